// Threads (docs/reliability.md, category 6; CI also runs this under ThreadSanitizer): >= 8 threads
// create, destroy, launch, record, wait, lease and allocate at once on one shared context, racing
// on shared handles. Every call must return a status its documentation allows for that race
// (success, or INVALID_HANDLE for an object destroyed by another thread, POOL_EXHAUSTED for a
// full pool, NOT_READY for a query), private work must compute the right result, and the live
// counters must be back to their baseline afterwards.
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

const int kThreads = 10;
const int kSlots = 16;

struct Tally {
    std::mutex mutex;
    std::map<std::string, uint64_t> unexpected;  // "op -> status" counts
    void bad(const char *op, qd_status st) {
        std::lock_guard<std::mutex> lock(mutex);
        ++unexpected[std::string(op) + " -> " + qd_status_name(st)];
    }
};

bool one_of(qd_status st, std::initializer_list<qd_status> allowed) {
    for (qd_status a : allowed)
        if (st == a) return true;
    return false;
}

void count_cb(void *user) { static_cast<std::atomic<uint64_t> *>(user)->fetch_add(1); }
std::atomic<uint64_t> g_sink{0};

}  // namespace

TEST(Threads, ManyThreadsOnOneContext_CreateDestroyLaunchRecord_CountersBackToBaseline) {
    qd_context ctx = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 16, 4);
    ASSERT_QD_OK(qd_context_create(&desc, &ctx));
    std::unique_ptr<TestKernels> k = make_cpu_host_fn_kernels(ctx);
    ASSERT_TRUE(k);
    qd_stream def = 0;
    ASSERT_QD_OK(qd_context_default_stream(ctx, &def));
    const qd_context_stats base = get_stats(ctx);
    std::atomic<uint64_t> streams[kSlots], events[kSlots];
    for (int i = 0; i < kSlots; ++i) {
        streams[i] = 0;
        events[i] = 0;
    }
    Tally tally;
    std::atomic<uint64_t> callbacks{0}, callbacks_queued{0};
    const int iterations = (int)scaled(10000, 100);
    std::vector<int32_t> private_results(kThreads, -1);
    std::vector<int32_t> private_expected(kThreads, 0);
    std::vector<std::thread> threads;
    Barrier start(kThreads);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng(1234 + t);
            qd_stream own = 0;
            if (qd_stream_create(ctx, nullptr, &own) != QD_SUCCESS) tally.bad("create own", -999);
            uint64_t counter = 0;
            if (qd_mem_alloc_async(own, 4, &counter) != QD_SUCCESS) tally.bad("alloc own", -999);
            if (qd_memset_async(own, counter, 0, 4) != QD_SUCCESS) tally.bad("memset own", -999);
            int32_t adds = 0;
            start.arrive_and_wait();
            for (int i = 0; i < iterations; ++i) {
                int slot = (int)(rng() % kSlots);
                switch (rng() % 15) {
                case 0: {  // create a stream into a slot, destroy the one it replaces
                    qd_stream s = 0;
                    qd_status st = qd_stream_create(ctx, nullptr, &s);
                    if (st != QD_SUCCESS) {
                        tally.bad("stream_create", st);
                        break;
                    }
                    uint64_t old = streams[slot].exchange(s);
                    if (old && (st = qd_stream_destroy(old)) != QD_SUCCESS)
                        tally.bad("stream_destroy(replaced)", st);
                    break;
                }
                case 1: {
                    uint64_t old = streams[slot].exchange(0);
                    qd_status st;
                    if (old && (st = qd_stream_destroy(old)) != QD_SUCCESS)
                        tally.bad("stream_destroy", st);
                    break;
                }
                case 2: {
                    qd_status st = launch_spin(streams[slot].load(), k->spin(), rng() % 20);
                    if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("launch(shared)", st);
                    break;
                }
                case 3: {
                    qd_status st =
                        qd_event_record(streams[slot].load(), events[rng() % kSlots].load());
                    if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("event_record", st);
                    break;
                }
                case 4: {
                    qd_status st =
                        qd_stream_wait_event(streams[slot].load(), events[rng() % kSlots].load());
                    if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("wait_event", st);
                    break;
                }
                case 5: {
                    qd_event e = 0;
                    qd_status st = qd_event_create(ctx, rng() % 2 ? QD_EVENT_TIMING : 0, &e);
                    if (st != QD_SUCCESS) {
                        tally.bad("event_create", st);
                        break;
                    }
                    uint64_t old = events[slot].exchange(e);
                    if (old && (st = qd_event_destroy(old)) != QD_SUCCESS)
                        tally.bad("event_destroy", st);
                    break;
                }
                case 6: {
                    qd_status st = qd_stream_query(streams[slot].load());
                    if (!one_of(st, {QD_SUCCESS, QD_NOT_READY, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("stream_query", st);
                    st = qd_event_query(events[slot].load());
                    if (!one_of(st, {QD_SUCCESS, QD_NOT_READY, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("event_query", st);
                    break;
                }
                case 7: {
                    qd_stream l = 0;
                    qd_status st = qd_stream_acquire(ctx, &l);
                    if (st == QD_ERROR_POOL_EXHAUSTED) break;
                    if (st != QD_SUCCESS) {
                        tally.bad("acquire", st);
                        break;
                    }
                    if ((st = launch_spin(l, k->spin(), 5)) != QD_SUCCESS)
                        tally.bad("launch(lease)", st);
                    if ((st = qd_stream_release(l)) != QD_SUCCESS) tally.bad("release", st);
                    break;
                }
                case 8: {
                    qd_stream kids[2];
                    qd_status st = qd_stream_fork(own, 2, kids);
                    if (st == QD_ERROR_POOL_EXHAUSTED) break;
                    if (st != QD_SUCCESS) {
                        tally.bad("fork", st);
                        break;
                    }
                    if ((st = launch_add_one(kids[0], k->add_one(), counter, 1)) != QD_SUCCESS)
                        tally.bad("launch(kid)", st);
                    else
                        ++adds;
                    if ((st = qd_stream_join(own, kids, 2)) != QD_SUCCESS) tally.bad("join", st);
                    break;
                }
                case 9: {
                    uint64_t a = 0;
                    qd_status st = qd_mem_alloc_async(own, 64 + rng() % 1000, &a);
                    if (st != QD_SUCCESS) {
                        tally.bad("mem_alloc", st);
                        break;
                    }
                    if ((st = qd_memset_async(own, a, 1, 64)) != QD_SUCCESS)
                        tally.bad("memset", st);
                    if ((st = qd_mem_free_async(own, a)) != QD_SUCCESS) tally.bad("mem_free", st);
                    break;
                }
                case 10: {
                    qd_task tasks[3];
                    TaskArgs storage[3];
                    task_spin(&tasks[0], &storage[0], 0, k->spin(), 1);
                    task_add_value(&tasks[1], &storage[1], 1, k->add_value(), counter, counter, 1);
                    task_spin(&tasks[2], &storage[2], 2, k->spin(), 1);
                    qd_status st = qd_launch_parallel(own, tasks, 3);
                    if (st == QD_SUCCESS)
                        ++adds;
                    else if (st != QD_ERROR_POOL_EXHAUSTED)
                        tally.bad("launch_parallel", st);
                    break;
                }
                case 11: {
                    qd_stream mine = rng() % 2 ? own : def, prev = 0, got = 0;
                    qd_status st = qd_stream_set_active(ctx, mine, &prev);
                    if (st != QD_SUCCESS) tally.bad("set_active", st);
                    st = qd_stream_get_active(ctx, &got);
                    if (st != QD_SUCCESS || got != mine) tally.bad("get_active(mismatch)", st);
                    break;
                }
                case 12: {
                    qd_status st = qd_launch_host_fn(streams[slot].load(), &count_cb, &callbacks);
                    if (st == QD_SUCCESS)
                        callbacks_queued.fetch_add(1);
                    else if (st != QD_ERROR_INVALID_HANDLE)
                        tally.bad("launch_host_fn", st);
                    break;
                }
                case 13: {
                    qd_status st = launch_add_one(own, k->add_one(), counter, 1);
                    if (st == QD_SUCCESS)
                        ++adds;
                    else
                        tally.bad("launch(own)", st);
                    break;
                }
                case 14: {
                    if (rng() % 8) break;  // synchronising is slow: do it rarely
                    qd_status st = qd_stream_synchronize(streams[slot].load());
                    if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("stream_synchronize", st);
                    st = qd_event_synchronize(events[slot].load());
                    if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                        tally.bad("event_synchronize", st);
                    break;
                }
                }
            }
            int32_t result = -1;
            qd_status st = qd_memcpy_async(own, (uint64_t)(uintptr_t)&result, counter, 4);
            if (st != QD_SUCCESS) tally.bad("memcpy own", st);
            if ((st = qd_stream_synchronize(own)) != QD_SUCCESS) tally.bad("synchronize own", st);
            private_results[t] = result;
            private_expected[t] = adds;
            if ((st = qd_mem_free_async(own, counter)) != QD_SUCCESS) tally.bad("free own", st);
            if ((st = qd_stream_set_active(ctx, def, nullptr)) != QD_SUCCESS)
                tally.bad("restore active", st);
            if ((st = qd_stream_destroy(own)) != QD_SUCCESS) tally.bad("destroy own", st);
        });
    }
    for (std::thread &th : threads) th.join();
    for (int i = 0; i < kSlots; ++i) {
        if (uint64_t s = streams[i].exchange(0)) {
            EXPECT_QD_OK(qd_stream_destroy(s));
        }
        if (uint64_t e = events[i].exchange(0)) {
            EXPECT_QD_OK(qd_event_destroy(e));
        }
    }
    EXPECT_QD_OK(qd_context_synchronize(ctx));
    for (const auto &u : tally.unexpected)
        ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
    for (int t = 0; t < kThreads; ++t)
        EXPECT_EQ(private_results[t], private_expected[t])
            << "thread " << t << "'s private counter";
    EXPECT_EQ(callbacks.load(), callbacks_queued.load()) << "queued callbacks that never ran";
    const qd_context_stats end = get_stats(ctx);
    EXPECT_EQ(end.live_streams, base.live_streams);
    EXPECT_EQ(end.live_events, base.live_events);
    EXPECT_EQ(end.live_kernels, base.live_kernels);
    EXPECT_EQ(end.stream_pool_leased, 0u);
    EXPECT_LE(end.stream_pool_created, 16u);
    EXPECT_EQ(end.live_allocations, 0u);
    EXPECT_EQ(end.bytes_allocated, 0u);
    k.reset();
    EXPECT_QD_OK(qd_context_destroy(ctx));
}

TEST(Threads, ManyThreadsCreatingAndDestroyingContexts_StaleHandlesFailCleanly) {
    const int rounds = (int)scaled(30, 5);
    std::atomic<uint64_t> last_stream{0}, last_ctx{0};
    Tally tally;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            for (int r = 0; r < rounds; ++r) {
                qd_context c = 0;
                qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
                qd_status st = qd_context_create(&desc, &c);
                if (st != QD_SUCCESS) {
                    tally.bad("context_create", st);
                    continue;
                }
                qd_stream s = 0;
                if ((st = qd_stream_create(c, nullptr, &s)) != QD_SUCCESS)
                    tally.bad("stream_create", st);
                if ((st = enqueue_sleep_us(s, 100)) != QD_SUCCESS) tally.bad("host_fn", st);
                last_stream.store(s);
                last_ctx.store(c);
                // Use another thread's (possibly destroyed) objects.
                qd_stream other = last_stream.load();
                st = qd_launch_host_fn(other, &count_cb, &g_sink);
                if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                    tally.bad("host_fn(other)", st);
                st = qd_stream_query(other);
                if (!one_of(st, {QD_SUCCESS, QD_NOT_READY, QD_ERROR_INVALID_HANDLE}))
                    tally.bad("query(other)", st);
                qd_context_stats stats = QD_CONTEXT_STATS_INIT;
                st = qd_context_get_stats(last_ctx.load(), &stats);
                if (!one_of(st, {QD_SUCCESS, QD_ERROR_INVALID_HANDLE}))
                    tally.bad("get_stats(other)", st);
                if (t % 2 && (st = qd_stream_destroy(s)) != QD_SUCCESS)
                    tally.bad("stream_destroy", st);
                if ((st = qd_context_destroy(c)) != QD_SUCCESS) tally.bad("context_destroy", st);
                if ((st = qd_stream_query(s)) != QD_ERROR_INVALID_HANDLE)
                    tally.bad("query(destroyed)", st);
            }
        });
    }
    for (std::thread &th : threads) th.join();
    for (const auto &u : tally.unexpected)
        ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
}

