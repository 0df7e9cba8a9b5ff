// Leaks (docs/reliability.md, category 14; CI runs this under AddressSanitizer/LeakSanitizer):
// QD_TEST_SCALE x 1e5 create/destroy cycles of each object type, counters back at baseline,
// then the context is destroyed. Contexts themselves (which start threads) cycle 1e3 times.
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

int32_t ok_kernel(const qd_host_kernel_info *, void *const *) { return 0; }

class Leaks : public ::testing::Test {
  protected:
    void SetUp() override {
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 8, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &ctx));
        ASSERT_QD_OK(qd_context_default_stream(ctx, &def));
        base = get_stats(ctx);
        n = scaled(100000, 100);
    }
    void TearDown() override {
        EXPECT_QD_OK(qd_context_synchronize(ctx));
        qd_context_stats end = get_stats(ctx);
        EXPECT_EQ(end.live_streams, base.live_streams);
        EXPECT_EQ(end.live_events, base.live_events);
        EXPECT_EQ(end.live_modules, base.live_modules);
        EXPECT_EQ(end.live_kernels, base.live_kernels);
        EXPECT_EQ(end.stream_pool_leased, 0u);
        EXPECT_LE(end.stream_pool_created, end.stream_pool_capacity);
        EXPECT_EQ(end.live_allocations, 0u);
        EXPECT_EQ(end.bytes_allocated, 0u);
        EXPECT_EQ(end.host_bytes_allocated, 0u);
        EXPECT_QD_OK(qd_context_destroy(ctx));
    }
    qd_context ctx = 0;
    qd_stream def = 0;
    qd_context_stats base;
    uint64_t n = 0;
};

}  // namespace

TEST_F(Leaks, StreamCreateDestroy_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n; ++i) {
        qd_stream s = 0;
        ASSERT_QD_OK(qd_stream_create(ctx, nullptr, &s));
        if (i % 64 == 0) {
            ASSERT_QD_OK(enqueue_sleep_us(s, 0));
        }  // sometimes with pending work
        ASSERT_QD_OK(qd_stream_destroy(s));
    }
}

TEST_F(Leaks, EventCreateRecordDestroy_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n; ++i) {
        qd_event e = 0;
        ASSERT_QD_OK(qd_event_create(ctx, i % 2 ? QD_EVENT_TIMING : 0, &e));
        if (i % 16 == 0) {
            ASSERT_QD_OK(qd_event_record(def, e));
        }
        ASSERT_QD_OK(qd_event_destroy(e));
    }
}

TEST_F(Leaks, KernelFromHostFnDestroy_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n; ++i) {
        qd_kernel k = 0;
        ASSERT_QD_OK(qd_kernel_from_host_fn(ctx, &ok_kernel, "leak", &k));
        if (i % 64 == 0) {
            ASSERT_QD_OK(qd_launch(def, k, nullptr, nullptr, 0));
        }
        ASSERT_QD_OK(qd_kernel_destroy(k));
    }
}

TEST_F(Leaks, ModuleLoadKernelGetUnload_CountersBackAtBaseline) {
    const std::string path = cpu_module_path();
    const uint64_t loads = scaled(10000, 50);  // dlopen/dlclose per cycle: 1e4
    for (uint64_t i = 0; i < loads; ++i) {
        qd_module m = 0;
        ASSERT_QD_OK(qd_module_load(ctx, path.data(), path.size(), &m));
        qd_kernel k = 0;
        ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &k));
        if (i % 2) {
            ASSERT_QD_OK(qd_kernel_destroy(k));
        }  // else unload destroys it
        ASSERT_QD_OK(qd_module_unload(m));
    }
    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(ctx, path.data(), path.size(), &m));
    for (uint64_t i = 0; i < n; ++i) {
        qd_kernel k = 0;
        ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &k));
        ASSERT_QD_OK(qd_kernel_destroy(k));
    }
    ASSERT_QD_OK(qd_module_unload(m));
}

TEST_F(Leaks, AcquireRelease_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n; ++i) {
        qd_stream l = 0;
        ASSERT_QD_OK(qd_stream_acquire(ctx, &l));
        ASSERT_QD_OK(qd_stream_release(l));
    }
    EXPECT_LE(get_stats(ctx).stream_pool_created, 1u);
}

