// Graphs (qd.h, "Graphs"): qd_stream_begin_capture, qd_stream_end_capture, qd_graph_launch,
// qd_graph_update, qd_graph_destroy. Replays equal direct execution bit for bit; 1000 replays
// with changed arguments; branches of a replay overlap on the CPU backend (proved with a
// latch, never with timing); ordering against work before and after a replay; every misuse
// status; destroy with replays in flight; captures on two threads at once; pool leases held by
// a capture until it ends; capture/destroy cycles leave every counter where it was.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

class GraphTest : public BackendTest {
  protected:
    qd_context small_pool(uint32_t size) {
        qd_context_desc desc = make_desc(backend(), size, 4);
        qd_context c = 0;
        EXPECT_QD_OK(qd_context_create(&desc, &c));
        extra_contexts_.push_back(c);
        return c;
    }

    // The captured step: on `s`, dst[0] = src + a (launch), a fork of two children that each
    // compute one word from dst[0] (add_value), a parallel launch of 4 groups of 2 chained
    // add_values, a memset and a memcpy, and a host callback that counts; all joined back.
    // `buf` holds 16 uint32 words.
    qd_status step(qd_stream s, uint64_t buf, uint32_t a, std::atomic<int> *calls) {
        qd_kernel k = kernels_->add_value();
        declare_slots(k, {0, 1});  // every add_value of the step reads and writes its own words
        const uint64_t w = sizeof(uint32_t);
        qd_status st = launch_add_value(s, k, buf + 0 * w, buf + 15 * w, a);
        if (st != QD_SUCCESS) return st;
        qd_stream kids[2] = {0, 0};
        st = qd_stream_fork(s, 2, kids);
        if (st != QD_SUCCESS) return st;
        for (uint32_t i = 0; i < 2; ++i) {
            st = launch_add_value(kids[i], k, buf + (1 + i) * w, buf + 0 * w, 10 * (i + 1));
            if (st != QD_SUCCESS) return st;
        }
        st = qd_stream_join(s, kids, 2);
        if (st != QD_SUCCESS) return st;
        qd_task tasks[8];
        TaskArgs store[8];
        for (uint32_t g = 0; g < 4; ++g) {
            // group g: word 3+2g = word1 + g + a; word 4+2g = word 3+2g + 1
            task_add_value(&tasks[2 * g], &store[2 * g], g, k, buf + (3 + 2 * g) * w, buf + 1 * w,
                           g + a);
            task_add_value(&tasks[2 * g + 1], &store[2 * g + 1], g, k, buf + (4 + 2 * g) * w,
                           buf + (3 + 2 * g) * w, 1);
        }
        st = qd_launch_parallel(s, tasks, 8);
        if (st != QD_SUCCESS) return st;
        st = qd_memset_async(s, buf + 11 * w, uint8_t(a), w);
        if (st != QD_SUCCESS) return st;
        st = qd_memcpy_async(s, buf + 12 * w, buf + 2 * w, w);
        if (st != QD_SUCCESS) return st;
        return qd_launch_host_fn(s, &count_cb, calls);
    }

    static void count_cb(void *user) { static_cast<std::atomic<int> *>(user)->fetch_add(1); }

    // Does qd_mem_alloc_async inside a capture work here? A native capture on a driver without
    // graph memory nodes refuses it (QD_ERROR_NOT_SUPPORTED, *why says the minimum version).
    bool graph_memory(std::string *why) {
        qd_stream s = new_stream();
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        uint64_t block = 0;
        const qd_status st = qd_mem_alloc_async(s, 64, &block);
        if (st == QD_ERROR_NOT_SUPPORTED && !is_cpu())
            *why = qd_last_error_message();
        else
            EXPECT_QD_OK(qd_mem_free_async(s, block));
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        EXPECT_QD_OK(qd_graph_destroy(g));
        if (st == QD_ERROR_NOT_SUPPORTED && !is_cpu()) return false;
        EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
        return true;
    }

    qd_graph capture_step(qd_stream s, uint64_t buf, uint32_t a, std::atomic<int> *calls) {
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        EXPECT_QD_OK(step(s, buf, a, calls));
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        return g;
    }

