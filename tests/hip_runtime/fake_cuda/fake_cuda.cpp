// A fake libcuda.so.1 for the test runtime's own tests without a GPU (README.md here): two
// devices, their primary contexts, each thread's current context, an address space
// (fake_cuda.h), and a record of the calls that matter to how hip_over_cuda.cpp issues work.
// It keeps the one rule of CUDA's that the test runtime must work around: cuMemcpyAsync checks
// both addresses in the thread's current context, where another device's memory is
// CUDA_ERROR_INVALID_VALUE (no peer access is ever granted here: the peer-access calls are
// recorded, not obeyed). cuMemcpyPeerAsync checks each side in its own context. Every other
// function the test runtime binds exists and answers CUDA_ERROR_NOT_SUPPORTED.
//
// Each function is defined under the header's name, so <cuda.h>'s macros give it the versioned
// symbol the runtime looks up (cuMemFree -> cuMemFree_v2).
#include "fake_cuda.h"

#include <cuda.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace {

using fake_cuda::Call;

std::mutex g_mutex;
std::vector<Call> g_calls;
CUstreamCaptureStatus g_capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
CUresult g_update_result = CUDA_SUCCESS;
CUgraphExecUpdateResult g_update_info = CU_GRAPH_EXEC_UPDATE_SUCCESS;
CUgraphNode g_update_node = nullptr;
fake_cuda::KernelNodeSet g_node_set{};

// The primary context of each device: the address of its slot.
int g_context_slots[fake_cuda::kDevices];
thread_local CUcontext t_current = nullptr;

CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(&g_context_slots[device]); }

int device_of_context(CUcontext ctx) {
    for (int d = 0; d < fake_cuda::kDevices; ++d)
        if (ctx == context_of(d)) return d;
    return -1;
}

// The device whose memory the address is; -1 for host memory (pinned or pageable).
int device_of_address(CUdeviceptr p) {
    for (int d = 0; d < fake_cuda::kDevices; ++d)
        if (p >= fake_cuda::device_base(d) && p < fake_cuda::device_base(d) + fake_cuda::kSpan)
            return d;
    return -1;
}
bool pinned(CUdeviceptr p) {
    return p >= fake_cuda::kPinnedBase && p < fake_cuda::kPinnedBase + fake_cuda::kSpan;
}

// An address is usable in a context when it is host memory or that context's device's memory.
bool usable_in(CUdeviceptr p, CUcontext ctx) {
    const int d = device_of_address(p);
    return d < 0 || d == device_of_context(ctx);
}

void record(Call call) {
    call.current_device = device_of_context(t_current);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_calls.push_back(call);
}

}  // namespace

// --- Steering and reading the fake ---------------------------------------------------------------

extern "C" {

size_t fake_cuda_call_count(void) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_calls.size();
}
Call fake_cuda_call(size_t index) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return index < g_calls.size() ? g_calls[index] : Call{};
}
void fake_cuda_reset(void) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_calls.clear();
    g_capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    g_update_result = CUDA_SUCCESS;
    g_update_info = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    g_update_node = nullptr;
    g_node_set = fake_cuda::KernelNodeSet{};
}
fake_cuda::KernelNodeSet fake_cuda_kernel_node_set(void) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_node_set;
}
void fake_cuda_set_capture_status(int status) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_capture_status = static_cast<CUstreamCaptureStatus>(status);
}
void fake_cuda_set_update_outcome(int result, int update_result, void *error_node) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_update_result = static_cast<CUresult>(result);
    g_update_info = static_cast<CUgraphExecUpdateResult>(update_result);
    g_update_node = static_cast<CUgraphNode>(error_node);
}