// A call racing with the destruction of an object it names either completes as if it came
// first, or returns INVALID_HANDLE: so every host callback whose qd_launch_host_fn succeeded
// must have run by the time qd_context_destroy (which drains) returns.
TEST(Threads, LaunchesRacingContextDestroy_EveryAcceptedCallbackRunsBeforeDestroyReturns) {
    const int rounds = (int)scaled(40, 5);
    for (int r = 0; r < rounds; ++r) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        qd_stream s = 0, def = 0;
        ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
        ASSERT_QD_OK(qd_context_default_stream(c, &def));
        std::atomic<uint64_t> ran{0}, accepted{0};
        std::atomic<bool> stop{false};
        Tally tally;
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                while (!stop.load()) {
                    qd_stream target = t % 2 ? s : def;
                    qd_status st = qd_launch_host_fn(target, &count_cb, &ran);
                    if (st == QD_SUCCESS)
                        accepted.fetch_add(1);
                    else if (st != QD_ERROR_INVALID_HANDLE)
                        tally.bad("launch_host_fn", st);
                    if (st == QD_ERROR_INVALID_HANDLE) break;
                }
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2 + r % 5));
        ASSERT_QD_OK(qd_context_destroy(c));
        const uint64_t ran_at_destroy = ran.load();
        stop.store(true);
        for (std::thread &th : threads) th.join();
        EXPECT_EQ(ran.load(), accepted.load())
            << "round " << r << ": accepted callbacks that never ran";
        EXPECT_EQ(ran_at_destroy, ran.load())
            << "round " << r << ": callbacks ran after qd_context_destroy returned";
        for (const auto &u : tally.unexpected)
            ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
    }
}

