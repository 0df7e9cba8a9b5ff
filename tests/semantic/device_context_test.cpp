// Devices, contexts, statistics, the last-error message and the version: success and every
// documented status of qd_device_count, qd_device_get_info, qd_context_create,
// qd_context_destroy, qd_context_synchronize, qd_context_default_stream, qd_context_get_stats,
// qd_last_error_message, qd_version and qd_backend_name.
#include <cstring>
#include <thread>

#include "c_shims.h"
#include "qd_test.h"

using namespace qdt;

namespace {

class DeviceTest : public ::testing::TestWithParam<qd_backend> {
  protected:
    void SetUp() override {
        std::string why;
        if (!backend_available(GetParam(), &why))
            GTEST_SKIP() << "no " << backend_name(GetParam()) << " device: " << why;
    }
};

class ContextTest : public BackendTest {};

}  // namespace

// ---------------------------------------------------------------------------------------------
// qd_version, qd_status_name, qd_last_error_message
// ---------------------------------------------------------------------------------------------

TEST(LastErrorMessage, FreshThread_IsEmptyAndNeverNull) {
    std::string seen = "<unset>";
    std::thread([&] {
        const char *m = qd_last_error_message();
        seen = m ? m : "<NULL>";
    }).join();
    EXPECT_EQ(seen, "");
}

TEST(LastErrorMessage, IsThreadLocal_AndOnlyWrittenOnFailure) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_query(0));
    std::string mine = qd_last_error_message();
    std::string other = "<unset>";
    std::thread([&] {
        uint32_t count = 0;
        (void)qd_device_count((qd_backend)999, &count);  // fails on the other thread only
        other = qd_last_error_message();
    }).join();
    EXPECT_NE(other, mine);
    EXPECT_EQ(mine, qd_last_error_message())
        << "another thread's failure changed this thread's message";
    // A successful call does not touch the message.
    uint32_t count = 0;
    EXPECT_QD_OK(qd_device_count(QD_BACKEND_CPU, &count));
    EXPECT_EQ(mine, qd_last_error_message());
}

TEST(Version, MatchesHeader) { EXPECT_EQ(qd_version(), (uint32_t)QD_VERSION); }

// ---------------------------------------------------------------------------------------------
// qd_backend_name
// ---------------------------------------------------------------------------------------------

TEST(BackendName, EveryBackendOfTheHeader_HasItsName) {
    EXPECT_STREQ(qd_backend_name(QD_BACKEND_DEFAULT), "default");
    EXPECT_STREQ(qd_backend_name(QD_BACKEND_CPU), "cpu");
    EXPECT_STREQ(qd_backend_name(QD_BACKEND_CUDA), "cuda");
    EXPECT_STREQ(qd_backend_name(QD_BACKEND_HIP), "hip");
}

TEST(BackendName, AValueThatNamesNoBackend_IsUnknownAndWritesNoMessage) {
    plant_marker_message();
    for (uint32_t raw : {4u, 99u, 0x7fffffffu, 0x80000000u, 0xffffffffu}) {
        SCOPED_TRACE(raw);
        // Any 32-bit value, as a C caller may pass; from C++ the conversion to qd_backend would
        // itself be undefined for values past the enumerators' range (UBSan's enum check).
        const char *name = qdt_backend_name_raw(raw);
        ASSERT_NE(name, nullptr);
        EXPECT_STREQ(name, "unknown");
    }
    EXPECT_TRUE(message_is_marker()) << "a name lookup is not a failure";
}

TEST(BackendName, CountingUpFromCpu_VisitsEveryBackendOnce) {
    // The header's promise: backends are numbered from QD_BACKEND_CPU up without gaps.
    std::vector<std::string> seen;
    for (uint32_t b = QD_BACKEND_CPU; std::strcmp(qd_backend_name((qd_backend)b), "unknown"); ++b)
        seen.push_back(qd_backend_name((qd_backend)b));
    EXPECT_EQ(seen, (std::vector<std::string>{"cpu", "cuda", "hip"}));
}

// ---------------------------------------------------------------------------------------------
// qd_device_count / qd_device_get_info
// ---------------------------------------------------------------------------------------------

TEST(DeviceCount, Cpu_IsExactlyOne) {
    uint32_t count = 77;
    EXPECT_QD_OK(qd_device_count(QD_BACKEND_CPU, &count));
    EXPECT_EQ(count, 1u);
}

