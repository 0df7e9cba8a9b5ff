// The submission chokepoint (src/core/submit.h): every operation a stream runs, from a direct
// API call or from fork, join and parallel launch, reaches the backend through core::submit(),
// where an observer attached to the context sees it, can refuse it, or can take it over.
// Links libqd's entry points and core statically (the observer seam is internal).
#include <gtest/gtest.h>
#include <qd/qd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/capture/capture.h"
#include "core/context.h"
#include "core/observers.h"
#include "core/submit.h"

namespace {

using qd::core::Op;
using qd::core::OpKind;
using qd::core::OpOrigin;

struct Seen {
    OpKind kind;
    OpOrigin origin;
    uint64_t stream;  // the core stream's address, to tell streams apart
    std::string kernel;
    uint32_t num_args;
    bool user_event;
    qd_status status;
    bool captured;
    qd_host_status_fn status_fn;  // HostFn of qd_launch_host_status_fn
    uint64_t handle;              // and the stream handle it passes
};

class Recorder : public qd::core::OpObserver {
  public:
    qd_status before(const Op &op, bool *consumed) override {
        seen_before.push_back(op.kind);
        batch_flags.push_back(op.batch);
        if (refuse != QD_SUCCESS) return refuse;
        if (refuse_launches && op.kind == OpKind::Launch) return QD_ERROR_LAUNCH_FAILED;
        *consumed = consume;
        return QD_SUCCESS;
    }
    void after(const Op &op, qd_status status) override {
        seen.push_back({op.kind, op.origin, reinterpret_cast<uint64_t>(op.stream),
                        op.kernel ? op.kernel->impl->name() : "", op.num_args,
                        op.user_event != nullptr, status, op.captured, op.status_fn, op.handle});
    }
    qd_status check_batch(const Op *ops, size_t n) override {
        std::vector<OpKind> list;
        for (size_t i = 0; i < n; ++i) list.push_back(ops[i].kind);
        batches.push_back(list);
        return refuse_batch;
    }
    std::vector<OpKind> seen_before;
    std::vector<bool> batch_flags;  // op.batch of each operation before() saw
    std::vector<Seen> seen;
    std::vector<std::vector<OpKind>> batches;  // what check_batch saw
    qd_status refuse = QD_SUCCESS;
    qd_status refuse_batch = QD_SUCCESS;
    bool refuse_launches = false;  // before() fails every launch (as a backend failure would)
    bool consume = false;
};

std::atomic<int> g_runs{0};
int32_t count_kernel(const qd_host_kernel_info *, void *const *) {
    g_runs.fetch_add(1);
    return 0;
}
void count_fn(void *) { g_runs.fetch_add(1); }
std::atomic<int32_t> g_status{1};
void count_status_fn(qd_stream, qd_status status, void *) {
    g_status.store(status);
    g_runs.fetch_add(1);
}

class SubmitTest : public ::testing::Test {
  protected:
    void SetUp() override {
        qd_context_desc d = QD_CONTEXT_DESC_INIT;
        d.backend = QD_BACKEND_CPU;
        ASSERT_EQ(qd_context_create(&d, &ctx_), QD_SUCCESS);
        ASSERT_EQ(qd_context_default_stream(ctx_, &s_), QD_SUCCESS);
        ASSERT_EQ(qd_kernel_from_host_fn(ctx_, count_kernel, "count", &k_), QD_SUCCESS);
        qd::core::Context *c = nullptr;
        ASSERT_EQ(qd::core::resolve(ctx_, &c), QD_SUCCESS);
        core_ = c;
        core_->set_observer_for_test(&rec_);
        g_runs = 0;
    }
    void TearDown() override {
        core_->set_observer_for_test(nullptr);
        EXPECT_EQ(qd_context_destroy(ctx_), QD_SUCCESS);
    }
    std::vector<OpKind> kinds() const {
        std::vector<OpKind> out;
        for (const Seen &s : rec_.seen) out.push_back(s.kind);
        return out;
    }

    qd_context ctx_ = 0;
    qd_stream s_ = 0;
    qd_kernel k_ = 0;
    qd::core::Context *core_ = nullptr;
    Recorder rec_;
};

// qd_launch_host_status_fn is a HostFn like qd_launch_host_fn's: observers see it once, with the
// function and the stream handle it passes, and a refusal queues nothing (fn never called).
TEST_F(SubmitTest, HostStatusFn_PassesThroughTheObserverOnceAsAHostFn_ARefusalQueuesNothing) {
    ASSERT_EQ(qd_launch_host_status_fn(s_, count_status_fn, nullptr), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 1);
    EXPECT_EQ(g_status.load(), QD_SUCCESS);
    ASSERT_EQ(rec_.seen.size(), 1u);
    EXPECT_EQ(rec_.seen[0].kind, OpKind::HostFn);
    EXPECT_EQ(rec_.seen[0].origin, OpOrigin::Api);
    EXPECT_EQ(rec_.seen[0].status_fn, &count_status_fn);
    EXPECT_EQ(rec_.seen[0].handle, s_);
    rec_.refuse = QD_ERROR_HAZARD;
    EXPECT_EQ(qd_launch_host_status_fn(s_, count_status_fn, nullptr), QD_ERROR_HAZARD);
    rec_.refuse = QD_SUCCESS;
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 1) << "a refused call's fn was called";
}

