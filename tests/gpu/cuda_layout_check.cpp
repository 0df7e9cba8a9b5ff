// qd's CUDA driver layouts and constants (src/backends/gpu/driver_table.h,
// src/backends/cuda/cuda_constants.h) against the real cuda.h: compiled wherever the CUDA
// toolkit is (tests/gpu/meson.build), so a difference fails the build. libqd itself never
// includes cuda.h.
#include <cuda.h>

#include <cstddef>

#include "backends/cuda/cuda_constants.h"
#include "backends/gpu/driver_table.h"

namespace gpu = qd::backend::gpu;
namespace abi = qd::cuda_abi;

// Conditional nodes (CUDA 12.3+).
static_assert(sizeof(gpu::GraphNodeParams) == sizeof(CUgraphNodeParams));
static_assert(offsetof(gpu::GraphNodeParams, conditional) ==
              offsetof(CUgraphNodeParams, conditional));
static_assert(offsetof(gpu::GraphNodeParams, reserved2) == offsetof(CUgraphNodeParams, reserved2));
static_assert(sizeof(gpu::ConditionalNodeParams) == sizeof(CUDA_CONDITIONAL_NODE_PARAMS));
static_assert(offsetof(gpu::ConditionalNodeParams, handle) ==
              offsetof(CUDA_CONDITIONAL_NODE_PARAMS, handle));
static_assert(offsetof(gpu::ConditionalNodeParams, type) ==
              offsetof(CUDA_CONDITIONAL_NODE_PARAMS, type));
static_assert(offsetof(gpu::ConditionalNodeParams, size) ==
              offsetof(CUDA_CONDITIONAL_NODE_PARAMS, size));
static_assert(offsetof(gpu::ConditionalNodeParams, bodies) ==
              offsetof(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out));
static_assert(offsetof(gpu::ConditionalNodeParams, ctx) ==
              offsetof(CUDA_CONDITIONAL_NODE_PARAMS, ctx));
static_assert(sizeof(gpu::ConditionalHandle) == sizeof(CUgraphConditionalHandle));
static_assert(abi::kGraphNodeTypeConditional == CU_GRAPH_NODE_TYPE_CONDITIONAL);
static_assert(abi::kGraphCondTypeIf == CU_GRAPH_COND_TYPE_IF);
static_assert(abi::kGraphCondTypeWhile == CU_GRAPH_COND_TYPE_WHILE);
static_assert(abi::kGraphCondTypeSwitch == CU_GRAPH_COND_TYPE_SWITCH);
static_assert(abi::kGraphCondAssignDefault == CU_GRAPH_COND_ASSIGN_DEFAULT);
static_assert(abi::kStreamSetCaptureDependencies == CU_STREAM_SET_CAPTURE_DEPENDENCIES);

// Launch attributes (cuLaunchKernelEx).
static_assert(sizeof(gpu::LaunchConfig) == sizeof(CUlaunchConfig));
static_assert(offsetof(gpu::LaunchConfig, shared_mem_bytes) ==
              offsetof(CUlaunchConfig, sharedMemBytes));
static_assert(offsetof(gpu::LaunchConfig, stream) == offsetof(CUlaunchConfig, hStream));
static_assert(offsetof(gpu::LaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs));
static_assert(offsetof(gpu::LaunchConfig, num_attrs) == offsetof(CUlaunchConfig, numAttrs));
static_assert(sizeof(gpu::LaunchAttribute) == sizeof(CUlaunchAttribute));
static_assert(offsetof(gpu::LaunchAttribute, value) == offsetof(CUlaunchAttribute, value));
static_assert(offsetof(gpu::LaunchAttribute, value.completion_event.flags) ==
              offsetof(CUlaunchAttribute, value.launchCompletionEvent.flags));
static_assert(abi::kLaunchAttrClusterDimension == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
static_assert(abi::kLaunchAttrProgrammaticStreamSerialization ==
              CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
static_assert(abi::kLaunchAttrPriority == CU_LAUNCH_ATTRIBUTE_PRIORITY);
static_assert(abi::kLaunchAttrLaunchCompletionEvent == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT);

// The structs and constants the table used before.
static_assert(sizeof(gpu::KernelNodeParams) == sizeof(CUDA_KERNEL_NODE_PARAMS_v2));
static_assert(sizeof(gpu::GraphExecUpdateInfo) == sizeof(CUgraphExecUpdateResultInfo));
static_assert(sizeof(gpu::MemAccessDesc) == sizeof(CUmemAccessDesc));
static_assert(abi::kNoBinaryForGpu == int(CUDA_ERROR_NO_BINARY_FOR_GPU));
static_assert(abi::kStreamCaptureModeRelaxed == CU_STREAM_CAPTURE_MODE_RELAXED);

// SM partitions (green contexts, CUDA 12.4+; the SM fields after smCount are 12.8's).
static_assert(sizeof(gpu::DevResource) == sizeof(CUdevResource));
static_assert(offsetof(gpu::DevResource, sm) == offsetof(CUdevResource, sm));
static_assert(offsetof(gpu::DevSmResource, min_partition_size) ==
              offsetof(CUdevSmResource, minSmPartitionSize));
static_assert(offsetof(gpu::DevSmResource, coscheduled_alignment) ==
              offsetof(CUdevSmResource, smCoscheduledAlignment));
static_assert(abi::kDevResourceTypeSm == CU_DEV_RESOURCE_TYPE_SM);
static_assert(abi::kGreenCtxDefaultStream == CU_GREEN_CTX_DEFAULT_STREAM);
// Timelines (stream memory operations on a 64-bit word).
static_assert(abi::kStreamWriteValueDefault == CU_STREAM_WRITE_VALUE_DEFAULT);
static_assert(abi::kStreamWaitValueGeq == CU_STREAM_WAIT_VALUE_GEQ);