// --- Devices and contexts ------------------------------------------------------------------------

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuDriverGetVersion(int *version) {
    *version = 13000;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int *count) {
    *count = fake_cuda::kDevices;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal < 0 || ordinal >= fake_cuda::kDevices) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device) {
    if (device < 0 || device >= fake_cuda::kDevices) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = context_of(device);
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
    return device >= 0 && device < fake_cuda::kDevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
CUresult cuCtxGetCurrent(CUcontext *ctx) {
    *ctx = t_current;
    return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (ctx && device_of_context(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    Call call{"cuCtxSetCurrent", 0, 0, 0, 0, nullptr, -1, -1, 0};
    call.value = static_cast<unsigned long long>(device_of_context(ctx) + 1);  // 0: none
    record(call);
    t_current = ctx;
    return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice *device) {
    if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
    *device = device_of_context(t_current);
    return CUDA_SUCCESS;
}

// --- Addresses and copies ------------------------------------------------------------------------

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr p) {
    if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
    const int device = device_of_address(p);
    if (device < 0 && !pinned(p)) return CUDA_ERROR_INVALID_VALUE;  // unknown to CUDA
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned *>(data) = device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int *>(data) = device >= 0 ? device : 0;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
    if (!usable_in(dst, t_current) || !usable_in(src, t_current)) return CUDA_ERROR_INVALID_VALUE;
    record({"cuMemcpyAsync", 0, dst, src, bytes, stream, -1, -1, 0});
    return CUDA_SUCCESS;
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                           size_t bytes, CUstream stream) {
    const int dst_device = device_of_context(dst_ctx), src_device = device_of_context(src_ctx);
    if (dst_device < 0 || src_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!usable_in(dst, dst_ctx) || !usable_in(src, src_ctx)) return CUDA_ERROR_INVALID_VALUE;
    record({"cuMemcpyPeerAsync", 0, dst, src, bytes, stream, dst_device, src_device, 0});
    return CUDA_SUCCESS;
}

// --- Peer access: the four qd's grant needs, recorded (the fake grants nothing itself) -----------

CUresult cuDeviceCanAccessPeer(int *can, CUdevice device, CUdevice peer) {
    if (device < 0 || device >= fake_cuda::kDevices || peer < 0 || peer >= fake_cuda::kDevices)
        return CUDA_ERROR_INVALID_DEVICE;
    record({"cuDeviceCanAccessPeer", 0, 0, 0, 0, nullptr, device, peer, 0});
    *can = device != peer;  // the fake's two devices are peers of each other
    return CUDA_SUCCESS;
}
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
    const int peer_device = device_of_context(peer);
    if (peer_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
    record({"cuCtxEnablePeerAccess", 0, 0, 0, 0, nullptr, peer_device, -1, flags});
    return CUDA_SUCCESS;
}
// Device d's pool: the address of its slot, as for contexts.
int g_pool_slots[fake_cuda::kDevices];
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice device) {
    if (device < 0 || device >= fake_cuda::kDevices) return CUDA_ERROR_INVALID_DEVICE;
    *pool = reinterpret_cast<CUmemoryPool>(&g_pool_slots[device]);
    return CUDA_SUCCESS;
}
// Records each entry: dst_device = the pool's device, src_device = the location's id,
// value = (location type << 8) | flags.
CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
    int pool_device = -1;
    for (int d = 0; d < fake_cuda::kDevices; ++d)
        if (pool == reinterpret_cast<CUmemoryPool>(&g_pool_slots[d])) pool_device = d;
    if (pool_device < 0 || (count && !map)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; ++i)
        record({"cuMemPoolSetAccess", 0, 0, 0, 0, nullptr, pool_device, map[i].location.id,
                (static_cast<unsigned long long>(map[i].location.type) << 8) |
                    static_cast<unsigned long long>(map[i].flags)});
    return CUDA_SUCCESS;
}

// --- Graphs --------------------------------------------------------------------------------------

CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
    record({"cuStreamBeginCapture", 0, 0, 0, 0, stream, -1, -1,
            static_cast<unsigned long long>(mode)});
    return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
    record({"cuStreamEndCapture", 0, 0, 0, 0, stream, -1, -1, 0});
    *graph = reinterpret_cast<CUgraph>(uintptr_t{0x6a});
    return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus *status) {
    std::lock_guard<std::mutex> lock(g_mutex);
    *status = g_capture_status;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    record({"cuGraphInstantiateWithFlags", 0, reinterpret_cast<uintptr_t>(graph), 0, 0, nullptr, -1,
            -1, flags});
    *exec = reinterpret_cast<CUgraphExec>(uintptr_t{0xe8});
    return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    record({"cuGraphLaunch", 0, reinterpret_cast<uintptr_t>(exec), 0, 0, stream, -1, -1, 0});
    return CUDA_SUCCESS;
}
CUresult cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *info) {
    std::lock_guard<std::mutex> lock(g_mutex);
    info->result = g_update_info;
    info->errorNode = g_update_node;
    info->errorFromNode = nullptr;
    return g_update_result;
}
CUresult cuStreamGetCaptureInfo(CUstream, CUstreamCaptureStatus *status, cuuint64_t *id,
                                CUgraph *graph, const CUgraphNode **dependencies,
                                const CUgraphEdgeData **edge_data, size_t *count) {
    static const CUgraphNode node = reinterpret_cast<CUgraphNode>(fake_cuda::kCaptureNode);
    std::lock_guard<std::mutex> lock(g_mutex);
    *status = g_capture_status;
    const bool active = g_capture_status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id) *id = active ? fake_cuda::kCaptureId : 0;
    if (graph) *graph = active ? reinterpret_cast<CUgraph>(fake_cuda::kCaptureGraph) : nullptr;
    if (dependencies) *dependencies = active ? &node : nullptr;
    if (edge_data) *edge_data = nullptr;
    if (count) *count = active ? 1 : 0;
    return CUDA_SUCCESS;
}
CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *params) {
    static uint64_t argument = fake_cuda::kNodeArgument;
    static void *arguments[] = {&argument};
    record({"cuGraphKernelNodeGetParams", 0, reinterpret_cast<uintptr_t>(node), 0, 0, nullptr, -1,
            -1, 0});
    *params = CUDA_KERNEL_NODE_PARAMS{};
    params->func = reinterpret_cast<CUfunction>(fake_cuda::kNodeFunction);
    params->gridDimX = fake_cuda::kNodeGrid[0];
    params->gridDimY = fake_cuda::kNodeGrid[1];
    params->gridDimZ = fake_cuda::kNodeGrid[2];
    params->blockDimX = fake_cuda::kNodeBlock[0];
    params->blockDimY = fake_cuda::kNodeBlock[1];
    params->blockDimZ = fake_cuda::kNodeBlock[2];
    params->sharedMemBytes = fake_cuda::kNodeShared;
    params->kernelParams = arguments;
    return CUDA_SUCCESS;
}
CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                        const CUDA_KERNEL_NODE_PARAMS *params) {
    record({"cuGraphExecKernelNodeSetParams", 0, reinterpret_cast<uintptr_t>(node), 0, 0, nullptr,
            -1, -1, 0});
    std::lock_guard<std::mutex> lock(g_mutex);
    fake_cuda::KernelNodeSet &s = g_node_set;
    ++s.calls;
    s.exec = exec;
    s.node = node;
    s.function = reinterpret_cast<uintptr_t>(params->func);
    s.grid[0] = params->gridDimX;
    s.grid[1] = params->gridDimY;
    s.grid[2] = params->gridDimZ;
    s.block[0] = params->blockDimX;
    s.block[1] = params->blockDimY;
    s.block[2] = params->blockDimZ;
    s.shared = params->sharedMemBytes;
    s.argument = 0;
    if (params->kernelParams && params->kernelParams[0])
        std::memcpy(&s.argument, params->kernelParams[0], sizeof s.argument);
    s.extra = params->extra != nullptr;
    return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec) { return CUDA_SUCCESS; }
CUresult cuGraphDestroy(CUgraph) { return CUDA_SUCCESS; }

}  // extern "C"

// --- Everything else the test runtime binds: present, and not supported ------------------------

#define QD_FAKE_STR2(x) #x
#define QD_FAKE_STR(x) QD_FAKE_STR2(x)  // the header's versioned name
#define QD_FAKE_STUB(name)                                                                         \
    CUresult fake_stub_##name() __asm__(QD_FAKE_STR(name));                                        \
    CUresult fake_stub_##name() { return CUDA_ERROR_NOT_SUPPORTED; }
// clang-format off
QD_FAKE_STUB(cuDeviceGetName) QD_FAKE_STUB(cuDeviceGetAttribute) QD_FAKE_STUB(cuDeviceTotalMem)
QD_FAKE_STUB(cuCtxGetStreamPriorityRange) QD_FAKE_STUB(cuStreamCreateWithPriority)
QD_FAKE_STUB(cuStreamDestroy) QD_FAKE_STUB(cuStreamQuery) QD_FAKE_STUB(cuStreamSynchronize)
QD_FAKE_STUB(cuStreamWaitEvent) QD_FAKE_STUB(cuStreamGetPriority) QD_FAKE_STUB(cuEventCreate)
QD_FAKE_STUB(cuEventDestroy) QD_FAKE_STUB(cuEventRecord) QD_FAKE_STUB(cuEventQuery)
QD_FAKE_STUB(cuEventSynchronize) QD_FAKE_STUB(cuEventElapsedTime) QD_FAKE_STUB(cuModuleLoadDataEx)
QD_FAKE_STUB(cuModuleGetFunction) QD_FAKE_STUB(cuModuleUnload) QD_FAKE_STUB(cuLaunchKernel)
QD_FAKE_STUB(cuLaunchHostFunc) QD_FAKE_STUB(cuMemAllocAsync) QD_FAKE_STUB(cuMemFreeAsync)
QD_FAKE_STUB(cuMemFree) QD_FAKE_STUB(cuMemsetD8Async) QD_FAKE_STUB(cuMemHostAlloc)
QD_FAKE_STUB(cuMemFreeHost)
    // clang-format on