// qd_timeline_signal and qd_timeline_wait are one operation each through the chokepoint, and a
// refusal there queues nothing and gives the signal's value back (a later signal of the same
// value is accepted).
TEST_F(SubmitTest, TimelineSignalAndWait_PassThroughTheObserverOnce_ARefusalQueuesNothing) {
    qd_timeline tl = 0;
    ASSERT_EQ(qd_timeline_create(ctx_, 0, &tl), QD_SUCCESS);
    ASSERT_EQ(qd_timeline_signal(s_, tl, 1), QD_SUCCESS);
    ASSERT_EQ(qd_timeline_wait(s_, tl, 1), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    ASSERT_EQ(kinds(), (std::vector<OpKind>{OpKind::Signal, OpKind::WaitValue}));
    rec_.refuse = QD_ERROR_HAZARD;
    EXPECT_EQ(qd_timeline_signal(s_, tl, 2), QD_ERROR_HAZARD);
    EXPECT_EQ(qd_timeline_wait(s_, tl, 5), QD_ERROR_HAZARD);
    rec_.refuse = QD_SUCCESS;
    EXPECT_EQ(qd_stream_query(s_), QD_SUCCESS) << "a refused wait was queued";
    uint64_t v = 0;
    ASSERT_EQ(qd_timeline_query(tl, &v), QD_SUCCESS);
    EXPECT_EQ(v, 1u) << "a refused signal was queued";
    EXPECT_EQ(qd_timeline_signal(s_, tl, 2), QD_SUCCESS) << "the refused value was kept";
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(qd_timeline_destroy(tl), QD_SUCCESS);
}

TEST_F(SubmitTest, EveryApiOperation_PassesThroughTheObserverOnce_WithItsRecord) {
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    uint64_t v = 7;
    qd_arg arg = {&v, sizeof v};
    ASSERT_EQ(qd_launch(s_, k_, &cfg, &arg, 1), QD_SUCCESS);
    ASSERT_EQ(qd_launch_host_fn(s_, count_fn, nullptr), QD_SUCCESS);
    qd_event ev = 0;
    ASSERT_EQ(qd_event_create(ctx_, 0, &ev), QD_SUCCESS);
    ASSERT_EQ(qd_event_record(s_, ev), QD_SUCCESS);
    ASSERT_EQ(qd_stream_wait_event(s_, ev), QD_SUCCESS);
    uint64_t a = 0, b = 0;
    ASSERT_EQ(qd_mem_alloc_async(s_, 64, &a), QD_SUCCESS);
    ASSERT_EQ(qd_mem_alloc_async(s_, 64, &b), QD_SUCCESS);
    ASSERT_EQ(qd_memset_async(s_, a, 1, 64), QD_SUCCESS);
    ASSERT_EQ(qd_memcpy_async(s_, b, a, 64), QD_SUCCESS);
    ASSERT_EQ(qd_mem_free_async(s_, a), QD_SUCCESS);
    ASSERT_EQ(qd_mem_free_async(s_, b), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 2);  // the kernel and the host function ran
    const std::vector<OpKind> expected = {
        OpKind::Launch,   OpKind::HostFn, OpKind::Record, OpKind::Wait,    OpKind::MemAlloc,
        OpKind::MemAlloc, OpKind::Memset, OpKind::Memcpy, OpKind::MemFree, OpKind::MemFree};
    ASSERT_EQ(kinds(), expected);
    EXPECT_EQ(rec_.seen_before, expected);
    for (const Seen &s : rec_.seen) {
        EXPECT_EQ(s.origin, OpOrigin::Api);
        EXPECT_EQ(s.status, QD_SUCCESS);
    }
    EXPECT_EQ(rec_.seen[0].kernel, "count");
    EXPECT_EQ(rec_.seen[0].num_args, 1u);
    EXPECT_TRUE(rec_.seen[2].user_event);
    EXPECT_TRUE(rec_.seen[3].user_event);
    EXPECT_EQ(qd_event_destroy(ev), QD_SUCCESS);
}

TEST_F(SubmitTest, ForkJoinAndParallelLaunch_AreRecordsWaitsAndLaunchesWithTheirOrigin) {
    qd_stream kids[2];
    ASSERT_EQ(qd_stream_fork(s_, 2, kids), QD_SUCCESS);
    // fork: the parent's record, each child's wait
    ASSERT_EQ(kinds(), (std::vector<OpKind>{OpKind::Record, OpKind::Wait, OpKind::Wait}));
    const uint64_t parent = rec_.seen[0].stream;
    EXPECT_NE(rec_.seen[1].stream, parent);
    EXPECT_NE(rec_.seen[2].stream, rec_.seen[1].stream);
    for (const Seen &s : rec_.seen) {
        EXPECT_EQ(s.origin, OpOrigin::Fork);
        EXPECT_FALSE(s.user_event);  // a pooled event
    }
    rec_.seen.clear();
    ASSERT_EQ(qd_stream_join(s_, kids, 2), QD_SUCCESS);
    // join: per child, its record then the parent's wait
    ASSERT_EQ(kinds(),
              (std::vector<OpKind>{OpKind::Record, OpKind::Wait, OpKind::Record, OpKind::Wait}));
    for (const Seen &s : rec_.seen) EXPECT_EQ(s.origin, OpOrigin::Join);
    EXPECT_EQ(rec_.seen[1].stream, parent);
    EXPECT_EQ(rec_.seen[3].stream, parent);
    rec_.seen.clear();

    qd_task tasks[3] = {QD_TASK_INIT, QD_TASK_INIT, QD_TASK_INIT};
    for (int i = 0; i < 3; ++i) {
        tasks[i].kernel = k_;
        tasks[i].group = uint32_t(i % 2);
    }
    ASSERT_EQ(qd_launch_parallel(s_, tasks, 3), QD_SUCCESS);
    // its fork (record + 2 waits), 3 launches, its join (2 x record + wait)
    ASSERT_EQ(kinds(),
              (std::vector<OpKind>{OpKind::Record, OpKind::Wait, OpKind::Wait, OpKind::Launch,
                                   OpKind::Launch, OpKind::Launch, OpKind::Record, OpKind::Wait,
                                   OpKind::Record, OpKind::Wait}));
    for (const Seen &s : rec_.seen) EXPECT_EQ(s.origin, OpOrigin::ParallelLaunch);
    EXPECT_EQ(rec_.seen[3].stream, rec_.seen[5].stream);  // group 0's two tasks: one stream
    EXPECT_NE(rec_.seen[3].stream, rec_.seen[4].stream);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 3);
}

