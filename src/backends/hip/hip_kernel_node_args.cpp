#include "backends/hip/hip_kernel_node_args.h"

namespace qd::backend::hip {

namespace {

// Written by bind_kernel_node_args before the table that points at the adapter exists.
KernelNodeFunctions g_functions;

gpu::Result set_args(gpu::NativeGraphExec exec, gpu::NativeGraphNode node,
                     gpu::NativeGraphNode source, void **params) {
    hip_abi::KernelNodeParams p{};
    gpu::Result r = g_functions.get_params(source, &p);
    if (r != hip_abi::kSuccess) return r;
    p.kernel_params = params;
    p.extra = nullptr;
    return g_functions.exec_set_params(exec, node, &p);
}

}  // namespace

void bind_kernel_node_args(gpu::DriverTable &table, const KernelNodeFunctions &functions) {
    table.rebind_by_source = true;
    const auto entry = static_cast<size_t>(gpu::Fn::graph_exec_kernel_node_set_args);
    table.graph_exec_kernel_node_set_args = nullptr;
    table.symbol[entry] =
        !functions.get_params ? "hipGraphKernelNodeGetParams" : "hipGraphExecKernelNodeSetParams";
    if (!functions.get_params || !functions.exec_set_params) return;
    g_functions = functions;
    table.graph_exec_kernel_node_set_args = set_args;
}

}  // namespace qd::backend::hip