TEST(Threads, LaunchesRacingStreamDestroyAndRelease_EveryAcceptedCallbackRuns) {
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    const int rounds = (int)scaled(200, 20);
    std::atomic<uint64_t> ran{0}, accepted{0};
    Tally tally;
    for (int r = 0; r < rounds; ++r) {
        qd_stream s = 0;
        const bool lease = r % 2;
        if (lease) {
            ASSERT_QD_OK(qd_stream_acquire(c, &s));
        } else {
            ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
        }
        std::atomic<bool> go{false};
        std::vector<std::thread> threads;
        for (int t = 0; t < 3; ++t) {
            threads.emplace_back([&] {
                while (!go.load()) std::this_thread::yield();
                for (int i = 0; i < 200; ++i) {
                    qd_status st = qd_launch_host_fn(s, &count_cb, &ran);
                    if (st == QD_SUCCESS)
                        accepted.fetch_add(1);
                    else if (st == QD_ERROR_INVALID_HANDLE)
                        break;
                    else
                        tally.bad("launch_host_fn", st);
                }
            });
        }
        go.store(true);
        std::this_thread::yield();
        qd_status st = lease ? qd_stream_release(s) : qd_stream_destroy(s);
        if (st != QD_SUCCESS) tally.bad(lease ? "release" : "stream_destroy", st);
        for (std::thread &th : threads) th.join();
    }
    EXPECT_QD_OK(qd_context_synchronize(c));
    EXPECT_EQ(ran.load(), accepted.load()) << "accepted callbacks that never ran";
    for (const auto &u : tally.unexpected)
        ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
    EXPECT_EQ(get_stats(c).stream_pool_leased, 0u);
    EXPECT_QD_OK(qd_context_destroy(c));
}

