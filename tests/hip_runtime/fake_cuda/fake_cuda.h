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
}
