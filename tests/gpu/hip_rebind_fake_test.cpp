// Rebinding a kernel node of a native HIP graph (src/backends/hip/hip_kernel_node_args.h), over
// the fake driver (tests/support/fake_gpu_driver.h) with a fake of the two HIP runtime
// functions on top of it:
//   - hipGraphKernelNodeGetParams gives what the "runtime" recorded at capture for the node: a
//     func that is no qd NativeFunction (a stand-in for AMD's host-side symbol), the captured
//     dimensions and shared memory, stale arguments and a non-null extra;
//   - hipGraphExecKernelNodeSetParams records what it is given and writes the new argument
//     into the fake's executable, so the next replay launches it.
// A rebind must pass the node's func, dimensions and shared memory back as the runtime gave them
// (whatever dimensions qd passes), the new argument values, and no extra; a runtime without
// either function, or without hipStreamGetCaptureInfo_v2, gives QD_ERROR_NOT_SUPPORTED naming
// it and changes nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "backends/hip/hip_kernel_node_args.h"
#include "common/error.h"
#include "fake_gpu_driver.h"

namespace {

using namespace qdt::fake_gpu;
namespace hip_abi = qd::hip_abi;
using qd::backend::Capture;
using qd::backend::Context;
using qd::backend::Driver;
using qd::backend::Graph;
using qd::backend::Kernel;
using qd::backend::LaunchDims;
using qd::backend::Module;
using qd::backend::Stream;

// What the fake runtime recorded for each captured kernel node (the fake names the nodes of a
// capture 1, 2, ...), and the calls of the two functions.
std::map<uintptr_t, hip_abi::KernelNodeParams> g_recorded;
int g_gets = 0;
struct SetCall {
    gpu::NativeGraphExec exec;
    uintptr_t node;
    hip_abi::KernelNodeParams params;
    uint64_t argument;
};
std::vector<SetCall> g_sets;
uint64_t g_stale = 0xdead;
void *g_stale_params[] = {&g_stale};
void *g_stale_extra[] = {nullptr};

gpu::Result (*g_fake_launch)(gpu::NativeFunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, gpu::NativeStream, void **, void **) = nullptr;

// The fake's launch, and on a capturing stream what a HIP runtime records in the node.
gpu::Result recording_launch(gpu::NativeFunction f, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz, unsigned shared,
                             gpu::NativeStream s, void **params, void **extra) {
    gpu::Result r = g_fake_launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
    if (r != kOk || !fs(s)->capture) return r;
    const auto node = reinterpret_cast<uintptr_t>(fs(s)->capture->last_node);
    hip_abi::KernelNodeParams p{};
    p.func = reinterpret_cast<void *>(0x5100 + node);  // a host-side symbol, not f
    p.grid = {gx, gy, gz};
    p.block = {bx, by, bz};
    p.shared_mem_bytes = shared;
    p.kernel_params = g_stale_params;
    p.extra = g_stale_extra;
    g_recorded[node] = p;
    return r;
}

gpu::Result hip_get_params(gpu::NativeGraphNode node, hip_abi::KernelNodeParams *p) {
    ++g_gets;
    auto it = g_recorded.find(reinterpret_cast<uintptr_t>(node));
    if (it == g_recorded.end()) return 1;  // hipErrorInvalidValue
    *p = it->second;
    return 0;
}

gpu::Result hip_exec_set_params(gpu::NativeGraphExec exec, gpu::NativeGraphNode node,
                                const hip_abi::KernelNodeParams *p) {
    SetCall call{exec, reinterpret_cast<uintptr_t>(node), *p, 0};
    if (p->kernel_params) std::memcpy(&call.argument, p->kernel_params[0], 8);
    g_sets.push_back(call);
    // The executable now launches the new argument (the fake's nodes are index + 1).
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *x = reinterpret_cast<FakeGraph *>(exec);
    std::vector<uint8_t> &bytes = x->args.at(call.node - 1);
    bytes.assign(8, 0);
    std::memcpy(bytes.data(), &call.argument, 8);
    return 0;
}

// The fake table as the HIP loader leaves it: no CUDA-form entry, the runtime's capture-info
// symbol named, and the rebind entry bound from `functions`.
gpu::DriverTable hip_table(const qd::backend::hip::KernelNodeFunctions &functions) {
    gpu::DriverTable t = fake_table();
    t.api_name = "HIP";
    g_fake_launch = t.launch_kernel;
    t.launch_kernel = recording_launch;
    t.graph_exec_kernel_node_set_params = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::stream_get_capture_info)] = "hipStreamGetCaptureInfo_v2";
    t.rebind_requires = "the HIP runtime's kernel-node entries";
    qd::backend::hip::bind_kernel_node_args(t, functions);
    return t;
}

const qd::backend::hip::KernelNodeFunctions kBoth = {hip_get_params, hip_exec_set_params};

class HipRebindFake : public ::testing::Test {
  protected:
    void SetUp() override {
        g_fake.reset();
        current_context() = nullptr;
        context_stack().clear();
        g_recorded.clear();
        g_gets = 0;
        g_sets.clear();
    }
    void TearDown() override {
        graph_.reset();
        kernel_.reset();
        module_.reset();
        if (ctx_) {
            stream_.reset();
            ctx_->synchronize();
            ctx_->shutdown();
        }
        ctx_.reset();
        driver_.reset();
    }

