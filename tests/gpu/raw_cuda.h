// The raw CUDA driver, for the GPU tests and benchmarks: what they compare qd against (the
// anchor) or use from "outside" qd (a stream another library created). Loaded with its own
// dlopen, like any other library in the process would; no CUDA header is needed to build.
//
// Declarations follow the CUDA driver ABI (cuda.h); only what the tests and benchmarks call.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_constants.h"

namespace rawcuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
struct CUgraph_st;
struct CUgraphExec_st;
using CUgraph = CUgraph_st *;
using CUgraphExec = CUgraphExec_st *;
struct CUgraphNode_st;
using CUgraphNode = CUgraphNode_st *;
// Green contexts (CUDA 12.4+): CUdevResource (RESOURCE_ABI_VERSION 1) and the opaque handles.
struct CUdevResource {
    int type;
    unsigned char internal_padding[92];
    union {
        struct {
            unsigned smCount, minSmPartitionSize, smCoscheduledAlignment;
        } sm;
        unsigned char oversize[48];
    };
};
struct CUdevResourceDesc_st;
struct CUgreenCtx_st;
using CUdevResourceDesc = CUdevResourceDesc_st *;
using CUgreenCtx = CUgreenCtx_st *;
constexpr int CU_DEV_RESOURCE_TYPE_SM = qd::cuda_abi::kDevResourceTypeSm;
constexpr unsigned CU_GREEN_CTX_DEFAULT_STREAM = qd::cuda_abi::kGreenCtxDefaultStream;
// CUDA_KERNEL_NODE_PARAMS_v2 (its first ten fields are the v1 struct).
struct CUDA_KERNEL_NODE_PARAMS {
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ;
    unsigned blockDimX, blockDimY, blockDimZ;
    unsigned sharedMemBytes;
    void **kernelParams;
    void **extra;
    void *kern;
    CUcontext ctx;
};
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;  // CUstreamCaptureMode
// cuLaunchKernelEx (CUDA 11.8), for the benchmarks' PDL anchor (B13): CUlaunchAttribute (an id,
// padding, a 64-byte value) and CUlaunchConfig.
struct CUlaunchAttribute {
    int id;  // CU_LAUNCH_ATTRIBUTE_*: qd::cuda_abi::kLaunchAttr*
    char pad[4];
    union {
        char bytes[64];
        int programmaticStreamSerializationAllowed;
    } value;
};
struct CUlaunchConfig {
    unsigned gridDimX, gridDimY, gridDimZ;
    unsigned blockDimX, blockDimY, blockDimZ;
    unsigned sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned numAttrs;
};
// Conditional nodes (CUDA 12.3), for the benchmarks' hand-built WHILE graphs (B12).
using CUgraphConditionalHandle = unsigned long long;
struct CUDA_CONDITIONAL_NODE_PARAMS {
    CUgraphConditionalHandle handle;
    int type;              // CUgraphConditionalNodeType
    unsigned size;         // bodies: 1 for WHILE
    CUgraph *phGraph_out;  // the bodies, filled by cuGraphAddNode
    CUcontext ctx;
};
// CUgraphNodeParams: a node's type and its parameters, 256 bytes in all.
struct CUgraphNodeParams {
    int type;  // CUgraphNodeType
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_CONDITIONAL_NODE_PARAMS conditional;
    };
    long long reserved2;
};
static_assert(sizeof(CUgraphNodeParams) == 256, "CUgraphNodeParams is 256 bytes in cuda.h");
constexpr int CU_GRAPH_NODE_TYPE_CONDITIONAL = 13;  // CUgraphNodeType
constexpr int CU_GRAPH_COND_TYPE_WHILE = 1;         // CUgraphConditionalNodeType
constexpr unsigned CU_GRAPH_COND_ASSIGN_DEFAULT = 0x1;
// CUgraphExecUpdateResultInfo (cuGraphExecUpdate_v2).
struct CUgraphExecUpdateResultInfo {
    int result;  // CUgraphExecUpdateResult
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
};

// From the one header that holds qd's CUDA constants (src/backends/cuda/cuda_constants.h).
constexpr CUresult CUDA_SUCCESS = qd::cuda_abi::kSuccess;
constexpr CUresult CUDA_ERROR_NOT_READY = qd::cuda_abi::kNotReady;
constexpr unsigned CU_STREAM_NON_BLOCKING = qd::cuda_abi::kStreamNonBlocking;
constexpr unsigned CU_EVENT_DEFAULT = qd::cuda_abi::kEventDefault;
constexpr unsigned CU_EVENT_DISABLE_TIMING = qd::cuda_abi::kEventDisableTiming;