TEST_F(SubmitTest, AnObserverThatRefuses_ReturnsItsStatus_AndTheBackendNeverRuns) {
    rec_.refuse = QD_ERROR_NOT_SUPPORTED;
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    EXPECT_EQ(qd_launch(s_, k_, &cfg, nullptr, 0), QD_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(qd_launch_host_fn(s_, count_fn, nullptr), QD_ERROR_NOT_SUPPORTED);
    rec_.refuse = QD_SUCCESS;
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 0);
    EXPECT_EQ(rec_.seen_before.size(), 2u);
    EXPECT_TRUE(rec_.seen.empty());  // after() is not called for a refused operation
}

TEST_F(SubmitTest, ABatchRefusedByCheckBatch_QueuesNoPart_AndBeforeNeverSeesIt) {
    rec_.refuse_batch = QD_ERROR_NOT_SUPPORTED;
    qd_task tasks[2] = {QD_TASK_INIT, QD_TASK_INIT};
    for (int i = 0; i < 2; ++i) {
        tasks[i].kernel = k_;
        tasks[i].group = uint32_t(i);
    }
    EXPECT_EQ(qd_launch_parallel(s_, tasks, 2), QD_ERROR_NOT_SUPPORTED);
    qd_stream kids[2];
    EXPECT_EQ(qd_stream_fork(s_, 2, kids), QD_ERROR_NOT_SUPPORTED);
    rec_.refuse_batch = QD_SUCCESS;
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 0);
    EXPECT_TRUE(rec_.seen_before.empty());
    // The whole lists: the parallel launch's fork, launches and join; the fork's record, waits.
    ASSERT_EQ(rec_.batches.size(), 2u);
    EXPECT_EQ(rec_.batches[0], (std::vector<OpKind>{OpKind::Record, OpKind::Wait, OpKind::Wait,
                                                    OpKind::Launch, OpKind::Launch, OpKind::Record,
                                                    OpKind::Wait, OpKind::Record, OpKind::Wait}));
    EXPECT_EQ(rec_.batches[1], (std::vector<OpKind>{OpKind::Record, OpKind::Wait, OpKind::Wait}));
    qd_context_stats st = QD_CONTEXT_STATS_INIT;
    ASSERT_EQ(qd_context_get_stats(ctx_, &st), QD_SUCCESS);
    EXPECT_EQ(st.stream_pool_leased, 0u);
}

