// Child graphs through the GPU layer (qd.h, "Graphs", "Child graphs"; core/capture/
// child_graph.cpp): the C API and the core over the shared GPU backend on the fake driver of
// tests/support/fake_gpu_driver.h, so the native capture path runs without a GPU. This binary
// defines qd::backend::get_driver itself (it links qd_internal as an archive, so the library's
// registry is never pulled in): QD_BACKEND_CUDA is the GPU layer over the fake table.
//
// A graph launched on a capturing stream is inlined: its operations are submitted into the
// driver capture like any others, so the parent is one driver graph whose launch runs the
// child's kernels (with their argument values) and host functions where the child's own launch
// runs them, between the parent's work before and after.
#include <gtest/gtest.h>
#include <qd/qd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/common/dl_library.h"
#include "backends/gpu/gpu_backend.h"
#include "common/error.h"
#include "fake_gpu_driver.h"

using namespace qdt::fake_gpu;

namespace qd::backend {

// The registry of this binary: the GPU layer over the fake table for QD_BACKEND_CUDA.
qd_status get_driver(uint32_t kind, Driver **out) {
    static std::unique_ptr<Driver> fake = [] {
        std::unique_ptr<Driver> d;
        if (gpu::make_gpu_driver(fake_table(), DlLibrary(), &d) != QD_SUCCESS) d.reset();
        return d;
    }();
    if (kind != QD_BACKEND_CUDA || !fake)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "this test has only the fake CUDA driver");
    *out = fake.get();
    return QD_SUCCESS;
}

}  // namespace qd::backend

namespace {

std::atomic<int> g_calls{0};
void count_cb(void *) { g_calls.fetch_add(1); }

// The kernels the fake driver ran since the last clear: each one's tag (its 8-byte argument).
std::vector<uint64_t> ran_tags() {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    std::vector<uint64_t> tags;
    for (const FakeLaunch &l : g_fake.launches) {
        uint64_t tag = 0;
        if (l.arg_bytes.size() == sizeof tag) std::memcpy(&tag, l.arg_bytes.data(), sizeof tag);
        tags.push_back(tag);
    }
    return tags;
}
void clear_launches() {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.launches.clear();
}
int graph_launches() {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    return g_fake.graph_launches;
}

class ChildGraphOverTheGpuLayer : public ::testing::Test {
  protected:
    void SetUp() override {
        g_fake.reset();
        qd_context_desc desc = QD_CONTEXT_DESC_INIT;
        desc.backend = QD_BACKEND_CUDA;
        desc.stream_pool_size = 8;
        ASSERT_EQ(qd_context_create(&desc, &ctx_), QD_SUCCESS) << qd_last_error_message();
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(qd_module_load(ctx_, ptx, sizeof ptx, &module_), QD_SUCCESS)
            << qd_last_error_message();
        ASSERT_EQ(qd_kernel_get(module_, "k1", &k1_), QD_SUCCESS) << qd_last_error_message();
        ASSERT_EQ(qd_context_default_stream(ctx_, &s_), QD_SUCCESS);
    }
    void TearDown() override {
        if (ctx_) {
            EXPECT_EQ(qd_context_destroy(ctx_), QD_SUCCESS) << qd_last_error_message();
        }
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_TRUE(g_fake.captures.empty()) << g_fake.captures.size() << " captures left open";
    }

    // k1 with its one 8-byte parameter set to `tag`.
    qd_status launch(qd_stream on, uint64_t tag) {
        const qd_launch_config config = QD_LAUNCH_CONFIG_INIT;
        qd_arg arg = {&tag, sizeof tag};
        return qd_launch(on, k1_, &config, &arg, 1);
    }
    // The child: tag 1; a fork of two streams running tags 2 and 3; joined; tag 4; a host
    // function that counts.
    qd_graph capture_child() {
        EXPECT_EQ(qd_stream_begin_capture(s_), QD_SUCCESS) << qd_last_error_message();
        EXPECT_EQ(launch(s_, 1), QD_SUCCESS) << qd_last_error_message();
        qd_stream kids[2] = {0, 0};
        EXPECT_EQ(qd_stream_fork(s_, 2, kids), QD_SUCCESS) << qd_last_error_message();
        EXPECT_EQ(launch(kids[0], 2), QD_SUCCESS);
        EXPECT_EQ(launch(kids[1], 3), QD_SUCCESS);
        EXPECT_EQ(qd_stream_join(s_, kids, 2), QD_SUCCESS) << qd_last_error_message();
        EXPECT_EQ(launch(s_, 4), QD_SUCCESS);
        EXPECT_EQ(qd_launch_host_fn(s_, &count_cb, nullptr), QD_SUCCESS);
        qd_graph g = 0;
        EXPECT_EQ(qd_stream_end_capture(s_, &g), QD_SUCCESS) << qd_last_error_message();
        return g;
    }