TEST(DeviceCount, DefaultBackend_IsTheCpuBackend) {
    uint32_t count = 77;
    EXPECT_QD_OK(qd_device_count(QD_BACKEND_DEFAULT, &count));
    EXPECT_EQ(count, 1u);
}

TEST(DeviceCount, NullCount_IsInvalidArgument) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "count|null",
                  qd_device_count(QD_BACKEND_CPU, nullptr));
}

TEST(DeviceCount, UnknownBackend_IsInvalidArgument) {
    for (uint32_t b : {4u, 5u, 99u, 0x7fffffffu, 0xffffffffu}) {
        uint32_t count = 77;
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "backend", qdt_device_count_raw(b, &count));
        EXPECT_EQ(count, 77u) << "count written on failure";
    }
}

TEST(DeviceCount, GpuBackends_SucceedOrAreUnavailableWithAReason) {
    for (qd_backend b : {QD_BACKEND_CUDA, QD_BACKEND_HIP}) {
        uint32_t count = 77;
        plant_marker_message();
        qd_status st = qd_device_count(b, &count);
        if (st == QD_SUCCESS) continue;
        EXPECT_EQ(st, QD_ERROR_BACKEND_UNAVAILABLE) << qd_status_name(st);
        EXPECT_STRNE(qd_last_error_message(), "");
        EXPECT_FALSE(message_is_marker());
        EXPECT_EQ(count, 77u);
        // The answer is stable (the driver is loaded once per process).
        EXPECT_QD(QD_ERROR_BACKEND_UNAVAILABLE, qd_device_count(b, &count));
    }
}

TEST(DeviceGetInfo, Cpu_DescribesTheHost) {
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_QD_OK(qd_device_get_info(QD_BACKEND_CPU, 0, &info));
    EXPECT_EQ(info.backend, (uint32_t)QD_BACKEND_CPU);
    EXPECT_EQ(info.device, 0u);
    EXPECT_EQ(info.driver_version, 0u);
    EXPECT_EQ(info.compute_major, 0u);
    EXPECT_EQ(info.compute_minor, 0u);
    EXPECT_GE(info.multiprocessors, 1u);
    EXPECT_EQ(info.total_memory, 0u);
    EXPECT_NE(memchr(info.name, '\0', sizeof info.name), nullptr) << "name is not NUL-terminated";
    EXPECT_GT(strlen(info.name), 0u);
}

TEST(DeviceGetInfo, NullOut_IsInvalidArgument) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|info|null",
                  qd_device_get_info(QD_BACKEND_CPU, 0, nullptr));
}

TEST(DeviceGetInfo, StructSizeTooSmall_IsInvalidArgument) {
    // Below the first size (168, 0.1's struct; 0.3 appended the split rule) is refused.
    for (uint32_t size : {0u, 4u, 168u - 1, (uint32_t)offsetof(qd_device_info, name)}) {
        qd_device_info info = QD_DEVICE_INFO_INIT;
        info.struct_size = size;
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "struct_size|size",
                      qd_device_get_info(QD_BACKEND_CPU, 0, &info));
        EXPECT_EQ(info.backend, 0u) << "written on failure";
    }
}

TEST(DeviceGetInfo, LargerStructSize_IsAcceptedAndTrailingBytesUntouched) {
    struct Bigger {
        qd_device_info info;
        uint8_t future[64];
    } big;
    memset(&big, 0xA5, sizeof big);
    big.info.struct_size = (uint32_t)sizeof big;
    ASSERT_QD_OK(qd_device_get_info(QD_BACKEND_CPU, 0, &big.info));
    EXPECT_EQ(big.info.backend, (uint32_t)QD_BACKEND_CPU);
    for (uint8_t b : big.future) {
        ASSERT_EQ(b, 0xA5) << "bytes past the known struct were written";
    }
}

TEST(DeviceGetInfo, UnknownBackend_IsInvalidArgument) {
    qd_device_info info = QD_DEVICE_INFO_INIT;
    for (uint32_t b : {4u, 42u, 0x7fffffffu, 0x80000000u, 0xffffffffu})
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "backend", qdt_device_get_info_raw(b, 0, &info));
}

TEST(DeviceGetInfo, DeviceOutOfRange_IsInvalidArgument) {
    qd_device_info info = QD_DEVICE_INFO_INIT;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "device",
                  qd_device_get_info(QD_BACKEND_CPU, 1, &info));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "device",
                  qd_device_get_info(QD_BACKEND_CPU, 0xffffffffu, &info));
}

