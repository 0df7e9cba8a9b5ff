// The stream pool: qd_stream_acquire, qd_stream_release, qd_stream_fork, qd_stream_join and
// qd_launch_parallel; success, every documented status, pool statistics, and the fan-out
// ordering figure (producer delayed on the parent, 1000 trials, 0 wrong results).
#include <algorithm>
#include <set>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

class PoolTest : public BackendTest {
  protected:
    // A context with a small pool (the fixture's ctx_ has 8).
    qd_context small_pool(uint32_t size) {
        qd_context_desc desc = make_desc(backend(), size, 4);
        qd_context c = 0;
        EXPECT_QD_OK(qd_context_create(&desc, &c));
        extra_contexts_.push_back(c);
        return c;
    }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// acquire / release
// ---------------------------------------------------------------------------------------------

TEST_P(PoolTest, Acquire_LeasesAreExclusiveUntilThePoolIsExhausted) {
    const uint32_t N = 4;
    qd_context c = small_pool(N);
    std::vector<qd_stream> leases(N);
    for (qd_stream &l : leases) {
        ASSERT_QD_OK(qd_stream_acquire(c, &l));
    }
    std::set<qd_stream> distinct(leases.begin(), leases.end());
    EXPECT_EQ(distinct.size(), N);
    qd_stream def = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &def));
    EXPECT_EQ(distinct.count(def), 0u) << "the pool handed out the default stream";
    qd_stream extra = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_POOL_EXHAUSTED, "pool", qd_stream_acquire(c, &extra));
    EXPECT_EQ(extra, 0x5555u);
    qd_context_stats st = get_stats(c);
    EXPECT_EQ(st.stream_pool_leased, N);
    EXPECT_EQ(st.stream_pool_capacity, N);
    EXPECT_LE(st.stream_pool_created, N);
    EXPECT_EQ(st.stream_pool_hits + st.stream_pool_misses, N);
    // Release one: its handle is stale at once; the next lease is a new handle value.
    qd_stream released = leases[1];
    ASSERT_QD_OK(qd_stream_release(released));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_query(released));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_release(released));
    EXPECT_EQ(get_stats(c).stream_pool_leased, N - 1);
    qd_stream again = 0;
    ASSERT_QD_OK(qd_stream_acquire(c, &again));
    EXPECT_EQ(distinct.count(again), 0u) << "a re-lease reused an old handle value";
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_query(released))
        << "the stale handle aliases the new lease";
    st = get_stats(c);
    EXPECT_EQ(st.stream_pool_hits + st.stream_pool_misses, N + 1);
    EXPECT_GE(st.stream_pool_hits, 1u) << "the re-lease had to reuse the released stream";
    EXPECT_LE(st.stream_pool_created, N);
    EXPECT_LE(st.stream_pool_misses, st.stream_pool_created) << "every miss creates a stream";
    EXPECT_QD_OK(qd_stream_release(again));
    leases[1] = 0;
    for (qd_stream l : leases)
        if (l) {
            EXPECT_QD_OK(qd_stream_release(l));
        }
    EXPECT_EQ(get_stats(c).stream_pool_leased, 0u);
}

TEST_P(PoolTest, Acquire_LeasesAreDistinctStreams_WorkOnOneDoesNotWaitForAnother) {
    // Exclusive leases are different queues: a lease blocked in a gate does not block the
    // (device) work of any other lease, as an aliased stream would.
    const uint32_t N = 4;
    qd_context c = small_pool(N);
    std::vector<qd_stream> leases(N);
    for (qd_stream &l : leases) ASSERT_QD_OK(qd_stream_acquire(c, &l));
    std::vector<uint64_t> bufs(N);
    for (uint32_t i = 1; i < N; ++i) {
        ASSERT_QD_OK(qd_mem_alloc_async(leases[i], 64, &bufs[i]));
        ASSERT_QD_OK(qd_stream_synchronize(leases[i]));
    }
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(leases[0]));
    for (uint32_t i = 1; i < N; ++i) ASSERT_QD_OK(qd_memset_async(leases[i], bufs[i], 7, 64));
    for (uint32_t i = 1; i < N; ++i)
        EXPECT_TRUE(wait_idle(leases[i], std::chrono::milliseconds(5000)))
            << "lease " << i << " shares a stream with lease 0";
    gate.open();
    for (uint32_t i = 1; i < N; ++i) EXPECT_QD_OK(qd_mem_free_async(leases[i], bufs[i]));
    for (qd_stream l : leases) EXPECT_QD_OK(qd_stream_release(l));
}

