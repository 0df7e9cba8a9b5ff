// Timelines (qd.h, "Timelines"): success and every documented status of qd_timeline_create,
// qd_timeline_destroy, qd_timeline_signal, qd_timeline_wait, qd_timeline_host_signal,
// qd_timeline_host_wait and qd_timeline_query; a wait queued before its signal; the lifetime
// rules (a destroy, a lost context and a context destroy never leave a waiter hanging); the
// capture's refusal. No test depends on timing: a stream is held back by a Gate, and "not yet"
// is what a stream query or a zero-timeout host wait says while nothing can have signalled.
#include <atomic>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

class TimelineTest : public BackendTest {
  protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (IsSkipped()) return;
        qd_timeline t = 0;
        const qd_status st = qd_timeline_create(ctx_, 0, &t);
        if (st == QD_ERROR_NOT_SUPPORTED && !is_cpu())
            GTEST_SKIP() << "no timelines on " << backend_name(backend()) << ": "
                         << qd_last_error_message();
        ASSERT_QD_OK(st);
        ASSERT_QD_OK(qd_timeline_destroy(t));
    }

    qd_timeline timeline(uint64_t initial = 0, qd_context ctx = 0) {
        qd_timeline t = 0;
        EXPECT_QD_OK(qd_timeline_create(ctx ? ctx : ctx_, initial, &t));
        return t;
    }

    uint64_t value_of(qd_timeline t) {
        uint64_t v = kAllOnes;
        EXPECT_QD_OK(qd_timeline_query(t, &v));
        return v;
    }
};

int32_t fault_kernel(const qd_host_kernel_info *, void *const *) { return 5; }

}  // namespace

TEST_P(TimelineTest, Create_StartsAtInitialValue_CountedUntilDestroyed) {
    const uint64_t before = get_stats(ctx_).live_timelines;
    qd_timeline a = timeline(), b = timeline(41);
    EXPECT_NE(a, 0u);
    EXPECT_NE(a, b);
    EXPECT_EQ(value_of(a), 0u);
    EXPECT_EQ(value_of(b), 41u);
    EXPECT_EQ(get_stats(ctx_).live_timelines, before + 2);
    EXPECT_QD_OK(qd_timeline_destroy(a));
    EXPECT_QD_OK(qd_timeline_destroy(b));
    EXPECT_EQ(get_stats(ctx_).live_timelines, before);
}

TEST_P(TimelineTest, Create_BadArguments_AreErrorsAndOutUntouched) {
    qd_timeline t = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_timeline_create(ctx_, 0, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_timeline_create(0, 0, &t));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_timeline_create(default_stream_, 0, &t));
    EXPECT_EQ(t, 0x5555u);
}

TEST_P(TimelineTest, Destroy_BadHandlesAndTwice_AreInvalidHandle) {
    qd_timeline t = timeline();
    ASSERT_QD_OK(qd_timeline_destroy(t));
    for (uint64_t x : {(uint64_t)0, t, (uint64_t)default_stream_, (uint64_t)ctx_, kAllOnes})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_destroy(x));
    qd_event e = new_event();
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_destroy(e));
    EXPECT_QD_OK(qd_event_destroy(e));
}

TEST_P(TimelineTest, EveryCall_BadHandlesAndWrongContext_AreErrorsAndChangeNothing) {
    qd_timeline t = timeline(), dead = timeline();
    ASSERT_QD_OK(qd_timeline_destroy(dead));
    qd_context c2 = other_context();
    qd_timeline foreign = timeline(0, c2);
    qd_stream foreign_stream = 0;
    ASSERT_QD_OK(qd_context_default_stream(c2, &foreign_stream));
    uint64_t v = 0;
    for (qd_timeline x : {(qd_timeline)0, dead, (qd_timeline)default_stream_, kAllOnes}) {
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline",
                      qd_timeline_signal(default_stream_, x, 1));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_wait(default_stream_, x, 1));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_host_signal(x, 1));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_host_wait(x, 1, 0));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_query(x, &v));
    }
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_timeline_signal(0, t, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_timeline_wait(t, t, 1));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context",
                  qd_timeline_signal(default_stream_, foreign, 1));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_timeline_wait(foreign_stream, t, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "value|null", qd_timeline_query(t, nullptr));
    // Which error wins: the NULL output before the handle.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "value|null", qd_timeline_query(0, nullptr));
    EXPECT_EQ(value_of(t), 0u) << "a refused call changed the counter";
    EXPECT_EQ(value_of(foreign), 0u);
    // The refused signals reserved nothing: 1 is still a value that grows.
    EXPECT_QD_OK(qd_timeline_host_signal(t, 1));
    EXPECT_QD_OK(qd_timeline_destroy(t));
    EXPECT_QD_OK(qd_timeline_destroy(foreign));
}

