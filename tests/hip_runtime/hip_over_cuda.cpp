// A test-only HIP runtime over the CUDA driver: libamdhip64.so.5 with the hip* functions qd's
// HIP backend resolves (src/backends/hip/hip_driver.cpp), each a thin call into libcuda.so.1.
// It lets qd's HIP backend run end to end on an NVIDIA GPU. Never installed, never loaded by
// default: put its build folder on LD_LIBRARY_PATH to use it (README.md next to this file).
//
// Signatures, enum values and error codes are HIP's own: this file includes the real HIP header
// (Debian's libamdhip64-dev, compiled with -D__HIP_PLATFORM_AMD__), and every definition below
// is inside extern "C", so one that differs from the header's declaration fails to compile. The
// CUDA side comes from the real <cuda.h>: each driver function's pointer type is the header's
// declaration (decltype), and its symbol name the header's versioned name (cuMemFree ->
// "cuMemFree_v2"). libcuda.so.1 is dlopen'd at first use, so this library builds and loads on a
// machine without CUDA, where every call reports hipErrorNoDevice.
//
// Like Debian's libamdhip64.so.5, it does not export hipLaunchHostFunc: qd's host functions then
// go through hipStreamAddCallback (qd's adapter), which is what this runtime proves. Built a second
// time with QD_HIP_OVER_CUDA_HOST_FUNC=1 (host-func/libamdhip64.so.5), it does export it, as
// HIP's later runtimes do: qd then captures host functions into native graphs.
#include <cuda.h>
#include <dlfcn.h>
#include <hip/hip_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {

// --- CUresult -> hipError_t, written once ---------------------------------------------------
// The same pairs as HIP's own NVIDIA path (hipCUResultTohipError in
// hip/nvidia_detail/nvidia_hip_runtime_api.h of HIP 5.2.3); any other code is hipErrorUnknown.

struct ErrorPair {
    CUresult cuda;
    hipError_t hip;
};

constexpr ErrorPair kErrorMap[] = {
    {CUDA_SUCCESS, hipSuccess},
    {CUDA_ERROR_INVALID_VALUE, hipErrorInvalidValue},
    {CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory},
    {CUDA_ERROR_NOT_INITIALIZED, hipErrorNotInitialized},
    {CUDA_ERROR_DEINITIALIZED, hipErrorDeinitialized},
    {CUDA_ERROR_PROFILER_DISABLED, hipErrorProfilerDisabled},
    {CUDA_ERROR_PROFILER_NOT_INITIALIZED, hipErrorProfilerNotInitialized},
    {CUDA_ERROR_PROFILER_ALREADY_STARTED, hipErrorProfilerAlreadyStarted},
    {CUDA_ERROR_PROFILER_ALREADY_STOPPED, hipErrorProfilerAlreadyStopped},
    {CUDA_ERROR_NO_DEVICE, hipErrorNoDevice},
    {CUDA_ERROR_INVALID_DEVICE, hipErrorInvalidDevice},
    {CUDA_ERROR_INVALID_IMAGE, hipErrorInvalidImage},
    {CUDA_ERROR_INVALID_CONTEXT, hipErrorInvalidContext},
    {CUDA_ERROR_CONTEXT_ALREADY_CURRENT, hipErrorContextAlreadyCurrent},
    {CUDA_ERROR_MAP_FAILED, hipErrorMapFailed},
    {CUDA_ERROR_UNMAP_FAILED, hipErrorUnmapFailed},
    {CUDA_ERROR_ARRAY_IS_MAPPED, hipErrorArrayIsMapped},
    {CUDA_ERROR_ALREADY_MAPPED, hipErrorAlreadyMapped},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, hipErrorNoBinaryForGpu},
    {CUDA_ERROR_ALREADY_ACQUIRED, hipErrorAlreadyAcquired},
    {CUDA_ERROR_NOT_MAPPED, hipErrorNotMapped},
    {CUDA_ERROR_NOT_MAPPED_AS_ARRAY, hipErrorNotMappedAsArray},
    {CUDA_ERROR_NOT_MAPPED_AS_POINTER, hipErrorNotMappedAsPointer},
    {CUDA_ERROR_ECC_UNCORRECTABLE, hipErrorECCNotCorrectable},
    {CUDA_ERROR_UNSUPPORTED_LIMIT, hipErrorUnsupportedLimit},
    {CUDA_ERROR_CONTEXT_ALREADY_IN_USE, hipErrorContextAlreadyInUse},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, hipErrorPeerAccessUnsupported},
    {CUDA_ERROR_INVALID_PTX, hipErrorInvalidKernelFile},
    {CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, hipErrorInvalidGraphicsContext},
    {CUDA_ERROR_INVALID_SOURCE, hipErrorInvalidSource},
    {CUDA_ERROR_FILE_NOT_FOUND, hipErrorFileNotFound},
    {CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, hipErrorSharedObjectSymbolNotFound},
    {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, hipErrorSharedObjectInitFailed},
    {CUDA_ERROR_OPERATING_SYSTEM, hipErrorOperatingSystem},
    {CUDA_ERROR_INVALID_HANDLE, hipErrorInvalidHandle},
    {CUDA_ERROR_ILLEGAL_STATE, hipErrorIllegalState},
    {CUDA_ERROR_NOT_FOUND, hipErrorNotFound},
    {CUDA_ERROR_NOT_READY, hipErrorNotReady},
    {CUDA_ERROR_ILLEGAL_ADDRESS, hipErrorIllegalAddress},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, hipErrorLaunchOutOfResources},
    {CUDA_ERROR_LAUNCH_TIMEOUT, hipErrorLaunchTimeOut},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, hipErrorPeerAccessAlreadyEnabled},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, hipErrorPeerAccessNotEnabled},
    {CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, hipErrorSetOnActiveProcess},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, hipErrorContextIsDestroyed},
    {CUDA_ERROR_ASSERT, hipErrorAssert},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, hipErrorHostMemoryAlreadyRegistered},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, hipErrorHostMemoryNotRegistered},
    {CUDA_ERROR_LAUNCH_FAILED, hipErrorLaunchFailure},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, hipErrorCooperativeLaunchTooLarge},
    {CUDA_ERROR_NOT_SUPPORTED, hipErrorNotSupported},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, hipErrorStreamCaptureUnsupported},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, hipErrorStreamCaptureInvalidated},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, hipErrorStreamCaptureMerge},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, hipErrorStreamCaptureUnmatched},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, hipErrorStreamCaptureUnjoined},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, hipErrorStreamCaptureIsolation},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, hipErrorStreamCaptureImplicit},
    {CUDA_ERROR_CAPTURED_EVENT, hipErrorCapturedEvent},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, hipErrorStreamCaptureWrongThread},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, hipErrorGraphExecUpdateFailure},
    {CUDA_ERROR_UNKNOWN, hipErrorUnknown},
};