TEST_F(SubmitTest, ABatchPartFailingAfterTheCheck_EndsTheLaunches_TheJoinStillRuns) {
    rec_.refuse_launches = true;  // the first launch fails past check_batch
    qd_task tasks[3] = {QD_TASK_INIT, QD_TASK_INIT, QD_TASK_INIT};
    for (int i = 0; i < 3; ++i) {
        tasks[i].kernel = k_;
        tasks[i].group = uint32_t(i % 2);
    }
    EXPECT_EQ(qd_launch_parallel(s_, tasks, 3), QD_ERROR_LAUNCH_FAILED);
    rec_.refuse_launches = false;
    EXPECT_EQ(rec_.seen_before,
              (std::vector<OpKind>{OpKind::Record, OpKind::Wait, OpKind::Wait, OpKind::Launch,
                                   OpKind::Record, OpKind::Wait, OpKind::Record, OpKind::Wait}));
    for (bool b : rec_.batch_flags) EXPECT_TRUE(b);  // every part marked as checked
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 0);
    // A single operation is no batch.
    rec_.batch_flags.clear();
    ASSERT_EQ(qd_launch_host_fn(s_, count_fn, nullptr), QD_SUCCESS);
    EXPECT_EQ(rec_.batch_flags, std::vector<bool>{false});
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
}

TEST_F(SubmitTest, AnObserverThatConsumes_TakesTheOperationOver) {
    rec_.consume = true;  // as graph capture will: the operation is kept, not run
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    EXPECT_EQ(qd_launch(s_, k_, &cfg, nullptr, 0), QD_SUCCESS);
    rec_.consume = false;
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 0);
    EXPECT_EQ(rec_.seen_before, std::vector<OpKind>{OpKind::Launch});
}

TEST_F(SubmitTest, WithNoObserver_OperationsRunAsBefore) {
    core_->set_observer_for_test(nullptr);
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    ASSERT_EQ(qd_launch(s_, k_, &cfg, nullptr, 0), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 1);
    EXPECT_TRUE(rec_.seen_before.empty());
}

// Several observers attach to one context (capture, trace, validation) through its ObserverSet.
struct Named : qd::core::OpObserver {
    Named(std::vector<std::string> *log, std::string name, bool consume)
        : log(log), name(std::move(name)), consume(consume) {}
    qd_status before(const Op &op, bool *consumed) override {
        log->push_back(name + ".before" + (op.captured ? "(captured)" : ""));
        if (refuse != QD_SUCCESS) return refuse;
        *consumed = consume;
        return QD_SUCCESS;
    }
    void after(const Op &, qd_status status) override {
        log->push_back(name + ".after" +
                       (status == QD_SUCCESS ? "" : "(" + std::to_string(status) + ")"));
    }
    void context_drained(qd::core::Context &) override { log->push_back(name + ".drained"); }
    bool needs_replay() const override { return replay; }
    std::vector<std::string> *log;
    std::string name;
    bool consume;
    qd_status refuse = QD_SUCCESS;
    bool replay = false;
};

TEST(ObserverSet, Observers_BeforeInOrder_AfterInReverse_TakeEndsTheWalk_DrainedAtDestroy) {
    qd_context ctx = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    qd_stream s = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    EXPECT_EQ(c->observer(), nullptr);
    std::vector<std::string> log;
    auto first = std::make_unique<Named>(&log, "a", false);
    auto second = std::make_unique<Named>(&log, "b", false);
    Named *b = second.get();
    ASSERT_EQ(c->attach_observer(std::move(first)), QD_SUCCESS);
    ASSERT_EQ(c->attach_observer(std::move(second)), QD_SUCCESS);
    EXPECT_EQ(c->observers()->find<Named>()->name, "a");

    ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    EXPECT_EQ(log, (std::vector<std::string>{"a.before", "b.before", "b.after", "a.after"}));

    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    log.clear();
    b->consume = true;  // b takes the operation over: nothing runs, a hears how it ended
    g_runs = 0;
    ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    EXPECT_EQ(log, (std::vector<std::string>{"a.before", "b.before", "a.after"}));
    b->consume = false;
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 0);

    for (size_t i = 2; i < qd::core::ObserverSet::kMaxObservers; ++i)
        ASSERT_EQ(c->attach_observer(std::make_unique<Named>(&log, "x", false)), QD_SUCCESS);
    EXPECT_EQ(c->attach_observer(std::make_unique<Named>(&log, "y", false)),
              QD_ERROR_OUT_OF_MEMORY);

    log.clear();
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
    ASSERT_GE(log.size(), 2u);
    EXPECT_EQ(log[0], "a.drained");
    EXPECT_EQ(log[1], "b.drained");
}

