// Double destroy (docs/reliability.md, category 3): destroying, releasing, unloading or freeing
// twice gives the documented error; two threads destroying the same object at once: exactly one
// succeeds.
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

int32_t ok_kernel(const qd_host_kernel_info *, void *const *) { return 0; }

class DoubleDestroy : public ::testing::Test {
  protected:
    void SetUp() override {
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 16, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &ctx));
        ASSERT_QD_OK(qd_context_default_stream(ctx, &def));
        path = cpu_module_path();
    }
    void TearDown() override {
        if (ctx) {
            EXPECT_QD_OK(qd_context_destroy(ctx));
        }
    }

    // Two threads call `destroy(h)` at the same moment, `iterations` times with fresh objects
    // from `make`; exactly one of each pair must return QD_SUCCESS, the other `loser`.
    void race(const char *what, uint64_t iterations, const std::function<uint64_t()> &make,
              const std::function<qd_status(uint64_t)> &destroy, qd_status loser) {
        std::atomic<uint64_t> target{0};
        std::atomic<int> round{0};
        std::atomic<int> arrived{0};
        qd_status results[2];
        uint64_t bad = 0, bad_loser = 0;
        std::string first_bad;
        auto worker = [&](int id) {
            for (uint64_t i = 0; i < iterations; ++i) {
                while (round.load(std::memory_order_acquire) < (int)(2 * i + 1))
                    std::this_thread::yield();
                results[id] = destroy(target.load());
                arrived.fetch_add(1);
                while (round.load(std::memory_order_acquire) < (int)(2 * i + 2))
                    std::this_thread::yield();
            }
        };
        std::thread t0(worker, 0), t1(worker, 1);
        for (uint64_t i = 0; i < iterations; ++i) {
            target.store(make());
            arrived.store(0);
            round.store((int)(2 * i + 1), std::memory_order_release);
            while (arrived.load() != 2) std::this_thread::yield();
            int successes = (results[0] == QD_SUCCESS) + (results[1] == QD_SUCCESS);
            if (successes != 1) {
                ++bad;
                if (first_bad.empty())
                    first_bad = std::string(qd_status_name(results[0])) + " / " +
                                qd_status_name(results[1]);
            } else if (results[0] != loser && results[1] != loser) {
                ++bad_loser;
            }
            round.store((int)(2 * i + 2), std::memory_order_release);
        }
        t0.join();
        t1.join();
        EXPECT_EQ(bad, 0u) << what << ": pairs without exactly one success (first: " << first_bad
                           << ")";
        EXPECT_EQ(bad_loser, 0u) << what << ": the loser did not get " << qd_status_name(loser);
    }

    qd_context ctx = 0;
    qd_stream def = 0;
    std::string path;
};

}  // namespace

TEST_F(DoubleDestroy, EveryDestroyTwice_SecondIsAnError) {
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(ctx, nullptr, &s));
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_destroy(s));

    qd_stream l = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx, &l));
    EXPECT_QD_OK(qd_stream_release(l));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_release(l));

    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(def, 2, kids));
    EXPECT_QD_OK(qd_stream_join(def, kids, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_join(def, kids, 2));

    qd_event e = 0;
    ASSERT_QD_OK(qd_event_create(ctx, 0, &e));
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_destroy(e));

    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx, &ok_kernel, "k", &k));
    EXPECT_QD_OK(qd_kernel_destroy(k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", qd_kernel_destroy(k));

    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(ctx, path.data(), path.size(), &m));
    EXPECT_QD_OK(qd_module_unload(m));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_module_unload(m));

    uint64_t a = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(def, 64, &a));
    EXPECT_QD_OK(qd_mem_free_async(def, a));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x", qd_mem_free_async(def, a));

    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx, 64, &h));
    EXPECT_QD_OK(qd_host_free(ctx, h));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|ptr|0x", qd_host_free(ctx, h));

    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_context_destroy(c));
    EXPECT_QD_OK(qd_context_synchronize(ctx));
}