TEST_P(PoolTest, Acquire_FromManyThreads_NeverExceedsThePoolAndAllReturn) {
    const uint32_t N = 4;
    qd_context c = small_pool(N);
    std::atomic<int> held{0}, max_held{0}, errors{0}, exhausted{0};
    std::vector<std::thread> threads;
    const int rounds = (int)scaled(500, 20);
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            for (int r = 0; r < rounds; ++r) {
                qd_stream l = 0;
                qd_status st = qd_stream_acquire(c, &l);
                if (st == QD_ERROR_POOL_EXHAUSTED) {
                    ++exhausted;
                    continue;
                }
                if (st != QD_SUCCESS) {
                    ++errors;
                    continue;
                }
                int now = ++held;
                int prev = max_held.load();
                while (now > prev && !max_held.compare_exchange_weak(prev, now)) {
                }
                --held;
                if (qd_stream_release(l) != QD_SUCCESS) ++errors;
            }
        });
    }
    for (std::thread &th : threads) th.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_LE(max_held.load(), (int)N);
    qd_context_stats st = get_stats(c);
    EXPECT_EQ(st.stream_pool_leased, 0u);
    EXPECT_LE(st.stream_pool_created, N);
    EXPECT_EQ(st.stream_pool_hits + st.stream_pool_misses,
              (uint64_t)(8 * rounds - exhausted.load()));
}

TEST_P(PoolTest, Acquire_ReleaseCycle_NeverReturnsAnOldHandleAndReusesTheStream) {
    qd_context c = small_pool(1);
    std::set<qd_stream> seen;
    for (int i = 0; i < 100; ++i) {
        qd_stream l = 0;
        ASSERT_QD_OK(qd_stream_acquire(c, &l));
        ASSERT_TRUE(seen.insert(l).second) << "handle value repeated at iteration " << i;
        ASSERT_QD_OK(qd_stream_release(l));
    }
    qd_context_stats st = get_stats(c);
    EXPECT_EQ(st.stream_pool_created, 1u);
    EXPECT_LE(st.stream_pool_misses, 1u);
    EXPECT_EQ(st.stream_pool_hits + st.stream_pool_misses, 100u);
    EXPECT_EQ(st.stream_pool_leased, 0u);
}

TEST_P(PoolTest, Acquire_LeaseStillRunningPreviousWork_QueuesAfterIt) {
    qd_context c = small_pool(1);
    qd_stream l = 0;
    ASSERT_QD_OK(qd_stream_acquire(c, &l));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(l));
    ASSERT_QD_OK(qd_stream_release(l));
    EXPECT_FALSE(gate.done()) << "release waited for the work";
    qd_stream l2 = 0;
    ASSERT_QD_OK(qd_stream_acquire(c, &l2));
    Flag f;
    ASSERT_QD_OK(f.enqueue(l2));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(f.is_set()) << "new holder's work ran before the old holder's";
    gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(l2));
    EXPECT_TRUE(f.is_set());
    EXPECT_QD_OK(qd_stream_release(l2));
}

TEST_P(PoolTest, Acquire_NullOutOrBadContext_AreErrors) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_stream_acquire(ctx_, nullptr));
    qd_stream l = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_stream_acquire(0, &l));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_stream_acquire(default_stream_, &l));
    EXPECT_EQ(l, 0x5555u);
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

TEST_P(PoolTest, Release_NonLease_IsInvalidOperation) {
    qd_stream owned = new_stream();
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "lease|pool", qd_stream_release(owned));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "lease|pool|default",
                  qd_stream_release(default_stream_));
    EXPECT_QD_OK(qd_stream_query(owned));
    EXPECT_QD_OK(qd_stream_destroy(owned));
}

TEST_P(PoolTest, Release_BadHandles_AreInvalidHandle) {
    qd_event e = new_event();
    for (qd_stream x : {(qd_stream)0, (qd_stream)e, (qd_stream)ctx_, kAllOnes})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_release(x));
    EXPECT_QD_OK(qd_event_destroy(e));
}

// ---------------------------------------------------------------------------------------------
// fork / join
// ---------------------------------------------------------------------------------------------

TEST_P(PoolTest, Fork_ArgumentErrors_LeaveNothingLeased) {
    qd_stream kids[4] = {0x5555, 0x5555, 0x5555, 0x5555};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "children|null",
                  qd_stream_fork(default_stream_, 2, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "n|count|0|zero",
                  qd_stream_fork(default_stream_, 0, kids));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|parent", qd_stream_fork(0, 2, kids));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|parent", qd_stream_fork(ctx_, 2, kids));
    qd_stream dead = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(dead));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|parent", qd_stream_fork(dead, 2, kids));
    for (qd_stream k : kids) {
        EXPECT_EQ(k, 0x5555u);
    }
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

