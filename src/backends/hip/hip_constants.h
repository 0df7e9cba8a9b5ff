// The HIP runtime ABI constants qd uses, written once from HIP's headers (hip_runtime_api.h,
// driver_types.h of HIP 5.2.3). hip/*.h is never included, so qd builds without HIP. The test
// runtime of tests/hip_runtime/ is compiled against the real header and checks every value here
// against it (static_assert), so a wrong value fails the build of the tests.
#pragma once

namespace qd::hip_abi {

// hipError_t values.
enum : int {
    kSuccess = 0,
    kInvalidValue = 1,
    kOutOfMemory = 2,
    kNotInitialized = 3,
    kDeinitialized = 4,
    kInsufficientDriver = 35,
    kNoDevice = 100,
    kInvalidDevice = 101,
    kInvalidImage = 200,
    kInvalidContext = 201,
    kNoBinaryForGpu = 209,
    kEccNotCorrectable = 214,
    kInvalidKernelFile = 218,
    kInvalidSource = 300,
    kFileNotFound = 301,
    kSharedObjectSymbolNotFound = 302,
    kSharedObjectInitFailed = 303,
    kInvalidHandle = 400,
    kNotFound = 500,
    kNotReady = 600,
    kIllegalAddress = 700,
    kLaunchOutOfResources = 701,
    kLaunchTimeOut = 702,
    kPeerAccessAlreadyEnabled = 704,
    kContextIsDestroyed = 709,
    kAssert = 710,
    kLaunchFailure = 719,
    kCooperativeLaunchTooLarge = 720,
    kNotSupported = 801,
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
    kUnknown = 999,
    kRuntimeMemory = 1052,
    kRuntimeOther = 1053,
};

// Flags.
enum : unsigned {
    kStreamDefault = 0x0,            // hipStreamDefault
    kStreamNonBlocking = 0x1,        // hipStreamNonBlocking
    kEventDefault = 0x0,             // hipEventDefault
    kEventDisableTiming = 0x2,       // hipEventDisableTiming
    kHostMallocPortable = 0x1,       // hipHostMallocPortable
    kStreamWriteValueDefault = 0x0,  // hipStreamWriteValue64's flags: none defined
    kStreamWaitValueGte = 0x0,       // hipStreamWaitValueGte
};

// hipDeviceAttribute_t values (HIP's own numbering, not CUDA's).
enum : int {
    kAttrComputeCapabilityMajor = 23,
    kAttrComputeCapabilityMinor = 61,
    kAttrMultiprocessorCount = 63,
    kAttrMemoryPoolsSupported = 88,
};

// hipJitOption values.
enum : int {
    kJitErrorLogBuffer = 5,
    kJitErrorLogBufferSizeBytes = 6,
};

enum : int { kMemcpyDefault = 4 };          // hipMemcpyKind: direction inferred from the addresses
enum : int { kMemLocationTypeDevice = 1 };  // hipMemLocationType: a device
enum : int { kMemAccessFlagsProtReadWrite = 3 };  // hipMemAccessFlags: read and write

enum : int {
    kStreamCaptureModeRelaxed = 2,  // hipStreamCaptureModeRelaxed
    kStreamCaptureStatusNone = 0,   // hipStreamCaptureStatusNone
};

// hipKernelNodeParams: a kernel node's parameters as hipGraphKernelNodeGetParams writes them and
// hipGraphExecKernelNodeSetParams reads them. qd reads func (a kernel's host-side symbol or
// whatever the runtime put there) only to pass it back.
struct Dim3 {
    unsigned x, y, z;
};
struct KernelNodeParams {
    Dim3 block;
    void **extra;
    void *func;
    Dim3 grid;
    void **kernel_params;
    unsigned shared_mem_bytes;
};

// hipStreamPerThread: a pseudo stream handle naming each thread's own stream.
constexpr unsigned long kStreamPerThread = 2;

}  // namespace qd::hip_abi