TEST(Threads, SynchronizeRacingContextDestroy_BothReturn) {
    const int rounds = (int)scaled(20, 3);
    for (int r = 0; r < rounds; ++r) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        qd_stream s = 0;
        qd_event e = 0;
        ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
        ASSERT_QD_OK(qd_event_create(c, 0, &e));
        ASSERT_QD_OK(enqueue_sleep_us(s, 3000));
        ASSERT_QD_OK(qd_event_record(s, e));
        ASSERT_QD_OK(enqueue_sleep_us(s, 3000));
        qd_status sync_stream = 1, sync_event = 1, sync_ctx = 1;
        std::thread a([&] { sync_stream = qd_stream_synchronize(s); });
        std::thread b([&] { sync_event = qd_event_synchronize(e); });
        std::thread d([&] { sync_ctx = qd_context_synchronize(c); });
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_QD_OK(qd_context_destroy(c));
        a.join();
        b.join();
        d.join();
        for (qd_status st : {sync_stream, sync_event, sync_ctx})
            EXPECT_TRUE(st == QD_SUCCESS || st == QD_ERROR_INVALID_HANDLE) << qd_status_name(st);
    }
}

// Allocations racing qd_context_destroy: each either fails with INVALID_HANDLE or is registered
// before destroy frees every registered block. A block that slipped in after that would leak;
// LeakSanitizer (CI's ASan build) reports it.
TEST(Threads, AllocationsRacingContextDestroy_NothingLeaks) {
    const int rounds = (int)scaled(40, 5);
    for (int r = 0; r < rounds; ++r) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        qd_stream s = 0;
        ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
        Tally tally;
        std::atomic<bool> stop{false};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                while (!stop.load()) {
                    qd_status st;
                    if (t % 2) {
                        uint64_t a = 0;
                        st = qd_mem_alloc_async(s, 4096, &a);
                    } else {
                        void *p = nullptr;
                        st = qd_host_alloc(c, 4096, &p);
                    }
                    if (st == QD_ERROR_INVALID_HANDLE) break;
                    if (st != QD_SUCCESS) tally.bad("alloc", st);
                }
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + r % 3));
        ASSERT_QD_OK(qd_context_destroy(c));
        stop.store(true);
        for (std::thread &th : threads) th.join();
        for (const auto &u : tally.unexpected)
            ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
    }
}

