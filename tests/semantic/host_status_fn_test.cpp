// Host callbacks that learn how their stream fared (qd.h, qd_launch_host_status_fn): called
// exactly once for every call that succeeded: in stream order with QD_SUCCESS and the stream's
// handle; with QD_ERROR_DEVICE_LOST when the context was lost before their turn; by the drain of
// a destroy with QD_SUCCESS. Refused on a capturing stream (the capture goes on), never called
// for a refused call.
#include <atomic>

#include "qd_test.h"

using namespace qdt;

namespace {

class HostStatusFnTest : public BackendTest {};

// What one callback saw.
struct Seen {
    std::atomic<int> calls{0};
    std::atomic<uint64_t> stream{0};
    std::atomic<int32_t> status{QD_NOT_READY};
    std::atomic<int> flag_at_call{-1};  // the value of *flag when it ran (ordering)
    std::atomic<int> *flag = nullptr;
};

void record_call(qd_stream stream, qd_status status, void *user_data) {
    auto *seen = static_cast<Seen *>(user_data);
    seen->stream.store(stream);
    seen->status.store(status);
    if (seen->flag) seen->flag_at_call.store(seen->flag->load());
    seen->calls.fetch_add(1);
}

void set_flag(void *p) { static_cast<std::atomic<int> *>(p)->store(1); }

int32_t faulting_kernel(const qd_host_kernel_info *, void *const *) { return 9; }

}  // namespace

TEST_P(HostStatusFnTest, RunsAfterEarlierWork_WithSuccessAndItsStreamHandle) {
    qd_stream s = new_stream();
    std::atomic<int> flag{0};
    Seen seen;
    seen.flag = &flag;
    ASSERT_QD_OK(enqueue_sleep_us(s, 2000));
    ASSERT_QD_OK(qd_launch_host_fn(s, &set_flag, &flag));
    ASSERT_QD_OK(qd_launch_host_status_fn(s, &record_call, &seen));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(seen.calls.load(), 1);
    EXPECT_EQ(seen.status.load(), QD_SUCCESS);
    EXPECT_EQ(seen.stream.load(), s);
    EXPECT_EQ(seen.flag_at_call.load(), 1) << "it ran before the work queued ahead of it";
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_EQ(seen.calls.load(), 1);
}

TEST_P(HostStatusFnTest, LaterWorkOnTheStream_WaitsForIt) {
    qd_stream s = new_stream();
    std::atomic<int> flag{0};
    Seen seen;
    seen.flag = &flag;
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(qd_launch_host_status_fn(s, &record_call, &seen));
    ASSERT_QD_OK(qd_launch_host_fn(s, &set_flag, &flag));
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(seen.flag_at_call.load(), 0) << "work queued after it ran first";
    EXPECT_EQ(flag.load(), 1);
    EXPECT_FALSE(gate.timed_out());
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// Pending when the context is destroyed: the destroy drains, so it runs, with QD_SUCCESS,
// before the destroy returns.
TEST_P(HostStatusFnTest, PendingAtContextDestroy_RunsWithSuccessBeforeTheDestroyReturns) {
    qd_context_desc desc = make_desc(backend(), 4, 2);
    qd_context c = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    Seen seen;
    ASSERT_QD_OK(enqueue_sleep_us(s, 5000));
    ASSERT_QD_OK(qd_launch_host_status_fn(s, &record_call, &seen));
    ASSERT_QD_OK(qd_context_destroy(c));
    EXPECT_EQ(seen.calls.load(), 1);
    EXPECT_EQ(seen.status.load(), QD_SUCCESS);
    EXPECT_EQ(seen.stream.load(), s);
}

// qd.h, "Work queued before a loss": the work never runs, but this callback is still called,
// once, with QD_ERROR_DEVICE_LOST (qd_launch_host_fn's fn is not). The gate holds it back until
// the fault on the other stream has been seen.
TEST_P(HostStatusFnTest, QueuedBeforeALoss_IsCalledOnceWithDeviceLost) {
    QDT_REQUIRE_CPU();
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 2);
    qd_context c = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0, t = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &t));
    qd_kernel fault = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &faulting_kernel, "fault", &fault));
    std::atomic<int> plain{0};
    Seen seen;
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_TRUE(gate.wait_entered());
    ASSERT_QD_OK(qd_launch_host_fn(s, &set_flag, &plain));
    ASSERT_QD_OK(qd_launch_host_status_fn(s, &record_call, &seen));
    ASSERT_QD_OK(launch0(t, fault));
    ASSERT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(t));
    EXPECT_EQ(seen.calls.load(), 0) << "called before its turn";
    gate.open();
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_EQ(plain.load(), 0) << "qd_launch_host_fn's fn ran after the loss";
    EXPECT_EQ(seen.calls.load(), 1) << "not called exactly once by the time the destroy returned";
    EXPECT_EQ(seen.status.load(), QD_ERROR_DEVICE_LOST);
    EXPECT_EQ(seen.stream.load(), s);
    EXPECT_FALSE(gate.timed_out());
}