    // A context of driver t, and a graph of three captured launches of k1 (one 8-byte
    // argument: 1, 2, 3), launch i over a grid of {i + 2, 3, 1} blocks of {32, 2, 1} threads
    // with 16 * i bytes of shared memory.
    void capture_three(const gpu::DriverTable &t) {
        ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver_), QD_SUCCESS)
            << qd::last_error_message();
        ASSERT_EQ(driver_->create_context(qd::backend::ContextParams{}, &ctx_), QD_SUCCESS);
        ASSERT_EQ(ctx_->create_stream(0, 0, &stream_), QD_SUCCESS);
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(ctx_->load_module(ptx, sizeof ptx, &module_), QD_SUCCESS);
        ASSERT_EQ(module_->get_kernel("k1", &kernel_), QD_SUCCESS);
        std::unique_ptr<Capture> cap;
        ASSERT_EQ(stream_->begin_capture(&cap), QD_SUCCESS) << qd::last_error_message();
        for (uint32_t i = 0; i < 3; ++i) {
            uint64_t v = i + 1;
            const qd_arg arg = {&v, 8};
            const LaunchDims dims = {{i + 2, 3, 1}, {32, 2, 1}, 16 * i};
            ASSERT_EQ(stream_->launch(*kernel_, dims, &arg, 1), QD_SUCCESS);
            cap->launched(*stream_);  // as the core's router does after each captured launch
        }
        ASSERT_EQ(cap->end(&graph_), QD_SUCCESS) << qd::last_error_message();
        ASSERT_EQ(g_recorded.size(), 3u);
    }

    // The 8-byte argument of the replay's i-th launch.
    uint64_t replayed(size_t i) {
        uint64_t v = 0;
        EXPECT_LT(i, g_fake.launches.size());
        if (i < g_fake.launches.size() && g_fake.launches[i].arg_bytes.size() == 8)
            std::memcpy(&v, g_fake.launches[i].arg_bytes.data(), 8);
        return v;
    }

    std::unique_ptr<Driver> driver_;
    std::unique_ptr<Context> ctx_;
    std::shared_ptr<Stream> stream_;
    std::shared_ptr<Module> module_;
    std::shared_ptr<Kernel> kernel_;
    std::shared_ptr<Graph> graph_;
};

const LaunchDims kOtherDims = {{1, 1, 1}, {1, 1, 1}, 0};

}  // namespace

TEST_F(HipRebindFake, Rebind_SetsTheNewArguments_WithTheNodesOwnFuncDimsAndSharedMemory) {
    capture_three(hip_table(kBoth));
    uint64_t v = 77;
    const qd_arg arg = {&v, 8};
    // qd's dimensions here differ from the captured ones: the runtime's are the ones kept.
    ASSERT_EQ(graph_->set_kernel_args(1, *kernel_, kOtherDims, &arg, 1), QD_SUCCESS)
        << qd::last_error_message();
    ASSERT_EQ(g_sets.size(), 1u);
    const SetCall &set = g_sets[0];
    EXPECT_EQ(set.node, 2u) << "the node of launch 1";
    EXPECT_EQ(set.argument, 77u);
    const hip_abi::KernelNodeParams &captured = g_recorded.at(2);
    EXPECT_EQ(set.params.func, captured.func);
    EXPECT_EQ(set.params.grid.x, 3u);
    EXPECT_EQ(set.params.grid.y, 3u);
    EXPECT_EQ(set.params.grid.z, 1u);
    EXPECT_EQ(set.params.block.x, 32u);
    EXPECT_EQ(set.params.block.y, 2u);
    EXPECT_EQ(set.params.block.z, 1u);
    EXPECT_EQ(set.params.shared_mem_bytes, 16u);
    EXPECT_EQ(set.params.extra, nullptr) << "the arguments are given one way";
    EXPECT_NE(set.params.kernel_params, g_stale_params);

    // The replay runs the new value at that node only.
    ASSERT_EQ(graph_->launch(*stream_), QD_SUCCESS) << qd::last_error_message();
    ASSERT_EQ(g_fake.launches.size(), 3u);
    EXPECT_EQ(replayed(0), 1u);
    EXPECT_EQ(replayed(1), 77u);
    EXPECT_EQ(replayed(2), 3u);
    EXPECT_EQ(g_sets[0].exec, g_sets.back().exec);
}

TEST_F(HipRebindFake, WithoutTheRuntimeFunctions_NotSupportedNamingThem_NothingChanges) {
    struct Case {
        qd::backend::hip::KernelNodeFunctions functions;
        bool capture_info;
        const char *named;
    } const cases[] = {
        {{nullptr, hip_exec_set_params}, true, "hipGraphKernelNodeGetParams"},
        {{hip_get_params, nullptr}, true, "hipGraphExecKernelNodeSetParams"},
        {{nullptr, nullptr}, true, "hipGraphKernelNodeGetParams"},
        {kBoth, false, "hipStreamGetCaptureInfo_v2"},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.named);
        TearDown();
        SetUp();
        gpu::DriverTable t = hip_table(c.functions);
        if (!c.capture_info) t.stream_get_capture_info = nullptr;
        EXPECT_TRUE(gpu::has_native_graphs(t)) << "rebinding is not needed for native graphs";
        capture_three(t);
        if (!c.capture_info) g_recorded.clear();  // nodes the loader could not name
        uint64_t v = 77;
        const qd_arg arg = {&v, 8};
        EXPECT_EQ(graph_->set_kernel_args(1, *kernel_, kOtherDims, &arg, 1),
                  QD_ERROR_NOT_SUPPORTED);
        const std::string msg = qd::last_error_message();
        EXPECT_NE(msg.find(c.named), std::string::npos) << msg;
        EXPECT_NE(msg.find("the HIP runtime's kernel-node entries"), std::string::npos) << msg;
        EXPECT_EQ(g_gets, 0);
        EXPECT_TRUE(g_sets.empty());
        ASSERT_EQ(graph_->launch(*stream_), QD_SUCCESS) << "the graph still launches";
        ASSERT_EQ(g_fake.launches.size(), 3u);
        EXPECT_EQ(replayed(1), 2u) << "the captured value";
    }
}