// Every observer whose before() passed gets exactly one after(), with the status the caller
// gets, whatever ended the route later: a later observer refusing or taking the operation.
TEST(ObserverSet, AnEarlierObserverGetsAfter_WhenALaterOneRefusesOrTakes) {
    qd_context ctx = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    qd_stream s = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    std::vector<std::string> log;
    auto second = std::make_unique<Named>(&log, "b", false);
    auto third = std::make_unique<Named>(&log, "c", false);
    Named *b = second.get();
    ASSERT_EQ(c->attach_observer(std::make_unique<Named>(&log, "a", false)), QD_SUCCESS);
    ASSERT_EQ(c->attach_observer(std::move(second)), QD_SUCCESS);
    ASSERT_EQ(c->attach_observer(std::move(third)), QD_SUCCESS);
    g_runs = 0;

    b->refuse =
        QD_ERROR_NOT_SUPPORTED;  // b refuses: a passed and hears the refusal; c never saw it
    EXPECT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_ERROR_NOT_SUPPORTED);
    const std::string refused = "(" + std::to_string(QD_ERROR_NOT_SUPPORTED) + ")";
    EXPECT_EQ(log, (std::vector<std::string>{"a.before", "b.before", "a.after" + refused}));

    log.clear();
    b->refuse = QD_SUCCESS;
    b->consume = true;  // b takes it: a passed and hears QD_SUCCESS
    EXPECT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    EXPECT_EQ(log, (std::vector<std::string>{"a.before", "b.before", "a.after"}));

    log.clear();
    b->consume = false;  // all pass: after() in reverse on all three
    EXPECT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    EXPECT_EQ(log, (std::vector<std::string>{"a.before", "b.before", "c.before", "c.after",
                                             "b.after", "a.after"}));
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 1);
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}

// The capture routes after the observers: an observer sees a captured operation, marked
// op.captured, and gets its after() with the capture's refusal.
TEST(SubmitGraph, ObserversSeeCapturedOperationsMarked_AndGetAfterWhenTheCaptureRefuses) {
    qd_context ctx = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    qd_stream s = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    std::vector<std::string> log;
    ASSERT_EQ(c->attach_observer(std::make_unique<Named>(&log, "a", false)), QD_SUCCESS);
    g_runs = 0;
    uint64_t outside = 0;
    ASSERT_EQ(qd_mem_alloc_async(s, 64, &outside), QD_SUCCESS);
    log.clear();
    ASSERT_EQ(qd_stream_begin_capture(s), QD_SUCCESS);
    ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    EXPECT_EQ(log, (std::vector<std::string>{"a.before(captured)", "a.after"}));
    log.clear();
    uint64_t addr = 0;
    ASSERT_EQ(qd_mem_alloc_async(s, 64, &addr), QD_SUCCESS);  // the graph's block
    EXPECT_EQ(log, (std::vector<std::string>{"a.before(captured)", "a.after"}));
    log.clear();
    EXPECT_EQ(qd_mem_free_async(s, outside), QD_ERROR_INVALID_OPERATION);  // the capture refuses
    const std::string refused = "(" + std::to_string(QD_ERROR_INVALID_OPERATION) + ")";
    EXPECT_EQ(log, (std::vector<std::string>{"a.before(captured)", "a.after" + refused}));
    ASSERT_EQ(qd_mem_free_async(s, addr), QD_SUCCESS);
    qd_graph g = 0;
    ASSERT_EQ(qd_stream_end_capture(s, &g), QD_SUCCESS);
    EXPECT_FALSE(c->observer() == nullptr);  // the observer stays attached
    log.clear();
    ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);  // not captured any more
    EXPECT_EQ(log, (std::vector<std::string>{"a.before", "a.after"}));
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 1) << "a captured host function ran at capture";
    EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}