TEST_P(PoolTest, Fork_MoreThanFree_IsPoolExhaustedAllOrNothing) {
    qd_context c = small_pool(4);
    qd_stream parent = 0, held = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &parent));
    ASSERT_QD_OK(qd_stream_acquire(c, &held));
    qd_stream kids[4] = {0x5555, 0x5555, 0x5555, 0x5555};
    EXPECT_QD_ERR(QD_ERROR_POOL_EXHAUSTED, "pool", qd_stream_fork(parent, 4, kids));
    for (qd_stream k : kids) {
        EXPECT_EQ(k, 0x5555u);
    }
    EXPECT_EQ(get_stats(c).stream_pool_leased, 1u) << "a failed fork kept leases";
    ASSERT_QD_OK(qd_stream_fork(parent, 3, kids));
    EXPECT_EQ(get_stats(c).stream_pool_leased, 4u);
    EXPECT_QD(QD_ERROR_POOL_EXHAUSTED, qd_stream_fork(parent, 1, kids + 3));
    ASSERT_QD_OK(qd_stream_join(parent, kids, 3));
    EXPECT_EQ(get_stats(c).stream_pool_leased, 1u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_query(kids[i]));
    }
    EXPECT_QD_OK(qd_stream_release(held));
}

TEST_P(PoolTest, Fork_MoreThanThePoolCanEverLease_IsPoolExhaustedNotOutOfMemory) {
    // n is checked against the pool's bound before anything is allocated for n children (a
    // fork of UINT32_MAX once reserved room for them and failed with QD_ERROR_OUT_OF_MEMORY).
    qd_context c = small_pool(4);
    qd_stream parent = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &parent));
    qd_stream kids[5] = {0x5555, 0x5555, 0x5555, 0x5555, 0x5555};
    EXPECT_QD_ERR(QD_ERROR_POOL_EXHAUSTED, "pool", qd_stream_fork(parent, UINT32_MAX, kids));
    EXPECT_QD_ERR(QD_ERROR_POOL_EXHAUSTED, "pool", qd_stream_fork(parent, 5, kids));
    for (qd_stream k : kids) {
        EXPECT_EQ(k, 0x5555u);
    }
    EXPECT_EQ(get_stats(c).stream_pool_leased, 0u);
    ASSERT_QD_OK(qd_stream_fork(parent, 4, kids)) << "the whole pool is still one fork";
    ASSERT_QD_OK(qd_stream_join(parent, kids, 4));
}

TEST_P(PoolTest, Fork_ChildrenWaitForTheParentAndJoinMakesParentWait) {
    qd_stream parent = new_stream();
    qd_stream kids[3];
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(parent));
    ASSERT_QD_OK(qd_stream_fork(parent, 3, kids));
    Flag kid_flags[3];
    for (int i = 0; i < 3; ++i) {
        ASSERT_QD_OK(kid_flags[i].enqueue(kids[i]));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (Flag &f : kid_flags) {
        EXPECT_FALSE(f.is_set()) << "a child ran before the parent's work";
    }
    gate.open();
    // Join: parent waits for the children's (delayed) work.
    Gate kid_gate;
    ASSERT_QD_OK(kid_gate.enqueue(kids[2]));
    ASSERT_QD_OK(qd_stream_join(parent, kids, 3));
    Flag after_join;
    ASSERT_QD_OK(after_join.enqueue(parent));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(after_join.is_set()) << "the parent did not wait for a child";
    kid_gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(parent));
    EXPECT_TRUE(after_join.is_set());
    for (Flag &f : kid_flags) {
        EXPECT_TRUE(f.is_set());
    }
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
    EXPECT_QD_OK(qd_stream_destroy(parent));
}

