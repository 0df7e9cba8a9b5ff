// Events: success and every documented status of qd_event_create, qd_event_destroy,
// qd_event_record, qd_event_query, qd_event_synchronize and qd_event_elapsed_ms, plus destroy
// with a pending record and timing.
#include <cmath>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {
class EventTest : public BackendTest {};
}  // namespace

TEST_P(EventTest, Create_FlagsZeroAndTiming_Succeed) {
    qd_event a = 0, b = 0;
    ASSERT_QD_OK(qd_event_create(ctx_, 0, &a));
    ASSERT_QD_OK(qd_event_create(ctx_, QD_EVENT_TIMING, &b));
    EXPECT_NE(a, 0u);
    EXPECT_NE(a, b);
    EXPECT_QD_OK(qd_event_query(a));  // never recorded: complete
    EXPECT_QD_OK(qd_event_synchronize(b));
    EXPECT_QD_OK(qd_event_destroy(a));
    EXPECT_QD_OK(qd_event_destroy(b));
}

TEST_P(EventTest, Create_InvalidArguments_AreErrorsAndOutUntouched) {
    qd_event e = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_event_create(ctx_, 0, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "flags", qd_event_create(ctx_, 2, &e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "flags",
                  qd_event_create(ctx_, 0x80000000u | QD_EVENT_TIMING, &e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_event_create(0, 0, &e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_event_create(default_stream_, 0, &e));
    EXPECT_EQ(e, 0x5555u);
}

TEST_P(EventTest, Destroy_BadHandlesAndTwice_AreInvalidHandle) {
    qd_event e = new_event();
    ASSERT_QD_OK(qd_event_destroy(e));
    for (qd_event x : {(qd_event)0, e, (qd_event)default_stream_, (qd_event)ctx_, kAllOnes})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_destroy(x));
}

TEST_P(EventTest, Record_BadHandlesAndWrongContext_AreErrors) {
    qd_event e = new_event();
    qd_event dead = new_event();
    ASSERT_QD_OK(qd_event_destroy(dead));
    qd_context c2 = other_context();
    qd_event foreign = 0;
    ASSERT_QD_OK(qd_event_create(c2, 0, &foreign));
    qd_stream foreign_stream = 0;
    ASSERT_QD_OK(qd_context_default_stream(c2, &foreign_stream));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_event_record(0, e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_event_record(e, e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_record(default_stream_, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_record(default_stream_, dead));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event",
                  qd_event_record(default_stream_, default_stream_));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_event_record(default_stream_, foreign));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_event_record(foreign_stream, e));
    EXPECT_QD_OK(qd_event_query(e)) << "a failed record changed the event";
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_event_destroy(foreign));
}

TEST_P(EventTest, QueryAndSynchronize_BadHandles_AreInvalidHandle) {
    qd_event dead = new_event();
    ASSERT_QD_OK(qd_event_destroy(dead));
    for (qd_event x : {(qd_event)0, dead, (qd_event)default_stream_, (qd_event)ctx_, kAllOnes}) {
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_query(x));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_synchronize(x));
    }
}

TEST_P(EventTest, Query_PendingRecord_IsNotReadyThenSuccess) {
    // A device-side gate: on CUDA a record queued behind a blocked host function is deferred by
    // the driver, so a host-function gate could not show the record pending.
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_event e = new_event();
    DeviceGate gate(ctx_, kernels_->wait_flag());
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(qd_event_record(s, e));
    EXPECT_QD(QD_NOT_READY, qd_event_query(e));
    gate.open();
    EXPECT_QD_OK(qd_event_synchronize(e));
    EXPECT_QD_OK(qd_event_query(e));
    EXPECT_TRUE(gate.done()) << "event_synchronize returned before the recorded work";
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, Record_Again_ReplacesThePreviousRecord) {
    qd_stream blocked = new_stream(), idle = new_stream();
    qd_event e = new_event();
    ASSERT_QD_OK(qd_event_record(idle, e));
    ASSERT_QD_OK(qd_event_synchronize(e));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(blocked));
    ASSERT_QD_OK(qd_event_record(blocked, e));
    EXPECT_QD(QD_NOT_READY, qd_event_query(e)) << "query looked at the older, completed record";
    ASSERT_QD_OK(qd_event_record(idle, e));
    EXPECT_QD_OK(qd_event_synchronize(e)) << "synchronize must follow the newest record";
    EXPECT_QD_OK(qd_event_query(e));
    EXPECT_FALSE(gate.done());
    gate.open();
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_stream_destroy(blocked));
    EXPECT_QD_OK(qd_stream_destroy(idle));
}