    std::vector<uint32_t> words(qd_stream s, uint64_t buf, uint32_t n = 16) {
        std::vector<uint8_t> b = read_back(s, buf, n * sizeof(uint32_t));
        std::vector<uint32_t> out(n);
        std::memcpy(out.data(), b.data(), b.size());
        return out;
    }

    void fill(qd_stream s, uint64_t buf, uint32_t seed) {
        std::vector<uint32_t> init(16, 0);
        init[15] = seed;
        ASSERT_QD_OK(qd_memcpy_async(s, buf, (uint64_t)(uintptr_t)init.data(), 16 * 4));
        ASSERT_QD_OK(qd_stream_synchronize(s));
    }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

TEST_P(GraphTest, Replay_EqualsDirectExecution_BitForBit) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t direct = alloc(s, 64), replayed = alloc(s, 64);
    std::atomic<int> calls{0};
    fill(s, direct, 7);
    fill(s, replayed, 7);
    ASSERT_QD_OK(step(s, direct, 5, &calls));
    const std::vector<uint32_t> want = words(s, direct);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(want[0], 12u);
    EXPECT_EQ(want[2], 32u);
    EXPECT_EQ(want[12], 32u);

    qd_graph g = capture_step(s, replayed, 5, &calls);
    ASSERT_NE(g, 0u);
    EXPECT_EQ(words(s, replayed)[0], 0u) << "captured work ran during the capture";
    EXPECT_EQ(calls.load(), 1) << "a captured host callback ran during the capture";
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(words(s, replayed), want);
    EXPECT_EQ(calls.load(), 2);
    // Replays on another stream, again and again: same result, the callback runs every time.
    qd_stream other = new_stream();
    for (int i = 0; i < 20; ++i) {
        fill(other, replayed, 7);
        ASSERT_QD_OK(qd_graph_launch(g, other));
        ASSERT_EQ(words(other, replayed), want) << "replay " << i;
    }
    EXPECT_EQ(calls.load(), 22);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

TEST_P(GraphTest, Update_1000ReplaysWithChangedArguments) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 64), ref = alloc(s, 64);
    std::atomic<int> calls{0};
    qd_graph g = capture_step(s, buf, 0, &calls);
    const int n = int(scaled(1000, 50));
    for (int i = 0; i < n; ++i) {
        const uint32_t a = uint32_t(i * 7 + 1);
        qd_graph fresh = capture_step(s, buf, a, &calls);
        ASSERT_QD_OK(qd_graph_update(g, fresh));
        ASSERT_QD_OK(qd_graph_destroy(fresh));  // g keeps the values
        fill(s, buf, uint32_t(i));
        ASSERT_QD_OK(qd_graph_launch(g, s));
        if (i % 50 == 0 || i == n - 1) {
            fill(s, ref, uint32_t(i));
            ASSERT_QD_OK(step(s, ref, a, &calls));
            ASSERT_EQ(words(s, buf), words(s, ref)) << "replay " << i;
        }
    }
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, Update_RefusesAnotherShape_AndKeepsTheGraph) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 64);
    std::atomic<int> calls{0};
    qd_graph g = capture_step(s, buf, 3, &calls);
    qd_graph small = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), buf, buf + 60, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &small));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "shape", qd_graph_update(g, small));
    qd_context c2 = other_context();
    qd_stream s2 = 0;
    ASSERT_QD_OK(qd_context_default_stream(c2, &s2));
    qd_graph foreign = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s2));
    ASSERT_QD_OK(qd_stream_end_capture(s2, &foreign));
    EXPECT_QD(QD_ERROR_WRONG_CONTEXT, qd_graph_update(g, foreign));
    EXPECT_QD(QD_ERROR_WRONG_CONTEXT, qd_graph_launch(foreign, s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_update(g, 0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_update(s, g));
    // g still replays its own values.
    fill(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(words(s, buf)[0], 4u);
    EXPECT_QD_OK(qd_graph_destroy(small));
    EXPECT_QD_OK(qd_graph_destroy(foreign));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, EmptyCapture_ReplayIsANoOp) {
    qd_stream s = new_stream();
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_QD_OK(qd_graph_launch(g, s));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// ---------------------------------------------------------------------------------------------
// Concurrency and ordering
// ---------------------------------------------------------------------------------------------

namespace {
// Two tasks that each arrive and then wait (bounded) until both arrived: they can only both
// finish with "met" if they ran at the same time. The bound only keeps a broken library from
// hanging the test; the verdict never depends on it.
std::atomic<int> g_arrived{0};
std::atomic<int> g_met{0};
int32_t rendezvous(const qd_host_kernel_info *, void *const *) {
    g_arrived.fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (g_arrived.load() < 2 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
    if (g_arrived.load() >= 2) g_met.fetch_add(1);
    return 0;
}
}  // namespace

TEST_P(GraphTest, Cpu_ReplayedBranchesRunConcurrently) {
    QDT_REQUIRE_CPU();
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &rendezvous, "rendezvous", &k));
    qd_stream s = new_stream();
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_task t[2] = {QD_TASK_INIT, QD_TASK_INIT};
    t[0].kernel = t[1].kernel = k;
    t[1].group = 1;
    ASSERT_QD_OK(qd_launch_parallel(s, t, 2));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    for (int i = 0; i < 20; ++i) {
        g_arrived = 0;
        g_met = 0;
        ASSERT_QD_OK(qd_graph_launch(g, s));
        ASSERT_QD_OK(qd_stream_synchronize(s));
        ASSERT_EQ(g_met.load(), 2) << "the two branches of replay " << i << " did not overlap";
    }
    // The same with forked streams.
    qd_graph g2 = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch0(kids[0], k));
    ASSERT_QD_OK(launch0(kids[1], k));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g2));
    g_arrived = 0;
    g_met = 0;
    ASSERT_QD_OK(qd_graph_launch(g2, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(g_met.load(), 2) << "the forked branches of the replay did not overlap";
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_graph_destroy(g2));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(GraphTest, Replay_OrderedAfterEarlierWork_AndBeforeLaterWork) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 64), out = alloc(s, 4);
    std::atomic<int> calls{0};
    fill(s, buf, 0);
    qd_graph g = capture_step(s, buf, 2, &calls);
    for (int trial = 0; trial < 20; ++trial) {
        fill(s, buf, 0);
        Gate gate;
        ASSERT_QD_OK(gate.enqueue(s));
        // Earlier work on s, held back by the gate: the seed the graph reads.
        ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), buf + 15 * 4, 100));
        ASSERT_QD_OK(qd_graph_launch(g, s));
        // Later work: reads what the last branch wrote (word 10 = word 9 + 1).
        ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), out, buf + 10 * 4, 1000));
        EXPECT_EQ(calls.load(), trial) << "the replay's callback ran before earlier work";
        gate.open();
        const std::vector<uint32_t> w = words(s, buf);
        EXPECT_EQ(w[0], 102u) << "the replay did not see the earlier write";
        EXPECT_EQ(w[10], 102u + 10 + 3 + 2 + 1);
        EXPECT_EQ(read_value<uint32_t>(s, out), w[10] + 1000) << "later work ran before a branch";
        EXPECT_EQ(calls.load(), trial + 1);
    }
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, Destroy_WithReplaysInFlight_TheyComplete) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 64);
    std::atomic<int> calls{0};
    fill(s, buf, 1);
    qd_graph g = capture_step(s, buf, 1, &calls);
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    for (int i = 0; i < 3; ++i) ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_launch(g, s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_destroy(g));
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(calls.load(), 3);
    EXPECT_EQ(words(s, buf)[0], 2u);
    EXPECT_EQ(get_stats(ctx_).live_graphs, 0u);
}