TEST(DeviceGetInfo, UnavailableGpuBackend_IsBackendUnavailable) {
    for (qd_backend b : {QD_BACKEND_CUDA, QD_BACKEND_HIP}) {
        if (backend_available(b, nullptr)) continue;
        uint32_t count = 0;
        if (qd_device_count(b, &count) == QD_SUCCESS) continue;  // present but 0 devices
        qd_device_info info = QD_DEVICE_INFO_INIT;
        EXPECT_QD(QD_ERROR_BACKEND_UNAVAILABLE, qd_device_get_info(b, 0, &info));
    }
}

TEST_P(DeviceTest, GetInfo_EveryDevice_ReportsItsOrdinalAndBackend) {
    uint32_t count = 0;
    ASSERT_QD_OK(qd_device_count(GetParam(), &count));
    for (uint32_t d = 0; d < count; ++d) {
        qd_device_info info = QD_DEVICE_INFO_INIT;
        ASSERT_QD_OK(qd_device_get_info(GetParam(), d, &info));
        EXPECT_EQ(info.backend, (uint32_t)GetParam());
        EXPECT_EQ(info.device, d);
        EXPECT_GE(info.multiprocessors, 1u);
        EXPECT_NE(memchr(info.name, '\0', sizeof info.name), nullptr);
        if (GetParam() != QD_BACKEND_CPU) {
            EXPECT_GT(info.total_memory, 0u);
            EXPECT_GT(info.driver_version, 0u);
        }
    }
    qd_device_info info = QD_DEVICE_INFO_INIT;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "device",
                  qd_device_get_info(GetParam(), count, &info));
}
QDT_INSTANTIATE_BACKENDS(DeviceTest);

// ---------------------------------------------------------------------------------------------
// qd_context_create
// ---------------------------------------------------------------------------------------------

TEST(ContextCreate, DefaultDesc_CreatesACpuContext) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    qd_context ctx = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &ctx));
    EXPECT_NE(ctx, 0u);
    qd_stream s = 0;
    EXPECT_QD_OK(qd_context_default_stream(ctx, &s));
    EXPECT_QD(QD_ERROR_NOT_SUPPORTED, qd_stream_import(ctx, 0x1234, &s));  // CPU context
    qd_context_stats st = get_stats(ctx);
    EXPECT_EQ(st.stream_pool_capacity, 32u) << "stream_pool_size 0 means 32";
    EXPECT_QD_OK(qd_context_destroy(ctx));
}

TEST(ContextCreate, NullDescOrOut_IsInvalidArgument) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    qd_context ctx = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "desc|null", qd_context_create(nullptr, &ctx));
    EXPECT_EQ(ctx, 0x5555u);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_context_create(&desc, nullptr));
}

TEST(ContextCreate, InvalidDescFields_AreInvalidArgumentAndOutUntouched) {
    struct Case {
        const char *what;
        const char *keywords;
        void (*mutate)(qd_context_desc *);
    };
    const Case cases[] = {
        {"struct_size 0", "struct_size|size", [](qd_context_desc *d) { d->struct_size = 0; }},
        {"struct_size too small", "struct_size|size",
         [](qd_context_desc *d) { d->struct_size = sizeof(qd_context_desc) - 4; }},
        {"backend 4", "backend", [](qd_context_desc *d) { d->backend = 4; }},
        {"backend ~0", "backend", [](qd_context_desc *d) { d->backend = 0xffffffffu; }},
        {"cpu device 1", "device", [](qd_context_desc *d) { d->device = 1; }},
        {"pool 4097", "pool", [](qd_context_desc *d) { d->stream_pool_size = 4097; }},
        {"pool ~0", "pool", [](qd_context_desc *d) { d->stream_pool_size = 0xffffffffu; }},
        {"workers 257", "worker|thread", [](qd_context_desc *d) { d->cpu_worker_threads = 257; }},
        {"flags 2 (QD_CONTEXT_VALIDATE_FAIL alone)", "flags",
         [](qd_context_desc *d) { d->flags = 2; }},
        {"flags 4 (unknown)", "flags", [](qd_context_desc *d) { d->flags = 4; }},
        {"flags high bit", "flags", [](qd_context_desc *d) { d->flags = 0x80000000u; }},
        {"reserved 1", "reserved", [](qd_context_desc *d) { d->reserved = 1; }},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        qd_context_desc desc = QD_CONTEXT_DESC_INIT;
        desc.backend = QD_BACKEND_CPU;
        c.mutate(&desc);
        qd_context ctx = 0x5555;
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, c.keywords, qd_context_create(&desc, &ctx));
        EXPECT_EQ(ctx, 0x5555u) << "out written on failure";
    }
}