// A backend stream with native graphs, over a CPU stream: counts the driver captures begun;
// while one is open, what reaches it is recorded by the "driver" (counted), not run.
struct FakeNativeGraph : qd::backend::Graph {
    qd_status launch(qd::backend::Stream &) override { return QD_SUCCESS; }
    qd_status update(qd::backend::Graph &) override { return QD_SUCCESS; }
};
struct FakeNativeStream : qd::backend::Stream {
    struct Capture : qd::backend::Capture {
        explicit Capture(FakeNativeStream *s) : s(s) {}
        qd_status host_fn(qd::backend::Stream &, qd_host_fn, void *) override {
            ++s->driver_ops;
            return QD_SUCCESS;
        }
        qd_status end(std::shared_ptr<qd::backend::Graph> *out) override {
            s->open = false;
            *out = std::make_shared<FakeNativeGraph>();
            return QD_SUCCESS;
        }
        ~Capture() override { s->open = false; }
        FakeNativeStream *s;
    };
    explicit FakeNativeStream(std::shared_ptr<qd::backend::Stream> cpu) : cpu(std::move(cpu)) {}
    qd_status begin_capture(std::unique_ptr<qd::backend::Capture> *out) override {
        ++captures_begun;
        open = true;
        *out = std::make_unique<Capture>(this);
        return QD_SUCCESS;
    }
    qd_status launch(qd::backend::Kernel &k, const qd::backend::LaunchDims &dims,
                     const qd_arg *args, uint32_t n) override {
        return open ? (++driver_ops, QD_SUCCESS) : cpu->launch(k, dims, args, n);
    }
    qd_status record(qd::backend::Event &e) override {
        return open ? (++driver_ops, QD_SUCCESS) : cpu->record(e);
    }
    qd_status wait(qd::backend::Event &e) override {
        return open ? (++driver_ops, QD_SUCCESS) : cpu->wait(e);
    }
    qd_status synchronize() override { return cpu->synchronize(); }
    qd_status query() override { return cpu->query(); }
    qd_status mem_alloc(uint64_t bytes, uint64_t *address) override {
        return cpu->mem_alloc(bytes, address);
    }
    qd_status mem_free(uint64_t address) override { return cpu->mem_free(address); }
    qd_status memcpy(uint64_t dst, uint64_t src, uint64_t bytes) override {
        return open ? (++driver_ops, QD_SUCCESS) : cpu->memcpy(dst, src, bytes);
    }
    qd_status memset(uint64_t dst, uint8_t value, uint64_t bytes) override {
        return open ? (++driver_ops, QD_SUCCESS) : cpu->memset(dst, value, bytes);
    }
    qd_status host_fn(qd_host_fn fn, void *user_data) override {
        return cpu->host_fn(fn, user_data);
    }
    int32_t priority() const override { return cpu->priority(); }
    std::shared_ptr<qd::backend::Stream> cpu;
    int captures_begun = 0;
    int driver_ops = 0;
    bool open = false;
};

// Native driver graphs are used unless an attached observer needs replayed operations; either
// way the capture records every operation as a node.
TEST(SubmitGraph, NativeCapture_UnlessAnAttachedObserverNeedsReplay_EitherWayRecorded) {
    qd_context ctx = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    qd_stream cpu = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &cpu), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    qd::core::Stream *cpu_stream = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    ASSERT_EQ(qd::core::resolve(cpu, &cpu_stream), QD_SUCCESS);
    auto fake = std::make_shared<FakeNativeStream>(cpu_stream->impl);
    std::vector<std::string> log;  // outlives the context (its observers log the drain)
    {
        auto s = std::make_shared<qd::core::Stream>(c->shared_from_this(), fake,
                                                    qd::core::StreamKind::Owned);
        auto plain = std::make_unique<Named>(&log, "plain", false);  // needs no replay
        ASSERT_EQ(c->attach_observer(std::move(plain)), QD_SUCCESS);
        qd::core::CaptureRouter *router = nullptr;
        ASSERT_EQ(c->open_capture(&router), QD_SUCCESS);
        EXPECT_TRUE(qd::core::native_graphs(*c));

        auto capture_one = [&](bool *native) {
            ASSERT_EQ(router->begin(*s, 0), QD_SUCCESS);
            EXPECT_TRUE(s->capturing());
            ASSERT_EQ(qd::core::submit_memset(*s, 0, 1, 0), QD_SUCCESS);
            std::shared_ptr<const qd::core::GraphData> data;
            std::shared_ptr<qd::backend::Graph> graph;
            ASSERT_EQ(router->end(*s, &data, &graph), QD_SUCCESS);
            EXPECT_FALSE(s->capturing());
            ASSERT_TRUE(data);
            EXPECT_EQ(data->nodes.size(), 1u) << "the capture recorded no node";
            *native = graph != nullptr;
        };
        bool native = false;
        capture_one(&native);
        EXPECT_TRUE(native) << "an observer that needs no replay turned native graphs off";
        EXPECT_EQ(fake->captures_begun, 1);
        EXPECT_EQ(fake->driver_ops, 1);  // the memset went to the driver's capture
        EXPECT_EQ(log, (std::vector<std::string>{"plain.before(captured)", "plain.after"}));

        auto replaying = std::make_unique<Named>(&log, "replaying", false);
        replaying->replay = true;
        ASSERT_EQ(c->attach_observer(std::move(replaying)), QD_SUCCESS);
        EXPECT_FALSE(qd::core::native_graphs(*c));
        capture_one(&native);
        EXPECT_FALSE(native) << "native although an attached observer needs replay";
        EXPECT_EQ(fake->captures_begun, 1);
        EXPECT_EQ(fake->driver_ops, 1);
    }
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}

