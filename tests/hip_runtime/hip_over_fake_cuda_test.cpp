// The test runtime (hip_over_cuda.cpp) over a fake libcuda.so.1 (fake_cuda/): how it issues
// copies and graph calls, checked call by call on any machine, GPU or not. meson puts the fake
// first on LD_LIBRARY_PATH; where the real driver is found instead, every test skips and says so.
//
// - Copies follow HIP's rule (src/backends/hip/README.md, "Copies across devices"): a copy of
//   another device's memory is issued in that device's context (the caller's context restored
//   after), a copy between two devices' memory is one cuMemcpyPeerAsync with both primary
//   contexts, and a copy of the current device's memory or of host memory switches nothing.
//   The fake refuses, as CUDA does, a cuMemcpyAsync whose addresses are another device's
//   memory than the current context's.
// - Graph calls map HIP's capture modes, capture statuses, instantiate flags and update results
//   to CUDA's by name, and leave the older hipGraphInstantiate's error node and log empty.
// - A capture's dependency set (hipStreamGetCaptureInfo_v2) and a kernel node's parameters
//   (hipGraphKernelNodeGetParams, hipGraphExecKernelNodeSetParams, what qd's HIP rebind calls)
//   are CUDA's, field by field.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <hip/hip_runtime_api.h>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda/fake_cuda.h"

namespace {

using fake_cuda::Call;

// --- The runtime under test, by path; each function may be missing (a runtime without it) ------

// clang-format off
#define QD_HIP_FUNCTIONS(X)                                                                     \
    X(hipSetDevice) X(hipGetDevice) X(hipMemcpyAsync) X(hipStreamBeginCapture)                    \
    X(hipStreamEndCapture) X(hipStreamIsCapturing) X(hipGraphInstantiate)                         \
    X(hipGraphInstantiateWithFlags) X(hipGraphLaunch) X(hipGraphExecUpdate)                      \
    X(hipDeviceCanAccessPeer) X(hipCtxEnablePeerAccess) X(hipDeviceGetMemPool)                    \
    X(hipMemPoolSetAccess) X(hipDevicePrimaryCtxRetain) X(hipStreamGetCaptureInfo_v2)            \
    X(hipGraphKernelNodeGetParams) X(hipGraphExecKernelNodeSetParams)
// clang-format on

struct Hip {
    std::string error;
#define QD_HIP_MEMBER(name) decltype(&::name) name = nullptr;
    QD_HIP_FUNCTIONS(QD_HIP_MEMBER)
#undef QD_HIP_MEMBER
};

const Hip &hip() {
    static const Hip loaded = [] {
        Hip h;
        const char *path = std::getenv("QD_HIP_RUNTIME");
        void *lib = dlopen(path && *path ? path : QD_HIP_OVER_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            h.error = dlerror();
            return h;
        }
#define QD_HIP_BIND(name) h.name = reinterpret_cast<decltype(h.name)>(dlsym(lib, #name));
        QD_HIP_FUNCTIONS(QD_HIP_BIND)
#undef QD_HIP_BIND
        return h;
    }();
    return loaded;
}

// --- The fake driver -------------------------------------------------------------------------

struct Fake {
    std::string why_not;  // empty when the fake is the libcuda.so.1 the loader finds
    size_t (*count)() = nullptr;
    Call (*call)(size_t) = nullptr;
    void (*reset)() = nullptr;
    void (*set_capture_status)(int) = nullptr;
    void (*set_update_outcome)(int, int, void *) = nullptr;
    fake_cuda::KernelNodeSet (*kernel_node_set)() = nullptr;
};

const Fake &fake() {
    static const Fake loaded = [] {
        Fake f;
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            f.why_not = std::string("no libcuda.so.1 on the loader's path: ") + dlerror();
            return f;
        }
        f.count = reinterpret_cast<decltype(f.count)>(dlsym(lib, "fake_cuda_call_count"));
        f.call = reinterpret_cast<decltype(f.call)>(dlsym(lib, "fake_cuda_call"));
        f.reset = reinterpret_cast<decltype(f.reset)>(dlsym(lib, "fake_cuda_reset"));
        f.set_capture_status = reinterpret_cast<decltype(f.set_capture_status)>(
            dlsym(lib, "fake_cuda_set_capture_status"));
        f.set_update_outcome = reinterpret_cast<decltype(f.set_update_outcome)>(
            dlsym(lib, "fake_cuda_set_update_outcome"));
        f.kernel_node_set =
            reinterpret_cast<decltype(f.kernel_node_set)>(dlsym(lib, "fake_cuda_kernel_node_set"));
        if (!f.count || !f.call || !f.reset || !f.set_capture_status || !f.set_update_outcome ||
            !f.kernel_node_set)
            f.why_not =
                "the libcuda.so.1 the loader finds is not the fake (fake_cuda/ is not first "
                "on LD_LIBRARY_PATH)";
        return f;
    }();
    return loaded;
}