struct Driver {
    void *lib = nullptr;
    std::string error;

    CUresult (*cuInit)(unsigned) = nullptr;
    CUresult (*cuDeviceGet)(CUdevice *, int) = nullptr;
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
    CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
    CUresult (*cuCtxGetCurrent)(CUcontext *) = nullptr;
    // Optional: creating a non-primary context (what some other library might do).
    CUresult (*cuCtxCreate_v4)(CUcontext *, void *params, unsigned, CUdevice) = nullptr;
    CUresult (*cuCtxCreate_v2)(CUcontext *, unsigned, CUdevice) = nullptr;
    CUresult (*cuCtxDestroy)(CUcontext) = nullptr;
    CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
    CUresult (*cuCtxPopCurrent)(CUcontext *) = nullptr;
    CUresult (*cuStreamCreate)(CUstream *, unsigned) = nullptr;
    CUresult (*cuStreamCreateWithPriority)(CUstream *, unsigned, int) = nullptr;
    CUresult (*cuStreamDestroy)(CUstream) = nullptr;
    CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
    CUresult (*cuStreamQuery)(CUstream) = nullptr;
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
    CUresult (*cuStreamGetPriority)(CUstream, int *) = nullptr;
    CUresult (*cuStreamGetFlags)(CUstream, unsigned *) = nullptr;
    CUresult (*cuEventCreate)(CUevent *, unsigned) = nullptr;
    CUresult (*cuEventDestroy)(CUevent) = nullptr;
    CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
    CUresult (*cuEventQuery)(CUevent) = nullptr;
    CUresult (*cuEventSynchronize)(CUevent) = nullptr;
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent) = nullptr;
    CUresult (*cuModuleLoadData)(CUmodule *, const void *) = nullptr;
    CUresult (*cuModuleUnload)(CUmodule) = nullptr;
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **) = nullptr;
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream) = nullptr;
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream) = nullptr;
    CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
    CUresult (*cuGetErrorName)(CUresult, const char **) = nullptr;
    // Optional (null when the driver lacks them): stream capture into a CUDA graph, for the
    // benchmarks' hand-captured anchor (B5g).
    CUresult (*cuStreamBeginCapture)(CUstream, int mode) = nullptr;
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *) = nullptr;
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long) = nullptr;
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
    CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
    CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
    // Optional: launches with attributes (B13's PDL anchor; CUDA 11.8).
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **) = nullptr;
    // Optional: uploading an instantiated graph ahead of its first launch (B5u; CUDA 11.1).
    CUresult (*cuGraphUpload)(CUgraphExec, CUstream) = nullptr;
    // Optional: rebinding a kernel node of an instantiated graph (B11).
    CUresult (*cuStreamGetCaptureInfo_v2)(CUstream, int *status, unsigned long long *id,
                                          CUgraph *graph, const CUgraphNode **deps,
                                          size_t *num_deps) = nullptr;
    CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode,
                                               const CUDA_KERNEL_NODE_PARAMS *) = nullptr;
    // Optional: graphs built node by node with a WHILE conditional (CUDA 12.3; B12).
    CUresult (*cuGraphCreate)(CUgraph *, unsigned) = nullptr;
    CUresult (*cuGraphAddKernelNode)(CUgraphNode *, CUgraph, const CUgraphNode *deps,
                                     size_t num_deps, const CUDA_KERNEL_NODE_PARAMS *) = nullptr;
    CUresult (*cuGraphAddNode)(CUgraphNode *, CUgraph, const CUgraphNode *deps,
                               const void *edge_data, size_t num_deps,
                               CUgraphNodeParams *) = nullptr;
    CUresult (*cuGraphConditionalHandleCreate)(CUgraphConditionalHandle *, CUgraph, CUcontext,
                                               unsigned default_value, unsigned flags) = nullptr;
    // Optional: a whole-graph update, the anchor of B11's update figures.
    CUresult (*cuGraphExecUpdate)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *) = nullptr;
    // Optional: several GPUs (B10).
    CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                  CUstream) = nullptr;
    // Optional: green contexts, SM partitions (CUDA 12.4; B17).
    CUresult (*cuDeviceGetDevResource)(CUdevice, CUdevResource *, int type) = nullptr;
    CUresult (*cuDevSmResourceSplitByCount)(CUdevResource *, unsigned *groups,
                                            const CUdevResource *input, CUdevResource *remaining,
                                            unsigned flags, unsigned min_count) = nullptr;
    CUresult (*cuDevResourceGenerateDesc)(CUdevResourceDesc *, CUdevResource *,
                                          unsigned count) = nullptr;
    CUresult (*cuGreenCtxCreate)(CUgreenCtx *, CUdevResourceDesc, CUdevice,
                                 unsigned flags) = nullptr;
    CUresult (*cuGreenCtxDestroy)(CUgreenCtx) = nullptr;
    CUresult (*cuGreenCtxStreamCreate)(CUstream *, CUgreenCtx, unsigned flags,
                                       int priority) = nullptr;
    // Optional: a 64-bit word written and waited on in stream order, in pinned host memory
    // (B14's anchor).
    CUresult (*cuStreamWriteValue64)(CUstream, CUdeviceptr, uint64_t, unsigned) = nullptr;
    CUresult (*cuStreamWaitValue64)(CUstream, CUdeviceptr, uint64_t, unsigned) = nullptr;
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned) = nullptr;
    CUresult (*cuMemFreeHost)(void *) = nullptr;

    // Loads libcuda.so.1 and calls cuInit(0). False (error says why) when there is no driver.
    bool load() {
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            error = e ? e : "dlopen(libcuda.so.1) failed";
            return false;
        }
        bool ok = true;
        auto bind = [&](auto &slot, const char *name) {
            slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(lib, name));
            if (!slot) {
                ok = false;
                error += std::string(error.empty() ? "" : ", ") + "no " + name;
            }
        };
        bind(cuInit, "cuInit");
        bind(cuDeviceGet, "cuDeviceGet");
        bind(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
        bind(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
        bind(cuCtxSetCurrent, "cuCtxSetCurrent");
        bind(cuCtxGetCurrent, "cuCtxGetCurrent");
        cuCtxCreate_v4 = reinterpret_cast<decltype(cuCtxCreate_v4)>(dlsym(lib, "cuCtxCreate_v4"));
        cuCtxCreate_v2 = reinterpret_cast<decltype(cuCtxCreate_v2)>(dlsym(lib, "cuCtxCreate_v2"));
        bind(cuCtxDestroy, "cuCtxDestroy_v2");
        bind(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
        bind(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
        bind(cuStreamCreate, "cuStreamCreate");
        bind(cuStreamCreateWithPriority, "cuStreamCreateWithPriority");
        bind(cuStreamDestroy, "cuStreamDestroy_v2");
        bind(cuStreamSynchronize, "cuStreamSynchronize");
        bind(cuStreamQuery, "cuStreamQuery");
        bind(cuStreamWaitEvent, "cuStreamWaitEvent");
        bind(cuStreamGetPriority, "cuStreamGetPriority");
        bind(cuStreamGetFlags, "cuStreamGetFlags");
        bind(cuEventCreate, "cuEventCreate");
        bind(cuEventDestroy, "cuEventDestroy_v2");
        bind(cuEventRecord, "cuEventRecord");
        bind(cuEventQuery, "cuEventQuery");
        bind(cuEventSynchronize, "cuEventSynchronize");
        bind(cuEventElapsedTime, "cuEventElapsedTime_v2");
        bind(cuModuleLoadData, "cuModuleLoadData");
        bind(cuModuleUnload, "cuModuleUnload");
        bind(cuModuleGetFunction, "cuModuleGetFunction");
        bind(cuLaunchKernel, "cuLaunchKernel");
        bind(cuMemAllocAsync, "cuMemAllocAsync");
        bind(cuMemFreeAsync, "cuMemFreeAsync");
        bind(cuMemcpyAsync, "cuMemcpyAsync");
        bind(cuGetErrorName, "cuGetErrorName");
        auto optional = [&](auto &slot, const char *name) {
            slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(lib, name));
        };
        optional(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
        optional(cuStreamEndCapture, "cuStreamEndCapture");
        optional(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
        optional(cuGraphLaunch, "cuGraphLaunch");
        optional(cuGraphExecDestroy, "cuGraphExecDestroy");
        optional(cuGraphDestroy, "cuGraphDestroy");
        optional(cuGraphUpload, "cuGraphUpload");
        optional(cuLaunchKernelEx, "cuLaunchKernelEx");
        optional(cuStreamGetCaptureInfo_v2, "cuStreamGetCaptureInfo_v2");
        optional(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2");
        optional(cuGraphCreate, "cuGraphCreate");
        optional(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2");
        optional(cuGraphAddNode, "cuGraphAddNode_v2");
        optional(cuGraphConditionalHandleCreate, "cuGraphConditionalHandleCreate");
        optional(cuGraphExecUpdate, "cuGraphExecUpdate_v2");
        optional(cuMemcpyPeerAsync, "cuMemcpyPeerAsync");
        optional(cuDeviceGetDevResource, "cuDeviceGetDevResource");
        optional(cuDevSmResourceSplitByCount, "cuDevSmResourceSplitByCount");
        optional(cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc");
        optional(cuGreenCtxCreate, "cuGreenCtxCreate");
        optional(cuGreenCtxDestroy, "cuGreenCtxDestroy");
        optional(cuGreenCtxStreamCreate, "cuGreenCtxStreamCreate");
        optional(cuStreamWriteValue64, "cuStreamWriteValue64_v2");
        optional(cuStreamWaitValue64, "cuStreamWaitValue64_v2");
        optional(cuMemHostAlloc, "cuMemHostAlloc");
        optional(cuMemFreeHost, "cuMemFreeHost");
        if (!ok) return false;
        CUresult r = cuInit(0);
        if (r != CUDA_SUCCESS) {
            error = "cuInit failed: " + name(r);
            return false;
        }
        return true;
    }

    bool has_graphs() const {
        return cuStreamBeginCapture && cuStreamEndCapture && cuGraphInstantiateWithFlags &&
               cuGraphLaunch && cuGraphExecDestroy && cuGraphDestroy;
    }
    bool has_upload() const { return has_graphs() && cuGraphUpload; }
    bool has_node_rebind() const {
        return has_graphs() && cuStreamGetCaptureInfo_v2 && cuGraphExecKernelNodeSetParams;
    }
    bool has_graph_update() const { return has_graphs() && cuGraphExecUpdate; }
    bool has_green_contexts() const {
        return cuDeviceGetDevResource && cuDevSmResourceSplitByCount && cuDevResourceGenerateDesc &&
               cuGreenCtxCreate && cuGreenCtxDestroy && cuGreenCtxStreamCreate;
    }

    bool has_conditional_nodes() const {
        return cuGraphCreate && cuGraphAddKernelNode && cuGraphAddNode &&
               cuGraphConditionalHandleCreate && cuGraphInstantiateWithFlags && cuGraphLaunch &&
               cuGraphExecDestroy && cuGraphDestroy;
    }

    std::string name(CUresult r) const {
        const char *n = nullptr;
        if (cuGetErrorName && cuGetErrorName(r, &n) == CUDA_SUCCESS && n) return n;
        return "CUresult " + std::to_string(r);
    }

    // A new (non-primary) context on device `ordinal`, pushed current on this thread.
    CUresult cuCtxCreate(CUcontext *out, unsigned flags, int ordinal) {
        CUdevice dev = 0;
        CUresult r = cuDeviceGet(&dev, ordinal);
        if (r != CUDA_SUCCESS) return r;
        if (cuCtxCreate_v2) return cuCtxCreate_v2(out, flags, dev);
        if (cuCtxCreate_v4) {
            struct {  // CUctxCreateParams, all defaults
                void *exec_affinity_params;
                int num_exec_affinity_params;
                void *cig_params;
            } params = {nullptr, 0, nullptr};
            return cuCtxCreate_v4(out, &params, flags, dev);
        }
        return 999;
    }

    // The primary context of device 0, retained and made current on this thread.
    bool use_primary(int ordinal, CUcontext *out) {
        CUdevice dev = 0;
        if (cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return false;
        if (cuDevicePrimaryCtxRetain(out, dev) != CUDA_SUCCESS) return false;
        return cuCtxSetCurrent(*out) == CUDA_SUCCESS;
    }
};

}  // namespace rawcuda
