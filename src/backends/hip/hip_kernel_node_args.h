// Rebinding a kernel node of a native HIP graph (qd_graph_set_kernel_args): the driver table's
// graph_exec_kernel_node_set_args over hipGraphKernelNodeGetParams and
// hipGraphExecKernelNodeSetParams.
//
// HIP's kernel-node parameters name the kernel by `func`, which for a node the runtime captured
// is whatever the runtime put there (a kernel's host-side symbol in AMD's runtime), not a
// module's hipFunction_t that qd could write. So qd never writes it: a rebind reads the node's
// own parameters from the graph the executable holds, replaces the arguments (kernelParams,
// with extra cleared: the arguments are given one way), and sets them on the executable's node.
// func, the grid, the block and the shared memory stay as the runtime recorded them.
#pragma once

#include "backends/gpu/driver_table.h"
#include "backends/hip/hip_constants.h"

namespace qd::backend::hip {

// The two runtime functions, as resolved from libamdhip64 (either may be null).
struct KernelNodeFunctions {
    gpu::Result (*get_params)(gpu::NativeGraphNode node,
                              hip_abi::KernelNodeParams *params) = nullptr;
    gpu::Result (*exec_set_params)(gpu::NativeGraphExec exec, gpu::NativeGraphNode node,
                                   const hip_abi::KernelNodeParams *params) = nullptr;
};

// Fills the table's graph_exec_kernel_node_set_args with the adapter over `functions` when both
// are there, sets rebind_by_source, and names the entry after the function it lacks otherwise
// (hipGraphKernelNodeGetParams first), so that a rebind's QD_ERROR_NOT_SUPPORTED names it.
// Called once while the driver loads (the functions are kept process-wide, as the loader's
// other runtime functions are); a white-box test may call it again with functions of its own.
void bind_kernel_node_args(gpu::DriverTable &table, const KernelNodeFunctions &functions);

}  // namespace qd::backend::hip
