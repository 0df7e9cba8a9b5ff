// Fills the GPU driver table from the HIP runtime (libamdhip64).
//
// The HIP constants qd needs are in hip_constants.h; no HIP header is included, so libqd builds
// on a machine without HIP and loads on one without it. Where a HIP function has the table's
// CUDA-shaped signature it fills the entry as it is; where it differs (error names returned
// instead of written, void* device pointers, a memcpy direction, a host function that this
// runtime only offers as a stream callback) a small adapter below converts. Nothing here knows
// streams, pools, events, launches or faults: that is the shared GPU layer's.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "backends/common/dl_library.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "backends/hip/hip_backend.h"
#include "backends/hip/hip_constants.h"
#include "backends/hip/hip_kernel_node_args.h"
#include "common/error.h"

namespace qd::backend {

namespace {

using gpu::DevicePtr;
using gpu::Fn;
using gpu::NativeStream;
using gpu::Result;

using namespace hip_abi;

// How HIP results map to qd statuses. Sticky codes are the asynchronous faults after which the
// device's context is unusable; the context is marked lost. Codes not listed take each call's
// own fallback status.
constexpr gpu::ErrorRule kErrorRules[] = {
    {kOutOfMemory, QD_ERROR_OUT_OF_MEMORY, false},
    {kRuntimeMemory, QD_ERROR_OUT_OF_MEMORY, false},
    {kNotInitialized, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kDeinitialized, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kInsufficientDriver, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kNoDevice, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kInvalidDevice, QD_ERROR_INVALID_ARGUMENT, false},
    {kInvalidImage, QD_ERROR_INVALID_IMAGE, false},
    {kInvalidContext, QD_ERROR_INTERNAL, false},
    {kNoBinaryForGpu, QD_ERROR_INVALID_IMAGE, false},
    {kInvalidKernelFile, QD_ERROR_INVALID_IMAGE, false},
    {kInvalidSource, QD_ERROR_INVALID_IMAGE, false},
    {kFileNotFound, QD_ERROR_NOT_FOUND, false},
    {kSharedObjectSymbolNotFound, QD_ERROR_INVALID_IMAGE, false},
    {kSharedObjectInitFailed, QD_ERROR_INVALID_IMAGE, false},
    {kNotFound, QD_ERROR_NOT_FOUND, false},
    {kLaunchOutOfResources, QD_ERROR_LAUNCH_FAILED, false},
    {kCooperativeLaunchTooLarge, QD_ERROR_LAUNCH_FAILED, false},
    {kContextIsDestroyed, QD_ERROR_INTERNAL, false},
    {kNotSupported, QD_ERROR_NOT_SUPPORTED, false},
    {kStreamCaptureUnsupported, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureInvalidated, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureImplicit, QD_ERROR_INVALID_OPERATION, false},
    {kCapturedEvent, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureWrongThread, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureMerge, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureUnmatched, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureUnjoined, QD_ERROR_INVALID_OPERATION, false},
    {kStreamCaptureIsolation, QD_ERROR_INVALID_OPERATION, false},
    {kGraphExecUpdateFailure, QD_ERROR_INVALID_OPERATION, false},
    // Sticky faults.
    {kEccNotCorrectable, QD_ERROR_DEVICE_LOST, true},
    {kIllegalAddress, QD_ERROR_DEVICE_LOST, true},
    {kLaunchTimeOut, QD_ERROR_DEVICE_LOST, true},
    {kAssert, QD_ERROR_DEVICE_LOST, true},
    {kLaunchFailure, QD_ERROR_DEVICE_LOST, true},
    {kUnknown, QD_ERROR_INTERNAL, false},
};

// --- The runtime functions the adapters call, resolved once at load --------------------------

struct HipFunctions {
    const char *(*get_error_name)(int error) = nullptr;
    const char *(*get_error_string)(int error) = nullptr;
    int (*launch_host_func)(void *stream, void (*fn)(void *), void *user_data) = nullptr;
    int (*stream_add_callback)(void *stream, void (*cb)(void *, int, void *), void *user_data,
                               unsigned flags) = nullptr;
    int (*malloc_async)(void **ptr, size_t bytes, void *stream) = nullptr;
    int (*free_async)(void *ptr, void *stream) = nullptr;
    int (*free)(void *ptr) = nullptr;
    int (*memcpy_async)(void *dst, const void *src, size_t bytes, int kind, void *stream) = nullptr;
    int (*memset_d8_async)(void *dst, unsigned char value, size_t bytes, void *stream) = nullptr;
    int (*graph_exec_update)(void *exec, void *graph, void **error_node, int *result) = nullptr;
    // Timelines (optional; HIP 5.2 has both): the wait takes a mask the table's entry has not.
    int (*stream_write_value64)(void *stream, void *ptr, uint64_t value, unsigned flags) = nullptr;
    int (*stream_wait_value64)(void *stream, void *ptr, uint64_t value, unsigned flags,
                               uint64_t mask) = nullptr;
};

// Written once, before the driver exists (registry.cpp loads each backend under call_once);
// read-only afterwards.
HipFunctions g_hip;

void *to_ptr(DevicePtr address) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
}

Result adapt_get_error_name(Result error, const char **name) {
    *name = g_hip.get_error_name(error);
    return *name ? kSuccess : kInvalidValue;
}
Result adapt_get_error_string(Result error, const char **text) {
    *text = g_hip.get_error_string(error);
    return *text ? kSuccess : kInvalidValue;
}

// Host functions where the runtime lacks hipLaunchHostFunc (Debian's libamdhip64.so.5 exports
// only hipStreamAddCallback): the callback runs the function. The runtime calls a stream
// callback in stream order once the work before it completed, as a host function would be, and
// calls it whatever the stream's status, so the function always runs (and frees its payload).
struct HostCallback {
    gpu::HostFn fn;
    void *user_data;
};
void run_host_callback(void * /*stream*/, int /*status*/, void *raw) {
    HostCallback call = *static_cast<HostCallback *>(raw);
    delete static_cast<HostCallback *>(raw);
    call.fn(call.user_data);
}
Result adapt_launch_host_func_via_callback(NativeStream stream, gpu::HostFn fn, void *user_data) {
    auto *call = new (std::nothrow) HostCallback{fn, user_data};
    if (!call) return kOutOfMemory;
    Result r = g_hip.stream_add_callback(stream, run_host_callback, call, 0);
    if (r != kSuccess) delete call;  // never called: the payload is ours
    return r;
}

// Stream-ordered allocation is a beta feature of HIP 5 (gated by
// hipDeviceAttributeMemoryPoolsSupported). A runtime without the functions reports
// hipErrorNotSupported, which maps to QD_ERROR_NOT_SUPPORTED; one whose device lacks memory
// pools returns its own error from the call.
Result adapt_mem_alloc_async(DevicePtr *address, size_t bytes, NativeStream stream) {
    if (!g_hip.malloc_async) return kNotSupported;
    void *ptr = nullptr;
    Result r = g_hip.malloc_async(&ptr, bytes, stream);
    if (r == kSuccess) *address = reinterpret_cast<uintptr_t>(ptr);
    return r;
}
Result adapt_mem_free_async(DevicePtr address, NativeStream stream) {
    if (!g_hip.free_async) return kNotSupported;
    return g_hip.free_async(to_ptr(address), stream);
}
Result adapt_mem_free(DevicePtr address) { return g_hip.free(to_ptr(address)); }
Result adapt_memcpy_async(DevicePtr dst, DevicePtr src, size_t bytes, NativeStream stream) {
    return g_hip.memcpy_async(to_ptr(dst), to_ptr(src), bytes, kMemcpyDefault, stream);
}
Result adapt_memset_d8_async(DevicePtr dst, unsigned char value, size_t bytes,
                             NativeStream stream) {
    return g_hip.memset_d8_async(to_ptr(dst), value, bytes, stream);
}

// hipStreamWriteValue64 and hipStreamWaitValue64 take the word as a pointer, and the wait a
// mask of the bits compared (all of them here).
Result adapt_stream_write_value64(NativeStream stream, DevicePtr address, uint64_t value,
                                  unsigned flags) {
    return g_hip.stream_write_value64(stream, to_ptr(address), value, flags);
}
Result adapt_stream_wait_value64(NativeStream stream, DevicePtr address, uint64_t value,
                                 unsigned flags) {
    return g_hip.stream_wait_value64(stream, to_ptr(address), value, flags, ~uint64_t{0});
}

// hipGraphExecUpdate has the shape of CUDA 11's cuGraphExecUpdate (the failing node and the
// result written separately) where the table has CUDA 12's _v2 (one result-info struct).
Result adapt_graph_exec_update(gpu::NativeGraphExec exec, gpu::NativeGraph graph,
                               gpu::GraphExecUpdateInfo *info) {
    void *node = nullptr;
    int result = 0;
    Result r = g_hip.graph_exec_update(exec, graph, &node, &result);
    *info = gpu::GraphExecUpdateInfo{result, node, nullptr};
    return r;
}

// The entries whose HIP function has the table's signature as it is. Each table entry and the
// symbols that provide it, preferred first.
constexpr gpu::SymbolBinding kDirect[] = {
    {Fn::init, {"hipInit"}},
    {Fn::driver_get_version, {"hipDriverGetVersion"}},
    {Fn::device_get_count, {"hipGetDeviceCount"}},
    {Fn::device_get, {"hipDeviceGet"}},
    {Fn::device_get_name, {"hipDeviceGetName"}},
    {Fn::device_get_attribute, {"hipDeviceGetAttribute"}},
    {Fn::device_total_mem, {"hipDeviceTotalMem"}},
    {Fn::device_primary_ctx_retain, {"hipDevicePrimaryCtxRetain"}},
    {Fn::device_primary_ctx_release, {"hipDevicePrimaryCtxRelease"}},
    {Fn::device_get_current, {"hipGetDevice"}},
    {Fn::device_set_current, {"hipSetDevice"}},
    {Fn::ctx_get_stream_priority_range, {"hipDeviceGetStreamPriorityRange"}},
    {Fn::stream_create, {"hipStreamCreateWithPriority"}},
    {Fn::stream_destroy, {"hipStreamDestroy"}},
    {Fn::stream_query, {"hipStreamQuery"}},
    {Fn::stream_synchronize, {"hipStreamSynchronize"}},
    {Fn::stream_wait_event, {"hipStreamWaitEvent"}},  // qd passes flags 0, all HIP accepts
    {Fn::stream_get_priority, {"hipStreamGetPriority"}},
    {Fn::stream_get_flags, {"hipStreamGetFlags"}},
    {Fn::event_create, {"hipEventCreateWithFlags"}},
    {Fn::event_destroy, {"hipEventDestroy"}},
    {Fn::event_record, {"hipEventRecord"}},
    {Fn::event_query, {"hipEventQuery"}},
    {Fn::event_synchronize, {"hipEventSynchronize"}},
    {Fn::event_elapsed_time, {"hipEventElapsedTime"}},
    {Fn::module_load_data, {"hipModuleLoadDataEx"}},
    {Fn::module_get_function, {"hipModuleGetFunction"}},
    {Fn::module_unload, {"hipModuleUnload"}},
    {Fn::launch_kernel, {"hipModuleLaunchKernel"}},
    {Fn::host_alloc, {"hipHostMalloc"}},
    {Fn::host_free, {"hipHostFree"}},
    // Native graphs (optional).
    {Fn::stream_begin_capture, {"hipStreamBeginCapture"}},
    {Fn::stream_end_capture, {"hipStreamEndCapture"}},
    {Fn::stream_is_capturing, {"hipStreamIsCapturing"}},
    {Fn::graph_instantiate, {"hipGraphInstantiateWithFlags"}},
    {Fn::graph_launch, {"hipGraphLaunch"}},
    {Fn::graph_exec_destroy, {"hipGraphExecDestroy"}},
    {Fn::graph_destroy, {"hipGraphDestroy"}},
    // Optional, with hipGraphKernelNodeGetParams and hipGraphExecKernelNodeSetParams: the node
    // of each captured launch, for rebinding (hip_kernel_node_args.h). The _v2 form has the
    // table's (CUDA 11.3's) signature.
    {Fn::stream_get_capture_info, {"hipStreamGetCaptureInfo_v2"}},
    // Optional: where the runtime lacks it, qd_graph_upload instantiates only
    // (DriverTable::upload_requires stays null).
    {Fn::graph_upload, {"hipGraphUpload"}},
    {Fn::device_can_access_peer, {"hipDeviceCanAccessPeer"}},
    // Deprecated in HIP but exported, and the one that takes the peer's context as CUDA's does;
    // it grants access from the current device, which ScopedCurrent has made ours.
    {Fn::ctx_enable_peer_access, {"hipCtxEnablePeerAccess"}},
    {Fn::device_get_mem_pool, {"hipDeviceGetMemPool"}},
    {Fn::mem_pool_set_access, {"hipMemPoolSetAccess"}},
    // memcpy_peer_async is left empty: hipMemcpyPeerAsync names devices, not contexts, and
    // hipMemcpyAsync(hipMemcpyDefault) copies between devices by their addresses.
};

// A clang offload bundle (HIP's fat binary): "__CLANG_OFFLOAD_BUNDLE__", uint64 entry count,
// then per entry {uint64 offset, uint64 size, uint64 triple length, triple}. The image ends at
// the furthest entry's end. UINT64_MAX when the header itself is cut short or overflows (the
// caller then refuses the image as truncated).
uint64_t hip_fat_binary_size(const void *image, uint64_t available) {
    static constexpr char kMagic[] = "__CLANG_OFFLOAD_BUNDLE__";
    constexpr uint64_t kMagicBytes = sizeof kMagic - 1;
    const auto *p = static_cast<const unsigned char *>(image);
    if (available < kMagicBytes || std::memcmp(p, kMagic, kMagicBytes) != 0) return 0;
    auto read64 = [&](uint64_t at, uint64_t *v) {
        uint64_t end = 0;
        if (add_overflows(at, 8, &end) || end > available) return false;
        std::memcpy(v, p + at, 8);
        return true;
    };
    uint64_t at = kMagicBytes, count = 0, end = 0;
    if (!read64(at, &count)) return UINT64_MAX;
    at += 8;
    end = at;
    for (uint64_t i = 0; i < count; ++i) {
        uint64_t offset = 0, size = 0, triple = 0, entry_end = 0;
        if (!read64(at, &offset) || !read64(at + 8, &size) || !read64(at + 16, &triple))
            return UINT64_MAX;
        if (add_overflows(at + 24, triple, &at) || at > available) return UINT64_MAX;
        if (add_overflows(offset, size, &entry_end)) return UINT64_MAX;
        if (entry_end > end) end = entry_end;
    }
    return end > at ? end : at;
}

gpu::DriverTable hip_constants() {
    gpu::DriverTable t;
    t.kind = QD_BACKEND_HIP;
    t.api_name = "HIP";
    t.success = kSuccess;
    t.not_ready = kNotReady;
    t.invalid_value = kInvalidValue;
    t.peer_access_already_enabled = kPeerAccessAlreadyEnabled;
    t.error_rules = kErrorRules;
    t.num_error_rules = sizeof kErrorRules / sizeof kErrorRules[0];
    t.stream_default_flags = kStreamDefault;
    t.stream_non_blocking_flag = kStreamNonBlocking;
    t.event_default_flags = kEventDefault;
    t.event_disable_timing_flag = kEventDisableTiming;
    t.host_alloc_flags = kHostMallocPortable;
    t.attr_compute_major = kAttrComputeCapabilityMajor;
    t.attr_compute_minor = kAttrComputeCapabilityMinor;
    t.attr_multiprocessors = kAttrMultiprocessorCount;
    t.jit_error_log_buffer = kJitErrorLogBuffer;
    t.jit_error_log_buffer_bytes = kJitErrorLogBufferSizeBytes;
    t.mem_location_device = kMemLocationTypeDevice;
    t.write_value_default = kStreamWriteValueDefault;
    t.wait_value_geq = kStreamWaitValueGte;
    t.timeline_requires = "HIP 5.2 or newer (hipStreamWriteValue64, hipStreamWaitValue64)";
    t.mem_access_read_write = kMemAccessFlagsProtReadWrite;
    // HIP's threads have a current device, not a context stack.
    t.current_model = gpu::CurrentModel::current_device;
    // Not relied on: HIP documents no rule that a call on a stream runs on the stream's device
    // whatever device is current, so the backend makes its device current around every call.
    t.stream_calls_use_stream_context = false;
    t.pseudo_streams[0] = kStreamPerThread;
    t.pseudo_streams[1] = kStreamPerThread;
    t.fat_binary_size = hip_fat_binary_size;
    // Relaxed, as for CUDA (cuda_driver.cpp says why).
    t.capture_mode = kStreamCaptureModeRelaxed;
    t.capture_status_none = kStreamCaptureStatusNone;
    // A rebind keeps the node's own parameters and replaces its arguments
    // (hip_kernel_node_args.h); without these a rebind is QD_ERROR_NOT_SUPPORTED with this
    // reason.
    t.rebind_requires =
        "hipStreamGetCaptureInfo_v2, hipGraphKernelNodeGetParams and "
        "hipGraphExecKernelNodeSetParams (HIP 4.5 or newer)";
    return t;
}

// The sonames tried, newest runtime first. By soname only: the system loader's search path,
// never a path of ours.
constexpr const char *kSonames[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
                                    "libamdhip64.so"};

template <class F>
void resolve(const DlLibrary &library, const char *name, F *out) {
    *out = reinterpret_cast<F>(library.symbol(name));
}

}  // namespace