TEST(ContextCreate, LimitsThemselves_AreAccepted) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    desc.backend = QD_BACKEND_CPU;
    desc.stream_pool_size = 4096;
    desc.event_pool_size = 1;
    desc.cpu_worker_threads = 1;
    qd_context ctx = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &ctx));
    EXPECT_EQ(get_stats(ctx).stream_pool_capacity, 4096u);
    EXPECT_QD_OK(qd_context_destroy(ctx));
    desc.stream_pool_size = 1;
    desc.cpu_worker_threads = 256;
    ASSERT_QD_OK(qd_context_create(&desc, &ctx));
    EXPECT_EQ(get_stats(ctx).stream_pool_capacity, 1u);
    EXPECT_QD_OK(qd_context_destroy(ctx));
}

TEST(ContextCreate, LargerStructSize_IsAcceptedAndUnknownFieldsIgnored) {
    struct Bigger {
        qd_context_desc desc;
        uint32_t future[8];
    } big;
    big.desc = qd_context_desc QD_CONTEXT_DESC_INIT;
    for (uint32_t &f : big.future) f = 0xdeadbeef;
    big.desc.struct_size = sizeof big;
    qd_context ctx = 0;
    ASSERT_QD_OK(qd_context_create(&big.desc, &ctx));
    EXPECT_QD_OK(qd_context_destroy(ctx));
}

TEST(ContextCreate, UnavailableGpuBackend_IsBackendUnavailableWithReason) {
    for (qd_backend b : {QD_BACKEND_CUDA, QD_BACKEND_HIP}) {
        uint32_t count = 0;
        if (qd_device_count(b, &count) == QD_SUCCESS) continue;
        qd_context_desc desc = make_desc(b);
        qd_context ctx = 0x5555;
        EXPECT_QD(QD_ERROR_BACKEND_UNAVAILABLE, qd_context_create(&desc, &ctx));
        EXPECT_EQ(ctx, 0x5555u);
    }
}

TEST_P(ContextTest, Create_DeviceOutOfRange_IsInvalidArgument) {
    uint32_t count = 0;
    ASSERT_QD_OK(qd_device_count(backend(), &count));
    qd_context_desc desc = make_desc(backend());
    desc.device = count;
    qd_context ctx = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "device", qd_context_create(&desc, &ctx));
    EXPECT_EQ(ctx, 0x5555u);
}

TEST_P(ContextTest, Create_HandlesAreDistinctAndNonZero) {
    qd_context a = other_context();
    qd_context b = other_context();
    EXPECT_NE(a, 0u);
    EXPECT_NE(b, 0u);
    EXPECT_NE(a, b);
    EXPECT_NE(a, ctx_);
}

// ---------------------------------------------------------------------------------------------
// qd_context_destroy / synchronize / default_stream / get_stats: handle errors
// ---------------------------------------------------------------------------------------------

TEST_P(ContextTest, ContextCalls_ZeroWrongTypeAndDestroyed_AreInvalidHandle) {
    qd_context dead = 0;
    {
        qd_context_desc desc = make_desc(backend());
        ASSERT_QD_OK(qd_context_create(&desc, &dead));
        ASSERT_QD_OK(qd_context_destroy(dead));
    }
    qd_event ev = new_event();
    const qd_context bad[] = {0, default_stream_, ev, dead, kAllOnes};
    for (qd_context c : bad) {
        SCOPED_TRACE(c);
        qd_stream s = 0x5555;
        qd_context_stats stats = QD_CONTEXT_STATS_INIT;
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_context_synchronize(c));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_context_default_stream(c, &s));
        EXPECT_EQ(s, 0x5555u);
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_context_get_stats(c, &stats));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_context_destroy(c));
    }
    EXPECT_QD_OK(qd_event_destroy(ev));
}

TEST_P(ContextTest, Destroy_Twice_IsInvalidHandle) {
    qd_context c = 0;
    qd_context_desc desc = make_desc(backend());
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_context_destroy(c));
}

