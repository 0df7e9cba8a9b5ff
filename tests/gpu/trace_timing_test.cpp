// White-box tests of the trace's timing events (src/core/trace/timing.h) over the fake GPU
// driver (tests/support/fake_gpu_driver.h): the driver calls a traced operation costs, counted,
// not timed. The observer (src/core/trace/observer.cpp) drives TraceTiming exactly as these
// tests do: begin() and end() under its lock, record() outside it, recorded() under it again.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "common/error.h"
#include "core/trace/timing.h"
#include "fake_gpu_driver.h"

namespace {

using namespace qdt::fake_gpu;
using qd::core::TimingEventPool;
using qd::core::TraceTiming;

const qd::backend::LaunchDims kOneThread = {{1, 1, 1}, {1, 1, 1}, 0};

std::atomic<long> g_creates{0}, g_records{0}, g_elapsed{0}, g_queries{0};
gpu::DriverTable g_base;  // the fake's own entries, which the counting ones call

Result counting_event_create(gpu::NativeEvent *e, unsigned flags) {
    ++g_creates;
    return g_base.event_create(e, flags);
}
Result counting_event_record(gpu::NativeEvent e, gpu::NativeStream s) {
    ++g_records;
    return g_base.event_record(e, s);
}
Result counting_event_query(gpu::NativeEvent e) {
    ++g_queries;
    return g_base.event_query(e);
}
Result counting_event_elapsed(float *ms, gpu::NativeEvent a, gpu::NativeEvent b) {
    ++g_elapsed;
    return g_base.event_elapsed_time(ms, a, b);
}

class TraceTimingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        g_fake.reset();
        current_context() = nullptr;
        context_stack().clear();
        g_base = fake_table();
        gpu::DriverTable t = g_base;
        t.event_create = counting_event_create;
        t.event_record = counting_event_record;
        t.event_elapsed_time = counting_event_elapsed;
        t.event_query = counting_event_query;
        t.stream_calls_use_stream_context = true;  // as CUDA's (checked on every GPU run)
        ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver_), QD_SUCCESS)
            << qd::last_error_message();
        qd::backend::ContextParams params;
        ASSERT_EQ(driver_->create_context(params, &ctx_), QD_SUCCESS) << qd::last_error_message();
        ASSERT_EQ(ctx_->create_stream(QD_STREAM_NON_BLOCKING, 0, &stream_), QD_SUCCESS);
        std::shared_ptr<qd::backend::Module> m;
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(ctx_->load_module(ptx, sizeof ptx, &m), QD_SUCCESS);
        ASSERT_EQ(m->get_kernel("k0", &kernel_), QD_SUCCESS);
    }
    void TearDown() override {
        pool_ = TimingEventPool();
        reference_.reset();
        kernel_.reset();
        stream_.reset();
        ctx_->synchronize();
        ctx_->shutdown();
        ctx_.reset();
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_TRUE(g_fake.events.empty()) << g_fake.events.size() << " native events leaked";
    }

    // Records a boundary handed out by begin() or end(), as the observer does: with no event
    // from the pool, the done boundaries are read and their events reused first (when the test
    // gave a reference event).
    void record(TraceTiming &timing, TraceTiming::Pending &p) {
        if (p.index == TraceTiming::kNone) return;
        TraceTiming::Scan scan;
        if (!p.event && reference_ && timing.take_scan(&scan)) {
            TraceTiming::read_scan(*ctx_, *reference_, scan);
            timing.scanned(std::move(scan), true, pool_);
            p.event = pool_.take();
        }
        const bool ok = TraceTiming::record(*ctx_, *stream_, p);
        timing.recorded(std::move(p), ok);
    }
    struct Op {
        size_t begin, end;
    };
    // One traced launch on lane 1 of `timing`: its boundaries. A shared begin is kept only
    // while the previous end is not done (the stream busy), as the observer does.
    Op traced_launch(TraceTiming &timing, uint64_t unobserved = 0, bool shareable = true) {
        Op op{};
        TraceTiming::Pending b, e;
        TraceTiming::EventPtr shared;
        op.begin = timing.begin(1, shareable, unobserved, pool_, &b, &shared);
        if (b.index == TraceTiming::kNone) {
            const bool busy = shared && shared->query() == QD_NOT_READY;
            if (!busy || !timing.still_shared(op.begin, shared.get()))
                op.begin = timing.fresh(1, pool_, &b);
        }
        record(timing, b);
        EXPECT_EQ(stream_->launch(*kernel_, kOneThread, nullptr, 0), QD_SUCCESS);
        op.end = timing.end(1, unobserved, pool_, &e);
        record(timing, e);
        return op;
    }
    struct Calls {
        long creates, records, counted, ctx_queries, elapsed, queries;
    };
    static Calls calls() {
        return {g_creates.load(),     g_records.load(), g_fake.calls,
                g_ctx_queries.load(), g_elapsed.load(), g_queries.load()};
    }
    // The window's reference event, recorded on the stream before its operations.
    void start_reference() {
        ASSERT_EQ(ctx_->create_event(true, &reference_), QD_SUCCESS);
        ASSERT_EQ(stream_->record(*reference_), QD_SUCCESS);
    }

    std::unique_ptr<qd::backend::Driver> driver_;
    std::unique_ptr<qd::backend::Context> ctx_;
    std::shared_ptr<qd::backend::Stream> stream_;
    std::shared_ptr<qd::backend::Kernel> kernel_;
    TimingEventPool pool_;
    std::shared_ptr<qd::backend::Event> reference_;
};