TEST_P(GraphTest, TwoThreadsCaptureAtOnce) {
    QDT_REQUIRE_KERNELS();
    qd_stream s[2] = {new_stream(), new_stream()};
    uint64_t buf[2] = {alloc(s[0], 64), alloc(s[1], 64)};
    std::atomic<int> calls[2];
    calls[0] = calls[1] = 0;
    Barrier barrier(2);
    qd_graph g[2] = {0, 0};
    std::vector<uint32_t> want[2];
    for (int t = 0; t < 2; ++t) {
        fill(s[t], buf[t], 3);
        ASSERT_QD_OK(step(s[t], buf[t], 4 + t, &calls[t]));
        want[t] = words(s[t], buf[t]);
        fill(s[t], buf[t], 3);
    }
    std::thread threads[2];
    qd_status st[2] = {QD_ERROR_INTERNAL, QD_ERROR_INTERNAL};
    for (int t = 0; t < 2; ++t)
        threads[t] = std::thread([&, t] {
            barrier.arrive_and_wait();
            st[t] = qd_stream_begin_capture(s[t]);
            barrier.arrive_and_wait();  // both capture now
            for (int r = 0; r < 5 && st[t] == QD_SUCCESS; ++r)
                st[t] = r == 0 ? step(s[t], buf[t], 4 + t, &calls[t]) : QD_SUCCESS;
            barrier.arrive_and_wait();
            if (st[t] == QD_SUCCESS) st[t] = qd_stream_end_capture(s[t], &g[t]);
        });
    for (auto &th : threads) th.join();
    for (int t = 0; t < 2; ++t) {
        ASSERT_QD_OK(st[t]) << "thread " << t;
        ASSERT_QD_OK(qd_graph_launch(g[t], s[t]));
        EXPECT_EQ(words(s[t], buf[t]), want[t]) << "thread " << t;
        EXPECT_QD_OK(qd_graph_destroy(g[t]));
    }
}