// Moved from tests/gpu/gpu_test.cpp (the ordering half of Gpu.ForkJoin_ChildrenOverlap_EventTimestamps;
// the overlap measurement stays there): timing events show every child's work completing after
// the parent's fork point and before its join point. Orders only, no durations.
TEST_P(PoolTest, ForkJoin_ChildrenRunBetweenTheForkAndTheJoin_EventTimes) {
    QDT_REQUIRE_KERNELS();
    const uint32_t n = 3;
    qd_stream parent = new_stream();
    qd_event fork_point = new_event(QD_EVENT_TIMING), join_point = new_event(QD_EVENT_TIMING);
    qd_event begin[n], end[n];
    for (uint32_t i = 0; i < n; ++i) {
        begin[i] = new_event(QD_EVENT_TIMING);
        end[i] = new_event(QD_EVENT_TIMING);
    }
    qd_stream kids[n];
    ASSERT_QD_OK(launch_spin(parent, kernels_->spin(), 1000));
    ASSERT_QD_OK(qd_event_record(parent, fork_point));
    ASSERT_QD_OK(qd_stream_fork(parent, n, kids));
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_QD_OK(qd_event_record(kids[i], begin[i]));
        ASSERT_QD_OK(launch_spin(kids[i], kernels_->spin(), 1000));
        ASSERT_QD_OK(qd_event_record(kids[i], end[i]));
    }
    ASSERT_QD_OK(qd_stream_join(parent, kids, n));
    ASSERT_QD_OK(qd_event_record(parent, join_point));
    ASSERT_QD_OK(qd_stream_synchronize(parent));
    for (uint32_t i = 0; i < n; ++i) {
        float after_fork = -1, before_join = -1, own = -1;
        ASSERT_QD_OK(qd_event_elapsed_ms(fork_point, begin[i], &after_fork));
        ASSERT_QD_OK(qd_event_elapsed_ms(end[i], join_point, &before_join));
        ASSERT_QD_OK(qd_event_elapsed_ms(begin[i], end[i], &own));
        EXPECT_GE(after_fork, 0.0f) << "child " << i << " began before the fork point";
        EXPECT_GE(before_join, 0.0f) << "the join point came before child " << i << " ended";
        EXPECT_GE(own, 0.0f) << "child " << i;
        EXPECT_QD_OK(qd_event_destroy(begin[i]));
        EXPECT_QD_OK(qd_event_destroy(end[i]));
    }
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u) << "join returns the children";
    EXPECT_QD_OK(qd_event_destroy(fork_point));
    EXPECT_QD_OK(qd_event_destroy(join_point));
    EXPECT_QD_OK(qd_stream_destroy(parent));
}

TEST_P(PoolTest, Join_ArgumentErrors_ChangeNothing) {
    qd_stream parent = default_stream_;
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(parent, 2, kids));
    qd_stream owned = new_stream();
    qd_context c2 = other_context();
    qd_stream foreign = 0;
    ASSERT_QD_OK(qd_stream_acquire(c2, &foreign));
    qd_stream released = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &released));
    ASSERT_QD_OK(qd_stream_release(released));

    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "children|null", qd_stream_join(parent, nullptr, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "n|count|0|zero", qd_stream_join(parent, kids, 0));
    qd_stream dup[2] = {kids[0], kids[0]};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "twice|duplicate|appear|same",
                  qd_stream_join(parent, dup, 2));
    qd_stream self[2] = {kids[0], kids[1]};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "parent", qd_stream_join(kids[0], self, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|parent", qd_stream_join(0, kids, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|parent", qd_stream_join(ctx_, kids, 2));
    qd_stream with_zero[2] = {kids[0], 0};
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|child", qd_stream_join(parent, with_zero, 2));
    qd_stream with_released[2] = {kids[0], released};
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream|child",
                  qd_stream_join(parent, with_released, 2));
    qd_stream with_foreign[2] = {kids[0], foreign};
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_stream_join(parent, with_foreign, 2));
    qd_stream with_owned[2] = {kids[0], owned};
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "lease|pool", qd_stream_join(parent, with_owned, 2));
    qd_stream with_default[2] = {kids[0], default_stream_};
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "lease|pool|default|parent",
                  qd_stream_join(owned, with_default, 2));

    // Nothing changed: both children are still leased and valid. (Synchronize, not query: on a
    // GPU the fork's wait may still be pending, and a query would then say NOT_READY.)
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 2u);
    EXPECT_QD_OK(qd_stream_synchronize(kids[0]));
    EXPECT_QD_OK(qd_stream_synchronize(kids[1]));
    EXPECT_QD_OK(qd_stream_join(parent, kids, 2));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
    EXPECT_QD_OK(qd_stream_release(foreign));
    EXPECT_QD_OK(qd_stream_destroy(owned));
}

TEST_P(PoolTest, Join_AcquiredLeases_AreAccepted) {
    qd_stream a = 0, b = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &a));
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &b));
    Flag fa, fb;
    ASSERT_QD_OK(enqueue_sleep_us(a, 10000));
    ASSERT_QD_OK(fa.enqueue(a));
    ASSERT_QD_OK(fb.enqueue(b));
    qd_stream kids[2] = {a, b};
    ASSERT_QD_OK(qd_stream_join(default_stream_, kids, 2));
    EXPECT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_TRUE(fa.is_set());
    EXPECT_TRUE(fb.is_set());
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_release(a));
}