TEST_F(Leaks, ForkJoin_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n / 4; ++i) {
        qd_stream kids[3];
        ASSERT_QD_OK(qd_stream_fork(def, 3, kids));
        ASSERT_QD_OK(qd_stream_join(def, kids, 3));
        if (i % 256 == 0) {
            ASSERT_QD_OK(qd_stream_synchronize(def));
        }
    }
    ASSERT_QD_OK(qd_stream_synchronize(def));
    qd_context_stats st = get_stats(ctx);
    EXPECT_LE(st.stream_pool_created, 8u);
    EXPECT_LE(st.event_pool_created, 256u) << "fork/join events are pooled, not created per call";
}

TEST_F(Leaks, LaunchParallel_CountersBackAtBaseline) {
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx, &ok_kernel, "p", &k));
    for (uint64_t i = 0; i < n / 4; ++i) {
        qd_task tasks[3] = {QD_TASK_INIT, QD_TASK_INIT, QD_TASK_INIT};
        for (uint32_t j = 0; j < 3; ++j) {
            tasks[j].kernel = k;
            tasks[j].group = j;
        }
        ASSERT_QD_OK(qd_launch_parallel(def, tasks, 3));
        if (i % 256 == 0) {
            ASSERT_QD_OK(qd_stream_synchronize(def));
        }
    }
    ASSERT_QD_OK(qd_stream_synchronize(def));
    ASSERT_QD_OK(qd_kernel_destroy(k));
}

TEST_F(Leaks, MemAllocFree_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t a = 0;
        ASSERT_QD_OK(qd_mem_alloc_async(def, 1 + (i % 4096), &a));
        ASSERT_QD_OK(qd_mem_free_async(def, a));
        if (i % 1024 == 0) {
            ASSERT_QD_OK(qd_stream_synchronize(def));
        }
    }
}

TEST_F(Leaks, HostAllocFree_CountersBackAtBaseline) {
    for (uint64_t i = 0; i < n; ++i) {
        void *p = nullptr;
        ASSERT_QD_OK(qd_host_alloc(ctx, 1 + (i % 4096), &p));
        ASSERT_QD_OK(qd_host_free(ctx, p));
    }
}

TEST_F(Leaks, LaunchAndHostFn_ArgumentCopiesAreFreed) {
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx, &ok_kernel, "args", &k));
    std::vector<uint8_t> blob(1024, 7);
    for (uint64_t i = 0; i < n; ++i) {
        qd_arg args[2] = {{blob.data(), blob.size()}, {&i, sizeof i}};
        ASSERT_QD_OK(qd_launch(def, k, nullptr, args, 2));
        if (i % 1024 == 0) {
            ASSERT_QD_OK(qd_stream_synchronize(def));
        }
    }
    ASSERT_QD_OK(qd_stream_synchronize(def));
    ASSERT_QD_OK(qd_kernel_destroy(k));
}

TEST(LeaksContext, ContextCreateDestroyWithChildren_NothingLeaks) {
    const uint64_t n = scaled(1000, 20);
    const std::string path = cpu_module_path();
    for (uint64_t i = 0; i < n; ++i) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 1 + (uint32_t)(i % 2));
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        if (i % 2 == 0) {
            // Leave children behind for destroy to clean up.
            qd_stream s = 0, l = 0;
            ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
            ASSERT_QD_OK(qd_stream_acquire(c, &l));
            qd_event e = 0;
            ASSERT_QD_OK(qd_event_create(c, QD_EVENT_TIMING, &e));
            ASSERT_QD_OK(qd_event_record(s, e));
            qd_kernel k = 0;
            ASSERT_QD_OK(qd_kernel_from_host_fn(c, &ok_kernel, "c", &k));
            ASSERT_QD_OK(qd_launch(s, k, nullptr, nullptr, 0));
            uint64_t a = 0;
            ASSERT_QD_OK(qd_mem_alloc_async(s, 256, &a));
            void *h = nullptr;
            ASSERT_QD_OK(qd_host_alloc(c, 256, &h));
            if (i % 20 == 0) {
                qd_module m = 0;
                ASSERT_QD_OK(qd_module_load(c, path.data(), path.size(), &m));
                qd_kernel km = 0;
                ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &km));
            }
        }
        ASSERT_QD_OK(qd_context_destroy(c));
    }
}