TEST_P(ContextTest, DefaultStream_IsStableNonZeroAndUsable) {
    qd_stream a = 0, b = 0;
    ASSERT_QD_OK(qd_context_default_stream(ctx_, &a));
    ASSERT_QD_OK(qd_context_default_stream(ctx_, &b));
    EXPECT_NE(a, 0u);
    EXPECT_EQ(a, b);
    qd_context owner = 0;
    EXPECT_QD_OK(qd_stream_get_context(a, &owner));
    EXPECT_EQ(owner, ctx_);
    Flag flag;
    ASSERT_QD_OK(flag.enqueue(a));
    EXPECT_QD_OK(qd_stream_synchronize(a));
    EXPECT_TRUE(flag.is_set());
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_context_default_stream(ctx_, nullptr));
}

TEST_P(ContextTest, DefaultStreams_OfTwoContextsDiffer) {
    qd_context c2 = other_context();
    qd_stream a = 0, b = 0;
    ASSERT_QD_OK(qd_context_default_stream(ctx_, &a));
    ASSERT_QD_OK(qd_context_default_stream(c2, &b));
    EXPECT_NE(a, b);
}

TEST_P(ContextTest, GetStats_NullOrSmallStructSize_IsInvalidArgument) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|stats|null", qd_context_get_stats(ctx_, nullptr));
    for (uint32_t size : {0u, 4u, 128u - 8u}) {  // below 128, the first released size
        qd_context_stats stats = QD_CONTEXT_STATS_INIT;
        stats.struct_size = size;
        stats.live_streams = 12345;
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "struct_size|size",
                      qd_context_get_stats(ctx_, &stats));
        EXPECT_EQ(stats.live_streams, 12345u) << "written on failure";
    }
}

TEST_P(ContextTest, GetStats_LargerStructSize_LeavesTrailingBytesUntouched) {
    struct Bigger {
        qd_context_stats stats;
        uint8_t future[32];
    } big;
    memset(&big, 0xA5, sizeof big);
    big.stats.struct_size = sizeof big;
    ASSERT_QD_OK(qd_context_get_stats(ctx_, &big.stats));
    EXPECT_EQ(big.stats.stream_pool_capacity, 8u);
    for (uint8_t b : big.future) {
        ASSERT_EQ(b, 0xA5);
    }
}

TEST_P(ContextTest, GetStats_FreshContext_CountsTheDefaultStreamOnly) {
    qd_context c = 0;
    qd_context_desc desc = make_desc(backend(), 5);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_context_stats s = get_stats(c);
    EXPECT_EQ(s.live_streams, 1u) << "the default stream counts as a live stream";
    EXPECT_EQ(s.live_events, 0u);
    EXPECT_EQ(s.live_modules, 0u);
    EXPECT_EQ(s.live_kernels, 0u);
    EXPECT_EQ(s.stream_pool_capacity, 5u);
    EXPECT_EQ(s.stream_pool_leased, 0u);
    EXPECT_EQ(s.stream_pool_hits, 0u);
    EXPECT_EQ(s.stream_pool_misses, 0u);
    EXPECT_LE(s.stream_pool_created, 5u);
    EXPECT_EQ(s.live_allocations, 0u);
    EXPECT_EQ(s.bytes_allocated, 0u);
    EXPECT_EQ(s.host_bytes_allocated, 0u);
    EXPECT_QD_OK(qd_context_destroy(c));
}