TEST_P(TimelineTest, Signal_ValueNotAboveEveryEarlierOne_IsInvalidArgumentAndQueuesNothing) {
    qd_timeline t = timeline(10);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "10", qd_timeline_signal(default_stream_, t, 10));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "10", qd_timeline_host_signal(t, 3));
    Gate gate;
    qd_stream s = new_stream();
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(qd_timeline_signal(s, t, 20));  // queued, not done: still known at the call
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "20", qd_timeline_signal(default_stream_, t, 20));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "20", qd_timeline_host_signal(t, 15));
    EXPECT_EQ(value_of(t), 10u);
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(value_of(t), 20u);
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, Wait_QueuedBeforeItsSignal_HoldsTheStreamUntilTheHostSignals) {
    qd_timeline t = timeline();
    qd_stream s = new_stream();
    Flag after;
    ASSERT_QD_OK(qd_timeline_wait(s, t, 3));
    ASSERT_QD_OK(after.enqueue(s));
    // Nothing can signal 3 yet: the stream is parked on the wait.
    EXPECT_QD(QD_NOT_READY, qd_stream_query(s));
    EXPECT_FALSE(after.is_set());
    EXPECT_QD(QD_NOT_READY, qd_timeline_host_wait(t, 3, 0));
    ASSERT_QD_OK(qd_timeline_host_signal(t, 2));
    EXPECT_QD(QD_NOT_READY, qd_stream_query(s)) << "2 does not reach 3";
    ASSERT_QD_OK(qd_timeline_host_signal(t, 3));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_TRUE(after.is_set());
    EXPECT_QD_OK(qd_timeline_host_wait(t, 3, 0));
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, SignalOnOneStream_ReleasesTheWaitOnAnother_InStreamOrder) {
    qd_timeline t = timeline();
    qd_stream a = new_stream(), b = new_stream();
    Gate gate;
    Flag after;
    ASSERT_QD_OK(qd_timeline_wait(b, t, 5));  // before the signal is queued
    ASSERT_QD_OK(after.enqueue(b));
    ASSERT_QD_OK(gate.enqueue(a));
    ASSERT_QD_OK(qd_timeline_signal(a, t, 5));
    EXPECT_QD(QD_NOT_READY, qd_stream_query(b));
    EXPECT_QD(QD_NOT_READY, qd_timeline_host_wait(t, 5, 0));
    EXPECT_EQ(value_of(t), 0u);
    gate.open();
    ASSERT_QD_OK(qd_timeline_host_wait(t, 5, UINT64_MAX));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_TRUE(after.is_set());
    EXPECT_EQ(value_of(t), 5u);
    EXPECT_FALSE(gate.timed_out());
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, Wait_ForAValueReachedAlready_IsSatisfiedAtOnce) {
    qd_timeline t = timeline(7);
    qd_stream s = new_stream();
    ASSERT_QD_OK(qd_timeline_wait(s, t, 0));
    ASSERT_QD_OK(qd_timeline_wait(s, t, 7));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_timeline_host_wait(t, 6, 0));
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, SignalsCompletingOutOfOrder_CounterKeepsTheLargest) {
    QDT_REQUIRE_CPU();  // CUDA and HIP write the value (qd.h, "Timelines": "Backends")
    qd_timeline t = timeline();
    qd_stream a = new_stream(), b = new_stream();
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(a));
    ASSERT_QD_OK(qd_timeline_signal(a, t, 1));  // behind the gate
    ASSERT_QD_OK(qd_timeline_signal(b, t, 2));  // b is idle: done at once or soon
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_EQ(value_of(t), 2u);
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_EQ(value_of(t), 2u) << "the counter went back";
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, HostWait_Timeout_IsNotReadyWithoutAMessage) {
    qd_timeline t = timeline();
    EXPECT_QD(QD_NOT_READY, qd_timeline_host_wait(t, 1, 0));
    EXPECT_QD(QD_NOT_READY, qd_timeline_host_wait(t, 1, 1000000));  // 1 ms
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, HostWait_WokenByAHostSignalOfAnotherThread) {
    qd_timeline t = timeline();
    std::atomic<qd_status> got{QD_ERROR_INTERNAL};
    std::thread waiter([&] { got = qd_timeline_host_wait(t, 4, UINT64_MAX); });
    ASSERT_QD_OK(qd_timeline_host_signal(t, 4));
    waiter.join();
    EXPECT_EQ(got.load(), QD_SUCCESS);
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, HostWait_WithoutLimit_ReturnsInvalidHandleWhenTheTimelineIsDestroyed) {
    qd_timeline t = timeline();
    std::atomic<qd_status> got{QD_ERROR_INTERNAL};
    std::thread waiter([&] { got = qd_timeline_host_wait(t, 9, UINT64_MAX); });
    ASSERT_QD_OK(qd_timeline_destroy(t));  // before or during the wait: either way, woken
    waiter.join();
    EXPECT_EQ(got.load(), QD_ERROR_INVALID_HANDLE);
}