TEST_P(PoolTest, ForkJoin_DelayedProducer_1000Trials_ZeroWrongResults) {
    QDT_REQUIRE_KERNELS();
    const int trials = (int)scaled(1000, 20);
    const uint32_t kKids = 4;
    qd_stream parent = new_stream();
    uint64_t produced = alloc(parent, 4);
    uint64_t derived = alloc(parent, 4 * kKids);
    declare_slots(kernels_->add_value(), {0}, {1});  // each child its own word of `derived`
    uint64_t bad = alloc(parent, 4 * (uint64_t)trials);
    ASSERT_QD_OK(qd_memset_async(parent, bad, 0xff, 4 * (uint64_t)trials));
    for (int t = 0; t < trials; ++t) {
        const uint32_t value = 1000u * (uint32_t)t + 17;
        ASSERT_QD_OK(launch_spin_write(parent, kernels_->spin_write(), produced, value,
                                       100 + (t % 4) * 150));
        qd_stream kids[kKids];
        ASSERT_QD_OK(qd_stream_fork(parent, kKids, kids));
        for (uint32_t i = 0; i < kKids; ++i) {
            if ((t + i) % 3 == 0) {
                ASSERT_QD_OK(launch_spin(kids[i], kernels_->spin(), 50));
            }
            ASSERT_QD_OK(
                launch_add_value(kids[i], kernels_->add_value(), derived + 4 * i, produced, i));
        }
        ASSERT_QD_OK(qd_stream_join(parent, kids, kKids));
        ASSERT_QD_OK(launch_count_mismatches(parent, kernels_->count_mismatches(), derived, kKids,
                                             value, bad + 4 * (uint64_t)t));
    }
    std::vector<uint8_t> host = read_back(parent, bad, 4 * (uint64_t)trials);
    int wrong = 0;
    for (int t = 0; t < trials; ++t) {
        uint32_t v;
        memcpy(&v, host.data() + 4 * t, 4);
        wrong += v != 0;
    }
    EXPECT_EQ(wrong, 0) << "wrong results in " << trials << " trials";
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
    for (uint64_t a : {produced, derived, bad}) {
        EXPECT_QD_OK(qd_mem_free_async(parent, a));
    }
    EXPECT_QD_OK(qd_stream_destroy(parent));
}

// ---------------------------------------------------------------------------------------------
// qd_launch_parallel
// ---------------------------------------------------------------------------------------------

TEST_P(PoolTest, LaunchParallel_DelayedProducer_1000Trials_ZeroWrongResults) {
    QDT_REQUIRE_KERNELS();
    const int trials = (int)scaled(1000, 20);
    const uint32_t kGroups = 4;
    qd_stream parent = new_stream();
    uint64_t produced = alloc(parent, 4);
    uint64_t derived = alloc(parent, 4 * kGroups);
    declare_slots(kernels_->add_value(), {0}, {1});  // each group its own word of `derived`
    uint64_t bad = alloc(parent, 4 * (uint64_t)trials);
    ASSERT_QD_OK(qd_memset_async(parent, bad, 0xff, 4 * (uint64_t)trials));
    const qd_context_stats before = get_stats(ctx_);
    for (int t = 0; t < trials; ++t) {
        const uint32_t value = 7u * (uint32_t)t + 3;
        ASSERT_QD_OK(launch_spin_write(parent, kernels_->spin_write(), produced, value,
                                       100 + (t % 4) * 150));
        qd_task tasks[2 * kGroups];
        TaskArgs storage[2 * kGroups];
        uint32_t n = 0;
        for (uint32_t g = 0; g < kGroups; ++g) {
            if ((t + g) % 3 == 0) {
                task_spin(&tasks[n], &storage[n], g, kernels_->spin(), 50);
                ++n;
            }
            task_add_value(&tasks[n], &storage[n], g, kernels_->add_value(), derived + 4 * g,
                           produced, g);
            ++n;
        }
        ASSERT_QD_OK(qd_launch_parallel(parent, tasks, n));
        ASSERT_QD_OK(launch_count_mismatches(parent, kernels_->count_mismatches(), derived, kGroups,
                                             value, bad + 4 * (uint64_t)t));
    }
    std::vector<uint8_t> host = read_back(parent, bad, 4 * (uint64_t)trials);
    int wrong = 0;
    for (int t = 0; t < trials; ++t) {
        uint32_t v;
        memcpy(&v, host.data() + 4 * t, 4);
        wrong += v != 0;
    }
    EXPECT_EQ(wrong, 0) << "wrong results in " << trials << " trials";
    qd_context_stats after = get_stats(ctx_);
    EXPECT_EQ(after.stream_pool_leased, 0u);
    EXPECT_LE(after.stream_pool_created, 8u);
    EXPECT_GE(after.stream_pool_hits + after.stream_pool_misses,
              before.stream_pool_hits + before.stream_pool_misses + (uint64_t)trials)
        << "parallel launches lease from the pool";
    EXPECT_GT(after.event_pool_hits, 0u) << "fork/join events come from the event pool";
    for (uint64_t a : {produced, derived, bad}) {
        EXPECT_QD_OK(qd_mem_free_async(parent, a));
    }
    EXPECT_QD_OK(qd_stream_destroy(parent));
}

