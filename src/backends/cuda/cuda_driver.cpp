// Fills the GPU driver table from libcuda.so.1.
//
// The few CUDA constants qd needs are in cuda_constants.h, written from the driver API's
// documented values (they are part of its stable ABI); no CUDA header is included, so libqd
// builds on a machine without the CUDA toolkit and loads on one without a driver.
//
// Symbols are resolved by their versioned ABI names (cuStreamDestroy_v2, cuMemFree_v2, ...),
// the names cuda.h maps its functions to. The unsuffixed names of stream functions
// (cuLaunchKernel, cuMemcpyAsync, ...) are the legacy-default-stream flavours; qd never passes
// the NULL stream, so they behave exactly like the _ptsz ones.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/condition_kernel_image.h"
#include "backends/cuda/cuda_constants.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "backends/common/dl_library.h"
#include "common/error.h"

namespace qd::backend {

namespace {

using gpu::Fn;

using namespace cuda_abi;  // the CUresult values (cuda_constants.h)

// How CUDA results map to qd statuses. Sticky codes are the asynchronous faults after which
// the CUDA context is unusable (the CUDA documentation: "the process must terminate"); the
// context is marked lost. Codes not listed take each call's own fallback status.
constexpr gpu::ErrorRule kErrorRules[] = {
    {kOutOfMemory, QD_ERROR_OUT_OF_MEMORY, false},
    {kNotInitialized, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kDeinitialized, QD_ERROR_BACKEND_UNAVAILABLE, false},  // at process exit
    {kStubLibrary, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kCallRequiresNewerDriver, QD_ERROR_NOT_SUPPORTED, false},
    {kDeviceUnavailable, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kNoDevice, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kInvalidDevice, QD_ERROR_INVALID_ARGUMENT, false},
    {kDeviceNotLicensed, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kInvalidImage, QD_ERROR_INVALID_IMAGE, false},
    {kInvalidContext, QD_ERROR_INTERNAL, false},
    {kNoBinaryForGpu, QD_ERROR_INVALID_IMAGE, false},
    {kInvalidPtx, QD_ERROR_INVALID_IMAGE, false},
    {kJitCompilerNotFound, QD_ERROR_INVALID_IMAGE, false},
    {kUnsupportedPtxVersion, QD_ERROR_INVALID_IMAGE, false},
    {kJitCompilationDisabled, QD_ERROR_INVALID_IMAGE, false},
    {kInvalidSource, QD_ERROR_INVALID_IMAGE, false},
    {kFileNotFound, QD_ERROR_NOT_FOUND, false},
    {kSharedObjectSymbolNotFound, QD_ERROR_INVALID_IMAGE, false},
    {kSharedObjectInitFailed, QD_ERROR_INVALID_IMAGE, false},
    {kNotFound, QD_ERROR_NOT_FOUND, false},
    {kLaunchOutOfResources, QD_ERROR_LAUNCH_FAILED, false},
    {kCooperativeLaunchTooLarge, QD_ERROR_LAUNCH_FAILED, false},
    {kInvalidClusterSize, QD_ERROR_LAUNCH_FAILED, false},
    {kContextIsDestroyed, QD_ERROR_INTERNAL, false},
    {kNotPermitted, QD_ERROR_INVALID_OPERATION, false},
    {kNotSupported, QD_ERROR_NOT_SUPPORTED, false},
    {kPeerAccessUnsupported, QD_ERROR_NOT_SUPPORTED, false},
    {kSystemNotReady, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kSystemDriverMismatch, QD_ERROR_BACKEND_UNAVAILABLE, false},
    {kCompatNotSupportedOnDevice, QD_ERROR_BACKEND_UNAVAILABLE, false},
    // An imported stream may be capturing a graph; qd's calls then are not allowed on it.
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
    {kEccUncorrectable, QD_ERROR_DEVICE_LOST, true},
    {kNvlinkUncorrectable, QD_ERROR_DEVICE_LOST, true},
    {kContained, QD_ERROR_DEVICE_LOST, true},
    {kIllegalAddress, QD_ERROR_DEVICE_LOST, true},
    {kLaunchTimeout, QD_ERROR_DEVICE_LOST, true},
    {kAssert, QD_ERROR_DEVICE_LOST, true},
    {kHardwareStackError, QD_ERROR_DEVICE_LOST, true},
    {kIllegalInstruction, QD_ERROR_DEVICE_LOST, true},
    {kMisalignedAddress, QD_ERROR_DEVICE_LOST, true},
    {kInvalidAddressSpace, QD_ERROR_DEVICE_LOST, true},
    {kInvalidPc, QD_ERROR_DEVICE_LOST, true},
    {kLaunchFailed, QD_ERROR_DEVICE_LOST, true},
    {kTensorMemoryLeak, QD_ERROR_DEVICE_LOST, true},
    {kUnknown, QD_ERROR_INTERNAL, false},
};

// Each table entry and the libcuda symbols that provide it, preferred first.
constexpr gpu::SymbolBinding kBindings[] = {
    {Fn::init, {"cuInit"}},
    {Fn::driver_get_version, {"cuDriverGetVersion"}},
    {Fn::get_error_name, {"cuGetErrorName"}},
    {Fn::get_error_string, {"cuGetErrorString"}},
    {Fn::device_get_count, {"cuDeviceGetCount"}},
    {Fn::device_get, {"cuDeviceGet"}},
    {Fn::device_get_name, {"cuDeviceGetName"}},
    {Fn::device_get_attribute, {"cuDeviceGetAttribute"}},
    {Fn::device_total_mem, {"cuDeviceTotalMem_v2"}},
    {Fn::device_primary_ctx_retain, {"cuDevicePrimaryCtxRetain"}},
    {Fn::device_primary_ctx_release, {"cuDevicePrimaryCtxRelease_v2"}},
    {Fn::ctx_get_current, {"cuCtxGetCurrent"}},
    {Fn::ctx_set_current, {"cuCtxSetCurrent"}},
    {Fn::ctx_push_current, {"cuCtxPushCurrent_v2"}},
    {Fn::ctx_pop_current, {"cuCtxPopCurrent_v2"}},
    {Fn::ctx_get_stream_priority_range, {"cuCtxGetStreamPriorityRange"}},
    {Fn::stream_create, {"cuStreamCreateWithPriority"}},
    {Fn::stream_destroy, {"cuStreamDestroy_v2"}},
    {Fn::stream_query, {"cuStreamQuery"}},
    {Fn::stream_synchronize, {"cuStreamSynchronize"}},
    {Fn::stream_wait_event, {"cuStreamWaitEvent"}},
    {Fn::stream_get_priority, {"cuStreamGetPriority"}},
    {Fn::stream_get_ctx, {"cuStreamGetCtx"}},
    {Fn::stream_get_flags, {"cuStreamGetFlags"}},
    {Fn::event_create, {"cuEventCreate"}},
    {Fn::event_destroy, {"cuEventDestroy_v2"}},
    {Fn::event_record, {"cuEventRecord"}},
    {Fn::event_query, {"cuEventQuery"}},
    {Fn::event_synchronize, {"cuEventSynchronize"}},
    {Fn::event_elapsed_time, {"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
    {Fn::module_load_data, {"cuModuleLoadDataEx"}},
    {Fn::module_get_function, {"cuModuleGetFunction"}},
    {Fn::module_unload, {"cuModuleUnload"}},
    {Fn::func_get_param_info, {"cuFuncGetParamInfo"}},
    {Fn::func_load, {"cuFuncLoad"}},
    {Fn::launch_kernel, {"cuLaunchKernel"}},
    {Fn::launch_kernel_ex, {"cuLaunchKernelEx"}},
    {Fn::launch_host_func, {"cuLaunchHostFunc"}},
    {Fn::mem_alloc_async, {"cuMemAllocAsync"}},
    {Fn::mem_free_async, {"cuMemFreeAsync"}},
    {Fn::mem_free, {"cuMemFree_v2"}},
    {Fn::memcpy_async, {"cuMemcpyAsync"}},
    {Fn::memset_d8_async, {"cuMemsetD8Async"}},
    {Fn::host_alloc, {"cuMemHostAlloc"}},
    {Fn::host_free, {"cuMemFreeHost"}},
    // Native graphs (optional, CUDA 12.0+ for cuGraphExecUpdate_v2).
    {Fn::stream_begin_capture, {"cuStreamBeginCapture_v2"}},
    {Fn::stream_end_capture, {"cuStreamEndCapture"}},
    {Fn::stream_is_capturing, {"cuStreamIsCapturing"}},
    {Fn::graph_instantiate, {"cuGraphInstantiateWithFlags"}},
    {Fn::graph_launch, {"cuGraphLaunch"}},
    {Fn::graph_exec_update, {"cuGraphExecUpdate_v2"}},
    {Fn::graph_exec_destroy, {"cuGraphExecDestroy"}},
    {Fn::graph_destroy, {"cuGraphDestroy"}},
    // Rebinding a kernel node (optional, CUDA 11.3+ for cuStreamGetCaptureInfo_v2; the _v2
    // set-params takes CUDA_KERNEL_NODE_PARAMS_v2, whose prefix is the v1 struct).
    {Fn::stream_get_capture_info, {"cuStreamGetCaptureInfo_v2"}},
    {Fn::graph_exec_kernel_node_set_params,
     {"cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams"}},
    // Conditional nodes (optional): cuGraphConditionalHandleCreate and
    // cuStreamBeginCaptureToGraph are CUDA 12.3; cuGraphAddNode is the 12.2 symbol without edge
    // data (cuda.h maps the name to cuGraphAddNode_v2, which adds it; qd passes none), as
    // cuStreamUpdateCaptureDependencies is 11.3's (cuda.h: _v2).
    {Fn::graph_conditional_handle_create, {"cuGraphConditionalHandleCreate"}},
    {Fn::graph_add_node, {"cuGraphAddNode"}},
    {Fn::stream_begin_capture_to_graph, {"cuStreamBeginCaptureToGraph"}},
    {Fn::stream_update_capture_dependencies, {"cuStreamUpdateCaptureDependencies"}},
    // Uploading a graph ahead of its first launch (optional, CUDA 11.1+).
    {Fn::graph_upload, {"cuGraphUpload"}},
    {Fn::device_can_access_peer, {"cuDeviceCanAccessPeer"}},
    {Fn::ctx_enable_peer_access, {"cuCtxEnablePeerAccess"}},
    {Fn::device_get_mem_pool, {"cuDeviceGetMemPool"}},
    {Fn::mem_pool_set_access, {"cuMemPoolSetAccess"}},
    {Fn::memcpy_peer_async, {"cuMemcpyPeerAsync"}},
    // SM partitions (optional, green contexts: CUDA 12.4+).
    {Fn::device_get_dev_resource, {"cuDeviceGetDevResource"}},
    {Fn::dev_sm_resource_split_by_count, {"cuDevSmResourceSplitByCount"}},
    {Fn::dev_resource_generate_desc, {"cuDevResourceGenerateDesc"}},
    {Fn::green_ctx_create, {"cuGreenCtxCreate"}},
    {Fn::green_ctx_destroy, {"cuGreenCtxDestroy"}},
    {Fn::ctx_from_green_ctx, {"cuCtxFromGreenCtx"}},
    {Fn::green_ctx_stream_create, {"cuGreenCtxStreamCreate"}},
    // Timelines (optional): the _v2 stream memory operations (CUDA 11.7+) need no device
    // attribute; the first ones (9.0) only where 64-bit stream memory operations are enabled.
    {Fn::stream_write_value64, {"cuStreamWriteValue64_v2", "cuStreamWriteValue64"}},
    {Fn::stream_wait_value64, {"cuStreamWaitValue64_v2", "cuStreamWaitValue64"}},
};

// A CUDA fat binary starts with {uint32 magic 0xBA55ED50, uint16 version, uint16 header size,
// uint64 payload size}; the image is header size + payload size bytes.
uint64_t cuda_fat_binary_size(const void *image, uint64_t available) {
    const auto *p = static_cast<const unsigned char *>(image);
    if (available < 16) return 0;
    uint32_t magic = 0;
    std::memcpy(&magic, p, 4);
    if (magic != 0xBA55ED50u) return 0;
    uint16_t header = 0;
    uint64_t payload = 0;
    std::memcpy(&header, p + 6, 2);
    std::memcpy(&payload, p + 8, 8);
    uint64_t total = 0;
    if (add_overflows(header, payload, &total)) return UINT64_MAX;
    return total;
}

gpu::DriverTable cuda_constants() {
    gpu::DriverTable t;
    t.kind = QD_BACKEND_CUDA;
    t.api_name = "CUDA";
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
    t.host_alloc_flags = kMemHostAllocPortable;
    t.attr_compute_major = kAttrComputeMajor;
    t.attr_compute_minor = kAttrComputeMinor;
    t.attr_multiprocessors = kAttrMultiprocessors;
    t.jit_error_log_buffer = kJitErrorLogBuffer;
    t.jit_error_log_buffer_bytes = kJitErrorLogBufferBytes;
    t.mem_location_device = kMemLocationTypeDevice;
    t.mem_access_read_write = kMemAccessProtReadWrite;
    // The driver runs a call on an explicit stream in that stream's context, with no context or
    // another one current (checked on every GPU run by
    // Gpu.StreamCalls_WithNoOrAnotherContextCurrent_RunInTheStreamsContext).
    t.stream_calls_use_stream_context = true;
    t.pseudo_streams[0] = kStreamLegacy;
    t.pseudo_streams[1] = kStreamPerThread;
    t.fat_binary_size = cuda_fat_binary_size;
    // Relaxed, not thread-local: qd_stream_end_capture may be called from any thread (qd.h),
    // which the driver allows only in relaxed mode (the other modes fail the end with
    // CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD; Go code cannot even choose its thread). What the
    // stricter modes guard against, calls that would synchronise with the capturing stream,
    // qd refuses itself on a capturing stream, and its streams never synchronise implicitly
    // (non-blocking).
    t.capture_mode = kStreamCaptureModeRelaxed;
    t.capture_status_none = kStreamCaptureStatusNone;
    t.rebind_requires = "CUDA 11.3 (driver 465) or newer";
    t.graph_node_conditional = kGraphNodeTypeConditional;
    t.conditional_if = kGraphCondTypeIf;
    t.conditional_while = kGraphCondTypeWhile;
    t.conditional_switch = kGraphCondTypeSwitch;
    t.conditional_assign_default = kGraphCondAssignDefault;
    t.set_capture_dependencies = kStreamSetCaptureDependencies;
    t.condition_image = kConditionKernelImage;
    t.condition_kernel_name = kConditionKernelName;
    t.condition_kernel_architectures = kConditionKernelArchitectures;
    t.no_binary_for_gpu = kNoBinaryForGpu;
    t.upload_requires = "CUDA 11.1 (driver 455) or newer";
    t.dev_resource_type_sm = kDevResourceTypeSm;
    t.green_ctx_default_stream = kGreenCtxDefaultStream;
    t.green_ctx_requires = "CUDA 12.4 (driver 550) or newer";
    t.write_value_default = kStreamWriteValueDefault;
    t.wait_value_geq = kStreamWaitValueGeq;
    t.timeline_requires = "CUDA 11.7 (driver 515) or newer (cuStreamWriteValue64_v2)";
    t.launch_attr_cluster_dimension = kLaunchAttrClusterDimension;
    t.launch_attr_programmatic_serialization = kLaunchAttrProgrammaticStreamSerialization;
    t.launch_attr_priority = kLaunchAttrPriority;
    t.launch_attr_launch_completion_event = kLaunchAttrLaunchCompletionEvent;
    t.launch_ex_requires = "CUDA 11.8 (driver 520) or newer";
    t.cluster_min_compute_major = 9;
    t.programmatic_capture_requires = "CUDA 12.3 (driver 545) or newer";
    t.programmatic_capture_min_version = 12030;
    return t;
}

}  // namespace

qd_status make_cuda_driver(std::unique_ptr<Driver> *out) {
    // By soname only: the system loader's search path, never a path of ours and never the
    // current directory. No environment variable changes what is loaded.
    const char *why = nullptr;
    DlLibrary library = DlLibrary::open("libcuda.so.1", &why);
    if (!library) return fail(QD_ERROR_BACKEND_UNAVAILABLE, "cannot load the CUDA driver: %s", why);

    gpu::DriverTable table = cuda_constants();
    gpu::bind_symbols(table, library, kBindings, sizeof kBindings / sizeof kBindings[0]);
    Fn missing = gpu::first_missing(table);
    if (missing != Fn::count)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE,
                    "libcuda.so.1 has no %s; the NVIDIA driver is too old for qd",
                    gpu::symbol_name(table, missing));

    gpu::Result r = table.init(0);
    if (r == kStubLibrary)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE,
                    "cuInit failed: CUDA_ERROR_STUB_LIBRARY: the libcuda.so.1 found is the CUDA "
                    "toolkit's link stub, not the NVIDIA driver (check the library search path)");
    if (r != kSuccess) {
        char what[256];
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "cuInit failed: %s",
                    gpu::describe_result(table, r, what, sizeof what));
    }
    if (gpu::g_table_hook) gpu::g_table_hook(table);
    return gpu::make_gpu_driver(table, std::move(library), out);
}

}  // namespace qd::backend