// The steady state of a busy traced stream: each operation's begin is the previous one's end
// (not done yet, so the operation starts exactly when it completes), so an operation costs two
// driver calls of its own, the record of its end and the query of the previous end (with its
// context check), and creates no event, on top of the operation itself.
TEST_F(TraceTimingTest, TracedOpsOnABusyStream_CostOneEventRecordAndOneQueryEach_NoCreate) {
    constexpr int kOps = 10;
    g_fake.work_per_launch = 1;  // every launch leaves the stream busy until synchronized
    ASSERT_EQ(pool_.fill(*ctx_, kOps + 1), QD_SUCCESS);
    TraceTiming timing;
    const Calls before = calls();
    Op prev = traced_launch(timing);
    for (int i = 1; i < kOps; ++i) {
        const Calls c0 = calls();
        const Op op = traced_launch(timing);
        const Calls c1 = calls();
        EXPECT_EQ(op.begin, prev.end) << "op " << i << " did not share its begin";
        EXPECT_EQ(c1.records - c0.records, 1) << "event records for op " << i;
        EXPECT_EQ(c1.queries - c0.queries, 1) << "event queries for op " << i;
        EXPECT_EQ(c1.creates - c0.creates, 0) << "event creations for op " << i;
        // Counted calls: the launch, the end's record and the previous end's query.
        EXPECT_EQ(c1.counted - c0.counted, 3) << "driver calls for op " << i;
        EXPECT_EQ(c1.ctx_queries - c0.ctx_queries, 1) << "context queries for op " << i;
        prev = op;
    }
    const Calls after = calls();
    EXPECT_EQ(after.records - before.records, kOps + 1);  // the first begin, then one end each
    EXPECT_EQ(after.creates - before.creates, 0);
    EXPECT_EQ(timing.size(), size_t{kOps + 1});
    for (size_t i = 0; i < timing.size(); ++i) EXPECT_TRUE(timing.boundary(i)->recorded) << i;
    complete_all_work();
}

// An idle stream: the previous end is done, so sharing it would count the idle time between
// the two operations as the second one's. Each begin is recorded afresh, just before its
// operation: two records per operation, still no event created.
TEST_F(TraceTimingTest, TracedOpsOnAnIdleStream_BeginRecordedAfresh_NoIdleTimeInTheSlice) {
    constexpr int kOps = 10;
    ASSERT_EQ(pool_.fill(*ctx_, 2 * kOps), QD_SUCCESS);
    TraceTiming timing;
    Op prev = traced_launch(timing);
    for (int i = 1; i < kOps; ++i) {
        const Calls c0 = calls();
        const Op op = traced_launch(timing);
        const Calls c1 = calls();
        EXPECT_NE(op.begin, prev.end) << "op " << i << " shared an end already done";
        EXPECT_EQ(c1.records - c0.records, 2) << "event records for op " << i;
        EXPECT_EQ(c1.creates - c0.creates, 0) << "event creations for op " << i;
        prev = op;
    }
}

// A window's events go back to the pool when it is over, and the next window records with them:
// no event is created while it runs.
TEST_F(TraceTimingTest, NextWindow_ReusesTheLastWindowsEvents) {
    TraceTiming first;
    const Calls c0 = calls();
    for (int i = 0; i < 5; ++i) (void)traced_launch(first);  // an idle stream: two each
    const Calls c1 = calls();
    EXPECT_EQ(c1.creates - c0.creates, 10) << "an empty pool: each boundary creates its event";
    std::move(first).give_back(pool_);
    EXPECT_EQ(pool_.size(), 10u);
    TraceTiming second;
    for (int i = 0; i < 5; ++i) (void)traced_launch(second);
    const Calls c2 = calls();
    EXPECT_EQ(c2.creates - c1.creates, 0);
    EXPECT_EQ(c2.records - c1.records, 10);
}