TEST_P(EventTest, Synchronize_WaitsForTheRecordedWork) {
    qd_stream s = new_stream();
    qd_event e = new_event();
    Flag f;
    ASSERT_QD_OK(enqueue_sleep_us(s, 20000));
    ASSERT_QD_OK(f.enqueue(s));
    ASSERT_QD_OK(qd_event_record(s, e));
    Flag later;
    Gate gate;  // work queued after the record must not be waited for
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(later.enqueue(s));
    EXPECT_QD_OK(qd_event_synchronize(e));
    EXPECT_TRUE(f.is_set());
    EXPECT_FALSE(later.is_set());
    gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, Destroy_WithPendingRecord_ReturnsAtOnceAndWaitersStillWait) {
    qd_stream producer = new_stream(), consumer = new_stream();
    qd_event e = new_event();
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(producer));
    Flag produced;
    ASSERT_QD_OK(produced.enqueue(producer));
    ASSERT_QD_OK(qd_event_record(producer, e));
    ASSERT_QD_OK(qd_stream_wait_event(consumer, e));
    Flag consumed_after;
    ASSERT_QD_OK(consumed_after.enqueue(consumer));
    ASSERT_QD_OK(qd_event_destroy(e));
    EXPECT_FALSE(gate.done()) << "qd_event_destroy waited for the pending record";
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_event_query(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(consumed_after.is_set()) << "destroying the event released its waiter early";
    gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(consumer));
    EXPECT_TRUE(consumed_after.is_set());
    EXPECT_QD_OK(qd_stream_synchronize(producer));
    EXPECT_QD_OK(qd_stream_destroy(producer));
    EXPECT_QD_OK(qd_stream_destroy(consumer));
}

// ---------------------------------------------------------------------------------------------
// qd_event_elapsed_ms
// ---------------------------------------------------------------------------------------------

TEST_P(EventTest, ElapsedMs_AroundA5msDelay_IsAtLeast4ms) {
    qd_stream s = new_stream();
    qd_event start = new_event(QD_EVENT_TIMING), end = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_record(s, start));
    if (kernels_)
        ASSERT_QD_OK(launch_spin(s, kernels_->spin(), 5000));
    else
        ASSERT_QD_OK(enqueue_sleep_us(s, 5000));
    ASSERT_QD_OK(qd_event_record(s, end));
    ASSERT_QD_OK(qd_event_synchronize(end));
    float ms = -1000.0f;
    ASSERT_QD_OK(qd_event_elapsed_ms(start, end, &ms));
    EXPECT_GE(ms, 4.0f);
    EXPECT_TRUE(std::isfinite(ms));
    float back = 1000.0f;
    ASSERT_QD_OK(qd_event_elapsed_ms(end, start, &back));
    EXPECT_LE(back, -4.0f) << "negative if end completed first";
    float zero = -1.0f;
    ASSERT_QD_OK(qd_event_elapsed_ms(start, start, &zero));
    EXPECT_EQ(zero, 0.0f);
    EXPECT_QD_OK(qd_event_destroy(start));
    EXPECT_QD_OK(qd_event_destroy(end));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, ElapsedMs_AcrossStreams_UsesCompletionTimes) {
    qd_stream a = new_stream(), b = new_stream();
    qd_event start = new_event(QD_EVENT_TIMING), end = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_record(a, start));
    ASSERT_QD_OK(qd_event_synchronize(start));
    ASSERT_QD_OK(enqueue_sleep_us(b, 10000));
    ASSERT_QD_OK(qd_event_record(b, end));
    ASSERT_QD_OK(qd_event_synchronize(end));
    float ms = 0;
    ASSERT_QD_OK(qd_event_elapsed_ms(start, end, &ms));
    EXPECT_GE(ms, 8.0f);
    for (qd_event e : {start, end}) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    for (qd_stream s : {a, b}) {
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
}