// A native (driver) capture whose backend refuses a conditional (backend::Capture's default:
// QD_ERROR_NOT_SUPPORTED naming the driver versions) records on as if it had not been asked:
// nothing changed.
TEST(SubmitGraph, NativeCapture_RefusesAConditional_AndRecordsOnUnchanged) {
    qd_context ctx = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    qd_stream cpu = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &cpu), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    qd::core::Stream *cpu_stream = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    ASSERT_EQ(qd::core::resolve(cpu, &cpu_stream), QD_SUCCESS);
    auto fake = std::make_shared<FakeNativeStream>(cpu_stream->impl);
    {
        auto s = std::make_shared<qd::core::Stream>(c->shared_from_this(), fake,
                                                    qd::core::StreamKind::Owned);
        qd::core::CaptureRouter *router = nullptr;
        ASSERT_EQ(c->open_capture(&router), QD_SUCCESS);
        ASSERT_EQ(router->begin(*s, 0), QD_SUCCESS);
        qd_conditional_desc cd = QD_CONDITIONAL_DESC_INIT;
        cd.kind = QD_CONDITIONAL_WHILE;
        cd.condition = 64;
        EXPECT_EQ(router->begin_conditional(*s, 0, cd), QD_ERROR_NOT_SUPPORTED);
        EXPECT_NE(std::string(qd_last_error_message()).find("12.3"), std::string::npos)
            << qd_last_error_message();
        EXPECT_EQ(router->end_conditional(*s, 0), QD_ERROR_INVALID_OPERATION);
        ASSERT_EQ(qd::core::submit_memset(*s, 0, 1, 0), QD_SUCCESS);
        std::shared_ptr<const qd::core::GraphData> data;
        std::shared_ptr<qd::backend::Graph> graph;
        ASSERT_EQ(router->end(*s, &data, &graph), QD_SUCCESS);
        ASSERT_TRUE(data);
        EXPECT_EQ(data->nodes.size(), 1u);
        EXPECT_FALSE(data->has_conditionals);
        EXPECT_TRUE(graph != nullptr);
        EXPECT_EQ(fake->driver_ops, 1);
    }
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}

// The trace and the validation mode need replayed operations; a capture with either attached
// records and replays.
TEST(SubmitGraph, TraceAndValidation_NeedReplay_ACaptureWithThemAttachedStillRecords) {
    auto capture_and_replay = [](qd_context ctx) {
        qd_stream s = 0;
        ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
        g_runs = 0;
        ASSERT_EQ(qd_stream_begin_capture(s), QD_SUCCESS);
        ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
        qd_graph g = 0;
        ASSERT_EQ(qd_stream_end_capture(s, &g), QD_SUCCESS);
        ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
        EXPECT_EQ(g_runs.load(), 0) << "a captured host function ran at capture";
        ASSERT_EQ(qd_graph_launch(g, s), QD_SUCCESS);
        ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
        EXPECT_EQ(g_runs.load(), 1);
        EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
    };
    qd_context ctx = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    d.flags = QD_CONTEXT_VALIDATE;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    EXPECT_FALSE(qd::core::native_graphs(*c));
    capture_and_replay(ctx);
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);

    d.flags = 0;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    EXPECT_TRUE(qd::core::native_graphs(*c));
    const std::string path = ::testing::TempDir() + "qd_submit_test_trace.json";
    ASSERT_EQ(qd_trace_start(ctx, path.c_str()), QD_SUCCESS);
    EXPECT_FALSE(qd::core::native_graphs(*c));
    capture_and_replay(ctx);
    ASSERT_EQ(qd_trace_stop(ctx), QD_SUCCESS);
    EXPECT_FALSE(qd::core::native_graphs(*c)) << "a stopped trace stays attached";
    ASSERT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
    std::remove(path.c_str());
}

}  // namespace