TEST_P(PoolTest, LaunchParallel_TasksOfAGroupRunInOrder) {
    QDT_REQUIRE_KERNELS();
    const uint32_t kGroups = 3, kPerGroup = 20;
    qd_stream s = new_stream();
    uint64_t logs = alloc(s, 4 * (1 + kPerGroup) * kGroups);
    declare_slots(kernels_->append_log(), {0});  // each group its own log in `logs`
    ASSERT_QD_OK(qd_memset_async(s, logs, 0, 4 * (1 + kPerGroup) * kGroups));
    std::vector<qd_task> tasks;
    std::vector<TaskArgs> storage(kGroups * kPerGroup * 2);
    size_t si = 0;
    // Interleave the groups in the task array; each group also has spins of varying length.
    for (uint32_t i = 0; i < kPerGroup; ++i) {
        for (uint32_t g = 0; g < kGroups; ++g) {
            qd_task t;
            if ((i + g) % 4 == 0) {
                task_spin(&t, &storage[si++], g, kernels_->spin(), 200);
                tasks.push_back(t);
            }
            task_append_log(&t, &storage[si++], g, kernels_->append_log(),
                            logs + 4 * (1 + kPerGroup) * g, 100 * g + i);
            tasks.push_back(t);
        }
    }
    ASSERT_QD_OK(qd_launch_parallel(s, tasks.data(), (uint32_t)tasks.size()));
    std::vector<uint8_t> host = read_back(s, logs, 4 * (1 + kPerGroup) * kGroups);
    const uint32_t *log = reinterpret_cast<const uint32_t *>(host.data());
    for (uint32_t g = 0; g < kGroups; ++g) {
        const uint32_t *lg = log + (1 + kPerGroup) * g;
        ASSERT_EQ(lg[0], kPerGroup) << "group " << g;
        for (uint32_t i = 0; i < kPerGroup; ++i) {
            EXPECT_EQ(lg[1 + i], 100 * g + i) << "group " << g << " entry " << i;
        }
    }
    EXPECT_QD_OK(qd_mem_free_async(s, logs));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(PoolTest, LaunchParallel_MoreGroupsThanFreeStreams_SharesThemRoundRobin) {
    QDT_REQUIRE_KERNELS();
    // 8-stream pool with 6 held: 10 groups share the 2 free streams, still correct and ordered.
    std::vector<qd_stream> held(6);
    for (qd_stream &h : held) {
        ASSERT_QD_OK(qd_stream_acquire(ctx_, &h));
    }
    const uint32_t kGroups = 10, kPerGroup = 5;
    qd_stream s = new_stream();
    uint64_t logs = alloc(s, 4 * (1 + kPerGroup) * kGroups);
    declare_slots(kernels_->append_log(), {0});  // each group its own log in `logs`
    ASSERT_QD_OK(qd_memset_async(s, logs, 0, 4 * (1 + kPerGroup) * kGroups));
    std::vector<qd_task> tasks(kGroups * kPerGroup);
    std::vector<TaskArgs> storage(kGroups * kPerGroup);
    for (uint32_t i = 0; i < kPerGroup; ++i)
        for (uint32_t g = 0; g < kGroups; ++g)
            task_append_log(&tasks[i * kGroups + g], &storage[i * kGroups + g], g * 3 + 1,
                            kernels_->append_log(), logs + 4 * (1 + kPerGroup) * g, 10 * g + i);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks.data(), (uint32_t)tasks.size()));
    std::vector<uint8_t> host = read_back(s, logs, 4 * (1 + kPerGroup) * kGroups);
    const uint32_t *log = reinterpret_cast<const uint32_t *>(host.data());
    for (uint32_t g = 0; g < kGroups; ++g) {
        const uint32_t *lg = log + (1 + kPerGroup) * g;
        ASSERT_EQ(lg[0], kPerGroup) << "group " << g;
        for (uint32_t i = 0; i < kPerGroup; ++i) {
            EXPECT_EQ(lg[1 + i], 10 * g + i);
        }
    }
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 6u);
    for (qd_stream h : held) {
        EXPECT_QD_OK(qd_stream_release(h));
    }
    EXPECT_QD_OK(qd_mem_free_async(s, logs));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(PoolTest, LaunchParallel_NoFreeStream_IsPoolExhausted) {
    QDT_REQUIRE_KERNELS();
    std::vector<qd_stream> held(8);
    for (qd_stream &h : held) {
        ASSERT_QD_OK(qd_stream_acquire(ctx_, &h));
    }
    qd_task t = QD_TASK_INIT;
    t.kernel = kernels_->noop();
    EXPECT_QD_ERR(QD_ERROR_POOL_EXHAUSTED, "pool", qd_launch_parallel(default_stream_, &t, 1));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 8u);
    for (qd_stream h : held) {
        EXPECT_QD_OK(qd_stream_release(h));
    }
}