hipError_t to_hip(CUresult r) {
    for (const ErrorPair &p : kErrorMap)
        if (p.cuda == r) return p.hip;
    return hipErrorUnknown;
}

// --- hipGetErrorName / hipGetErrorString ----------------------------------------------------
// Every hipError_t of the header, once (deprecated aliases of the same value left out). The
// string carries this runtime's name, so a message shows which libamdhip64 produced it.

// clang-format off
#define QD_HIP_ERRORS(X)                                                                        \
    X(hipSuccess) X(hipErrorInvalidValue) X(hipErrorOutOfMemory) X(hipErrorNotInitialized)       \
    X(hipErrorDeinitialized) X(hipErrorProfilerDisabled) X(hipErrorProfilerNotInitialized)       \
    X(hipErrorProfilerAlreadyStarted) X(hipErrorProfilerAlreadyStopped)                          \
    X(hipErrorInvalidConfiguration) X(hipErrorInvalidPitchValue) X(hipErrorInvalidSymbol)        \
    X(hipErrorInvalidDevicePointer) X(hipErrorInvalidMemcpyDirection)                            \
    X(hipErrorInsufficientDriver) X(hipErrorMissingConfiguration) X(hipErrorPriorLaunchFailure)  \
    X(hipErrorInvalidDeviceFunction) X(hipErrorNoDevice) X(hipErrorInvalidDevice)                \
    X(hipErrorInvalidImage) X(hipErrorInvalidContext) X(hipErrorContextAlreadyCurrent)           \
    X(hipErrorMapFailed) X(hipErrorUnmapFailed) X(hipErrorArrayIsMapped)                         \
    X(hipErrorAlreadyMapped) X(hipErrorNoBinaryForGpu) X(hipErrorAlreadyAcquired)                \
    X(hipErrorNotMapped) X(hipErrorNotMappedAsArray) X(hipErrorNotMappedAsPointer)               \
    X(hipErrorECCNotCorrectable) X(hipErrorUnsupportedLimit) X(hipErrorContextAlreadyInUse)      \
    X(hipErrorPeerAccessUnsupported) X(hipErrorInvalidKernelFile)                                \
    X(hipErrorInvalidGraphicsContext) X(hipErrorInvalidSource) X(hipErrorFileNotFound)           \
    X(hipErrorSharedObjectSymbolNotFound) X(hipErrorSharedObjectInitFailed)                      \
    X(hipErrorOperatingSystem) X(hipErrorInvalidHandle) X(hipErrorIllegalState)                  \
    X(hipErrorNotFound) X(hipErrorNotReady) X(hipErrorIllegalAddress)                            \
    X(hipErrorLaunchOutOfResources) X(hipErrorLaunchTimeOut)                                     \
    X(hipErrorPeerAccessAlreadyEnabled) X(hipErrorPeerAccessNotEnabled)                          \
    X(hipErrorSetOnActiveProcess) X(hipErrorContextIsDestroyed) X(hipErrorAssert)                \
    X(hipErrorHostMemoryAlreadyRegistered) X(hipErrorHostMemoryNotRegistered)                    \
    X(hipErrorLaunchFailure) X(hipErrorCooperativeLaunchTooLarge) X(hipErrorNotSupported)        \
    X(hipErrorStreamCaptureUnsupported) X(hipErrorStreamCaptureInvalidated)                      \
    X(hipErrorStreamCaptureMerge) X(hipErrorStreamCaptureUnmatched)                              \
    X(hipErrorStreamCaptureUnjoined) X(hipErrorStreamCaptureIsolation)                           \
    X(hipErrorStreamCaptureImplicit) X(hipErrorCapturedEvent)                                    \
    X(hipErrorStreamCaptureWrongThread) X(hipErrorGraphExecUpdateFailure) X(hipErrorUnknown)     \
    X(hipErrorRuntimeMemory) X(hipErrorRuntimeOther)
// clang-format on

struct ErrorText {
    hipError_t code;
    const char *name;
    const char *text;
};

#define QD_HIP_ERROR_TEXT(code) {code, #code, #code " [hip_over_cuda test runtime]"},
constexpr ErrorText kErrorTexts[] = {QD_HIP_ERRORS(QD_HIP_ERROR_TEXT)};
#undef QD_HIP_ERROR_TEXT

const ErrorText &error_text(hipError_t code) {
    for (const ErrorText &e : kErrorTexts)
        if (e.code == code) return e;
    for (const ErrorText &e : kErrorTexts)
        if (e.code == hipErrorUnknown) return e;
    return kErrorTexts[0];  // not reached: hipErrorUnknown is listed
}

// --- The CUDA driver, loaded at first use ----------------------------------------------------

// The header's versioned symbol name of a driver function: cuMemFree -> "cuMemFree_v2".
#define QD_STR2(x) #x
#define QD_STR(x) QD_STR2(x)