// ---------------------------------------------------------------------------------------------
// Leases and misuse
// ---------------------------------------------------------------------------------------------

TEST_P(GraphTest, Leases_StayWithTheCaptureUntilItEnds) {
    QDT_REQUIRE_KERNELS();
    qd_context c = small_pool(2);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_release(kids[0]))
        << "a joined child's handle is stale";
    // Both streams are still the capture's: another holder cannot lease them.
    EXPECT_EQ(get_stats(c).stream_pool_leased, 2u);
    qd_stream other = 0;
    EXPECT_QD_ERR(QD_ERROR_POOL_EXHAUSTED, "pool", qd_stream_acquire(c, &other));
    // A parallel launch inside the same capture reuses them (repeated: no exhaustion).
    qd_task t[2] = {QD_TASK_INIT, QD_TASK_INIT};
    t[0].kernel = t[1].kernel = 0;
    qd_kernel k = 0;
    if (is_cpu()) {
        ASSERT_QD_OK(qd_kernel_from_host_fn(
            c, [](const qd_host_kernel_info *, void *const *) -> int32_t { return 0; }, "nop", &k));
        t[0].kernel = t[1].kernel = k;
        t[1].group = 1;
        for (int i = 0; i < 10; ++i) ASSERT_QD_OK(qd_launch_parallel(s, t, 2));
    }
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_EQ(get_stats(c).stream_pool_leased, 0u) << "the capture's leases went back to the pool";
    ASSERT_QD_OK(qd_stream_acquire(c, &other));
    ASSERT_QD_OK(qd_stream_release(other));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(get_stats(c).stream_pool_leased, 0u) << "a replay's leases went back to the pool";
    // A replay with the pool fully leased still runs (every branch on the launch stream).
    qd_stream l[2];
    ASSERT_QD_OK(qd_stream_acquire(c, &l[0]));
    ASSERT_QD_OK(qd_stream_acquire(c, &l[1]));
    EXPECT_QD_OK(qd_graph_launch(g, s));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_stream_release(l[0]));
    EXPECT_QD_OK(qd_stream_release(l[1]));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, Leases_AnotherThreadNeverGetsAStreamOfTheCapture) {
    // The redesign of qd_launch_parallel and qd_stream_join under capture: their streams stay
    // with the capture, so a lease another thread takes meanwhile is never a capturing stream
    // (its work runs at once, and it may synchronize).
    QDT_REQUIRE_KERNELS();
    qd_context c = small_pool(4);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    qd_kernel k = 0;
    if (is_cpu()) {
        ASSERT_QD_OK(qd_kernel_from_host_fn(
            c, [](const qd_host_kernel_info *, void *const *) -> int32_t { return 0; }, "nop", &k));
    }
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    if (k) {
        qd_task t[2] = {QD_TASK_INIT, QD_TASK_INIT};
        t[0].kernel = t[1].kernel = k;
        t[1].group = 1;
        ASSERT_QD_OK(qd_launch_parallel(s, t, 2));
    }
    std::atomic<int> ran{0};
    qd_status results[4] = {QD_ERROR_INTERNAL, QD_ERROR_INTERNAL, QD_ERROR_INTERNAL,
                            QD_ERROR_INTERNAL};
    std::thread other([&] {
        qd_stream l[2] = {0, 0};
        results[0] = qd_stream_acquire(c, &l[0]);
        results[1] = qd_stream_acquire(c, &l[1]);
        qd_stream third = 0;
        results[2] = qd_stream_acquire(c, &third);  // the capture holds the other two
        qd_status st = QD_SUCCESS;
        for (qd_stream x : l) {
            if (!x) continue;
            if (st == QD_SUCCESS)
                st = qd_launch_host_fn(
                    x, [](void *u) { static_cast<std::atomic<int> *>(u)->fetch_add(1); }, &ran);
            if (st == QD_SUCCESS) st = qd_stream_synchronize(x);
            if (st == QD_SUCCESS) st = qd_stream_release(x);
        }
        results[3] = st;
    });
    other.join();
    EXPECT_QD_OK(results[0]);
    EXPECT_QD_OK(results[1]);
    EXPECT_EQ(results[2], QD_ERROR_POOL_EXHAUSTED);
    EXPECT_QD_OK(results[3]) << "a lease of another thread was a capturing stream";
    EXPECT_EQ(ran.load(), 2) << "work on another thread's lease was recorded instead of run";
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_EQ(get_stats(c).stream_pool_leased, 0u);
    EXPECT_QD_OK(qd_graph_launch(g, s));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, Misuse_EveryStatus) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 64);
    qd_graph g = 0;
    // Handles and arguments.
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_begin_capture(0));
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_stream_end_capture(s, nullptr));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_end_capture(0, &g));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_launch(0, s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_launch(s, s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_destroy(0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_destroy(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "not capturing", qd_stream_end_capture(s, &g));
    EXPECT_EQ(g, 0u);

    // Inside a capture.
    qd_event before = new_event();
    ASSERT_QD_OK(qd_event_record(s, before));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "already capturing", qd_stream_begin_capture(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing", qd_stream_synchronize(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing", qd_stream_query(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing", qd_stream_destroy(s));
    // A block allocated inside is the graph's; one allocated outside is not freed inside.
    // (A native capture on a driver without graph memory nodes refuses the allocation.)
    uint64_t addr = 0;
    const qd_status allocated = qd_mem_alloc_async(s, 64, &addr);
    if (allocated == QD_SUCCESS || is_cpu()) {
        EXPECT_EQ(allocated, QD_SUCCESS) << qd_last_error_message();
        EXPECT_QD_OK(qd_mem_free_async(s, addr));
    } else {
        EXPECT_EQ(allocated, QD_ERROR_NOT_SUPPORTED) << qd_last_error_message();
    }
    const uint64_t live = get_stats(ctx_).live_allocations;
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "outside the capture", qd_mem_free_async(s, buf));
    // The refused free leaves the block the caller's: still registered, so the context's
    // destroy frees it (it once leaked, found by LeakSanitizer) and a later free is accepted.
    EXPECT_EQ(get_stats(ctx_).live_allocations, live) << "the refused free unregistered the block";
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "outside the capture",
                  qd_stream_wait_event(s, before));
    qd_event never = new_event();
    EXPECT_QD_OK(qd_stream_wait_event(s, never)) << "a wait on a never-recorded event is a no-op";
    // A user event recorded inside: a graph-internal dependency.
    qd_event inside = new_event();
    ASSERT_QD_OK(qd_event_record(s, inside));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capture", qd_event_query(inside));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capture", qd_event_synchronize(inside));
    // Another capture may not wait on it.
    qd_stream s2 = new_stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "another capture", qd_stream_wait_event(s2, inside));
    qd_graph g2 = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s2, &g2));
    // A fork not joined back: end names the child, and the capture stays open.
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[1], kernels_->add_value(), buf, buf + 4, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "joined", qd_stream_begin_capture(kids[0]));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "origin", qd_stream_end_capture(kids[0], &g));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing", qd_stream_release(kids[0]));
    // A graph launched on a capturing stream is recorded into the capture (an empty one adds
    // nothing; graph_child_test.cpp).
    EXPECT_QD_OK(qd_graph_launch(g2, s));
    EXPECT_QD_OK(qd_graph_launch(g2, kids[0]));
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)kids[0]);
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, hex, qd_stream_end_capture(s, &g));
    EXPECT_EQ(g, 0u);
    ASSERT_QD_OK(qd_stream_join(s, kids, 1));
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)kids[1]);
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, hex, qd_stream_end_capture(s, &g));
    // Joined back by a record there and a wait on the origin, without a join: the lease stays
    // the caller's.
    qd_event back = new_event();
    ASSERT_QD_OK(qd_event_record(kids[1], back));
    ASSERT_QD_OK(qd_stream_wait_event(s, back));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_QD_OK(qd_stream_query(kids[1])) << "the child left the capture";
    EXPECT_QD_OK(qd_stream_release(kids[1]));
    EXPECT_QD_OK(qd_event_query(inside));
    // The capture was usable throughout: its replay does what was captured.
    uint32_t init[2] = {0, 41};
    ASSERT_QD_OK(qd_memcpy_async(s, buf, (uint64_t)(uintptr_t)init, sizeof init));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(read_value<uint32_t>(s, buf), 42u);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_graph_destroy(g2));
}