TEST_P(EventTest, ElapsedMs_PendingRecord_IsNotReadyAndMsUnwritten) {
    qd_stream s = new_stream();
    qd_event start = new_event(QD_EVENT_TIMING), end = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_record(s, start));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(qd_event_record(s, end));
    float ms = 123.0f;
    EXPECT_QD(QD_NOT_READY, qd_event_elapsed_ms(start, end, &ms));
    EXPECT_EQ(ms, 123.0f) << "ms written on QD_NOT_READY";
    EXPECT_QD(QD_NOT_READY, qd_event_query(end));
    EXPECT_QD(QD_NOT_READY, qd_stream_query(s));
    gate.open();
    EXPECT_QD_OK(qd_event_synchronize(end));
    EXPECT_QD_OK(qd_event_elapsed_ms(start, end, &ms));
    EXPECT_GE(ms, 0.0f);
    for (qd_event e : {start, end}) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, ElapsedMs_TimingDisabled_IsTimingDisabled) {
    qd_stream s = new_stream();
    qd_event timed = new_event(QD_EVENT_TIMING), plain = new_event(0);
    ASSERT_QD_OK(qd_event_record(s, timed));
    ASSERT_QD_OK(qd_event_record(s, plain));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    float ms = 123.0f;
    EXPECT_QD_ERR(QD_ERROR_TIMING_DISABLED, "timing", qd_event_elapsed_ms(timed, plain, &ms));
    EXPECT_QD_ERR(QD_ERROR_TIMING_DISABLED, "timing", qd_event_elapsed_ms(plain, timed, &ms));
    EXPECT_QD_ERR(QD_ERROR_TIMING_DISABLED, "timing", qd_event_elapsed_ms(plain, plain, &ms));
    EXPECT_EQ(ms, 123.0f);
    for (qd_event e : {timed, plain}) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, ElapsedMs_NeverRecorded_IsNotRecorded) {
    qd_stream s = new_stream();
    qd_event recorded = new_event(QD_EVENT_TIMING), never = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_record(s, recorded));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    float ms = 123.0f;
    EXPECT_QD_ERR(QD_ERROR_NOT_RECORDED, "record", qd_event_elapsed_ms(recorded, never, &ms));
    EXPECT_QD_ERR(QD_ERROR_NOT_RECORDED, "record", qd_event_elapsed_ms(never, recorded, &ms));
    EXPECT_QD_ERR(QD_ERROR_NOT_RECORDED, "record", qd_event_elapsed_ms(never, never, &ms));
    EXPECT_EQ(ms, 123.0f);
    for (qd_event e : {recorded, never}) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, ElapsedMs_HandleErrors_AreReported) {
    qd_stream s = new_stream();
    qd_event a = new_event(QD_EVENT_TIMING), b = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_record(s, a));
    ASSERT_QD_OK(qd_event_record(s, b));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    qd_context c2 = other_context();
    qd_event foreign = 0;
    ASSERT_QD_OK(qd_event_create(c2, QD_EVENT_TIMING, &foreign));
    qd_stream s2 = 0;
    ASSERT_QD_OK(qd_context_default_stream(c2, &s2));
    ASSERT_QD_OK(qd_event_record(s2, foreign));
    ASSERT_QD_OK(qd_stream_synchronize(s2));
    qd_event dead = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_destroy(dead));
    float ms = 123.0f;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "ms|null", qd_event_elapsed_ms(a, b, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event|start", qd_event_elapsed_ms(0, b, &ms));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event|end", qd_event_elapsed_ms(a, 0, &ms));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event|start", qd_event_elapsed_ms(dead, b, &ms));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event|end", qd_event_elapsed_ms(a, s, &ms));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_event_elapsed_ms(a, foreign, &ms));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_event_elapsed_ms(foreign, b, &ms));
    EXPECT_EQ(ms, 123.0f);
    EXPECT_QD_OK(qd_event_elapsed_ms(a, b, &ms));
    EXPECT_GE(ms, 0.0f);
    for (qd_event e : {a, b}) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    EXPECT_QD_OK(qd_event_destroy(foreign));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(EventTest, CreateDestroy_Repeated_NoHandleComesBack) {
    std::vector<qd_event> dead;
    for (int i = 0; i < 200; ++i) {
        qd_event e = new_event(i % 2 ? QD_EVENT_TIMING : 0);
        for (qd_event d : dead) {
            ASSERT_NE(e, d);
        }
        ASSERT_QD_OK(qd_event_destroy(e));
        dead.push_back(e);
    }
    for (qd_event d : dead) {
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_event_query(d));
    }
}

QDT_INSTANTIATE_BACKENDS(EventTest);
