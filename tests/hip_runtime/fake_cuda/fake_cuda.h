// What the fake libcuda.so.1 (fake_cuda.cpp) records, and how a test reads and steers it.
// Shared by the fake and hip_over_fake_cuda_test.cpp; no CUDA or HIP header needed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fake_cuda {

// The fake's address space: device d's memory is [device_base(d), +kSpan), pinned host memory
// (cuMemHostAlloc's) [kPinnedBase, +kSpan); any other address is pageable host memory, which
// CUDA does not know. Addresses are numbers only: the fake never touches memory.
constexpr int kDevices = 2;
constexpr uint64_t kSpan = uint64_t{1} << 32;
constexpr uint64_t device_base(int device) { return uint64_t(device + 1) << 32; }
constexpr uint64_t kPinnedBase = uint64_t{8} << 32;

// One call that reached the fake.
struct Call {
    const char *fn;              // its name as the header declares it ("cuMemcpyAsync")
    int current_device;          // the device of the thread's current context; -1 for none
    uint64_t dst, src, bytes;    // copies
    void *stream;                // stream-ordered calls
    int dst_device, src_device;  // cuMemcpyPeerAsync: the devices of the two contexts
    unsigned long long value;    // a capture mode, instantiate flags, a context set current
};

// Kernel nodes. Every node's parameters, as cuGraphKernelNodeGetParams gives them, are these:
// the function kNodeFunction over a grid of kNodeGrid blocks of kNodeBlock threads with
// kNodeShared bytes of shared memory, its one argument the 8-byte value kNodeArgument.
constexpr uintptr_t kNodeFunction = 0xf00;
constexpr unsigned kNodeGrid[3] = {3, 2, 1};
constexpr unsigned kNodeBlock[3] = {64, 1, 1};
constexpr unsigned kNodeShared = 128;
constexpr uint64_t kNodeArgument = 0x5eed;
// cuStreamGetCaptureInfo's answer while a capture is active: its graph, id and one dependency.
constexpr uintptr_t kCaptureGraph = 0x6a, kCaptureNode = 0x90d;
constexpr unsigned long long kCaptureId = 0x1d;

// The last cuGraphExecKernelNodeSetParams: its executable and node, the parameters it was given
// (the first argument's 8 bytes read at the call), and whether `extra` was set.
struct KernelNodeSet {
    int calls;  // how many so far
    void *exec, *node;
    uintptr_t function;
    unsigned grid[3], block[3], shared;
    uint64_t argument;
    bool extra;
};

}  // namespace fake_cuda

extern "C" {
// The calls recorded since the last reset, in order (copies, context switches, graph calls).
size_t fake_cuda_call_count(void);
fake_cuda::Call fake_cuda_call(size_t index);
void fake_cuda_reset(void);
// What cuStreamIsCapturing reports next (a CUstreamCaptureStatus).
void fake_cuda_set_capture_status(int status);
// What cuGraphExecUpdate returns next: the CUresult, the CUgraphExecUpdateResult and node.
void fake_cuda_set_update_outcome(int result, int update_result, void *error_node);
// The last cuGraphExecKernelNodeSetParams (calls 0: none since the last reset).
fake_cuda::KernelNodeSet fake_cuda_kernel_node_set(void);
}
