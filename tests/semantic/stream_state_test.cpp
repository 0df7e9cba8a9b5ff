// A stream's state read back (qd.h, "Streams"): qd_stream_is_capturing (the origin of a capture,
// a forked child, a stream that joined through a wait; false once the capture ends) and
// qd_stream_get_flags (the creation flags, round trip). Both queue nothing, so they leave a
// capture usable, and answer on a lost context.
#include <atomic>

#include "qd_test.h"

using namespace qdt;

namespace {

class StreamStateTest : public BackendTest {
  protected:
    int32_t capturing(qd_stream s) {
        int32_t c = -1;
        EXPECT_QD_OK(qd_stream_is_capturing(s, &c));
        return c;
    }
    uint32_t flags(qd_stream s) {
        uint32_t f = 0xdead;
        EXPECT_QD_OK(qd_stream_get_flags(s, &f));
        return f;
    }
};

int32_t faulting_kernel(const qd_host_kernel_info *, void *const *) { return 5; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// qd_stream_is_capturing
// ---------------------------------------------------------------------------------------------

TEST_P(StreamStateTest, IsCapturing_TrueInsideACaptureAndOnAForkedChild_FalseAfterEnd) {
    qd_stream s = new_stream();
    qd_stream other = new_stream();
    EXPECT_EQ(capturing(s), 0);
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    EXPECT_EQ(capturing(s), 1);
    EXPECT_EQ(capturing(other), 0) << "a stream outside the capture";
    qd_stream kids[2] = {0, 0};
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    EXPECT_EQ(capturing(kids[0]), 1) << "a forked child joined the capture";
    EXPECT_EQ(capturing(kids[1]), 1);
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    EXPECT_EQ(capturing(s), 1);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_EQ(capturing(s), 0);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_stream_destroy(other));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(StreamStateTest, IsCapturing_StreamThatWaitedOnARecordInsideTheCapture_IsCapturing) {
    qd_stream s = new_stream();
    qd_stream joiner = new_stream();
    qd_event e = new_event();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_event_record(s, e));
    EXPECT_EQ(capturing(joiner), 0);
    ASSERT_QD_OK(qd_stream_wait_event(joiner, e));
    EXPECT_EQ(capturing(joiner), 1) << "the wait joined the capture";
    // Join back: record on the joiner, wait on the origin.
    qd_event back = new_event();
    ASSERT_QD_OK(qd_event_record(joiner, back));
    ASSERT_QD_OK(qd_stream_wait_event(s, back));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_EQ(capturing(joiner), 0) << "the joiner stops capturing with the capture";
    EXPECT_EQ(capturing(s), 0);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_event_destroy(back));
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_stream_destroy(joiner));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// The queries queue nothing: asked in the middle of a capture, they leave it as it was, and the
// graph replays what was captured around them.
TEST_P(StreamStateTest, Queries_DuringACapture_LeaveTheCaptureAndItsGraphIntact) {
    qd_stream s = new_stream();
    std::atomic<int> calls{0};
    auto count = [](void *p) { static_cast<std::atomic<int> *>(p)->fetch_add(1); };
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_launch_host_fn(s, count, &calls));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(capturing(s), 1);
        EXPECT_EQ(flags(s), 0u);
    }
    ASSERT_QD_OK(qd_launch_host_fn(s, count, &calls));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_EQ(calls.load(), 0) << "captured work ran during the capture";
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(calls.load(), 2) << "the replay runs exactly the two captured callbacks";
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(StreamStateTest, IsCapturing_BadHandleOrNullOut_AreErrorsThatWriteNothing) {
    int32_t c = 7;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "capturing",
                  qd_stream_is_capturing(default_stream_, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_is_capturing(0, &c));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_is_capturing(ctx_, &c));
    qd_stream s = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_is_capturing(s, &c));
    EXPECT_EQ(c, 7);
}

// ---------------------------------------------------------------------------------------------
// qd_stream_get_flags
// ---------------------------------------------------------------------------------------------

TEST_P(StreamStateTest, GetFlags_RoundTripsTheCreationFlags) {
    qd_stream_desc desc = QD_STREAM_DESC_INIT;
    qd_stream plain = 0, non_blocking = 0, defaults = 0;
    ASSERT_QD_OK(qd_stream_create(ctx_, &desc, &plain));
    desc.flags = QD_STREAM_NON_BLOCKING;
    ASSERT_QD_OK(qd_stream_create(ctx_, &desc, &non_blocking));
    ASSERT_QD_OK(qd_stream_create(ctx_, nullptr, &defaults));
    EXPECT_EQ(flags(plain), 0u);
    EXPECT_EQ(flags(non_blocking), uint32_t(QD_STREAM_NON_BLOCKING));
    EXPECT_EQ(flags(defaults), 0u) << "desc NULL is QD_STREAM_DESC_INIT";
    EXPECT_EQ(flags(default_stream_), uint32_t(QD_STREAM_NON_BLOCKING));
    qd_stream lease = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &lease));
    EXPECT_EQ(flags(lease), uint32_t(QD_STREAM_NON_BLOCKING));
    EXPECT_QD_OK(qd_stream_release(lease));
    for (qd_stream s : {plain, non_blocking, defaults}) EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(StreamStateTest, GetFlags_Gpu_ImportedStreamHasItsNativeFlags) {
    QDT_REQUIRE_GPU();
    // qd creates every native stream non-blocking: importing one reads that back.
    qd_stream s = new_stream();
    uint64_t native = 0;
    ASSERT_QD_OK(qd_stream_native_handle(s, &native));
    qd_stream borrowed = 0;
    ASSERT_QD_OK(qd_stream_import(ctx_, native, &borrowed));
    EXPECT_EQ(flags(borrowed), uint32_t(QD_STREAM_NON_BLOCKING));
    EXPECT_QD_OK(qd_stream_destroy(borrowed));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(StreamStateTest, GetFlags_BadHandleOrNullOut_AreErrorsThatWriteNothing) {
    uint32_t f = 7;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "flags",
                  qd_stream_get_flags(default_stream_, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_get_flags(0, &f));
    qd_event e = new_event();
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_get_flags(e, &f));
    EXPECT_EQ(f, 7u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

// Bookkeeping queries: they answer on a lost context, where work is refused.
TEST_P(StreamStateTest, Queries_OnALostContext_StillAnswer) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    qd_kernel fault = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &faulting_kernel, "fault", &fault));
    ASSERT_QD_OK(launch0(s, fault));
    ASSERT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(s));
    EXPECT_EQ(capturing(s), 0);
    EXPECT_EQ(flags(s), 0u);
    EXPECT_QD_OK(qd_context_destroy(c));
}

QDT_INSTANTIATE_BACKENDS(StreamStateTest);