struct Cuda {
#define QD_CU_FN(name) decltype(&::name) name = nullptr;
// clang-format off
#define QD_CU_FUNCTIONS(X)                                                                      \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)        \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                      \
    X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)         \
    X(cuCtxGetStreamPriorityRange) X(cuStreamCreateWithPriority) X(cuStreamDestroy)              \
    X(cuStreamQuery) X(cuStreamSynchronize) X(cuStreamWaitEvent) X(cuStreamGetPriority)          \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) X(cuEventSynchronize)    \
    X(cuEventElapsedTime) X(cuModuleLoadDataEx) X(cuModuleGetFunction) X(cuModuleUnload)         \
    X(cuLaunchKernel) X(cuLaunchHostFunc) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemFree)      \
    X(cuMemcpyAsync) X(cuMemcpyPeerAsync) X(cuPointerGetAttribute) X(cuMemsetD8Async)            \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuStreamBeginCapture) X(cuStreamEndCapture)             \
    X(cuStreamIsCapturing) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecUpdate)  \
    X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess)     \
    X(cuDeviceGetMemPool) X(cuMemPoolSetAccess) X(cuStreamGetCaptureInfo)                       \
    X(cuGraphKernelNodeGetParams) X(cuGraphExecKernelNodeSetParams)
    // clang-format on
    QD_CU_FUNCTIONS(QD_CU_FN)
#undef QD_CU_FN

    // hipSuccess once libcuda.so.1 is loaded and cuInit succeeded; else why not.
    hipError_t status = hipErrorNotInitialized;
};

Cuda g_cuda;
std::once_flag g_cuda_once;

void load_cuda() {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {  // no NVIDIA driver on this machine
        g_cuda.status = hipErrorNoDevice;
        return;
    }
    bool complete = true;
    auto bind = [&](auto &slot, const char *versioned, const char *plain) {
        void *address = dlsym(lib, versioned);
        // Only cuEventElapsedTime_v2 (driver 12.8+) has an unversioned twin of the same
        // signature; the other _v2 functions' unversioned symbols are the old 32-bit ABI.
        if (!address && std::string_view(plain) == "cuEventElapsedTime")
            address = dlsym(lib, plain);
        if (!address) complete = false;
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(address);
    };
#define QD_CU_BIND(name) bind(g_cuda.name, QD_STR(name), #name);
    QD_CU_FUNCTIONS(QD_CU_BIND)
#undef QD_CU_BIND
    if (!complete) {  // a driver older than the functions this runtime calls
        g_cuda.status = hipErrorInsufficientDriver;
        return;
    }
    CUresult r = g_cuda.cuInit(0);
    // A stub libcuda (the toolkit's, with no driver behind it) is no driver either.
    g_cuda.status =
        r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY ? hipErrorNoDevice : to_hip(r);
}

// The loaded driver, or null with *why set.
const Cuda *cuda(hipError_t *why) {
    std::call_once(g_cuda_once, load_cuda);
    *why = g_cuda.status;
    return g_cuda.status == hipSuccess ? &g_cuda : nullptr;
}

// Every function below starts with this: the driver, or return why not.
#define QD_CUDA(cu)                                                                                \
    hipError_t cuda_status_ = hipSuccess;                                                          \
    const Cuda *cu = cuda(&cuda_status_);                                                          \
    if (!cu) return cuda_status_

// --- Devices, and HIP's per-thread current device --------------------------------------------

// The primary context of each device, retained once by this runtime for the life of the process
// (as HIP's own runtime holds every device it has initialised); the application's
// hipDevicePrimaryCtxRetain/Release calls count separately, straight through to CUDA.
std::mutex g_primary_mutex;
std::vector<CUcontext> g_primary;

// HIP's current device of this thread when no CUDA context is current (HIP's default: 0).
thread_local int t_device = 0;

hipError_t device_count(const Cuda *cu, int *count) {
    hipError_t r = to_hip(cu->cuDeviceGetCount(count));
    if (r == hipSuccess && *count <= 0) r = hipErrorNoDevice;
    return r;
}

hipError_t primary_context(const Cuda *cu, int ordinal, CUcontext *out) {
    int count = 0;
    hipError_t r = device_count(cu, &count);
    if (r != hipSuccess) return r;
    if (ordinal < 0 || ordinal >= count) return hipErrorInvalidDevice;
    std::lock_guard<std::mutex> lock(g_primary_mutex);
    if (g_primary.size() < static_cast<size_t>(count)) g_primary.resize(count, nullptr);
    if (!g_primary[ordinal]) {
        CUdevice device = 0;
        if ((r = to_hip(cu->cuDeviceGet(&device, ordinal))) != hipSuccess) return r;
        if ((r = to_hip(cu->cuDevicePrimaryCtxRetain(&g_primary[ordinal], device))) != hipSuccess)
            return r;
    }
    *out = g_primary[ordinal];
    return hipSuccess;
}

// HIP's current device: that of the thread's current CUDA context, else the thread's own.
hipError_t current_device(const Cuda *cu, int *ordinal) {
    CUcontext ctx = nullptr;
    hipError_t r = to_hip(cu->cuCtxGetCurrent(&ctx));
    if (r != hipSuccess) return r;
    if (!ctx) {
        *ordinal = t_device;
        return hipSuccess;
    }
    CUdevice device = 0;
    if ((r = to_hip(cu->cuCtxGetDevice(&device))) != hipSuccess) return r;
    int count = 0;
    if ((r = device_count(cu, &count)) != hipSuccess) return r;
    for (int i = 0; i < count; ++i) {  // the ordinal whose CUdevice it is
        CUdevice d = 0;
        if (cu->cuDeviceGet(&d, i) == CUDA_SUCCESS && d == device) {
            *ordinal = i;
            return hipSuccess;
        }
    }
    return hipErrorInvalidDevice;
}

// Makes the primary context of HIP's current device current on this thread: what a HIP call
// that creates something "on the current device" needs.
hipError_t use_current_device(const Cuda *cu) {
    int ordinal = 0;
    CUcontext ctx = nullptr;
    hipError_t r = current_device(cu, &ordinal);
    if (r == hipSuccess) r = primary_context(cu, ordinal, &ctx);
    if (r == hipSuccess) r = to_hip(cu->cuCtxSetCurrent(ctx));
    return r;
}

// For calls on existing objects: CUDA wants some context current; HIP always has a device.
hipError_t ensure_context(const Cuda *cu) {
    CUcontext ctx = nullptr;
    hipError_t r = to_hip(cu->cuCtxGetCurrent(&ctx));
    if (r == hipSuccess && !ctx) r = use_current_device(cu);
    return r;
}

#define QD_CONTEXT(cu)                                                                             \
    if (hipError_t context_status_ = ensure_context(cu); context_status_ != hipSuccess)            \
    return context_status_