std::vector<Call> calls_named(const char *fn) {
    std::vector<Call> out;
    for (size_t i = 0; i < fake().count(); ++i) {
        Call c = fake().call(i);
        if (std::strcmp(c.fn, fn) == 0) out.push_back(c);
    }
    return out;
}

template <class... F>
bool all_bound(F... fns) {
    return ((fns != nullptr) && ...);
}

#define REQUIRE_FAKE(...)                                                                          \
    if (!fake().why_not.empty()) GTEST_SKIP() << fake().why_not;                                   \
    ASSERT_TRUE(hip().error.empty()) << hip().error;                                               \
    ASSERT_TRUE(all_bound(__VA_ARGS__)) << "the runtime lacks a function this test calls"

void *address(uint64_t a) { return reinterpret_cast<void *>(static_cast<uintptr_t>(a)); }
uint64_t number(const void *p) { return reinterpret_cast<uintptr_t>(p); }

const uint64_t kDevice0 = fake_cuda::device_base(0) + 0x100;
const uint64_t kDevice1 = fake_cuda::device_base(1) + 0x200;
const uint64_t kPinned = fake_cuda::kPinnedBase + 0x300;
const hipStream_t kStream = reinterpret_cast<hipStream_t>(uintptr_t{0x51});

// Runs f on a fresh thread (no context current, HIP's device 0), as a new HIP thread starts.
template <class F>
void on_fresh_thread(F f) {
    std::thread(f).join();
}

// --- Copies ----------------------------------------------------------------------------------------

TEST(HipOverFakeCuda, MemcpyAsync_OfAnotherDevicesMemory_IsIssuedInThatDevicesContext) {
    REQUIRE_FAKE(hip().hipSetDevice, hip().hipGetDevice, hip().hipMemcpyAsync);
    on_fresh_thread([] {
        const Hip &h = hip();
        ASSERT_EQ(h.hipSetDevice(1), hipSuccess);
        fake().reset();
        std::vector<char> pageable(64);
        // Device 0's memory into pinned, then pageable host memory, on device 1's stream; then
        // host memory into device 0's.
        EXPECT_EQ(
            h.hipMemcpyAsync(address(kPinned), address(kDevice0), 64, hipMemcpyDefault, kStream),
            hipSuccess);
        EXPECT_EQ(h.hipMemcpyAsync(pageable.data(), address(kDevice0), 64, hipMemcpyDeviceToHost,
                                   kStream),
                  hipSuccess);
        EXPECT_EQ(h.hipMemcpyAsync(address(kDevice0), address(kPinned), 32, hipMemcpyHostToDevice,
                                   kStream),
                  hipSuccess);
        const std::vector<Call> copies = calls_named("cuMemcpyAsync");
        ASSERT_EQ(copies.size(), 3u);
        for (const Call &c : copies) {
            EXPECT_EQ(c.current_device, 0) << "not issued in the memory's device's context";
            EXPECT_EQ(c.stream, kStream) << "not on the caller's stream";
        }
        EXPECT_EQ(copies[0].dst, kPinned);
        EXPECT_EQ(copies[0].src, kDevice0);
        EXPECT_EQ(copies[0].bytes, 64u);
        EXPECT_EQ(copies[1].dst, number(pageable.data()));
        EXPECT_EQ(copies[2].dst, kDevice0);
        EXPECT_EQ(copies[2].bytes, 32u);
        EXPECT_TRUE(calls_named("cuMemcpyPeerAsync").empty());
        // The caller's context is back after each copy.
        const std::vector<Call> switches = calls_named("cuCtxSetCurrent");
        ASSERT_EQ(switches.size(), 6u);
        EXPECT_EQ(switches.back().value, 2u) << "device 1's context was not restored";
        int device = -1;
        ASSERT_EQ(h.hipGetDevice(&device), hipSuccess);
        EXPECT_EQ(device, 1);
    });
}