TEST_P(GraphTest, ContextDestroy_WithAnOpenCaptureAndLiveGraphs) {
    QDT_REQUIRE_KERNELS();
    qd_context c = small_pool(4);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &s));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    extra_contexts_.erase(std::find(extra_contexts_.begin(), extra_contexts_.end(), c));
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_launch(g, s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_destroy(g));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_end_capture(s, &g));
}

TEST_P(GraphTest, Leaks_CaptureDestroyCycles_CountersBackToZero) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 64);
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const qd_context_stats before = get_stats(ctx_);
    std::atomic<int> calls{0};
    const uint64_t n = scaled(10000, 200);
    for (uint64_t i = 0; i < n; ++i) {
        qd_graph g = capture_step(s, buf, uint32_t(i), &calls);
        ASSERT_NE(g, 0u);
        if (i % 100 == 0) {
            ASSERT_QD_OK(qd_graph_launch(g, s));
        }
        ASSERT_QD_OK(qd_graph_destroy(g));
    }
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const qd_context_stats after = get_stats(ctx_);
    EXPECT_EQ(after.live_graphs, 0u);
    EXPECT_EQ(after.stream_pool_leased, 0u);
    EXPECT_EQ(after.live_streams, before.live_streams);
    EXPECT_EQ(after.live_events, before.live_events);
    EXPECT_EQ(after.live_kernels, before.live_kernels);
    EXPECT_EQ(after.live_allocations, before.live_allocations);
    EXPECT_LE(after.stream_pool_created, 8u);
    EXPECT_LE(after.event_pool_created, before.event_pool_created + 16u);
}