TEST_P(PoolTest, LaunchParallel_ZeroTasks_IsANoOp) {
    EXPECT_QD_OK(qd_launch_parallel(default_stream_, nullptr, 0));
    qd_task t = QD_TASK_INIT;
    EXPECT_QD_OK(qd_launch_parallel(default_stream_, &t, 0));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

TEST_P(PoolTest, LaunchParallel_NullTasks_IsInvalidArgument) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks|null",
                  qd_launch_parallel(default_stream_, nullptr, 3));
}

TEST_P(PoolTest, LaunchParallel_AnInvalidTaskInTheMiddle_QueuesNothingAndKeepsNoLease) {
    QDT_REQUIRE_KERNELS();
    qd_context c2 = other_context();
    std::unique_ptr<TestKernels> foreign_kernels = make_test_kernels(backend(), c2, nullptr);
    ASSERT_TRUE(foreign_kernels);
    qd_stream s = new_stream();
    const uint32_t kTasks = 10;
    uint64_t out = alloc(s, 4 * kTasks);
    ASSERT_QD_OK(qd_memset_async(s, out, 0, 4 * kTasks));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    qd_kernel dead = 0;
    if (is_cpu()) {
        ASSERT_QD_OK(qd_kernel_from_host_fn(
            ctx_, [](const qd_host_kernel_info *, void *const *) { return 0; }, "d", &dead));
        ASSERT_QD_OK(qd_kernel_destroy(dead));
    }
    uint8_t big[QD_MAX_ARG_BYTES + 1] = {0};
    struct Case {
        const char *what;
        qd_status status;
        void (*mutate)(qd_task *, qd_kernel dead, qd_kernel foreign, qd_stream s,
                       const uint8_t *big);
    };
    const Case cases[] = {
        {"kernel 0", QD_ERROR_INVALID_HANDLE,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) { t->kernel = 0; }},
        {"kernel is a stream", QD_ERROR_INVALID_HANDLE,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream s, const uint8_t *) { t->kernel = s; }},
        {"destroyed kernel", QD_ERROR_INVALID_HANDLE,
         [](qd_task *t, qd_kernel d, qd_kernel, qd_stream, const uint8_t *) { t->kernel = d; }},
        {"foreign kernel", QD_ERROR_WRONG_CONTEXT,
         [](qd_task *t, qd_kernel, qd_kernel f, qd_stream, const uint8_t *) { t->kernel = f; }},
        {"task struct_size", QD_ERROR_INVALID_ARGUMENT,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) { t->struct_size = 8; }},
        {"config struct_size", QD_ERROR_INVALID_ARGUMENT,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) {
             t->config.struct_size = 4;
         }},
        {"grid 0", QD_ERROR_INVALID_ARGUMENT,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) {
             t->config.grid[1] = 0;
         }},
        {"block 0", QD_ERROR_INVALID_ARGUMENT,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) {
             t->config.block[2] = 0;
         }},
        {"args NULL", QD_ERROR_INVALID_ARGUMENT,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) { t->args = nullptr; }},
        {"too many args", QD_ERROR_INVALID_ARGUMENT,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) {
             t->num_args = QD_MAX_ARGS + 1;
         }},
        {"grid overflow", QD_ERROR_OVERFLOW,
         [](qd_task *t, qd_kernel, qd_kernel, qd_stream, const uint8_t *) {
             t->config.grid[0] = 65536;
             t->config.grid[1] = 65536;
         }},
    };
    for (const Case &c : cases) {
        if (c.status == QD_ERROR_INVALID_HANDLE && std::string(c.what) == "destroyed kernel" &&
            !dead)
            continue;
        SCOPED_TRACE(c.what);
        std::vector<qd_task> tasks(kTasks);
        std::vector<TaskArgs> storage(kTasks);
        for (uint32_t i = 0; i < kTasks; ++i)
            task_append_log(&tasks[i], &storage[i], i % 3, kernels_->write_value(), out + 4 * i,
                            1 + i);
        // too many args: give it a real array so only the count is wrong
        std::vector<qd_arg> many(QD_MAX_ARGS + 1, qd_arg{&storage[5].u32[0], 4});
        if (std::string(c.what) == "too many args") tasks[5].args = many.data();
        c.mutate(&tasks[5], dead, foreign_kernels->noop(), s, big);
        EXPECT_QD(c.status, qd_launch_parallel(s, tasks.data(), kTasks));
        EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u)
            << "a failed parallel launch kept a lease";
    }
    // Too much argument data in one task.
    {
        std::vector<qd_task> tasks(kTasks);
        std::vector<TaskArgs> storage(kTasks);
        for (uint32_t i = 0; i < kTasks; ++i)
            task_append_log(&tasks[i], &storage[i], i % 3, kernels_->write_value(), out + 4 * i,
                            1 + i);
        qd_arg huge[1] = {{big, sizeof big}};
        tasks[7].args = huge;
        tasks[7].num_args = 1;
        EXPECT_QD(QD_ERROR_OVERFLOW, qd_launch_parallel(s, tasks.data(), kTasks));
        qd_arg empty[2] = {{big, 0}, {nullptr, 4}};
        tasks[7].args = empty;
        tasks[7].num_args = 1;
        EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_launch_parallel(s, tasks.data(), kTasks));
        tasks[7].args = empty + 1;
        EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_launch_parallel(s, tasks.data(), kTasks));
    }
    std::vector<uint8_t> host = read_back(s, out, 4 * kTasks);
    for (uint32_t i = 0; i < kTasks; ++i) {
        uint32_t v;
        memcpy(&v, host.data() + 4 * i, 4);
        EXPECT_EQ(v, 0u) << "task " << i << " ran although the launch failed";
    }
    qd_context_stats st = get_stats(ctx_);
    EXPECT_EQ(st.stream_pool_leased, 0u);
    EXPECT_QD_OK(qd_mem_free_async(s, out));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(PoolTest, LaunchParallel_BadStream_IsInvalidHandle) {
    QDT_REQUIRE_KERNELS();
    qd_task t = QD_TASK_INIT;
    t.kernel = kernels_->noop();
    qd_stream dead = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(dead));
    for (qd_stream s : {(qd_stream)0, dead, (qd_stream)ctx_})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_launch_parallel(s, &t, 1));
}