CUstream cu_stream(hipStream_t s) { return reinterpret_cast<CUstream>(s); }
CUevent cu_event(hipEvent_t e) { return reinterpret_cast<CUevent>(e); }
CUdeviceptr cu_ptr(const void *p) {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// hipDeviceAttribute_t -> CUdevice_attribute, for the attributes this runtime answers.
struct AttributePair {
    hipDeviceAttribute_t hip;
    CUdevice_attribute cuda;
};
constexpr AttributePair kAttributes[] = {
    {hipDeviceAttributeComputeCapabilityMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
    {hipDeviceAttributeComputeCapabilityMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
    {hipDeviceAttributeMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {hipDeviceAttributeMemoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
    {hipDeviceAttributeMaxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {hipDeviceAttributeWarpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
};

// hipJitOption -> CUjit_option (HIP copied CUDA's list, but each is mapped by name here).
struct JitPair {
    hipJitOption hip;
    CUjit_option cuda;
};
constexpr JitPair kJitOptions[] = {
    {hipJitOptionMaxRegisters, CU_JIT_MAX_REGISTERS},
    {hipJitOptionThreadsPerBlock, CU_JIT_THREADS_PER_BLOCK},
    {hipJitOptionWallTime, CU_JIT_WALL_TIME},
    {hipJitOptionInfoLogBuffer, CU_JIT_INFO_LOG_BUFFER},
    {hipJitOptionInfoLogBufferSizeBytes, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES},
    {hipJitOptionErrorLogBuffer, CU_JIT_ERROR_LOG_BUFFER},
    {hipJitOptionErrorLogBufferSizeBytes, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES},
    {hipJitOptionOptimizationLevel, CU_JIT_OPTIMIZATION_LEVEL},
    {hipJitOptionTargetFromContext, CU_JIT_TARGET_FROM_CUCONTEXT},
    {hipJitOptionTarget, CU_JIT_TARGET},
    {hipJitOptionFallbackStrategy, CU_JIT_FALLBACK_STRATEGY},
    {hipJitOptionGenerateDebugInfo, CU_JIT_GENERATE_DEBUG_INFO},
    {hipJitOptionLogVerbose, CU_JIT_LOG_VERBOSE},
    {hipJitOptionGenerateLineInfo, CU_JIT_GENERATE_LINE_INFO},
    {hipJitOptionCacheMode, CU_JIT_CACHE_MODE},
};

// hipStreamAddCallback over cuLaunchHostFunc: the host function calls the HIP callback with
// (stream, hipSuccess, userData) and frees the payload.
struct Callback {
    hipStreamCallback_t callback;
    hipStream_t stream;
    void *user_data;
};
void run_callback(void *raw) {
    Callback call = *static_cast<Callback *>(raw);
    delete static_cast<Callback *>(raw);
    call.callback(call.stream, hipSuccess, call.user_data);
}

// --- Copies between devices --------------------------------------------------------------------
// HIP (hip_runtime_api.h, hipMemcpy and hipMemcpyAsync): the copy is performed by the device of
// the stream, any two addresses may be given, and where that device cannot reach the source or
// the destination (no peer access) the copy still works, staged through host memory. CUDA's
// cuMemcpyAsync runs in the stream's context too, but checks both addresses in the thread's
// current context: memory of another device's stream-ordered pool, which that context was not
// granted, is CUDA_ERROR_INVALID_VALUE there. So each copy is issued where CUDA accepts it:
// between two devices' memory, cuMemcpyPeerAsync with both primary contexts (CUDA stages it
// where the devices are not peers); with one device's memory on either side, cuMemcpyAsync with
// that device's primary context current (the caller's restored after); host to host, as it is.

// The ordinal of the device whose memory p addresses; -1 for host memory (pinned, or pageable,
// which CUDA does not know).
int device_of(const Cuda *cu, const void *p) {
    unsigned type = 0;
    if (cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, cu_ptr(p)) !=
            CUDA_SUCCESS ||
        type != CU_MEMORYTYPE_DEVICE)
        return -1;
    int ordinal = -1;
    if (cu->cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, cu_ptr(p)) !=
        CUDA_SUCCESS)
        return -1;
    return ordinal;
}

hipError_t copy_async(const Cuda *cu, void *dst, const void *src, size_t bytes, CUstream stream) {
    const int from = device_of(cu, src), to = device_of(cu, dst);
    hipError_t r = hipSuccess;
    if (from >= 0 && to >= 0 && from != to) {
        CUcontext src_ctx = nullptr, dst_ctx = nullptr;
        if ((r = primary_context(cu, from, &src_ctx)) != hipSuccess) return r;
        if ((r = primary_context(cu, to, &dst_ctx)) != hipSuccess) return r;
        return to_hip(
            cu->cuMemcpyPeerAsync(cu_ptr(dst), dst_ctx, cu_ptr(src), src_ctx, bytes, stream));
    }
    const int owner = from >= 0 ? from : to;
    CUcontext owner_ctx = nullptr, previous = nullptr;
    if (owner >= 0 && (r = primary_context(cu, owner, &owner_ctx)) != hipSuccess) return r;
    if ((r = to_hip(cu->cuCtxGetCurrent(&previous))) != hipSuccess) return r;
    if (owner < 0 || previous == owner_ctx)
        return to_hip(cu->cuMemcpyAsync(cu_ptr(dst), cu_ptr(src), bytes, stream));
    if ((r = to_hip(cu->cuCtxSetCurrent(owner_ctx))) != hipSuccess) return r;
    r = to_hip(cu->cuMemcpyAsync(cu_ptr(dst), cu_ptr(src), bytes, stream));
    const hipError_t restored = to_hip(cu->cuCtxSetCurrent(previous));
    return r != hipSuccess ? r : restored;
}

// --- Graphs ---------------------------------------------------------------------------------------
// HIP's graph handles are CUDA's (hipGraph_t is a CUgraph, hipGraphExec_t a CUgraphExec, a
// hipGraphNode_t a CUgraphNode); the enums are mapped by name.

CUgraph cu_graph(hipGraph_t g) { return reinterpret_cast<CUgraph>(g); }
CUgraphExec cu_exec(hipGraphExec_t e) { return reinterpret_cast<CUgraphExec>(e); }

struct CaptureModePair {
    hipStreamCaptureMode hip;
    CUstreamCaptureMode cuda;
};
constexpr CaptureModePair kCaptureModes[] = {
    {hipStreamCaptureModeGlobal, CU_STREAM_CAPTURE_MODE_GLOBAL},
    {hipStreamCaptureModeThreadLocal, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL},
    {hipStreamCaptureModeRelaxed, CU_STREAM_CAPTURE_MODE_RELAXED},
};

struct CaptureStatusPair {
    CUstreamCaptureStatus cuda;
    hipStreamCaptureStatus hip;
};
constexpr CaptureStatusPair kCaptureStatuses[] = {
    {CU_STREAM_CAPTURE_STATUS_NONE, hipStreamCaptureStatusNone},
    {CU_STREAM_CAPTURE_STATUS_ACTIVE, hipStreamCaptureStatusActive},
    {CU_STREAM_CAPTURE_STATUS_INVALIDATED, hipStreamCaptureStatusInvalidated},
};

// CUgraphExecUpdateResult -> hipGraphExecUpdateResult; CUDA's later reasons (attributes
// changed) have no HIP name and are hipGraphExecUpdateError.
struct UpdateResultPair {
    CUgraphExecUpdateResult cuda;
    hipGraphExecUpdateResult hip;
};
constexpr UpdateResultPair kUpdateResults[] = {
    {CU_GRAPH_EXEC_UPDATE_SUCCESS, hipGraphExecUpdateSuccess},
    {CU_GRAPH_EXEC_UPDATE_ERROR, hipGraphExecUpdateError},
    {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, hipGraphExecUpdateErrorTopologyChanged},
    {CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, hipGraphExecUpdateErrorNodeTypeChanged},
    {CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED, hipGraphExecUpdateErrorFunctionChanged},
    {CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, hipGraphExecUpdateErrorParametersChanged},
    {CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, hipGraphExecUpdateErrorNotSupported},
    {CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE,
     hipGraphExecUpdateErrorUnsupportedFunctionChange},
};

hipGraphExecUpdateResult to_hip_update_result(CUgraphExecUpdateResult result) {
    for (const UpdateResultPair &p : kUpdateResults)
        if (p.cuda == result) return p.hip;
    return hipGraphExecUpdateError;
}

hipError_t instantiate(const Cuda *cu, hipGraphExec_t *exec, hipGraph_t graph,
                       unsigned long long cu_flags) {
    if (!exec || !graph) return hipErrorInvalidValue;
    return to_hip(cu->cuGraphInstantiateWithFlags(reinterpret_cast<CUgraphExec *>(exec),
                                                  cu_graph(graph), cu_flags));
}

}  // namespace

// --- The HIP functions -----------------------------------------------------------------------

extern "C" {

const char *hipGetErrorName(hipError_t hip_error) { return error_text(hip_error).name; }
const char *hipGetErrorString(hipError_t hipError) { return error_text(hipError).text; }

hipError_t hipInit(unsigned int flags) {
    QD_CUDA(cu);
    if (flags != 0) return hipErrorInvalidValue;
    int count = 0;
    return device_count(cu, &count);
}

hipError_t hipDriverGetVersion(int *driverVersion) {
    QD_CUDA(cu);
    return to_hip(cu->cuDriverGetVersion(driverVersion));
}

hipError_t hipGetDeviceCount(int *count) {
    if (!count) return hipErrorInvalidValue;
    *count = 0;
    QD_CUDA(cu);
    hipError_t r = device_count(cu, count);
    if (r != hipSuccess) *count = 0;
    return r;
}

hipError_t hipDeviceGet(hipDevice_t *device, int ordinal) {
    QD_CUDA(cu);
    return to_hip(cu->cuDeviceGet(device, ordinal));
}

hipError_t hipDeviceGetName(char *name, int len, hipDevice_t device) {
    QD_CUDA(cu);
    return to_hip(cu->cuDeviceGetName(name, len, device));
}

hipError_t hipDeviceGetAttribute(int *pi, hipDeviceAttribute_t attr, int deviceId) {
    QD_CUDA(cu);
    CUdevice device = 0;
    hipError_t r = to_hip(cu->cuDeviceGet(&device, deviceId));
    if (r != hipSuccess) return r == hipErrorInvalidValue ? hipErrorInvalidDevice : r;
    for (const AttributePair &a : kAttributes)
        if (a.hip == attr) return to_hip(cu->cuDeviceGetAttribute(pi, a.cuda, device));
    return hipErrorInvalidValue;  // an attribute this test runtime does not answer
}

hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device) {
    QD_CUDA(cu);
    return to_hip(cu->cuDeviceTotalMem(bytes, device));
}

hipError_t hipDevicePrimaryCtxRetain(hipCtx_t *pctx, hipDevice_t dev) {
    QD_CUDA(cu);
    return to_hip(cu->cuDevicePrimaryCtxRetain(reinterpret_cast<CUcontext *>(pctx), dev));
}

hipError_t hipDevicePrimaryCtxRelease(hipDevice_t dev) {
    QD_CUDA(cu);
    return to_hip(cu->cuDevicePrimaryCtxRelease(dev));
}

hipError_t hipGetDevice(int *deviceId) {
    if (!deviceId) return hipErrorInvalidValue;
    QD_CUDA(cu);
    return current_device(cu, deviceId);
}

hipError_t hipSetDevice(int deviceId) {
    QD_CUDA(cu);
    CUcontext ctx = nullptr;
    hipError_t r = primary_context(cu, deviceId, &ctx);
    if (r == hipSuccess) r = to_hip(cu->cuCtxSetCurrent(ctx));
    if (r == hipSuccess) t_device = deviceId;
    return r;
}

hipError_t hipDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
    QD_CUDA(cu);
    if (hipError_t r = use_current_device(cu); r != hipSuccess) return r;
    return to_hip(cu->cuCtxGetStreamPriorityRange(leastPriority, greatestPriority));
}

hipError_t hipStreamCreateWithPriority(hipStream_t *stream, unsigned int flags, int priority) {
    QD_CUDA(cu);
    if (hipError_t r = use_current_device(cu); r != hipSuccess) return r;
    // hipStreamDefault / hipStreamNonBlocking are CU_STREAM_DEFAULT / CU_STREAM_NON_BLOCKING.
    unsigned cu_flags = 0;
    if (flags == hipStreamNonBlocking)
        cu_flags = CU_STREAM_NON_BLOCKING;
    else if (flags != hipStreamDefault)
        return hipErrorInvalidValue;
    return to_hip(
        cu->cuStreamCreateWithPriority(reinterpret_cast<CUstream *>(stream), cu_flags, priority));
}

hipError_t hipStreamDestroy(hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuStreamDestroy(cu_stream(stream)));
}

hipError_t hipStreamQuery(hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuStreamQuery(cu_stream(stream)));
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuStreamSynchronize(cu_stream(stream)));
}

hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (flags != 0) return hipErrorInvalidValue;  // HIP: must be 0
    return to_hip(cu->cuStreamWaitEvent(cu_stream(stream), cu_event(event), 0));
}

hipError_t hipStreamGetPriority(hipStream_t stream, int *priority) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuStreamGetPriority(cu_stream(stream), priority));
}

hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags) {
    QD_CUDA(cu);
    if (hipError_t r = use_current_device(cu); r != hipSuccess) return r;
    struct FlagPair {
        unsigned hip, cuda;
    };
    constexpr FlagPair kFlags[] = {
        {hipEventBlockingSync, CU_EVENT_BLOCKING_SYNC},
        {hipEventDisableTiming, CU_EVENT_DISABLE_TIMING},
    };
    unsigned cu_flags = 0, known = 0;
    for (const FlagPair &f : kFlags) {
        known |= f.hip;
        if (flags & f.hip) cu_flags |= f.cuda;
    }
    if (flags & ~known) return hipErrorInvalidValue;  // hipEventInterprocess, ...
    return to_hip(cu->cuEventCreate(reinterpret_cast<CUevent *>(event), cu_flags));
}

hipError_t hipEventDestroy(hipEvent_t event) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuEventDestroy(cu_event(event)));
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuEventRecord(cu_event(event), cu_stream(stream)));
}