// ---------------------------------------------------------------------------------------------
// Memory inside a graph: qd_mem_alloc_async and qd_mem_free_async on a capturing stream
// ---------------------------------------------------------------------------------------------

// Skips (visibly) where a native capture cannot allocate (the driver's minimum version).
#define QDT_REQUIRE_GRAPH_MEMORY()                                                                 \
    do {                                                                                           \
        std::string why_;                                                                          \
        if (!graph_memory(&why_)) GTEST_SKIP() << why_;                                            \
    } while (0)

// The captured step of the memory tests: a block made inside the graph, set, computed into
// from `in`, copied out to `out`, and freed inside the graph. *block receives its address.
static qd_status alloc_step(qd_stream s, qd_kernel add_value, uint64_t in, uint64_t out,
                            uint64_t *block) {
    qd_status st = qd_mem_alloc_async(s, 64, block);
    if (st == QD_SUCCESS) st = qd_memset_async(s, *block, 0x5a, 64);
    if (st == QD_SUCCESS) st = launch_add_value(s, add_value, *block, in, 1);  // word 0 = in + 1
    if (st == QD_SUCCESS) st = qd_memcpy_async(s, out, *block, 64);
    if (st == QD_SUCCESS) st = qd_mem_free_async(s, *block);
    return st;
}