TEST(HipOverFakeCuda, MemcpyAsync_BetweenTwoDevices_IsOnePeerCopyWithBothPrimaryContexts) {
    REQUIRE_FAKE(hip().hipSetDevice, hip().hipMemcpyAsync);
    on_fresh_thread([] {
        const Hip &h = hip();
        ASSERT_EQ(h.hipSetDevice(1), hipSuccess);
        fake().reset();
        EXPECT_EQ(
            h.hipMemcpyAsync(address(kDevice1), address(kDevice0), 128, hipMemcpyDefault, kStream),
            hipSuccess);
        ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
        EXPECT_EQ(h.hipMemcpyAsync(address(kDevice0), address(kDevice1), 16,
                                   hipMemcpyDeviceToDevice, kStream),
                  hipSuccess);
        const std::vector<Call> peers = calls_named("cuMemcpyPeerAsync");
        ASSERT_EQ(peers.size(), 2u);
        EXPECT_EQ(peers[0].dst_device, 1);
        EXPECT_EQ(peers[0].src_device, 0);
        EXPECT_EQ(peers[0].dst, kDevice1);
        EXPECT_EQ(peers[0].src, kDevice0);
        EXPECT_EQ(peers[0].bytes, 128u);
        EXPECT_EQ(peers[0].stream, kStream);
        EXPECT_EQ(peers[1].dst_device, 0);
        EXPECT_EQ(peers[1].src_device, 1);
        EXPECT_TRUE(calls_named("cuMemcpyAsync").empty());
        EXPECT_EQ(calls_named("cuCtxSetCurrent").size(), 1u) << "only hipSetDevice(0) switches";
    });
}

TEST(HipOverFakeCuda, MemcpyAsync_OfTheCurrentDevicesOrHostMemory_SwitchesNothing) {
    REQUIRE_FAKE(hip().hipSetDevice, hip().hipMemcpyAsync);
    on_fresh_thread([] {
        const Hip &h = hip();
        ASSERT_EQ(h.hipSetDevice(1), hipSuccess);
        fake().reset();
        std::vector<char> pageable(64);
        EXPECT_EQ(h.hipMemcpyAsync(address(kDevice1 + 64), address(kDevice1), 64, hipMemcpyDefault,
                                   kStream),
                  hipSuccess);
        EXPECT_EQ(
            h.hipMemcpyAsync(address(kPinned), address(kDevice1), 64, hipMemcpyDefault, kStream),
            hipSuccess);
        EXPECT_EQ(
            h.hipMemcpyAsync(pageable.data(), address(kPinned), 64, hipMemcpyHostToHost, kStream),
            hipSuccess);
        const std::vector<Call> copies = calls_named("cuMemcpyAsync");
        ASSERT_EQ(copies.size(), 3u);
        for (const Call &c : copies) EXPECT_EQ(c.current_device, 1);
        EXPECT_TRUE(calls_named("cuCtxSetCurrent").empty());
        EXPECT_TRUE(calls_named("cuMemcpyPeerAsync").empty());
    });
}

// --- Graphs ----------------------------------------------------------------------------------------

