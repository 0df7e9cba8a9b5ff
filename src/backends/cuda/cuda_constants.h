// The CUDA driver ABI constants qd uses, written once from the driver API's documented values
// (they are part of its stable ABI; cuda.h is never included, so qd builds without the CUDA
// toolkit). Used by the CUDA driver table (cuda_driver.cpp), the fake driver of the GPU
// white-box tests and the raw-CUDA anchor of the GPU tests and benchmarks (tests/gpu/raw_cuda.h).
#pragma once

namespace qd::cuda_abi {

// CUresult values (cuda.h, enum cudaError_enum).
enum : int {
    kSuccess = 0,
    kInvalidValue = 1,
    kOutOfMemory = 2,
    kNotInitialized = 3,
    kDeinitialized = 4,
    kStubLibrary = 34,
    kCallRequiresNewerDriver = 36,
    kDeviceUnavailable = 46,
    kNoDevice = 100,
    kInvalidDevice = 101,
    kDeviceNotLicensed = 102,
    kInvalidImage = 200,
    kInvalidContext = 201,
    kNoBinaryForGpu = 209,
    kEccUncorrectable = 214,
    kPeerAccessUnsupported = 217,
    kInvalidPtx = 218,
    kNvlinkUncorrectable = 220,
    kJitCompilerNotFound = 221,
    kUnsupportedPtxVersion = 222,
    kJitCompilationDisabled = 223,
    kContained = 226,
    kInvalidSource = 300,
    kFileNotFound = 301,
    kSharedObjectSymbolNotFound = 302,
    kSharedObjectInitFailed = 303,
    kInvalidHandle = 400,
    kNotFound = 500,
    kNotReady = 600,
    kIllegalAddress = 700,
    kLaunchOutOfResources = 701,
    kLaunchTimeout = 702,
    kPeerAccessAlreadyEnabled = 704,
    kContextIsDestroyed = 709,
    kAssert = 710,
    kHardwareStackError = 714,
    kIllegalInstruction = 715,
    kMisalignedAddress = 716,
    kInvalidAddressSpace = 717,
    kInvalidPc = 718,
    kLaunchFailed = 719,
    kCooperativeLaunchTooLarge = 720,
    kTensorMemoryLeak = 721,
    kNotPermitted = 800,
    kNotSupported = 801,
    kSystemNotReady = 802,
    kSystemDriverMismatch = 803,
    kCompatNotSupportedOnDevice = 804,
    kStreamCaptureUnsupported = 900,
    kStreamCaptureInvalidated = 901,
    kStreamCaptureMerge = 902,
    kStreamCaptureUnmatched = 903,
    kStreamCaptureUnjoined = 904,
    kStreamCaptureIsolation = 905,
    kStreamCaptureImplicit = 906,
    kCapturedEvent = 907,
    kStreamCaptureWrongThread = 908,
    kGraphExecUpdateFailure = 910,
    kInvalidClusterSize = 912,
    kUnknown = 999,
};

// Flags, attributes and options (cuda.h).
inline constexpr int kDevResourceTypeSm = 1;             // CU_DEV_RESOURCE_TYPE_SM
inline constexpr unsigned kGreenCtxDefaultStream = 0x1;  // CU_GREEN_CTX_DEFAULT_STREAM
inline constexpr unsigned kStreamDefault = 0x0;          // CU_STREAM_DEFAULT
inline constexpr unsigned kStreamNonBlocking = 0x1;      // CU_STREAM_NON_BLOCKING
inline constexpr unsigned kEventDefault = 0x0;           // CU_EVENT_DEFAULT
inline constexpr unsigned kEventDisableTiming = 0x2;     // CU_EVENT_DISABLE_TIMING
inline constexpr unsigned kMemHostAllocPortable = 0x1;   // CU_MEMHOSTALLOC_PORTABLE
inline constexpr int kAttrComputeMajor = 75;         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int kAttrComputeMinor = 76;         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
inline constexpr int kAttrMultiprocessors = 16;      // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
inline constexpr int kJitErrorLogBuffer = 5;         // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int kJitErrorLogBufferBytes = 6;    // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
inline constexpr int kMemLocationTypeDevice = 0x1;   // CU_MEM_LOCATION_TYPE_DEVICE
inline constexpr int kMemAccessProtReadWrite = 0x3;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr unsigned long kStreamLegacy = 0x1;  // CU_STREAM_LEGACY
inline constexpr unsigned long kStreamPerThread = 0x2;  // CU_STREAM_PER_THREAD
inline constexpr int kStreamCaptureModeRelaxed = 2;     // CU_STREAM_CAPTURE_MODE_RELAXED
inline constexpr int kStreamCaptureStatusNone = 0;      // CU_STREAM_CAPTURE_STATUS_NONE
// Conditional nodes (CUDA 12.3+).
inline constexpr int kGraphNodeTypeConditional = 13;      // CU_GRAPH_NODE_TYPE_CONDITIONAL
inline constexpr int kGraphCondTypeIf = 0;                // CU_GRAPH_COND_TYPE_IF
inline constexpr int kGraphCondTypeWhile = 1;             // CU_GRAPH_COND_TYPE_WHILE
inline constexpr int kGraphCondTypeSwitch = 2;            // CU_GRAPH_COND_TYPE_SWITCH
inline constexpr unsigned kGraphCondAssignDefault = 0x1;  // CU_GRAPH_COND_ASSIGN_DEFAULT
inline constexpr unsigned kStreamSetCaptureDependencies =
    0x1;  // CU_STREAM_SET_CAPTURE_DEPENDENCIES
// Timelines: stream memory operations on a 64-bit word.
inline constexpr unsigned kStreamWriteValueDefault = 0x0;  // CU_STREAM_WRITE_VALUE_DEFAULT
inline constexpr unsigned kStreamWaitValueGeq = 0x0;       // CU_STREAM_WAIT_VALUE_GEQ
// Launch attributes (cuLaunchKernelEx, CUDA 11.8+): the CUlaunchAttributeID values.
inline constexpr int kLaunchAttrClusterDimension = 4;  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
inline constexpr int kLaunchAttrProgrammaticStreamSerialization =
    6;                                         // ..._PROGRAMMATIC_STREAM_SERIALIZATION
inline constexpr int kLaunchAttrPriority = 8;  // CU_LAUNCH_ATTRIBUTE_PRIORITY
inline constexpr int kLaunchAttrLaunchCompletionEvent =
    12;  // CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT

}  // namespace qd::cuda_abi