hipError_t hipEventQuery(hipEvent_t event) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuEventQuery(cu_event(event)));
}

hipError_t hipEventSynchronize(hipEvent_t event) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuEventSynchronize(cu_event(event)));
}

hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuEventElapsedTime(ms, cu_event(start), cu_event(stop)));
}

hipError_t hipModuleLoadDataEx(hipModule_t *module, const void *image, unsigned int numOptions,
                               hipJitOption *options, void **optionValues) {
    QD_CUDA(cu);
    if (hipError_t r = use_current_device(cu); r != hipSuccess) return r;
    if (numOptions > 0 && (!options || !optionValues)) return hipErrorInvalidValue;
    std::vector<CUjit_option> cu_options;
    for (unsigned i = 0; i < numOptions; ++i) {
        const JitPair *found = nullptr;
        for (const JitPair &j : kJitOptions)
            if (j.hip == options[i]) found = &j;
        if (!found) return hipErrorInvalidValue;
        cu_options.push_back(found->cuda);
    }
    // The image (PTX, cubin or fatbin on CUDA) and the option values go through as they are.
    return to_hip(cu->cuModuleLoadDataEx(reinterpret_cast<CUmodule *>(module), image, numOptions,
                                         cu_options.data(), optionValues));
}

hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module, const char *kname) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuModuleGetFunction(reinterpret_cast<CUfunction *>(function),
                                          reinterpret_cast<CUmodule>(module), kname));
}

hipError_t hipModuleUnload(hipModule_t module) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuModuleUnload(reinterpret_cast<CUmodule>(module)));
}

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
                                 unsigned int gridDimZ, unsigned int blockDimX,
                                 unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, hipStream_t stream,
                                 void **kernelParams, void **extra) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    // HIP's `extra` list ends with HIP_LAUNCH_PARAM_END (0x3), CUDA's with CU_LAUNCH_PARAM_END
    // (0x0); the buffer pointer and size markers are the same (0x1, 0x2).
    void *cu_extra[5] = {};
    if (extra) {
        size_t n = 0;
        for (; extra[n] != HIP_LAUNCH_PARAM_END; n += 2) {
            if (n + 2 >= sizeof cu_extra / sizeof cu_extra[0]) return hipErrorInvalidValue;
            if (extra[n] == HIP_LAUNCH_PARAM_BUFFER_POINTER)
                cu_extra[n] = CU_LAUNCH_PARAM_BUFFER_POINTER;
            else if (extra[n] == HIP_LAUNCH_PARAM_BUFFER_SIZE)
                cu_extra[n] = CU_LAUNCH_PARAM_BUFFER_SIZE;
            else
                return hipErrorInvalidValue;
            cu_extra[n + 1] = extra[n + 1];
        }
        cu_extra[n] = CU_LAUNCH_PARAM_END;
    }
    return to_hip(cu->cuLaunchKernel(reinterpret_cast<CUfunction>(f), gridDimX, gridDimY, gridDimZ,
                                     blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                                     cu_stream(stream), kernelParams, extra ? cu_extra : nullptr));
}

hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback, void *userData,
                                unsigned int flags) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!callback || flags != 0) return hipErrorInvalidValue;  // HIP: flags must be 0
    auto *call = new (std::nothrow) Callback{callback, stream, userData};
    if (!call) return hipErrorOutOfMemory;
    hipError_t r = to_hip(cu->cuLaunchHostFunc(cu_stream(stream), run_callback, call));
    if (r != hipSuccess) delete call;  // never called: the payload is ours
    return r;
}

hipError_t hipMallocAsync(void **dev_ptr, size_t size, hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!dev_ptr) return hipErrorInvalidValue;
    CUdeviceptr address = 0;
    hipError_t r = to_hip(cu->cuMemAllocAsync(&address, size, cu_stream(stream)));
    if (r == hipSuccess) *dev_ptr = reinterpret_cast<void *>(static_cast<uintptr_t>(address));
    return r;
}

hipError_t hipFreeAsync(void *dev_ptr, hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuMemFreeAsync(cu_ptr(dev_ptr), cu_stream(stream)));
}