// Pool leases taken and given back in a loop while the context is destroyed. The pool arms and
// disarms its slots under its own lock only, so destroy must close the pool before it touches
// them: every call returns SUCCESS or INVALID_HANDLE (or POOL_EXHAUSTED), every lease handle is
// invalid afterwards, and the sanitizer builds see no race, use after free or leak.
TEST(Threads, LeasesCyclingRacingContextDestroy_AllEndInvalid) {
    const int rounds = (int)scaled(40, 5);
    for (int r = 0; r < rounds; ++r) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        Tally tally;
        std::mutex held_mutex;
        std::vector<qd_stream> held;  // leases a thread still held when destroy began
        std::atomic<bool> stop{false};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&] {
                while (!stop.load()) {
                    qd_stream lease = 0;
                    qd_status st = qd_stream_acquire(c, &lease);
                    if (st == QD_ERROR_INVALID_HANDLE) break;
                    if (st == QD_ERROR_POOL_EXHAUSTED) continue;
                    if (st != QD_SUCCESS) {
                        tally.bad("acquire", st);
                        continue;
                    }
                    st = qd_stream_release(lease);
                    if (st == QD_ERROR_INVALID_HANDLE) {
                        std::lock_guard<std::mutex> lock(held_mutex);
                        held.push_back(lease);
                        break;
                    }
                    if (st != QD_SUCCESS) tally.bad("release", st);
                }
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + r % 3));
        ASSERT_QD_OK(qd_context_destroy(c));
        stop.store(true);
        for (std::thread &th : threads) th.join();
        for (const auto &u : tally.unexpected)
            ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
        for (qd_stream lease : held) {
            EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_release(lease));
            EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_query(lease));
        }
    }
}