TEST(HipOverFakeCuda, StreamCapture_ModesAndStatusesMapByName) {
    REQUIRE_FAKE(hip().hipStreamBeginCapture, hip().hipStreamEndCapture,
                 hip().hipStreamIsCapturing);
    const Hip &h = hip();
    fake().reset();
    EXPECT_EQ(h.hipStreamBeginCapture(kStream, hipStreamCaptureModeRelaxed), hipSuccess);
    EXPECT_EQ(h.hipStreamBeginCapture(kStream, hipStreamCaptureModeThreadLocal), hipSuccess);
    EXPECT_EQ(h.hipStreamBeginCapture(kStream, hipStreamCaptureModeGlobal), hipSuccess);
    EXPECT_EQ(h.hipStreamBeginCapture(kStream, static_cast<hipStreamCaptureMode>(7)),
              hipErrorInvalidValue);
    const std::vector<Call> begins = calls_named("cuStreamBeginCapture");
    ASSERT_EQ(begins.size(), 3u) << "a refused mode reached the driver";
    EXPECT_EQ(begins[0].value, unsigned(CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT_EQ(begins[1].value, unsigned(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    EXPECT_EQ(begins[2].value, unsigned(CU_STREAM_CAPTURE_MODE_GLOBAL));
    EXPECT_EQ(begins[0].stream, kStream);

    struct {
        CUstreamCaptureStatus cuda;
        hipStreamCaptureStatus hip;
    } const statuses[] = {
        {CU_STREAM_CAPTURE_STATUS_ACTIVE, hipStreamCaptureStatusActive},
        {CU_STREAM_CAPTURE_STATUS_INVALIDATED, hipStreamCaptureStatusInvalidated},
        {CU_STREAM_CAPTURE_STATUS_NONE, hipStreamCaptureStatusNone},
    };
    for (const auto &s : statuses) {
        fake().set_capture_status(s.cuda);
        hipStreamCaptureStatus got = static_cast<hipStreamCaptureStatus>(-1);
        ASSERT_EQ(h.hipStreamIsCapturing(kStream, &got), hipSuccess);
        EXPECT_EQ(got, s.hip) << "CUDA status " << s.cuda;
    }
    EXPECT_EQ(h.hipStreamIsCapturing(kStream, nullptr), hipErrorInvalidValue);
    hipGraph_t graph = nullptr;
    ASSERT_EQ(h.hipStreamEndCapture(kStream, &graph), hipSuccess);
    EXPECT_EQ(number(graph), 0x6au) << "the graph is CUDA's handle";
    EXPECT_EQ(h.hipStreamEndCapture(kStream, nullptr), hipErrorInvalidValue);
}

TEST(HipOverFakeCuda, GraphInstantiate_FlagsMapAndTheOlderFormLeavesItsLogEmpty) {
    REQUIRE_FAKE(hip().hipGraphInstantiate, hip().hipGraphInstantiateWithFlags,
                 hip().hipGraphLaunch);
    const Hip &h = hip();
    fake().reset();
    const hipGraph_t graph = reinterpret_cast<hipGraph_t>(uintptr_t{0x6a});
    hipGraphExec_t exec = nullptr;
    EXPECT_EQ(h.hipGraphInstantiateWithFlags(&exec, graph, hipGraphInstantiateFlagAutoFreeOnLaunch),
              hipSuccess);
    EXPECT_EQ(h.hipGraphInstantiateWithFlags(&exec, graph, 0), hipSuccess);
    EXPECT_EQ(h.hipGraphInstantiateWithFlags(&exec, graph, 0x2), hipErrorInvalidValue);
    EXPECT_EQ(h.hipGraphInstantiateWithFlags(nullptr, graph, 0), hipErrorInvalidValue);
    hipGraphNode_t node = reinterpret_cast<hipGraphNode_t>(uintptr_t{1});
    char log[8] = "unset";
    exec = nullptr;
    ASSERT_EQ(h.hipGraphInstantiate(&exec, graph, &node, log, sizeof log), hipSuccess);
    EXPECT_EQ(node, nullptr);
    EXPECT_STREQ(log, "");
    EXPECT_EQ(number(exec), 0xe8u) << "the executable is CUDA's handle";
    const std::vector<Call> made = calls_named("cuGraphInstantiateWithFlags");
    ASSERT_EQ(made.size(), 3u) << "a refused flag reached the driver";
    EXPECT_EQ(made[0].value, unsigned(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    EXPECT_EQ(made[1].value, 0u);
    EXPECT_EQ(made[2].value, 0u);
    EXPECT_EQ(made[0].dst, number(graph));

    ASSERT_EQ(h.hipGraphLaunch(exec, kStream), hipSuccess);
    const std::vector<Call> launches = calls_named("cuGraphLaunch");
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_EQ(launches[0].dst, 0xe8u);
    EXPECT_EQ(launches[0].stream, kStream);
}

TEST(HipOverFakeCuda, GraphExecUpdate_ResultsMapByName) {
    REQUIRE_FAKE(hip().hipGraphExecUpdate);
    const Hip &h = hip();
    fake().reset();
    const hipGraphExec_t exec = reinterpret_cast<hipGraphExec_t>(uintptr_t{0xe8});
    const hipGraph_t graph = reinterpret_cast<hipGraph_t>(uintptr_t{0x6a});
    hipGraphNode_t node = reinterpret_cast<hipGraphNode_t>(uintptr_t{1});
    hipGraphExecUpdateResult result = hipGraphExecUpdateError;
    ASSERT_EQ(h.hipGraphExecUpdate(exec, graph, &node, &result), hipSuccess);
    EXPECT_EQ(result, hipGraphExecUpdateSuccess);
    EXPECT_EQ(node, nullptr);

    void *const failing = reinterpret_cast<void *>(uintptr_t{0x77});
    struct {
        CUgraphExecUpdateResult cuda;
        hipGraphExecUpdateResult hip;
    } const refusals[] = {
        {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, hipGraphExecUpdateErrorTopologyChanged},
        {CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, hipGraphExecUpdateErrorNodeTypeChanged},
        {CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, hipGraphExecUpdateErrorParametersChanged},
        {CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, hipGraphExecUpdateErrorNotSupported},
        {CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED, hipGraphExecUpdateError},  // no HIP name
    };
    for (const auto &r : refusals) {
        fake().set_update_outcome(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, r.cuda, failing);
        EXPECT_EQ(h.hipGraphExecUpdate(exec, graph, &node, &result),
                  hipErrorGraphExecUpdateFailure);
        EXPECT_EQ(result, r.hip) << "CUDA result " << r.cuda;
        EXPECT_EQ(node, failing);
    }
    EXPECT_EQ(h.hipGraphExecUpdate(exec, graph, nullptr, &result), hipErrorInvalidValue);
    EXPECT_EQ(h.hipGraphExecUpdate(exec, graph, &node, nullptr), hipErrorInvalidValue);
}

}  // namespace

// --- Peer access ---------------------------------------------------------------------------------

// HIP names devices by ordinal; the grant qd makes (src/backends/gpu/peer.cpp) reaches CUDA with
// the devices, the current context and the pool's access entries mapped by name.
TEST(HipOverFakeCuda, PeerAccess_OrdinalsContextsAndPoolGrantsMapToCudas) {
    REQUIRE_FAKE(hip().hipSetDevice, hip().hipDeviceCanAccessPeer, hip().hipCtxEnablePeerAccess,
                 hip().hipDeviceGetMemPool, hip().hipMemPoolSetAccess,
                 hip().hipDevicePrimaryCtxRetain);
    on_fresh_thread([] {
        const Hip &h = hip();
        fake().reset();
        int can = -1;
        ASSERT_EQ(h.hipDeviceCanAccessPeer(&can, 1, 0), hipSuccess);
        EXPECT_EQ(can, 1);
        ASSERT_EQ(h.hipDeviceCanAccessPeer(&can, 1, 1), hipSuccess);
        EXPECT_EQ(can, 0) << "a device is not its own peer";
        EXPECT_EQ(h.hipDeviceCanAccessPeer(&can, 1, 2), hipErrorInvalidDevice);
        EXPECT_EQ(h.hipDeviceCanAccessPeer(nullptr, 1, 0), hipErrorInvalidValue);
        const std::vector<Call> asked = calls_named("cuDeviceCanAccessPeer");
        ASSERT_EQ(asked.size(), 1u) << "only the valid pair of distinct devices reaches CUDA";
        EXPECT_EQ(asked[0].dst_device, 1);
        EXPECT_EQ(asked[0].src_device, 0);

        // Device 1 current: it gets access to device 0's context and pool.
        ASSERT_EQ(h.hipSetDevice(1), hipSuccess);
        hipCtx_t ctx0 = nullptr;
        ASSERT_EQ(h.hipDevicePrimaryCtxRetain(&ctx0, 0), hipSuccess);
        ASSERT_EQ(h.hipCtxEnablePeerAccess(ctx0, 0), hipSuccess);
        const std::vector<Call> enabled = calls_named("cuCtxEnablePeerAccess");
        ASSERT_EQ(enabled.size(), 1u);
        EXPECT_EQ(enabled[0].current_device, 1) << "not issued in the current device's context";
        EXPECT_EQ(enabled[0].dst_device, 0);
        hipMemPool_t pool = nullptr;
        EXPECT_EQ(h.hipDeviceGetMemPool(&pool, 2), hipErrorInvalidDevice);
        ASSERT_EQ(h.hipDeviceGetMemPool(&pool, 0), hipSuccess);
        hipMemAccessDesc grants[2] = {};
        grants[0].location.type = hipMemLocationTypeDevice;
        grants[0].location.id = 1;
        grants[0].flags = hipMemAccessFlagsProtReadWrite;
        grants[1].location.type = hipMemLocationTypeDevice;
        grants[1].location.id = 1;
        grants[1].flags = hipMemAccessFlagsProtRead;
        ASSERT_EQ(h.hipMemPoolSetAccess(pool, grants, 2), hipSuccess);
        const std::vector<Call> set = calls_named("cuMemPoolSetAccess");
        ASSERT_EQ(set.size(), 2u);
        EXPECT_EQ(set[0].dst_device, 0) << "not device 0's pool";
        EXPECT_EQ(set[0].src_device, 1);
        EXPECT_EQ(set[0].value, (uint64_t(CU_MEM_LOCATION_TYPE_DEVICE) << 8) |
                                    uint64_t(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
        EXPECT_EQ(set[1].value, (uint64_t(CU_MEM_LOCATION_TYPE_DEVICE) << 8) |
                                    uint64_t(CU_MEM_ACCESS_FLAGS_PROT_READ));
        // What HIP 5.2 does not define is refused before CUDA sees any of the list.
        grants[1].flags = static_cast<hipMemAccessFlags>(2);
        EXPECT_EQ(h.hipMemPoolSetAccess(pool, grants, 2), hipErrorInvalidValue);
        grants[1].flags = hipMemAccessFlagsProtRead;
        grants[1].location.type = hipMemLocationTypeInvalid;
        EXPECT_EQ(h.hipMemPoolSetAccess(pool, grants, 2), hipErrorInvalidValue);
        EXPECT_EQ(calls_named("cuMemPoolSetAccess").size(), 2u);
    });
}

// --- Kernel nodes (qd's HIP rebind: src/backends/hip/hip_kernel_node_args.h) -----------------------

TEST(HipOverFakeCuda, StreamGetCaptureInfo_GivesCudasGraphIdAndDependencies) {
    REQUIRE_FAKE(hip().hipStreamGetCaptureInfo_v2);
    const Hip &h = hip();
    fake().reset();
    fake().set_capture_status(CU_STREAM_CAPTURE_STATUS_ACTIVE);
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    unsigned long long id = 0;
    hipGraph_t graph = nullptr;
    const hipGraphNode_t *deps = nullptr;
    size_t n = 0;
    ASSERT_EQ(h.hipStreamGetCaptureInfo_v2(kStream, &status, &id, &graph, &deps, &n), hipSuccess);
    EXPECT_EQ(status, hipStreamCaptureStatusActive);
    EXPECT_EQ(id, fake_cuda::kCaptureId);
    EXPECT_EQ(number(graph), fake_cuda::kCaptureGraph);
    ASSERT_EQ(n, 1u);
    ASSERT_NE(deps, nullptr);
    EXPECT_EQ(number(deps[0]), fake_cuda::kCaptureNode);
    fake().set_capture_status(CU_STREAM_CAPTURE_STATUS_NONE);
    ASSERT_EQ(h.hipStreamGetCaptureInfo_v2(kStream, &status, &id, &graph, &deps, &n), hipSuccess);
    EXPECT_EQ(status, hipStreamCaptureStatusNone);
    EXPECT_EQ(n, 0u);
    EXPECT_EQ(h.hipStreamGetCaptureInfo_v2(kStream, nullptr, &id, &graph, &deps, &n),
              hipErrorInvalidValue);
}

TEST(HipOverFakeCuda, KernelNodeParams_ReadAndSetFieldByField_FuncIsTheNodesCudaFunction) {
    REQUIRE_FAKE(hip().hipGraphKernelNodeGetParams, hip().hipGraphExecKernelNodeSetParams);
    const Hip &h = hip();
    fake().reset();
    const hipGraphNode_t node = reinterpret_cast<hipGraphNode_t>(uintptr_t{0x90d});
    const hipGraphExec_t exec = reinterpret_cast<hipGraphExec_t>(uintptr_t{0xe8});
    hipKernelNodeParams p{};
    ASSERT_EQ(h.hipGraphKernelNodeGetParams(node, &p), hipSuccess);
    EXPECT_EQ(number(p.func), fake_cuda::kNodeFunction);
    EXPECT_EQ(p.gridDim.x, fake_cuda::kNodeGrid[0]);
    EXPECT_EQ(p.gridDim.y, fake_cuda::kNodeGrid[1]);
    EXPECT_EQ(p.gridDim.z, fake_cuda::kNodeGrid[2]);
    EXPECT_EQ(p.blockDim.x, fake_cuda::kNodeBlock[0]);
    EXPECT_EQ(p.blockDim.y, fake_cuda::kNodeBlock[1]);
    EXPECT_EQ(p.blockDim.z, fake_cuda::kNodeBlock[2]);
    EXPECT_EQ(p.sharedMemBytes, fake_cuda::kNodeShared);
    ASSERT_NE(p.kernelParams, nullptr);
    uint64_t captured = 0;
    std::memcpy(&captured, p.kernelParams[0], 8);
    EXPECT_EQ(captured, fake_cuda::kNodeArgument);
    EXPECT_EQ(p.extra, nullptr);
    const std::vector<Call> gets = calls_named("cuGraphKernelNodeGetParams");
    ASSERT_EQ(gets.size(), 1u);
    EXPECT_EQ(gets[0].dst, number(node));

    // Set back with a new argument: every other field reaches CUDA as it was read.
    uint64_t value = 0xabcdef;
    void *arguments[] = {&value};
    p.kernelParams = arguments;
    ASSERT_EQ(h.hipGraphExecKernelNodeSetParams(exec, node, &p), hipSuccess);
    const fake_cuda::KernelNodeSet set = fake().kernel_node_set();
    ASSERT_EQ(set.calls, 1);
    EXPECT_EQ(number(set.exec), number(exec));
    EXPECT_EQ(number(set.node), number(node));
    EXPECT_EQ(set.function, fake_cuda::kNodeFunction);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(set.grid[i], fake_cuda::kNodeGrid[i]) << i;
        EXPECT_EQ(set.block[i], fake_cuda::kNodeBlock[i]) << i;
    }
    EXPECT_EQ(set.shared, fake_cuda::kNodeShared);
    EXPECT_EQ(set.argument, value);
    EXPECT_FALSE(set.extra);

    // Refused before CUDA: no node, no parameters, an extra list (whose markers differ).
    EXPECT_EQ(h.hipGraphKernelNodeGetParams(nullptr, &p), hipErrorInvalidValue);
    EXPECT_EQ(h.hipGraphKernelNodeGetParams(node, nullptr), hipErrorInvalidValue);
    EXPECT_EQ(h.hipGraphExecKernelNodeSetParams(exec, node, nullptr), hipErrorInvalidValue);
    void *extra[] = {HIP_LAUNCH_PARAM_END};
    p.extra = extra;
    EXPECT_EQ(h.hipGraphExecKernelNodeSetParams(exec, node, &p), hipErrorInvalidValue);
    EXPECT_EQ(fake().kernel_node_set().calls, 1) << "a refused set reached the driver";
}