// A boundary is shared only when nothing else can have been queued between the two operations.
TEST_F(TraceTimingTest, Begin_IsRecordedAfresh_WhenSomethingMayHaveComeBetween) {
    g_fake.work_per_launch = 1;  // a busy stream, where boundaries are shared
    ASSERT_EQ(pool_.fill(*ctx_, 64), QD_SUCCESS);
    TraceTiming timing;
    Op a = traced_launch(timing, 0);
    // An operation queued past the observers (the stream's unobserved count moved).
    Op b = traced_launch(timing, 1);
    EXPECT_NE(b.begin, a.end) << "an unobserved submission came between";
    // A borrowed stream: its owner may queue work on it at any time.
    Op c = traced_launch(timing, 1, false);
    EXPECT_NE(c.begin, b.end) << "a borrowed stream's boundary was shared";
    // An untraced operation on the lane (nested too deep, or begun before the window).
    timing.invalidate(1);
    Op d = traced_launch(timing, 1);
    EXPECT_NE(d.begin, c.end) << "an untraced operation came between";
    // Two operations of one stream in flight together (two submitting threads): neither the
    // second's begin nor the next operation's begin may be an end taken while both ran.
    TraceTiming::Pending pb1, pb2, pe1, pe2;
    TraceTiming::EventPtr shared;
    const size_t b1 = timing.begin(1, true, 1, pool_, &pb1, &shared);
    EXPECT_EQ(b1, d.end) << "nothing came between d and this one";
    const size_t b2 = timing.begin(1, true, 1, pool_, &pb2, &shared);
    EXPECT_NE(b2, d.end) << "shared a begin with an operation still in flight";
    record(timing, pb2);
    const size_t e1 = timing.end(1, 1, pool_, &pe1);
    record(timing, pe1);
    const size_t e2 = timing.end(1, 1, pool_, &pe2);
    // The second's end handed out, then a third begins before it is recorded: not shared.
    TraceTiming::Pending p3;
    const size_t b3 = timing.begin(1, true, 1, pool_, &p3, &shared);
    record(timing, pe2);
    record(timing, p3);
    EXPECT_NE(b3, e1);
    EXPECT_NE(b3, e2) << "shared an end recorded after the next operation began";
    TraceTiming::Pending p3e;
    const size_t e3 = timing.end(1, 1, pool_, &p3e);
    record(timing, p3e);
    Op f = traced_launch(timing, 1);
    EXPECT_EQ(f.begin, e3) << "back to sharing once the lane is quiet";
    complete_all_work();
}

// A long window reuses the events of boundaries already done instead of creating one per
// operation: each is read once (one elapsed-time call) and its event recycled, and the times
// read are the ones the file will show.
TEST_F(TraceTimingTest, LongWindow_ReusesDoneBoundariesEvents_CreatingAWorkingSetOnly) {
    start_reference();
    constexpr int kOps = 1000;
    TraceTiming timing;
    const Calls c0 = calls();
    for (int i = 0; i < kOps; ++i) (void)traced_launch(timing);  // an idle stream: two each
    const Calls c1 = calls();
    EXPECT_EQ(c1.records - c0.records, 2 * kOps);
    EXPECT_LE(c1.creates - c0.creates, long{TraceTiming::kScan} + 2)
        << "created an event per operation";
    EXPECT_LE(c1.elapsed - c0.elapsed, 2 * kOps) << "read a boundary twice";
    size_t read = 0;
    for (size_t i = 0; i < timing.size(); ++i) {
        const TraceTiming::Boundary *b = timing.boundary(i);
        EXPECT_TRUE(b->recorded) << i;
        if (!b->read) continue;
        ++read;
        EXPECT_TRUE(b->timed) << i;
        EXPECT_FLOAT_EQ(b->ms, 1.5f) << i;  // the fake's elapsed time
        EXPECT_EQ(b->event, nullptr) << i << ": read, but its event was not recycled";
    }
    EXPECT_GE(read, size_t{2 * kOps - 2 * TraceTiming::kScan});
}

// Work not done yet: the scan stops at the oldest boundary not done, and later scans back off
// (creating events meanwhile) rather than asking the driver again on every operation.
TEST_F(TraceTimingTest, BoundariesNotDone_AreNotRecycled_AndScansBackOff) {
    start_reference();
    g_fake.work_per_launch = 1;  // every launch leaves the stream busy until synchronized
    TraceTiming timing;
    const Calls c0 = calls();
    for (int i = 0; i < 200; ++i) (void)traced_launch(timing);
    const Calls c1 = calls();
    // Only the first begin, recorded before any launch, was done: the others were all created.
    EXPECT_EQ(c1.creates - c0.creates, 200) << "recycled an event whose work is not done";
    EXPECT_LE(c1.elapsed - c0.elapsed, 201 / long{TraceTiming::kScan} + 2)
        << "asked the driver on every operation";
    for (size_t i = 1; i < timing.size(); ++i) EXPECT_FALSE(timing.boundary(i)->read) << i;
    complete_all_work();
}

}  // namespace
