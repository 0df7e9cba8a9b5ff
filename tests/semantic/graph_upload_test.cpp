// Uploading a graph ahead of its first replay (qd.h, qd_graph_upload): the replays after it give
// the same results; on the CPU (re-issue) path it makes the pooled events the first replay takes;
// it is refused on a capturing stream (the capture goes on), with a destroyed graph or stream,
// and across contexts.
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

class GraphUploadTest : public BackendTest {
  protected:
    // A graph that writes 10 + i into word i of buf for i < 3, one parallel group each, after
    // zeroing the block.
    qd_graph capture_parallel(qd_stream s, uint64_t buf) {
        qd_kernel k = kernels_->write_value();
        declare_slots(k, {0});
        qd_task tasks[3];
        TaskArgs store[3];
        for (uint32_t i = 0; i < 3; ++i)
            task_write_value(&tasks[i], &store[i], i, k, buf + 4 * i, 10 + i);
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        EXPECT_QD_OK(qd_memset_async(s, buf, 0, 12));
        EXPECT_QD_OK(qd_launch_parallel(s, tasks, 3));
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        return g;
    }

    std::vector<uint32_t> words(qd_stream s, uint64_t buf) {
        std::vector<uint8_t> bytes = read_back(s, buf, 12);
        std::vector<uint32_t> w(3);
        std::memcpy(w.data(), bytes.data(), 12);
        return w;
    }
};

}  // namespace

TEST_P(GraphUploadTest, Upload_ThenLaunch_GivesTheResultsOfALaunchWithoutIt) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 12);
    ASSERT_QD_OK(qd_memset_async(s, buf, 0xff, 12));
    qd_graph g = capture_parallel(s, buf);
    ASSERT_QD_OK(qd_graph_upload(g, s));
    ASSERT_QD_OK(qd_graph_upload(g, s));  // again: nothing more
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(words(s, buf), (std::vector<uint32_t>{10, 11, 12}));
    // Uploaded on one stream, launched on another, and after a launch.
    qd_stream other = new_stream();
    ASSERT_QD_OK(qd_memset_async(s, buf, 0xff, 12));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_QD_OK(qd_graph_upload(g, s));
    ASSERT_QD_OK(qd_graph_launch(g, other));
    EXPECT_EQ(words(other, buf), (std::vector<uint32_t>{10, 11, 12}));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphUploadTest, Upload_OnTheReissuePath_MakesThePooledEventsTheFirstReplayTakes) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_CPU();  // a GPU driver graph takes no pooled event
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 12);
    qd_graph g = capture_parallel(s, buf);
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const qd_context_stats before = get_stats(ctx_);
    ASSERT_QD_OK(qd_graph_upload(g, s));
    const qd_context_stats uploaded = get_stats(ctx_);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const qd_context_stats launched = get_stats(ctx_);
    EXPECT_EQ(launched.event_pool_misses, uploaded.event_pool_misses)
        << "the first replay after the upload created events";
    EXPECT_GE(uploaded.event_pool_created, before.event_pool_created);
    EXPECT_EQ(words(s, buf), (std::vector<uint32_t>{10, 11, 12}));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphUploadTest, Upload_OfADestroyedGraphOrStream_IsInvalidHandle) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 12);
    qd_graph g = capture_parallel(s, buf);
    qd_stream gone = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(gone));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_upload(g, gone));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_upload(g, 0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_upload(0, s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_upload(qd_graph(s), s));
    ASSERT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_upload(g, s));
}

TEST_P(GraphUploadTest, Upload_OnAStreamOfAnotherContext_IsWrongContext) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 12);
    qd_graph g = capture_parallel(s, buf);
    qd_stream foreign = new_stream(other_context());
    EXPECT_QD(QD_ERROR_WRONG_CONTEXT, qd_graph_upload(g, foreign));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphUploadTest, Upload_OnACapturingStream_IsRefusedAndTheCaptureGoesOn) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 12);
    qd_graph g = capture_parallel(s, buf);
    qd_stream c = new_stream();
    ASSERT_QD_OK(qd_stream_begin_capture(c));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing", qd_graph_upload(g, c));
    // The capture is as it was: it records, ends, and its graph has only what was queued.
    ASSERT_QD_OK(launch_write_value(c, kernels_->write_value(), buf, 1));
    qd_graph captured = 0;
    ASSERT_QD_OK(qd_stream_end_capture(c, &captured));
    uint32_t count = 0;
    ASSERT_QD_OK(qd_graph_kernel_node_count(captured, &count));
    EXPECT_EQ(count, 1u);
    EXPECT_QD_OK(qd_graph_destroy(captured));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// A lost context (qd.h, "Lost contexts"): the upload touches the device, and the DOT is refused
// as every other call on the context's graphs is; the graph is still destroyed.
TEST_P(GraphUploadTest, UploadAndDebugDot_OnALostContext_AreDeviceLost) {
    QDT_REQUIRE_CPU();  // the CPU test module's fault kernel
    QDT_REQUIRE_KERNELS();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    std::string path = cpu_module_path();
    std::string why;
    auto mk = make_module_kernels(c, path.data(), path.size(), &why);
    ASSERT_TRUE(mk) << why;
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch0(s, mk->noop()));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(launch0(s, mk->fault()));
    EXPECT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, mk->fault_name().c_str(), qd_graph_upload(g, s));
    const std::string dot = "/tmp/qd_graph_upload_lost_" + std::to_string(::getpid()) + ".dot";
    EXPECT_QD(QD_ERROR_DEVICE_LOST, qd_graph_debug_dot(g, dot.c_str(), 0));
    EXPECT_EQ(::access(dot.c_str(), F_OK), -1) << "a refused call wrote the file";
    EXPECT_QD_OK(qd_graph_destroy(g));
    mk.reset();
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_OK(qd_context_destroy(c));
}

QDT_INSTANTIATE_BACKENDS(GraphUploadTest);