qd_status make_hip_driver(std::unique_ptr<Driver> *out) {
    DlLibrary library;
    std::string tried;
    for (const char *soname : kSonames) {
        const char *why = nullptr;
        library = DlLibrary::open(soname, &why);
        if (library) break;
        tried += std::string(tried.empty() ? "" : "; ") + why;
    }
    if (!library)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "cannot load libamdhip64: %s", tried.c_str());

    gpu::DriverTable table = hip_constants();
    gpu::bind_symbols(table, library, kDirect, sizeof kDirect / sizeof kDirect[0]);

    // The adapted entries: each needs its HIP function, except the optional ones.
    HipFunctions hip;
    resolve(library, "hipGetErrorName", &hip.get_error_name);
    resolve(library, "hipGetErrorString", &hip.get_error_string);
    resolve(library, "hipLaunchHostFunc", &hip.launch_host_func);
    resolve(library, "hipStreamAddCallback", &hip.stream_add_callback);
    resolve(library, "hipMallocAsync", &hip.malloc_async);  // optional (beta in HIP 5)
    resolve(library, "hipFreeAsync", &hip.free_async);      // optional, with hipMallocAsync
    resolve(library, "hipFree", &hip.free);
    resolve(library, "hipMemcpyAsync", &hip.memcpy_async);
    resolve(library, "hipMemsetD8Async", &hip.memset_d8_async);
    resolve(library, "hipGraphExecUpdate", &hip.graph_exec_update);  // optional
    hip::KernelNodeFunctions kernel_node;                            // optional, rebinding
    resolve(library, "hipGraphKernelNodeGetParams", &kernel_node.get_params);
    resolve(library, "hipGraphExecKernelNodeSetParams", &kernel_node.exec_set_params);
    resolve(library, "hipStreamWriteValue64", &hip.stream_write_value64);  // optional
    resolve(library, "hipStreamWaitValue64", &hip.stream_wait_value64);    // optional
    struct Adapted {
        Fn fn;
        bool have;
        void *adapter;
        const char *symbol;
    };
    const Adapted adapted[] = {
        {Fn::get_error_name, hip.get_error_name != nullptr,
         reinterpret_cast<void *>(&adapt_get_error_name), "hipGetErrorName"},
        {Fn::get_error_string, hip.get_error_string != nullptr,
         reinterpret_cast<void *>(&adapt_get_error_string), "hipGetErrorString"},
        {Fn::launch_host_func, hip.launch_host_func != nullptr,
         reinterpret_cast<void *>(hip.launch_host_func), "hipLaunchHostFunc"},
        {Fn::mem_alloc_async, true, reinterpret_cast<void *>(&adapt_mem_alloc_async),
         "hipMallocAsync"},
        {Fn::mem_free_async, true, reinterpret_cast<void *>(&adapt_mem_free_async), "hipFreeAsync"},
        {Fn::mem_free, hip.free != nullptr, reinterpret_cast<void *>(&adapt_mem_free), "hipFree"},
        {Fn::memcpy_async, hip.memcpy_async != nullptr,
         reinterpret_cast<void *>(&adapt_memcpy_async), "hipMemcpyAsync"},
        {Fn::memset_d8_async, hip.memset_d8_async != nullptr,
         reinterpret_cast<void *>(&adapt_memset_d8_async), "hipMemsetD8Async"},
        {Fn::graph_exec_update, hip.graph_exec_update != nullptr,
         reinterpret_cast<void *>(&adapt_graph_exec_update), "hipGraphExecUpdate"},
        {Fn::stream_write_value64, hip.stream_write_value64 != nullptr,
         reinterpret_cast<void *>(&adapt_stream_write_value64), "hipStreamWriteValue64"},
        {Fn::stream_wait_value64, hip.stream_wait_value64 != nullptr,
         reinterpret_cast<void *>(&adapt_stream_wait_value64), "hipStreamWaitValue64"},
    };
    for (const Adapted &a : adapted) {
        table.symbol[static_cast<size_t>(a.fn)] = a.symbol;
        if (a.have) gpu::set_entry(table, a.fn, a.adapter);
    }
    if (!hip.launch_host_func && hip.stream_add_callback) {
        gpu::set_entry(table, Fn::launch_host_func,
                       reinterpret_cast<void *>(&adapt_launch_host_func_via_callback));
        table.symbol[static_cast<size_t>(Fn::launch_host_func)] = "hipStreamAddCallback";
        // A stream callback cannot be captured: a host function in a native capture is refused.
        table.host_func_capturable = false;
    }
    Fn missing = gpu::first_missing(table);
    if (missing != Fn::count)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "the HIP runtime has no %s; it is too old for qd",
                    gpu::symbol_name(table, missing));
    g_hip = hip;
    hip::bind_kernel_node_args(table, kernel_node);

    // Without an AMD GPU the real runtime loads, hipGetDeviceCount reports hipErrorNoDevice and
    // hipInit hipErrorInvalidDevice (HIP 5.2.3): ask for the devices first (the runtime
    // initialises itself on any call) and say so plainly, it is the common case on NVIDIA and
    // CPU machines.
    int count = 0;
    Result r = table.device_get_count(&count);
    if (r == kSuccess && count <= 0) r = kNoDevice;
    if (r == kSuccess) r = table.init(0);
    if (r == kNoDevice) {
        char what[256];
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "no HIP device: %s",
                    gpu::describe_result(table, r, what, sizeof what));
    }
    if (r != kSuccess) {
        char what[256];
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "%s failed: %s",
                    count > 0 ? "hipInit" : "hipGetDeviceCount",
                    gpu::describe_result(table, r, what, sizeof what));
    }
    if (gpu::g_table_hook) gpu::g_table_hook(table);
    return gpu::make_gpu_driver(table, std::move(library), out);
}

}  // namespace qd::backend