    qd_context ctx_ = 0;
    qd_module module_ = 0;
    qd_kernel k1_ = 0;
    qd_stream s_ = 0;
};

}  // namespace

TEST_F(ChildGraphOverTheGpuLayer, ParentIsOneDriverGraph_RunningTheChildsKernelsWhereItsLaunchWas) {
    g_calls = 0;
    qd_graph child = capture_child();
    ASSERT_NE(child, 0u);
    // The child launched directly: one driver graph launch.
    clear_launches();
    const int before = graph_launches();
    ASSERT_EQ(qd_graph_launch(child, s_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    const std::vector<uint64_t> direct = ran_tags();
    ASSERT_EQ(direct, (std::vector<uint64_t>{1, 2, 3, 4}));
    EXPECT_EQ(graph_launches(), before + 1);
    EXPECT_EQ(g_calls.load(), 1);

    // The parent: tag 10, the child, tag 20; the child is destroyed before the parent runs.
    qd_graph parent = 0;
    ASSERT_EQ(qd_stream_begin_capture(s_), QD_SUCCESS);
    ASSERT_EQ(launch(s_, 10), QD_SUCCESS);
    ASSERT_EQ(qd_graph_launch(child, s_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(launch(s_, 20), QD_SUCCESS);
    ASSERT_EQ(qd_stream_end_capture(s_, &parent), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(graph_launches(), before + 1) << "the child's launch inside the capture ran it";
    ASSERT_EQ(g_calls.load(), 1);
    ASSERT_EQ(qd_graph_destroy(child), QD_SUCCESS);
    uint32_t nodes = 0;
    ASSERT_EQ(qd_graph_kernel_node_count(parent, &nodes), QD_SUCCESS);
    EXPECT_EQ(nodes, 6u);

    for (int i = 0; i < 3; ++i) {
        clear_launches();
        ASSERT_EQ(qd_graph_launch(parent, s_), QD_SUCCESS) << qd_last_error_message();
        ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
        EXPECT_EQ(ran_tags(), (std::vector<uint64_t>{10, 1, 2, 3, 4, 20})) << "replay " << i;
        EXPECT_EQ(graph_launches(), before + 2 + i) << "the parent is not one driver graph";
        EXPECT_EQ(g_calls.load(), 2 + i) << "the child's host function runs once per replay";
    }
    // A rebind of the child's launch in the parent goes to the driver graph's node.
    uint64_t tag = 30;
    qd_arg arg = {&tag, sizeof tag};
    ASSERT_EQ(qd_graph_set_kernel_args(parent, 4, &arg, 1), QD_SUCCESS) << qd_last_error_message();
    clear_launches();
    ASSERT_EQ(qd_graph_launch(parent, s_), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(ran_tags(), (std::vector<uint64_t>{10, 1, 2, 3, 30, 20}));
    EXPECT_EQ(qd_graph_destroy(parent), QD_SUCCESS);
}

TEST_F(ChildGraphOverTheGpuLayer, OnAForkedLaneAndNested_OneDriverGraphInCaptureOrder) {
    g_calls = 0;
    qd_graph child = capture_child();
    qd_graph middle = 0, outer = 0;
    // The child on a forked lane of the middle capture.
    ASSERT_EQ(qd_stream_begin_capture(s_), QD_SUCCESS);
    qd_stream kids[1] = {0};
    ASSERT_EQ(qd_stream_fork(s_, 1, kids), QD_SUCCESS);
    ASSERT_EQ(qd_graph_launch(child, kids[0]), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_stream_join(s_, kids, 1), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(launch(s_, 5), QD_SUCCESS);
    ASSERT_EQ(qd_stream_end_capture(s_, &middle), QD_SUCCESS) << qd_last_error_message();
    // The middle graph inside a third capture.
    ASSERT_EQ(qd_stream_begin_capture(s_), QD_SUCCESS);
    ASSERT_EQ(launch(s_, 7), QD_SUCCESS);
    ASSERT_EQ(qd_graph_launch(middle, s_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_stream_end_capture(s_, &outer), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_graph_destroy(child), QD_SUCCESS);
    ASSERT_EQ(qd_graph_destroy(middle), QD_SUCCESS);
    clear_launches();
    const int before = graph_launches();
    ASSERT_EQ(qd_graph_launch(outer, s_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(ran_tags(), (std::vector<uint64_t>{7, 1, 2, 3, 4, 5}));
    EXPECT_EQ(graph_launches(), before + 1);
    EXPECT_EQ(g_calls.load(), 1);
    EXPECT_EQ(qd_graph_destroy(outer), QD_SUCCESS);
}