// Creations racing qd_context_destroy: each either fails with INVALID_HANDLE or makes a child
// that destroy then invalidates ("every child handle then gives QD_ERROR_INVALID_HANDLE"). A
// child registered after destroy's sweep would stay valid (and leak).
TEST(Threads, CreationsRacingContextDestroy_EveryChildHandleIsInvalidAfterwards) {
    const int rounds = (int)scaled(40, 5);
    const std::string path = cpu_module_path();
    for (int r = 0; r < rounds; ++r) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 64, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        qd_stream parent = 0;
        ASSERT_QD_OK(qd_stream_create(c, nullptr, &parent));
        Tally tally;
        std::mutex made_mutex;
        std::vector<std::pair<int, uint64_t>> made;  // (kind, handle)
        std::atomic<bool> stop{false};
        std::vector<std::thread> threads;
        for (int t = 0; t < 6; ++t) {
            threads.emplace_back([&, t] {
                int i = 0;
                while (!stop.load()) {
                    uint64_t h = 0;
                    qd_stream kid = 0;
                    qd_status st;
                    int kind = (t + i++) % 6;
                    switch (kind) {
                    case 0: st = qd_stream_create(c, nullptr, &h); break;
                    case 1: st = qd_event_create(c, 0, &h); break;
                    case 2: st = qd_stream_acquire(c, &h); break;
                    case 3:
                        st = qd_kernel_from_host_fn(
                            c, [](const qd_host_kernel_info *, void *const *) { return 0; }, "k",
                            &h);
                        break;
                    case 4:
                        st = qd_stream_fork(parent, 1, &kid);
                        h = kid;
                        break;
                    default: st = qd_module_load(c, path.data(), path.size(), &h); break;
                    }
                    if (st == QD_SUCCESS) {
                        std::lock_guard<std::mutex> lock(made_mutex);
                        made.emplace_back(kind, h);
                    } else if (st == QD_ERROR_INVALID_HANDLE) {
                        break;
                    } else if (st != QD_ERROR_POOL_EXHAUSTED) {
                        tally.bad("create", st);
                    }
                }
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1 + r % 3));
        ASSERT_QD_OK(qd_context_destroy(c));
        stop.store(true);
        for (std::thread &th : threads) th.join();
        int still_valid = 0;
        std::string first;
        std::map<std::string, int> by_kind;
        static const char *kind_names[] = {"qd_stream_create",  "qd_event_create",
                                           "qd_stream_acquire", "qd_kernel_from_host_fn",
                                           "qd_stream_fork",    "qd_module_load"};
        for (const auto &m : made) {
            qd_status st;
            switch (m.first) {
            case 1: st = qd_event_query(m.second); break;
            case 3: st = qd_kernel_destroy(m.second); break;
            case 5: st = qd_module_unload(m.second); break;
            default: st = qd_stream_query(m.second); break;
            }
            if (st != QD_ERROR_INVALID_HANDLE) {
                ++still_valid;
                ++by_kind[std::string(kind_names[m.first]) + " -> " + qd_status_name(st)];
            }
        }
        for (const auto &k : by_kind)
            first += " [" + k.first + " x" + std::to_string(k.second) + "]";
        EXPECT_EQ(still_valid, 0) << "round " << r
                                  << ": children of a destroyed context still valid:" << first;
        for (const auto &u : tally.unexpected)
            ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
    }
}

// qd_kernel_get racing qd_module_unload of its module: either the get fails with INVALID_HANDLE,
// or it made a kernel that the unload invalidated. A kernel added to the module after the
// unload took its kernel list would stay launchable (and counted) with its module gone.
TEST(Threads, KernelGetRacingModuleUnload_NoKernelOutlivesTheUnload) {
    const int trials = (int)scaled(300, 40);
    const std::string path = cpu_module_path();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 8, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &s));
    int still_valid = 0;
    for (int t = 0; t < trials; ++t) {
        qd_module m = 0;
        ASSERT_QD_OK(qd_module_load(c, path.data(), path.size(), &m));
        std::atomic<int> made{0};
        std::vector<qd_kernel> got;
        Tally tally;
        std::thread getter([&] {
            for (;;) {
                qd_kernel k = 0;
                const qd_status st = qd_kernel_get(m, "qd_test_noop", &k);
                if (st == QD_ERROR_INVALID_HANDLE) break;
                if (st != QD_SUCCESS) {
                    tally.bad("qd_kernel_get", st);
                    made.store(-1);
                    break;
                }
                got.push_back(k);
                made.fetch_add(1);
            }
        });
        // The unload comes while the getter is in its loop (it has made a kernel already).
        while (made.load() == 0) std::this_thread::yield();
        ASSERT_QD_OK(qd_module_unload(m));
        getter.join();
        for (qd_kernel k : got)
            if (qd_launch(s, k, nullptr, nullptr, 0) != QD_ERROR_INVALID_HANDLE) ++still_valid;
        for (const auto &u : tally.unexpected)
            ADD_FAILURE() << "unexpected status: " << u.first << " x" << u.second;
    }
    EXPECT_EQ(still_valid, 0) << "kernels still launchable after their module's unload returned";
    ASSERT_QD_OK(qd_context_synchronize(c));
    qd_context_stats stats = QD_CONTEXT_STATS_INIT;
    ASSERT_QD_OK(qd_context_get_stats(c, &stats));
    EXPECT_EQ(stats.live_modules, 0u);
    EXPECT_EQ(stats.live_kernels, 0u);
    ASSERT_QD_OK(qd_context_destroy(c));
}