TEST_P(ContextTest, GetStats_LiveCounts_FollowCreateAndDestroyBackToBaseline) {
    const qd_context_stats base = get_stats(ctx_);
    std::vector<qd_stream> streams;
    std::vector<qd_event> events;
    for (int i = 0; i < 5; ++i) streams.push_back(new_stream());
    for (int i = 0; i < 7; ++i) events.push_back(new_event(i % 2 ? QD_EVENT_TIMING : 0));
    qd_stream lease = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &lease));
    uint64_t a1 = alloc(streams[0], 100), a2 = alloc(streams[1], 28);
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx_, 64, &h));
    qd_context_stats mid = get_stats(ctx_);
    EXPECT_EQ(mid.live_streams, base.live_streams + 6) << "5 created + 1 lease";
    EXPECT_EQ(mid.live_events, base.live_events + 7);
    EXPECT_EQ(mid.stream_pool_leased, base.stream_pool_leased + 1);
    EXPECT_EQ(mid.live_allocations, base.live_allocations + 2);
    EXPECT_EQ(mid.bytes_allocated, base.bytes_allocated + 128);
    EXPECT_EQ(mid.host_bytes_allocated, base.host_bytes_allocated + 64);
    EXPECT_QD_OK(qd_mem_free_async(streams[0], a1));
    EXPECT_QD_OK(qd_mem_free_async(streams[1], a2));
    EXPECT_QD_OK(qd_host_free(ctx_, h));
    EXPECT_QD_OK(qd_stream_release(lease));
    for (qd_stream s : streams) {
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
    for (qd_event e : events) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    EXPECT_QD_OK(qd_context_synchronize(ctx_));
    qd_context_stats end = get_stats(ctx_);
    EXPECT_EQ(end.live_streams, base.live_streams);
    EXPECT_EQ(end.live_events, base.live_events);
    EXPECT_EQ(end.live_modules, base.live_modules);
    EXPECT_EQ(end.live_kernels, base.live_kernels);
    EXPECT_EQ(end.stream_pool_leased, base.stream_pool_leased);
    EXPECT_EQ(end.live_allocations, base.live_allocations);
    EXPECT_EQ(end.bytes_allocated, base.bytes_allocated);
    EXPECT_EQ(end.host_bytes_allocated, base.host_bytes_allocated);
}

TEST_P(ContextTest, GetStats_Kernels_AreCounted) {
    QDT_REQUIRE_CPU();
    const qd_context_stats base = get_stats(ctx_);
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(
        ctx_, [](const qd_host_kernel_info *, void *const *) { return 0; }, "k", &k));
    EXPECT_EQ(get_stats(ctx_).live_kernels, base.live_kernels + 1);
    EXPECT_QD_OK(qd_kernel_destroy(k));
    EXPECT_EQ(get_stats(ctx_).live_kernels, base.live_kernels);
}

// ---------------------------------------------------------------------------------------------
// qd_context_synchronize
// ---------------------------------------------------------------------------------------------

TEST_P(ContextTest, Synchronize_WaitsForEveryStream) {
    const int kStreams = 4;
    qd_stream streams[kStreams];
    Flag flags[kStreams];
    for (int i = 0; i < kStreams; ++i) {
        streams[i] = new_stream();
        ASSERT_QD_OK(enqueue_sleep_us(streams[i], 5000 + 5000 * i));
        ASSERT_QD_OK(flags[i].enqueue(streams[i]));
    }
    Flag on_default;
    ASSERT_QD_OK(enqueue_sleep_us(default_stream_, 10000));
    ASSERT_QD_OK(on_default.enqueue(default_stream_));
    qd_stream lease = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &lease));
    Flag on_lease;
    ASSERT_QD_OK(enqueue_sleep_us(lease, 10000));
    ASSERT_QD_OK(on_lease.enqueue(lease));
    EXPECT_QD_OK(qd_context_synchronize(ctx_));
    for (int i = 0; i < kStreams; ++i) {
        EXPECT_TRUE(flags[i].is_set()) << "stream " << i;
    }
    EXPECT_TRUE(on_default.is_set());
    EXPECT_TRUE(on_lease.is_set());
    for (qd_stream s : streams) {
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
    EXPECT_QD_OK(qd_stream_release(lease));
}

TEST_P(ContextTest, Synchronize_IdleContext_ReturnsSuccess) {
    EXPECT_QD_OK(qd_context_synchronize(ctx_));
    EXPECT_QD_OK(qd_context_synchronize(ctx_));
}

// ---------------------------------------------------------------------------------------------
// qd_context_destroy with live children
// ---------------------------------------------------------------------------------------------