TEST_P(PoolTest, LaunchParallel_ArgumentStorageReusableAtOnce) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint32_t kTasks = 16;
    uint64_t out = alloc(s, 4 * kTasks);
    ASSERT_QD_OK(qd_memset_async(s, out, 0, 4 * kTasks));
    declare_slots(kernels_->write_value(), {0});  // each task its own word of `out`
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    {
        std::vector<qd_task> tasks(kTasks);
        std::vector<TaskArgs> storage(kTasks);
        for (uint32_t i = 0; i < kTasks; ++i) {
            tasks[i] = qd_task QD_TASK_INIT;
            tasks[i].group = i % 4;
            tasks[i].kernel = kernels_->write_value();
            storage[i].u64[0] = out + 4 * i;
            storage[i].u32[0] = 500 + i;
            storage[i].args[0] = {&storage[i].u64[0], 8};
            storage[i].args[1] = {&storage[i].u32[0], 4};
            tasks[i].args = storage[i].args;
            tasks[i].num_args = 2;
        }
        ASSERT_QD_OK(qd_launch_parallel(s, tasks.data(), kTasks));
        for (TaskArgs &a : storage) {
            a.u64[0] = 0xdeadbeefdeadbeefull;
            a.u32[0] = 0xcdcdcdcd;
            a.args[0] = {nullptr, 0};
        }
        for (qd_task &t : tasks) memset(&t, 0xcd, sizeof t);
    }
    gate.open();
    std::vector<uint8_t> host = read_back(s, out, 4 * kTasks);
    for (uint32_t i = 0; i < kTasks; ++i) {
        uint32_t v;
        memcpy(&v, host.data() + 4 * i, 4);
        EXPECT_EQ(v, 500 + i);
    }
    EXPECT_QD_OK(qd_mem_free_async(s, out));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

QDT_INSTANTIATE_BACKENDS(PoolTest);