TEST_P(TimelineTest, HostWait_FromAHostCallback_RefusedUnlessItOnlyLooks) {
    qd_timeline t = timeline(1);
    struct Probe {
        qd_timeline t;
        qd_status blocking = QD_ERROR_INTERNAL, looking = QD_ERROR_INTERNAL;
    } probe{t};
    ASSERT_QD_OK(qd_launch_host_fn(
        default_stream_,
        [](void *p) {
            auto *x = static_cast<Probe *>(p);
            x->blocking = qd_timeline_host_wait(x->t, 5, UINT64_MAX);
            x->looking = qd_timeline_host_wait(x->t, 1, 0);
        },
        &probe));
    ASSERT_QD_OK(qd_stream_synchronize(default_stream_));
    if (is_cpu()) {
        EXPECT_EQ(probe.blocking, QD_ERROR_INVALID_OPERATION);
    }
    EXPECT_EQ(probe.looking, QD_SUCCESS);
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, Destroy_ReleasesWaitsNoQueuedSignalReaches_KeepsTheOthers) {
    QDT_REQUIRE_CPU();  // CUDA and HIP release every wait at once (qd.h, "Timelines": "Backends")
    qd_timeline t = timeline();
    qd_stream a = new_stream(), b = new_stream(), c = new_stream();
    Gate gate;
    Flag b_done, c_done;
    ASSERT_QD_OK(gate.enqueue(a));
    ASSERT_QD_OK(qd_timeline_signal(a, t, 2));
    ASSERT_QD_OK(qd_timeline_wait(b, t, 2));  // a queued signal reaches it
    ASSERT_QD_OK(b_done.enqueue(b));
    ASSERT_QD_OK(qd_timeline_wait(c, t, 3));  // nothing will
    ASSERT_QD_OK(c_done.enqueue(c));
    ASSERT_QD_OK(qd_timeline_destroy(t));
    ASSERT_QD_OK(qd_stream_synchronize(c));
    EXPECT_TRUE(c_done.is_set());
    EXPECT_QD(QD_NOT_READY, qd_stream_query(b)) << "a wait its signal still reaches was released";
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_TRUE(b_done.is_set());
}

TEST_P(TimelineTest, ContextDestroy_WithAStreamWaitingForAValueNeverSignalled_Returns) {
    qd_context c2 = 0;
    qd_context_desc desc = make_desc(backend(), 4, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c2));
    qd_timeline t = timeline(0, c2);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c2, nullptr, &s));
    ASSERT_QD_OK(qd_timeline_wait(s, t, 100));
    std::atomic<qd_status> got{QD_ERROR_INTERNAL};
    std::thread waiter([&] { got = qd_timeline_host_wait(t, 100, UINT64_MAX); });
    EXPECT_QD_OK(qd_context_destroy(c2));  // never hangs on the wait
    waiter.join();
    EXPECT_EQ(got.load(), QD_ERROR_INVALID_HANDLE);
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "timeline", qd_timeline_host_signal(t, 1));
}

TEST_P(TimelineTest, LostContext_WakesHostWaitersAndReleasesStreamWaits) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream a = 0, b = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &a));
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &b));
    qd_kernel fault = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &fault_kernel, "timeline_fault", &fault));
    qd_timeline t = timeline(0, c);
    ASSERT_QD_OK(qd_timeline_wait(b, t, 1));  // never signalled
    std::atomic<qd_status> got{QD_ERROR_INTERNAL};
    std::thread waiter([&] { got = qd_timeline_host_wait(t, 1, UINT64_MAX); });
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    ASSERT_QD_OK(qd_launch(a, fault, &cfg, nullptr, 0));
    waiter.join();
    EXPECT_EQ(got.load(), QD_ERROR_DEVICE_LOST);
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "timeline_fault", qd_stream_synchronize(b));
    uint64_t v = 0;
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "lost", qd_timeline_query(t, &v));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "lost", qd_timeline_signal(b, t, 1));
    EXPECT_QD_OK(qd_timeline_destroy(t));  // cleanup still works
    EXPECT_QD_OK(qd_context_destroy(c));
}

TEST_P(TimelineTest, CapturingStream_SignalAndWaitRefused_CaptureGoesOn) {
    qd_timeline t = timeline();
    qd_stream s = new_stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "captur", qd_timeline_signal(s, t, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "captur", qd_timeline_wait(s, t, 1));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_QD_OK(qd_graph_destroy(g));
    // The refused signal reserved nothing.
    EXPECT_QD_OK(qd_timeline_signal(s, t, 1));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(value_of(t), 1u);
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TimelineTest, PingPong_TwoStreams_ManyHops_EndAtTheLastValue) {
    qd_timeline t = timeline();
    qd_stream a = new_stream(), b = new_stream();
    const uint64_t hops = scaled(2000, 10);
    for (uint64_t i = 1; i <= hops; i += 2) {
        ASSERT_QD_OK(qd_timeline_wait(a, t, i - 1));
        ASSERT_QD_OK(qd_timeline_signal(a, t, i));
        ASSERT_QD_OK(qd_timeline_wait(b, t, i));
        ASSERT_QD_OK(qd_timeline_signal(b, t, i + 1));
    }
    ASSERT_QD_OK(qd_timeline_host_wait(t, hops + (hops % 2), UINT64_MAX));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_EQ(value_of(t), hops + (hops % 2));
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

QDT_INSTANTIATE_BACKENDS(TimelineTest);