// Graph capture (core/capture/capture.h) routes after the observers: an observer sees every
// captured operation (op.captured), and a replay submits them again through the chokepoint,
// with the fork/join structure of the captured calls, every one as OpOrigin::GraphLaunch.: it consumes the operations of a
// capturing stream, so an observer attached after it never sees them, and a replay submits them
// again through the chokepoint, with the fork/join structure of the captured calls, as
// OpOrigin::GraphLaunch.
TEST(SubmitGraph, CapturedOperationsAreSeenMarked_AndAReplaySubmitsThemAsGraphLaunch) {
    struct Forward : qd::core::OpObserver {
        explicit Forward(Recorder *r) : rec(r) {}
        qd_status before(const Op &op, bool *consumed) override {
            return rec->before(op, consumed);
        }
        void after(const Op &op, qd_status status) override { rec->after(op, status); }
        Recorder *rec;
    };
    Recorder rec;
    qd_context ctx = 0;
    qd_stream s = 0;
    qd_kernel k = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
    ASSERT_EQ(qd_kernel_from_host_fn(ctx, count_kernel, "count", &k), QD_SUCCESS);
    uint64_t buf = 0;
    ASSERT_EQ(qd_mem_alloc_async(s, 128, &buf), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    g_runs = 0;
    qd::core::Context *c = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    ASSERT_EQ(c->attach_observer(std::make_unique<Forward>(&rec)), QD_SUCCESS);
    ASSERT_EQ(qd_stream_begin_capture(s), QD_SUCCESS);
    qd_task tasks[3] = {QD_TASK_INIT, QD_TASK_INIT, QD_TASK_INIT};
    for (int i = 0; i < 3; ++i) {
        tasks[i].kernel = k;
        tasks[i].group = uint32_t(i % 2);
    }
    ASSERT_EQ(qd_launch_parallel(s, tasks, 3), QD_SUCCESS);
    ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    ASSERT_EQ(qd_memset_async(s, buf, 1, 64), QD_SUCCESS);
    ASSERT_EQ(qd_memcpy_async(s, buf + 64, buf, 64), QD_SUCCESS);
    // the fork (record + 2 waits), 3 launches, the join (2 x record + wait), host fn, set, copy
    const std::vector<OpKind> expected = {
        OpKind::Record, OpKind::Wait,   OpKind::Wait,  OpKind::Launch, OpKind::Launch,
        OpKind::Launch, OpKind::Record, OpKind::Wait,  OpKind::Record, OpKind::Wait,
        OpKind::HostFn, OpKind::Memset, OpKind::Memcpy};
    std::vector<OpKind> kinds;
    for (const Seen &x : rec.seen) kinds.push_back(x.kind);
    ASSERT_EQ(kinds, expected) << "the observer did not see every captured operation";
    for (const Seen &x : rec.seen) {
        EXPECT_TRUE(x.captured);
        EXPECT_EQ(x.status, QD_SUCCESS);
    }
    rec.seen.clear();
    qd_graph g = 0;
    ASSERT_EQ(qd_stream_end_capture(s, &g), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 0) << "captured work ran at capture";
    ASSERT_EQ(qd_graph_launch(g, s), QD_SUCCESS);
    kinds.clear();
    for (const Seen &x : rec.seen) kinds.push_back(x.kind);
    ASSERT_EQ(kinds, expected);
    for (const Seen &x : rec.seen) {
        EXPECT_EQ(x.origin, OpOrigin::GraphLaunch);
        EXPECT_FALSE(x.captured);
    }
    EXPECT_EQ(rec.seen[3].stream, rec.seen[5].stream);  // group 0's two tasks: one stream
    EXPECT_NE(rec.seen[3].stream, rec.seen[4].stream);
    EXPECT_EQ(rec.seen[3].kernel, "count");
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 4);
    EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
    EXPECT_EQ(qd_mem_free_async(s, buf), QD_SUCCESS);
    EXPECT_EQ(qd_context_destroy(ctx), QD_SUCCESS);  // before rec goes
}

// The fast path: with nothing attached, a submit takes the observed path (where captures are
// routed) only while a capture is open.
TEST(SubmitGraph, WithNoObserver_TheObservedPathIsTakenOnlyWhileACaptureIsOpen) {
    qd_context ctx = 0;
    qd_stream s = 0;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    ASSERT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
    qd::core::Context *c = nullptr;
    ASSERT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    EXPECT_EQ(c->observer(), nullptr);
    ASSERT_EQ(qd_stream_begin_capture(s), QD_SUCCESS);
    EXPECT_NE(c->observer(), nullptr);
    g_runs = 0;
    ASSERT_EQ(qd_launch_host_fn(s, count_fn, nullptr), QD_SUCCESS);
    qd_graph g = 0;
    ASSERT_EQ(qd_stream_end_capture(s, &g), QD_SUCCESS);
    EXPECT_EQ(c->observer(), nullptr) << "the chokepoint's branch stays taken after the capture";
    ASSERT_EQ(qd_graph_launch(g, s), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s), QD_SUCCESS);
    EXPECT_EQ(g_runs.load(), 1);
    EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
    EXPECT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}
