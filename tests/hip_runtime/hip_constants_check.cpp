// qd's HIP constants (src/backends/hip/hip_constants.h, written by hand so that libqd builds
// without HIP) checked against the real HIP header: a wrong value fails this build. Compiled
// into the test runtime's library (tests/hip_runtime/meson.build); it defines nothing.
//
// hipStreamPerThread is a pointer cast, which no constant expression may hold: the shim's test
// checks that one at run time (hip_over_cuda_test.cpp, ConstantsMatchTheHeaderAtRunTime).
#include <hip/hip_runtime_api.h>

#include <cstddef>

#include "backends/hip/hip_constants.h"

namespace {

namespace abi = qd::hip_abi;

#define QD_CHECK(qd_name, hip_value)                                                               \
    static_assert(static_cast<long long>(abi::qd_name) == static_cast<long long>(hip_value),       \
                  "qd::hip_abi::" #qd_name " differs from HIP's " #hip_value)

// hipError_t
QD_CHECK(kSuccess, hipSuccess);
QD_CHECK(kInvalidValue, hipErrorInvalidValue);
QD_CHECK(kOutOfMemory, hipErrorOutOfMemory);
QD_CHECK(kNotInitialized, hipErrorNotInitialized);
QD_CHECK(kDeinitialized, hipErrorDeinitialized);
QD_CHECK(kInsufficientDriver, hipErrorInsufficientDriver);
QD_CHECK(kNoDevice, hipErrorNoDevice);
QD_CHECK(kInvalidDevice, hipErrorInvalidDevice);
QD_CHECK(kInvalidImage, hipErrorInvalidImage);
QD_CHECK(kInvalidContext, hipErrorInvalidContext);
QD_CHECK(kNoBinaryForGpu, hipErrorNoBinaryForGpu);
QD_CHECK(kEccNotCorrectable, hipErrorECCNotCorrectable);
QD_CHECK(kInvalidKernelFile, hipErrorInvalidKernelFile);
QD_CHECK(kInvalidSource, hipErrorInvalidSource);
QD_CHECK(kFileNotFound, hipErrorFileNotFound);
QD_CHECK(kSharedObjectSymbolNotFound, hipErrorSharedObjectSymbolNotFound);
QD_CHECK(kSharedObjectInitFailed, hipErrorSharedObjectInitFailed);
QD_CHECK(kInvalidHandle, hipErrorInvalidHandle);
QD_CHECK(kNotFound, hipErrorNotFound);
QD_CHECK(kNotReady, hipErrorNotReady);
QD_CHECK(kIllegalAddress, hipErrorIllegalAddress);
QD_CHECK(kLaunchOutOfResources, hipErrorLaunchOutOfResources);
QD_CHECK(kLaunchTimeOut, hipErrorLaunchTimeOut);
QD_CHECK(kPeerAccessAlreadyEnabled, hipErrorPeerAccessAlreadyEnabled);
QD_CHECK(kContextIsDestroyed, hipErrorContextIsDestroyed);
QD_CHECK(kAssert, hipErrorAssert);
QD_CHECK(kLaunchFailure, hipErrorLaunchFailure);
QD_CHECK(kCooperativeLaunchTooLarge, hipErrorCooperativeLaunchTooLarge);
QD_CHECK(kNotSupported, hipErrorNotSupported);
QD_CHECK(kStreamCaptureUnsupported, hipErrorStreamCaptureUnsupported);
QD_CHECK(kStreamCaptureInvalidated, hipErrorStreamCaptureInvalidated);
QD_CHECK(kStreamCaptureMerge, hipErrorStreamCaptureMerge);
QD_CHECK(kStreamCaptureUnmatched, hipErrorStreamCaptureUnmatched);
QD_CHECK(kStreamCaptureUnjoined, hipErrorStreamCaptureUnjoined);
QD_CHECK(kStreamCaptureIsolation, hipErrorStreamCaptureIsolation);
QD_CHECK(kStreamCaptureImplicit, hipErrorStreamCaptureImplicit);
QD_CHECK(kCapturedEvent, hipErrorCapturedEvent);
QD_CHECK(kStreamCaptureWrongThread, hipErrorStreamCaptureWrongThread);
QD_CHECK(kGraphExecUpdateFailure, hipErrorGraphExecUpdateFailure);
QD_CHECK(kUnknown, hipErrorUnknown);
QD_CHECK(kRuntimeMemory, hipErrorRuntimeMemory);
QD_CHECK(kRuntimeOther, hipErrorRuntimeOther);

// Flags
QD_CHECK(kStreamDefault, hipStreamDefault);
QD_CHECK(kStreamNonBlocking, hipStreamNonBlocking);
QD_CHECK(kEventDefault, hipEventDefault);
QD_CHECK(kEventDisableTiming, hipEventDisableTiming);
QD_CHECK(kHostMallocPortable, hipHostMallocPortable);

// hipDeviceAttribute_t
QD_CHECK(kAttrComputeCapabilityMajor, hipDeviceAttributeComputeCapabilityMajor);
QD_CHECK(kAttrComputeCapabilityMinor, hipDeviceAttributeComputeCapabilityMinor);
QD_CHECK(kAttrMultiprocessorCount, hipDeviceAttributeMultiprocessorCount);
QD_CHECK(kAttrMemoryPoolsSupported, hipDeviceAttributeMemoryPoolsSupported);

// hipJitOption
QD_CHECK(kJitErrorLogBuffer, hipJitOptionErrorLogBuffer);
QD_CHECK(kJitErrorLogBufferSizeBytes, hipJitOptionErrorLogBufferSizeBytes);

// hipMemcpyKind
QD_CHECK(kMemcpyDefault, hipMemcpyDefault);

// Graphs
QD_CHECK(kStreamCaptureModeRelaxed, hipStreamCaptureModeRelaxed);
QD_CHECK(kStreamCaptureStatusNone, hipStreamCaptureStatusNone);
// hipMemLocationType, hipMemAccessFlags (hipMemAccessDesc, through qd's MemAccessDesc)
QD_CHECK(kMemLocationTypeDevice, hipMemLocationTypeDevice);
QD_CHECK(kMemAccessFlagsProtReadWrite, hipMemAccessFlagsProtReadWrite);
static_assert(sizeof(hipMemAccessDesc) == 3 * sizeof(int) &&
                  offsetof(hipMemAccessDesc, location) == 0 &&
                  offsetof(hipMemAccessDesc, flags) == 2 * sizeof(int),
              "hipMemAccessDesc is not {type, id, flags} as qd's MemAccessDesc");
// hipKernelNodeParams, field by field (the rebind reads and writes it: hip_kernel_node_args.cpp)
static_assert(sizeof(abi::KernelNodeParams) == sizeof(hipKernelNodeParams) &&
                  offsetof(abi::KernelNodeParams, block) ==
                      offsetof(hipKernelNodeParams, blockDim) &&
                  offsetof(abi::KernelNodeParams, extra) == offsetof(hipKernelNodeParams, extra) &&
                  offsetof(abi::KernelNodeParams, func) == offsetof(hipKernelNodeParams, func) &&
                  offsetof(abi::KernelNodeParams, grid) == offsetof(hipKernelNodeParams, gridDim) &&
                  offsetof(abi::KernelNodeParams, kernel_params) ==
                      offsetof(hipKernelNodeParams, kernelParams) &&
                  offsetof(abi::KernelNodeParams, shared_mem_bytes) ==
                      offsetof(hipKernelNodeParams, sharedMemBytes) &&
                  sizeof(abi::Dim3) == sizeof(dim3) && offsetof(abi::Dim3, z) == offsetof(dim3, z),
              "hipKernelNodeParams is not qd's hip_abi::KernelNodeParams");

#undef QD_CHECK

}  // namespace