TEST_P(GraphTest, GraphMemory_AllocSetCopyOutFree_Replayed3Times_DataRightEachTime) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_stream s = new_stream(), other = new_stream();
    const uint64_t in = alloc(s, 64), out = alloc(s, 64);
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const qd_context_stats before = get_stats(ctx_);
    uint64_t block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(alloc_step(s, kernels_->add_value(), in, out, &block));
    ASSERT_NE(block, 0u);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    // The graph's block is the graph's: not one of the caller's allocations (qd.h).
    EXPECT_EQ(get_stats(ctx_).live_allocations, before.live_allocations);
    EXPECT_EQ(get_stats(ctx_).bytes_allocated, before.bytes_allocated);
    for (uint32_t i = 0; i < 3; ++i) {
        // Replays alternate between two streams: each runs after the one before.
        qd_stream on = i % 2 ? other : s;
        const uint32_t value = 100 * (i + 1);
        ASSERT_QD_OK(qd_memcpy_async(on, in, (uint64_t)(uintptr_t)&value, sizeof value));
        ASSERT_QD_OK(qd_memset_async(on, out, 0, 64));
        ASSERT_QD_OK(qd_graph_launch(g, on));
        const std::vector<uint8_t> got = read_back(on, out, 64);
        uint32_t word0 = 0;
        std::memcpy(&word0, got.data(), 4);
        EXPECT_EQ(word0, value + 1) << "replay " << i;
        for (size_t b = 4; b < 64; ++b) ASSERT_EQ(got[b], 0x5a) << "replay " << i << " byte " << b;
    }
    EXPECT_QD_OK(qd_graph_destroy(g));
    ASSERT_QD_OK(qd_context_synchronize(ctx_));
    EXPECT_EQ(get_stats(ctx_).live_allocations, before.live_allocations);
}

TEST_P(GraphTest, GraphMemory_EndCaptureWithAnUnfreedBlock_IsRefused_ThenFreeAndEndWork) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_stream s = new_stream();
    const uint64_t out = alloc(s, 64);
    uint64_t block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &block));
    ASSERT_QD_OK(qd_memset_async(s, block, 7, 64));
    qd_graph g = 0;
    char hex[32];
    snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)block);
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, hex, qd_stream_end_capture(s, &g));
    EXPECT_EQ(g, 0u);
    // The capture stays open and usable.
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing", qd_stream_synchronize(s));
    ASSERT_QD_OK(qd_memcpy_async(s, out, block, 64));
    ASSERT_QD_OK(qd_mem_free_async(s, block));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_NE(g, 0u);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    const std::vector<uint8_t> got = read_back(s, out, 64);
    EXPECT_EQ(got, std::vector<uint8_t>(64, 7));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, GraphMemory_AGraphBlockFreedOutsideItsCapture_IsRefused) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_stream s = new_stream(), s2 = new_stream();
    const uint64_t in = alloc(s, 64), out = alloc(s, 64);
    uint64_t block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(alloc_step(s, kernels_->add_value(), in, out, &block));
    // Freed twice inside the capture.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "already freed", qd_mem_free_async(s, block));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    // Outside every capture, and inside another one: the block is the graph's.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "graph", qd_mem_free_async(s, block));
    ASSERT_QD_OK(qd_stream_begin_capture(s2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "another graph", qd_mem_free_async(s2, block));
    // A block of the caller's is not freed inside a capture either; it stays the caller's.
    const uint64_t live = get_stats(ctx_).live_allocations;
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "outside the capture", qd_mem_free_async(s2, in));
    EXPECT_EQ(get_stats(ctx_).live_allocations, live);
    qd_graph g2 = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s2, &g2));
    // The refusals changed nothing: the graph replays as captured.
    const uint32_t value = 9;
    ASSERT_QD_OK(qd_memcpy_async(s, in, (uint64_t)(uintptr_t)&value, sizeof value));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(read_value<uint32_t>(s, out), 10u);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_graph_destroy(g2));
    // Once the graph is gone its block is nobody's.
    EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_mem_free_async(s, block));
}