TEST_P(ContextTest, Destroy_WithLiveChildren_DrainsThenInvalidatesEveryChild) {
    qd_context c = 0;
    qd_context_desc desc = make_desc(backend(), 4, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream def = 0, s = 0, lease = 0, forked[2] = {0, 0};
    ASSERT_QD_OK(qd_context_default_stream(c, &def));
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(qd_stream_acquire(c, &lease));
    ASSERT_QD_OK(qd_stream_fork(s, 2, forked));
    qd_event e = 0, et = 0, recorded = 0;
    ASSERT_QD_OK(qd_event_create(c, 0, &e));
    ASSERT_QD_OK(qd_event_create(c, QD_EVENT_TIMING, &et));
    ASSERT_QD_OK(qd_event_create(c, 0, &recorded));
    qd_module m = 0;
    qd_kernel km = 0, kf = 0;
    std::string path = cpu_module_path();
    if (is_cpu()) {
        ASSERT_QD_OK(qd_module_load(c, path.data(), path.size(), &m));
        ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &km));
        ASSERT_QD_OK(qd_kernel_from_host_fn(
            c, [](const qd_host_kernel_info *, void *const *) { return 0; }, "k", &kf));
    }
    uint64_t a = 0, a2 = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(s, 4096, &a));
    ASSERT_QD_OK(qd_mem_alloc_async(lease, 64, &a2));
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(c, 256, &h));
    // Pending work on several streams: destroy must drain it.
    Flag f_s, f_def, f_lease, f_fork;
    ASSERT_QD_OK(enqueue_sleep_us(s, 30000));
    ASSERT_QD_OK(f_s.enqueue(s));
    ASSERT_QD_OK(qd_event_record(s, recorded));
    ASSERT_QD_OK(enqueue_sleep_us(def, 20000));
    ASSERT_QD_OK(f_def.enqueue(def));
    ASSERT_QD_OK(enqueue_sleep_us(lease, 20000));
    ASSERT_QD_OK(f_lease.enqueue(lease));
    ASSERT_QD_OK(enqueue_sleep_us(forked[1], 20000));
    ASSERT_QD_OK(f_fork.enqueue(forked[1]));
    ASSERT_QD_OK(qd_stream_set_active(c, s, nullptr));

    ASSERT_QD_OK(qd_context_destroy(c));
    EXPECT_TRUE(f_s.is_set()) << "destroy returned before draining the stream";
    EXPECT_TRUE(f_def.is_set()) << "destroy returned before draining the default stream";
    EXPECT_TRUE(f_lease.is_set()) << "destroy returned before draining a lease";
    EXPECT_TRUE(f_fork.is_set()) << "destroy returned before draining a forked child";

    for (qd_stream x : {def, s, lease, forked[0], forked[1]}) {
        SCOPED_TRACE(x);
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_query(x));
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_synchronize(x));
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_launch_host_fn(x, &Flag::set_cb, &f_s));
        qd_context owner = 0;
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_get_context(x, &owner));
    }
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_destroy(s));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_release(lease));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_join(s, forked, 2));
    for (qd_event x : {e, et, recorded}) {
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_query(x));
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_event_synchronize(x));
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_event_destroy(x));
    }
    if (is_cpu()) {
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_module_unload(m));
        qd_kernel k2 = 0;
        EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_kernel_get(m, "qd_test_noop", &k2));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", qd_kernel_destroy(km));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", qd_kernel_destroy(kf));
    }
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_mem_free_async(s, a));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_host_free(c, h));
    qd_stream active = 0;
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_get_active(c, &active));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_context_synchronize(c));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_context_destroy(c));
    // The fixture's context is unaffected.
    EXPECT_QD_OK(qd_stream_query(default_stream_));
}

TEST_P(ContextTest, Destroy_LeavesOtherContextsWorking) {
    qd_context c2 = 0;
    qd_context_desc desc = make_desc(backend());
    ASSERT_QD_OK(qd_context_create(&desc, &c2));
    qd_stream s2 = 0;
    ASSERT_QD_OK(qd_stream_create(c2, nullptr, &s2));
    qd_stream mine = new_stream();
    ASSERT_QD_OK(qd_context_destroy(c2));
    EXPECT_QD_OK(qd_stream_query(mine));
    Flag f;
    ASSERT_QD_OK(f.enqueue(mine));
    EXPECT_QD_OK(qd_stream_synchronize(mine));
    EXPECT_TRUE(f.is_set());
    EXPECT_QD_OK(qd_stream_destroy(mine));
}

TEST_P(ContextTest, CreateDestroy_Repeated_NoHandleComesBack) {
    std::vector<qd_context> dead;
    std::vector<qd_stream> dead_streams;
    for (int i = 0; i < 20; ++i) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(backend(), 2, 1);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        for (qd_context d : dead) {
            ASSERT_NE(c, d) << "a destroyed context handle came back";
        }
        qd_stream s = 0;
        ASSERT_QD_OK(qd_context_default_stream(c, &s));
        for (qd_stream d : dead_streams) {
            EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_query(d));
        }
        ASSERT_QD_OK(qd_context_destroy(c));
        dead.push_back(c);
        dead_streams.push_back(s);
    }
}

QDT_INSTANTIATE_BACKENDS(ContextTest);