hipError_t hipFree(void *ptr) {
    QD_CUDA(cu);
    if (!ptr) return hipSuccess;  // HIP: freeing null is a no-op
    QD_CONTEXT(cu);
    return to_hip(cu->cuMemFree(cu_ptr(ptr)));
}

hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind,
                          hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    // Under CUDA's unified addressing every direction is the same copy: the devices are found
    // from the addresses (copy_async), as hipMemcpyDefault asks.
    switch (kind) {
    case hipMemcpyHostToHost:
    case hipMemcpyHostToDevice:
    case hipMemcpyDeviceToHost:
    case hipMemcpyDeviceToDevice:
    case hipMemcpyDefault: break;
    default: return hipErrorInvalidMemcpyDirection;
    }
    return copy_async(cu, dst, src, sizeBytes, cu_stream(stream));  // any two devices' memory
}

hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count,
                            hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuMemsetD8Async(cu_ptr(dest), value, count, cu_stream(stream)));
}

hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    struct FlagPair {
        unsigned hip, cuda;
    };
    constexpr FlagPair kFlags[] = {
        {hipHostMallocPortable, CU_MEMHOSTALLOC_PORTABLE},
        {hipHostMallocMapped, CU_MEMHOSTALLOC_DEVICEMAP},
        {hipHostMallocWriteCombined, CU_MEMHOSTALLOC_WRITECOMBINED},
    };
    unsigned cu_flags = 0, known = 0;
    for (const FlagPair &f : kFlags) {
        known |= f.hip;
        if (flags & f.hip) cu_flags |= f.cuda;
    }
    if (flags & ~known) return hipErrorInvalidValue;  // hipHostMallocNumaUser, Coherent, ...
    return to_hip(cu->cuMemHostAlloc(ptr, size, cu_flags));
}

hipError_t hipHostFree(void *ptr) {
    QD_CUDA(cu);
    if (!ptr) return hipSuccess;
    QD_CONTEXT(cu);
    return to_hip(cu->cuMemFreeHost(ptr));
}

// --- Peer access --------------------------------------------------------------------------------
// HIP names devices by ordinal where CUDA takes a CUdevice; a context is the device's primary
// context (hipCtx_t is the CUcontext, as hipDevicePrimaryCtxRetain returns it). A device's
// stream-ordered pool is its CUDA pool: granting another device access to it is CUDA's own.

hipError_t hipDeviceCanAccessPeer(int *canAccessPeer, int deviceId, int peerDeviceId) {
    if (!canAccessPeer) return hipErrorInvalidValue;
    QD_CUDA(cu);
    int count = 0;
    hipError_t r = device_count(cu, &count);
    if (r != hipSuccess) return r;
    if (deviceId < 0 || deviceId >= count || peerDeviceId < 0 || peerDeviceId >= count)
        return hipErrorInvalidDevice;
    if (deviceId == peerDeviceId) {  // HIP: a device is not its own peer
        *canAccessPeer = 0;
        return hipSuccess;
    }
    CUdevice device = 0, peer = 0;
    if ((r = to_hip(cu->cuDeviceGet(&device, deviceId))) != hipSuccess) return r;
    if ((r = to_hip(cu->cuDeviceGet(&peer, peerDeviceId))) != hipSuccess) return r;
    return to_hip(cu->cuDeviceCanAccessPeer(canAccessPeer, device, peer));
}

// The current context (HIP's current device's) may then read and write peerCtx's memory.
hipError_t hipCtxEnablePeerAccess(hipCtx_t peerCtx, unsigned int flags) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuCtxEnablePeerAccess(reinterpret_cast<CUcontext>(peerCtx), flags));
}

hipError_t hipDeviceGetMemPool(hipMemPool_t *mem_pool, int device) {
    if (!mem_pool) return hipErrorInvalidValue;
    QD_CUDA(cu);
    int count = 0;
    hipError_t r = device_count(cu, &count);
    if (r != hipSuccess) return r;
    if (device < 0 || device >= count) return hipErrorInvalidDevice;
    CUdevice d = 0;
    if ((r = to_hip(cu->cuDeviceGet(&d, device))) != hipSuccess) return r;
    return to_hip(cu->cuDeviceGetMemPool(reinterpret_cast<CUmemoryPool *>(mem_pool), d));
}

hipError_t hipMemPoolSetAccess(hipMemPool_t mem_pool, const hipMemAccessDesc *desc_list,
                               size_t count) {
    if (!mem_pool || (count && !desc_list)) return hipErrorInvalidValue;
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    std::vector<CUmemAccessDesc> descs(count);
    for (size_t i = 0; i < count; ++i) {
        // Each HIP value mapped by name: a location HIP 5.2 does not have, or flags it does
        // not define, are its hipErrorInvalidValue.
        if (desc_list[i].location.type != hipMemLocationTypeDevice) return hipErrorInvalidValue;
        descs[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        descs[i].location.id = desc_list[i].location.id;
        switch (desc_list[i].flags) {
        case hipMemAccessFlagsProtNone: descs[i].flags = CU_MEM_ACCESS_FLAGS_PROT_NONE; break;
        case hipMemAccessFlagsProtRead: descs[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READ; break;
        case hipMemAccessFlagsProtReadWrite:
            descs[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            break;
        default: return hipErrorInvalidValue;
        }
    }
    return to_hip(
        cu->cuMemPoolSetAccess(reinterpret_cast<CUmemoryPool>(mem_pool), descs.data(), count));
}

// --- Graphs (beta in HIP 5.2, as the header says) ---------------------------------------------
// Capture, instantiate, launch, update and destroy over the CUDA driver's, so that qd's native
// HIP graph path runs (src/backends/gpu/graph.cpp).

hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    for (const CaptureModePair &m : kCaptureModes)
        if (m.hip == mode) return to_hip(cu->cuStreamBeginCapture(cu_stream(stream), m.cuda));
    return hipErrorInvalidValue;
}

hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t *pGraph) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!pGraph) return hipErrorInvalidValue;
    return to_hip(cu->cuStreamEndCapture(cu_stream(stream), reinterpret_cast<CUgraph *>(pGraph)));
}

hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *pCaptureStatus) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!pCaptureStatus) return hipErrorInvalidValue;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    hipError_t r = to_hip(cu->cuStreamIsCapturing(cu_stream(stream), &status));
    if (r != hipSuccess) return r;
    for (const CaptureStatusPair &p : kCaptureStatuses)
        if (p.cuda == status) {
            *pCaptureStatus = p.hip;
            return hipSuccess;
        }
    return hipErrorUnknown;  // a status CUDA added later
}

// The older form: no flags; the error node and log that CUDA 12 no longer reports are empty.
hipError_t hipGraphInstantiate(hipGraphExec_t *pGraphExec, hipGraph_t graph,
                               hipGraphNode_t *pErrorNode, char *pLogBuffer, size_t bufferSize) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (pErrorNode) *pErrorNode = nullptr;
    if (pLogBuffer && bufferSize > 0) pLogBuffer[0] = '\0';
    return instantiate(cu, pGraphExec, graph, 0);
}

hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *pGraphExec, hipGraph_t graph,
                                        unsigned long long flags) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    // HIP 5.2 names one flag, CUDA's of the same meaning.
    if (flags & ~static_cast<unsigned long long>(hipGraphInstantiateFlagAutoFreeOnLaunch))
        return hipErrorInvalidValue;
    return instantiate(cu, pGraphExec, graph,
                       flags ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0);
}

hipError_t hipGraphLaunch(hipGraphExec_t graphExec, hipStream_t stream) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuGraphLaunch(cu_exec(graphExec), cu_stream(stream)));
}

// HIP keeps CUDA 11's shape (the failing node and the result written separately).
hipError_t hipGraphExecUpdate(hipGraphExec_t hGraphExec, hipGraph_t hGraph,
                              hipGraphNode_t *hErrorNode_out,
                              hipGraphExecUpdateResult *updateResult_out) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!hErrorNode_out || !updateResult_out) return hipErrorInvalidValue;
    CUgraphExecUpdateResultInfo info{};
    hipError_t r = to_hip(cu->cuGraphExecUpdate(cu_exec(hGraphExec), cu_graph(hGraph), &info));
    *hErrorNode_out = reinterpret_cast<hipGraphNode_t>(info.errorNode);
    *updateResult_out = to_hip_update_result(info.result);
    return r;
}

// The capture's dependency set (its last nodes): CUDA's, without edge data (qd adds none).
hipError_t hipStreamGetCaptureInfo_v2(hipStream_t stream, hipStreamCaptureStatus *captureStatus_out,
                                      unsigned long long *id_out, hipGraph_t *graph_out,
                                      const hipGraphNode_t **dependencies_out,
                                      size_t *numDependencies_out) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!captureStatus_out) return hipErrorInvalidValue;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    hipError_t r = to_hip(cu->cuStreamGetCaptureInfo(
        cu_stream(stream), &status, &id, reinterpret_cast<CUgraph *>(graph_out),
        reinterpret_cast<const CUgraphNode **>(dependencies_out), nullptr, numDependencies_out));
    if (r != hipSuccess) return r;
    if (id_out) *id_out = id;
    for (const CaptureStatusPair &p : kCaptureStatuses)
        if (p.cuda == status) {
            *captureStatus_out = p.hip;
            return hipSuccess;
        }
    return hipErrorUnknown;  // a status CUDA added later
}

// A kernel node's parameters, field by field: func is the CUfunction the node runs (this
// runtime's hipFunction_t), the dimensions and arguments CUDA's. An `extra` list is refused on
// the way in (its markers differ from CUDA's and no caller of this runtime passes one).
hipError_t hipGraphKernelNodeGetParams(hipGraphNode_t node, hipKernelNodeParams *pNodeParams) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!node || !pNodeParams) return hipErrorInvalidValue;
    CUDA_KERNEL_NODE_PARAMS p{};
    hipError_t r = to_hip(cu->cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p));
    if (r != hipSuccess) return r;
    pNodeParams->func = reinterpret_cast<void *>(p.func);
    pNodeParams->gridDim = dim3(p.gridDimX, p.gridDimY, p.gridDimZ);
    pNodeParams->blockDim = dim3(p.blockDimX, p.blockDimY, p.blockDimZ);
    pNodeParams->sharedMemBytes = p.sharedMemBytes;
    pNodeParams->kernelParams = p.kernelParams;
    pNodeParams->extra = p.extra;
    return hipSuccess;
}

hipError_t hipGraphExecKernelNodeSetParams(hipGraphExec_t hGraphExec, hipGraphNode_t node,
                                           const hipKernelNodeParams *pNodeParams) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!node || !pNodeParams || pNodeParams->extra) return hipErrorInvalidValue;
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = reinterpret_cast<CUfunction>(pNodeParams->func);
    p.gridDimX = pNodeParams->gridDim.x;
    p.gridDimY = pNodeParams->gridDim.y;
    p.gridDimZ = pNodeParams->gridDim.z;
    p.blockDimX = pNodeParams->blockDim.x;
    p.blockDimY = pNodeParams->blockDim.y;
    p.blockDimZ = pNodeParams->blockDim.z;
    p.sharedMemBytes = pNodeParams->sharedMemBytes;
    p.kernelParams = pNodeParams->kernelParams;
    return to_hip(cu->cuGraphExecKernelNodeSetParams(cu_exec(hGraphExec),
                                                     reinterpret_cast<CUgraphNode>(node), &p));
}

hipError_t hipGraphExecDestroy(hipGraphExec_t graphExec) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuGraphExecDestroy(cu_exec(graphExec)));
}

hipError_t hipGraphDestroy(hipGraph_t graph) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    return to_hip(cu->cuGraphDestroy(cu_graph(graph)));
}

#if QD_HIP_OVER_CUDA_HOST_FUNC
// Only in the host-func/ build of this runtime (README.md): a runtime that exports
// hipLaunchHostFunc, as HIP's later ones do. A capture records it, as it does CUDA's.
hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void *userData) {
    QD_CUDA(cu);
    QD_CONTEXT(cu);
    if (!fn) return hipErrorInvalidValue;
    return to_hip(cu->cuLaunchHostFunc(cu_stream(stream), fn, userData));
}
#endif

}  // extern "C"