TEST_P(GraphTest, GraphMemory_MemcpyPastAGraphBlock_IsRefusedAtCapture) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_stream s = new_stream();
    const uint64_t out = alloc(s, 128);
    uint64_t block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &block));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "runs past", qd_memcpy_async(s, out, block, 65));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "runs past", qd_memset_async(s, block + 8, 1, 57));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end", qd_memset_async(s, block + 64, 1, 1));
    ASSERT_QD_OK(qd_memset_async(s, block, 3, 64));
    ASSERT_QD_OK(qd_memcpy_async(s, out, block, 64));
    ASSERT_QD_OK(qd_mem_free_async(s, block));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_memset_async(s, out, 0, 128));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    const std::vector<uint8_t> got = read_back(s, out, 128);
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 64), std::vector<uint8_t>(64, 3));
    EXPECT_EQ(std::vector<uint8_t>(got.begin() + 64, got.end()), std::vector<uint8_t>(64, 0))
        << "a refused call was captured";
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphTest, GraphMemory_DestroyWhileAReplayIsQueued_TheReplayStillRuns) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_stream s = new_stream();
    const uint64_t in = alloc(s, 64), out = alloc(s, 64);
    const uint32_t value = 41;
    ASSERT_QD_OK(qd_memcpy_async(s, in, (uint64_t)(uintptr_t)&value, sizeof value));
    ASSERT_QD_OK(qd_memset_async(s, out, 0, 64));
    uint64_t block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(alloc_step(s, kernels_->add_value(), in, out, &block));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_QD_OK(qd_graph_destroy(g));  // the replays keep the block until they are done
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(read_value<uint32_t>(s, out), 42u);
    EXPECT_EQ(get_stats(ctx_).live_graphs, 0u);
}

TEST_P(GraphTest, GraphMemory_ContextDestroy_WithALiveGraphThatOwnsABlock) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_context c = small_pool(4);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &s));
    uint64_t block = 0, open_block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &block));
    ASSERT_QD_OK(qd_memset_async(s, block, 1, 64));
    ASSERT_QD_OK(qd_mem_free_async(s, block));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    // And a capture left open with a block in it.
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &open_block));
    extra_contexts_.erase(std::find(extra_contexts_.begin(), extra_contexts_.end(), c));
    EXPECT_QD_OK(qd_context_destroy(c));  // frees both (LeakSanitizer sees it)
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_destroy(g));
}

TEST_P(GraphTest, GraphMemory_Update_AllocationSizesArePartOfTheShape) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_GRAPH_MEMORY();
    qd_stream s = new_stream();
    const uint64_t out = alloc(s, 128);
    auto capture = [&](uint64_t bytes, uint8_t value) {
        uint64_t block = 0;
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        EXPECT_QD_OK(qd_mem_alloc_async(s, bytes, &block));
        EXPECT_QD_OK(qd_memset_async(s, block, value, 64));
        EXPECT_QD_OK(qd_memcpy_async(s, out, block, 64));
        EXPECT_QD_OK(qd_mem_free_async(s, block));
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        return g;
    };
    qd_graph g = capture(64, 1), bigger = capture(128, 2), same = capture(64, 3);
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "allocation", qd_graph_update(g, bigger));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(read_back(s, out, 64), std::vector<uint8_t>(64, 1)) << "a refused update changed it";
    const qd_status st = qd_graph_update(g, same);
    if (st == QD_SUCCESS) {
        ASSERT_QD_OK(qd_graph_launch(g, s));
        EXPECT_EQ(read_back(s, out, 64), std::vector<uint8_t>(64, 3));
    } else {
        // A native driver graph's blocks live in its own launches only (qd.h).
        EXPECT_FALSE(is_cpu()) << qd_last_error_message();
        EXPECT_EQ(st, QD_ERROR_INVALID_OPERATION);
        EXPECT_NE(std::string(qd_last_error_message()).find("native"), std::string::npos);
    }
    for (qd_graph x : {g, bigger, same}) EXPECT_QD_OK(qd_graph_destroy(x));
}

QDT_INSTANTIATE_BACKENDS(GraphTest);