// Once the loss is visible the call itself is refused, and a refused call never calls fn.
TEST_P(HostStatusFnTest, OnALostContext_IsDeviceLostAndFnIsNeverCalled) {
    QDT_REQUIRE_CPU();
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 2);
    qd_context c = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    qd_kernel fault = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &faulting_kernel, "fault", &fault));
    ASSERT_QD_OK(launch0(s, fault));
    ASSERT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(s));
    Seen seen;
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_launch_host_status_fn(s, &record_call, &seen));
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_EQ(seen.calls.load(), 0);
}

TEST_P(HostStatusFnTest, OnACapturingStream_IsRefused_AndTheCaptureGoesOn) {
    qd_stream s = new_stream();
    std::atomic<int> flag{0};
    Seen seen;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "captur",
                  qd_launch_host_status_fn(s, &record_call, &seen));
    qd_stream kids[1] = {0};
    ASSERT_QD_OK(qd_stream_fork(s, 1, kids));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "captur",
                  qd_launch_host_status_fn(kids[0], &record_call, &seen))
        << "a forked child of the capture";
    ASSERT_QD_OK(qd_stream_join(s, kids, 1));
    ASSERT_QD_OK(qd_launch_host_fn(s, &set_flag, &flag));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(flag.load(), 1) << "the capture did not go on";
    EXPECT_EQ(seen.calls.load(), 0) << "a refused call's fn was called";
    // After the capture it is accepted again.
    ASSERT_QD_OK(qd_launch_host_status_fn(s, &record_call, &seen));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(seen.calls.load(), 1);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(HostStatusFnTest, BadArguments_AreRefusedAndFnIsNeverCalled) {
    Seen seen;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "fn",
                  qd_launch_host_status_fn(default_stream_, nullptr, &seen));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "fn", qd_launch_host_status_fn(0, nullptr, &seen))
        << "a NULL fn wins over a bad handle";
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream",
                  qd_launch_host_status_fn(0, &record_call, &seen));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream",
                  qd_launch_host_status_fn(ctx_, &record_call, &seen));
    ASSERT_QD_OK(qd_context_synchronize(ctx_));
    EXPECT_EQ(seen.calls.load(), 0);
}

// It is an operation like any other: with the validation mode and its observers attached it
// passes the same chokepoint and runs with QD_SUCCESS.
TEST_P(HostStatusFnTest, UnderValidation_RunsWithSuccess) {
    QDT_RACES_ON_PURPOSE();  // sets validation itself
    qd_context_desc desc = make_desc(backend(), 4, 2);
    desc.flags = QD_CONTEXT_VALIDATE;
    qd_context c = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    Seen seen;
    ASSERT_QD_OK(qd_launch_host_status_fn(s, &record_call, &seen));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(seen.calls.load(), 1);
    EXPECT_EQ(seen.status.load(), QD_SUCCESS);
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_EQ(seen.calls.load(), 1);
}

QDT_INSTANTIATE_BACKENDS(HostStatusFnTest);