TEST_F(DoubleDestroy, StreamDestroyFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "stream", scaled(10000, 50),
        [&] {
            qd_stream s = 0;
            EXPECT_EQ(qd_stream_create(ctx, nullptr, &s), QD_SUCCESS);
            return s;
        },
        [](uint64_t h) { return qd_stream_destroy(h); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(get_stats(ctx).live_streams, 1u);
}

TEST_F(DoubleDestroy, StreamWithPendingWorkDestroyFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "busy stream", scaled(500, 20),
        [&] {
            qd_stream s = 0;
            EXPECT_EQ(qd_stream_create(ctx, nullptr, &s), QD_SUCCESS);
            EXPECT_EQ(enqueue_sleep_us(s, 50), QD_SUCCESS);
            return s;
        },
        [](uint64_t h) { return qd_stream_destroy(h); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_QD_OK(qd_context_synchronize(ctx));
    EXPECT_EQ(get_stats(ctx).live_streams, 1u);
}

TEST_F(DoubleDestroy, EventDestroyFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "event", scaled(10000, 50),
        [&] {
            qd_event e = 0;
            EXPECT_EQ(qd_event_create(ctx, 0, &e), QD_SUCCESS);
            EXPECT_EQ(qd_event_record(def, e), QD_SUCCESS);
            return e;
        },
        [](uint64_t h) { return qd_event_destroy(h); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(get_stats(ctx).live_events, 0u);
}

TEST_F(DoubleDestroy, ReleaseFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "lease", scaled(10000, 50),
        [&] {
            qd_stream l = 0;
            EXPECT_EQ(qd_stream_acquire(ctx, &l), QD_SUCCESS);
            return l;
        },
        [](uint64_t h) { return qd_stream_release(h); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(get_stats(ctx).stream_pool_leased, 0u);
}

TEST_F(DoubleDestroy, KernelDestroyFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "kernel", scaled(10000, 50),
        [&] {
            qd_kernel k = 0;
            EXPECT_EQ(qd_kernel_from_host_fn(ctx, &ok_kernel, "k", &k), QD_SUCCESS);
            return k;
        },
        [](uint64_t h) { return qd_kernel_destroy(h); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(get_stats(ctx).live_kernels, 0u);
}

TEST_F(DoubleDestroy, ModuleUnloadFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "module", scaled(300, 20),
        [&] {
            qd_module m = 0;
            EXPECT_EQ(qd_module_load(ctx, path.data(), path.size(), &m), QD_SUCCESS);
            return m;
        },
        [](uint64_t h) { return qd_module_unload(h); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(get_stats(ctx).live_modules, 0u);
}

TEST_F(DoubleDestroy, MemFreeFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "allocation", scaled(2000, 50),
        [&] {
            uint64_t a = 0;
            EXPECT_EQ(qd_mem_alloc_async(def, 128, &a), QD_SUCCESS);
            return a;
        },
        [this](uint64_t a) { return qd_mem_free_async(def, a); }, QD_ERROR_INVALID_ADDRESS);
    EXPECT_QD_OK(qd_stream_synchronize(def));
    EXPECT_EQ(get_stats(ctx).live_allocations, 0u);
}

TEST_F(DoubleDestroy, HostFreeFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "host block", scaled(2000, 50),
        [&] {
            void *p = nullptr;
            EXPECT_EQ(qd_host_alloc(ctx, 128, &p), QD_SUCCESS);
            return (uint64_t)(uintptr_t)p;
        },
        [this](uint64_t p) { return qd_host_free(ctx, reinterpret_cast<void *>((uintptr_t)p)); },
        QD_ERROR_INVALID_ADDRESS);
    EXPECT_EQ(get_stats(ctx).host_bytes_allocated, 0u);
}

TEST_F(DoubleDestroy, ContextDestroyFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "context", scaled(100, 10),
        [&] {
            qd_context c = 0;
            qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
            EXPECT_EQ(qd_context_create(&desc, &c), QD_SUCCESS);
            qd_stream s = 0;
            EXPECT_EQ(qd_stream_create(c, nullptr, &s), QD_SUCCESS);
            EXPECT_EQ(enqueue_sleep_us(s, 100), QD_SUCCESS);
            return c;
        },
        [](uint64_t h) { return qd_context_destroy(h); }, QD_ERROR_INVALID_HANDLE);
}

TEST_F(DoubleDestroy, JoinFromTwoThreads_ExactlyOneSucceeds) {
    race(
        "join", scaled(1000, 30),
        [&] {
            qd_stream l = 0;
            EXPECT_EQ(qd_stream_acquire(ctx, &l), QD_SUCCESS);
            return l;
        },
        [this](uint64_t l) { return qd_stream_join(def, &l, 1); }, QD_ERROR_INVALID_HANDLE);
    EXPECT_QD_OK(qd_stream_synchronize(def));
    EXPECT_EQ(get_stats(ctx).stream_pool_leased, 0u);
}
