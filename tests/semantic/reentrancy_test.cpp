// qd calls nested in other qd calls on the same thread, and calls racing a destroy of what they
// name (qd.h, "Threads"): a hazard handler, a module's constructor or destructor may destroy the
// objects the outer call is using, its own context included; the outer call then completes as if
// the destroy came after it, or returns QD_ERROR_INVALID_HANDLE, and nothing it used is freed
// before it returns. CPU backend (the validation mode's handler and the CPU module's
// constructors run on the calling thread there).
//
// No test depends on timing: every window is held open by a hook (a hazard handler, a module
// constructor, a gate on a stream).
#include <qd/qd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "qd_test.h"

namespace qdt {
namespace {

int32_t k_noop(const qd_host_kernel_info *, void *const *) { return 0; }

// A kernel that only says it ran.
std::atomic<int> g_marker_runs{0};
int32_t k_marker(const qd_host_kernel_info *, void *const *) {
    g_marker_runs++;
    return 0;
}

qd_context make_context(uint32_t flags) {
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
    desc.flags = flags;
    qd_context ctx = 0;
    EXPECT_QD_OK(qd_context_create(&desc, &ctx));
    return ctx;
}

// Two launches of a kernel that names block `a` on two unordered streams: the second is a race
// the validation mode reports (the kernel itself touches nothing). `first` runs behind a gate,
// so the two kernels never run at once.
struct RacingLaunches {
    qd_context ctx = 0;
    qd_stream s1 = 0, s2 = 0;
    qd_kernel k = 0;
    uint64_t a = 0;
    Gate gate;

    explicit RacingLaunches(uint32_t flags) {
        ctx = make_context(flags);
        qd_stream def = 0;
        EXPECT_QD_OK(qd_context_default_stream(ctx, &def));
        EXPECT_QD_OK(qd_stream_create(ctx, nullptr, &s1));
        EXPECT_QD_OK(qd_stream_create(ctx, nullptr, &s2));
        EXPECT_QD_OK(qd_kernel_from_host_fn(ctx, &k_noop, "racer", &k));
        EXPECT_QD_OK(qd_mem_alloc_async(def, 64, &a));
        EXPECT_QD_OK(qd_stream_synchronize(def));
        EXPECT_QD_OK(gate.enqueue(s1));
        EXPECT_QD_OK(launch(s1));
    }
    qd_status launch(qd_stream s) {
        qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
        qd_arg arg = {&a, sizeof a};
        return qd_launch(s, k, &cfg, &arg, 1);
    }
};

// What a hazard handler did, for the test to check after the reporting call returned.
struct HandlerLog {
    std::atomic<int> calls{0};
    std::atomic<qd_status> destroy_status{QD_ERROR_INTERNAL};  // may be set on another thread
    qd_status other_status = QD_ERROR_INTERNAL;
    qd_context other = 0;
    qd_kernel kernel = 0;
    qd_kernel made = 0;  // a kernel the handler made in `other`
};

void destroy_own_context(const qd_hazard *h, void *user) {
    auto *log = static_cast<HandlerLog *>(user);
    if (log->calls++ == 0) log->destroy_status = qd_context_destroy(h->context);
}

TEST(ReentrancyTest, HazardHandler_DestroysItsOwnContext_TheReportingLaunchCompletes) {
    QDT_RACES_ON_PURPOSE();  // plants a hazard for its handler to see
    RacingLaunches r(QD_CONTEXT_VALIDATE);
    HandlerLog log;
    ASSERT_QD_OK(qd_context_set_hazard_handler(r.ctx, &destroy_own_context, &log));
    r.gate.open();  // the destroy inside the handler drains s1
    const qd_status st = r.launch(r.s2);
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.destroy_status.load(), QD_SUCCESS) << qd_last_error_message();
    // The launch completes as if the destroy came after it, or finds its context gone.
    EXPECT_TRUE(st == QD_SUCCESS || st == QD_ERROR_INVALID_HANDLE) << qd_status_name(st);
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_context_synchronize(r.ctx));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_query(r.s2));
}

void destroy_kernel_then_call_other(const qd_hazard *, void *user) {
    auto *log = static_cast<HandlerLog *>(user);
    if (log->calls++ != 0) return;
    log->destroy_status = qd_kernel_destroy(log->kernel);
    // Calls on another context, one of which makes a kernel: the launched kernel must survive
    // them (were it freed here, the new kernel could take its place in memory, and the
    // reporting launch would run that one).
    qd_stream def = 0;
    log->other_status = qd_kernel_from_host_fn(log->other, &k_marker, "marker", &log->made);
    if (log->other_status == QD_SUCCESS)
        log->other_status = qd_context_default_stream(log->other, &def);
    if (log->other_status == QD_SUCCESS) log->other_status = qd_stream_synchronize(def);
}

TEST(ReentrancyTest, HazardHandler_DestroysTheLaunchedKernel_AndCallsAnotherContext) {
    QDT_RACES_ON_PURPOSE();  // plants a hazard for its handler to see
    RacingLaunches r(QD_CONTEXT_VALIDATE);
    HandlerLog log;
    log.kernel = r.k;
    log.other = make_context(0);
    ASSERT_QD_OK(qd_context_set_hazard_handler(r.ctx, &destroy_kernel_then_call_other, &log));
    // The report comes before the launch is queued; the kernel it launches is the one the
    // handler destroys, which the launch keeps alive until it ran.
    EXPECT_QD_OK(r.launch(r.s2));
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.destroy_status.load(), QD_SUCCESS);
    EXPECT_EQ(log.other_status, QD_SUCCESS) << qd_last_error_message();
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, r.launch(r.s1));
    r.gate.open();
    EXPECT_QD_OK(qd_context_synchronize(r.ctx));
    EXPECT_EQ(g_marker_runs.load(), 0);  // the launch ran the kernel it named
    EXPECT_EQ(get_stats(r.ctx).live_kernels, 0u);
    EXPECT_QD_OK(qd_kernel_destroy(log.made));
    EXPECT_QD_OK(qd_context_destroy(log.other));
    EXPECT_QD_OK(qd_context_destroy(r.ctx));
}

// With QD_CONTEXT_VALIDATE_FAIL a qd_host_free of a block in unordered use is refused and the
// block goes back to its context; a handler that destroys the context meanwhile has the
// destroy free it. It is freed once (the refused free must not free it a second time).
void destroy_context_in_fail_mode(const qd_hazard *h, void *user) {
    auto *log = static_cast<HandlerLog *>(user);
    if (log->calls++ == 0) log->destroy_status = qd_context_destroy(h->context);
}

TEST(ReentrancyTest, HostFreeRefusedByHazard_HandlerDestroysContext_BlockFreedOnce) {
    QDT_RACES_ON_PURPOSE();  // plants a hazard for its handler to see
    qd_context ctx = make_context(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    qd_stream s = 0;
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_stream_create(ctx, nullptr, &s));
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx, &k_noop, "user", &k));
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx, 64, &h));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    uint64_t address = (uint64_t)(uintptr_t)h;
    qd_arg arg = {&address, sizeof address};
    ASSERT_QD_OK(qd_launch(s, k, &cfg, &arg, 1));
    HandlerLog log;
    ASSERT_QD_OK(qd_context_set_hazard_handler(ctx, &destroy_context_in_fail_mode, &log));
    gate.open();  // the destroy in the handler drains the stream
    const qd_status st = qd_host_free(ctx, h);
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.destroy_status.load(), QD_SUCCESS) << qd_last_error_message();
    EXPECT_TRUE(st == QD_ERROR_HAZARD || st == QD_ERROR_INVALID_HANDLE) << qd_status_name(st);
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_host_free(ctx, h));
    // Heap still sound: a double free would have aborted here or at the next allocations.
    for (int i = 0; i < 64; ++i) {
        void *p = std::malloc(64);
        ASSERT_NE(p, nullptr);
        std::free(p);
    }
}

// The same refusal while the destroy runs on another thread and is still draining: the block
// given back is freed by the destroy after the work queued earlier (a memset behind a gate)
// ran, never under it.
void hold_free_while_destroy_drains(const qd_hazard *h, void *user) {
    auto *log = static_cast<HandlerLog *>(user);
    if (log->calls++ != 0) return;
    const qd_context ctx = h->context;
    std::thread([ctx, log] { log->destroy_status = qd_context_destroy(ctx); }).detach();
    // The destroy has begun once the context's handle is gone; it then waits for the gate.
    qd_context_stats stats = QD_CONTEXT_STATS_INIT;
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (qd_context_get_stats(ctx, &stats) == QD_SUCCESS &&
           std::chrono::steady_clock::now() < limit)
        std::this_thread::yield();
}

TEST(ReentrancyTest, MemFreeRefusedByHazard_DuringDestroyDrain_FreedAfterQueuedWork) {
    QDT_RACES_ON_PURPOSE();  // plants a hazard for its handler to see
    qd_context ctx = make_context(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    qd_stream def = 0, s = 0;
    ASSERT_QD_OK(qd_context_default_stream(ctx, &def));
    ASSERT_QD_OK(qd_stream_create(ctx, nullptr, &s));
    uint64_t a = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(def, 4096, &a));
    ASSERT_QD_OK(qd_stream_synchronize(def));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(qd_memset_async(s, a, 1, 4096));  // runs once the gate opens
    HandlerLog log;
    ASSERT_QD_OK(qd_context_set_hazard_handler(ctx, &hold_free_while_destroy_drains, &log));
    // Not ordered after the memset: refused, and the block goes back while the destroy drains.
    const qd_status st = qd_mem_free_async(def, a);
    EXPECT_TRUE(st == QD_ERROR_HAZARD || st == QD_ERROR_INVALID_HANDLE) << qd_status_name(st);
    gate.open();  // the memset writes the block: it must still be there
    ASSERT_TRUE(gate.wait_done());
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (log.destroy_status == QD_ERROR_INTERNAL && std::chrono::steady_clock::now() < limit)
        std::this_thread::yield();
    EXPECT_EQ(log.destroy_status.load(), QD_SUCCESS);
}

// ---------------------------------------------------------------------------------------------
// Peer copies and the destroy of the context whose memory they name
// ---------------------------------------------------------------------------------------------

// Large enough to be mapped on its own by malloc: once freed, reading it faults at once.
constexpr uint64_t kPeerBytes = 8ull << 20;

struct PeerPair {
    qd_context a = 0, b = 0;  // the copy runs on a stream of a; b's memory is the source
    qd_stream sa = 0;
    uint64_t dst = 0, src = 0;
    explicit PeerPair(uint32_t a_flags) {
        a = make_context(a_flags);
        b = make_context(0);
        qd_stream da = 0, db = 0;
        EXPECT_QD_OK(qd_context_default_stream(a, &da));
        EXPECT_QD_OK(qd_context_default_stream(b, &db));
        EXPECT_QD_OK(qd_stream_create(a, nullptr, &sa));
        EXPECT_QD_OK(qd_mem_alloc_async(da, kPeerBytes, &dst));
        EXPECT_QD_OK(qd_mem_alloc_async(db, kPeerBytes, &src));
        EXPECT_QD_OK(qd_memset_async(db, src, 0x5a, kPeerBytes));
        EXPECT_QD_OK(qd_memset_async(da, dst, 0, kPeerBytes));
        EXPECT_QD_OK(qd_stream_synchronize(da));
        EXPECT_QD_OK(qd_stream_synchronize(db));
    }
    qd_status copy() { return qd_memcpy_peer_async(sa, dst, a, src, b, kPeerBytes); }
    // The last bytes the copy wrote, read back on the host.
    bool copied() {
        uint8_t tail[16] = {};
        EXPECT_QD_OK(qd_memcpy_async(sa, (uint64_t)(uintptr_t)tail, dst + kPeerBytes - sizeof tail,
                                     sizeof tail));
        EXPECT_QD_OK(qd_stream_synchronize(sa));
        for (uint8_t v : tail)
            if (v != 0x5a) return false;
        return true;
    }
};

void destroy_other_context(const qd_hazard *, void *user) {
    auto *log = static_cast<HandlerLog *>(user);
    if (log->calls++ == 0) log->destroy_status = qd_context_destroy(log->other);
}

TEST(ReentrancyTest, HazardHandlerOfAPeerCopy_DestroysTheSourceContext_CopyReadsLiveMemory) {
    QDT_RACES_ON_PURPOSE();  // plants a hazard for its handler to see
    PeerPair p(QD_CONTEXT_VALIDATE);
    // An unordered launch that names dst on another stream makes the copy's write a race: the
    // copy's report comes from inside qd_memcpy_peer_async, before the copy is queued.
    qd_stream other = 0;
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_stream_create(p.a, nullptr, &other));
    ASSERT_QD_OK(qd_kernel_from_host_fn(p.a, &k_noop, "user", &k));
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    qd_arg arg = {&p.dst, sizeof p.dst};
    ASSERT_QD_OK(qd_launch(other, k, &cfg, &arg, 1));
    ASSERT_QD_OK(qd_stream_synchronize(other));
    ASSERT_QD_OK(qd_launch(other, k, &cfg, &arg, 1));
    HandlerLog log;
    log.other = p.b;
    ASSERT_QD_OK(qd_context_set_hazard_handler(p.a, &destroy_other_context, &log));
    // b's destroy runs inside this call: its memory is freed only after the copy ran.
    EXPECT_QD_OK(p.copy());
    EXPECT_EQ(log.calls.load(), 1);
    EXPECT_EQ(log.destroy_status.load(), QD_SUCCESS) << qd_last_error_message();
    EXPECT_TRUE(p.copied());
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, p.copy());
    EXPECT_QD_OK(qd_context_destroy(p.a));
}

TEST(ReentrancyTest, DestroyOfTheSourceContext_WaitsForAQueuedPeerCopy) {
    PeerPair p(0);
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(p.sa));
    ASSERT_QD_OK(p.copy());  // queued behind the gate
    // Opens the gate once b's destroy has begun (its handle is gone).
    std::thread opener([&] {
        qd_context_stats stats = QD_CONTEXT_STATS_INIT;
        const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (qd_context_get_stats(p.b, &stats) == QD_SUCCESS &&
               std::chrono::steady_clock::now() < limit)
            std::this_thread::yield();
        gate.open();
    });
    EXPECT_QD_OK(qd_context_destroy(p.b));
    opener.join();
    EXPECT_TRUE(p.copied());
    EXPECT_QD_OK(qd_context_destroy(p.a));
}

// Peer copies and captures racing the destroy of their context get the statuses qd.h lists for
// that race (QD_ERROR_INVALID_HANDLE, or success as if they came first), never
// QD_ERROR_INVALID_ADDRESS for the swept memory or "not capturing" for the ended capture; a copy
// that succeeded read live memory.
TEST(ReentrancyTest, CallsRacingContextDestroy_GetOnlyListedStatuses) {
    constexpr int kCopiers = 3;
    const int rounds = int(scaled(40, 8));
    for (int round = 0; round < rounds; ++round) {
        const qd_context a = make_context(0), b = make_context(0);
        qd_stream da = 0, db = 0, sb = 0;
        ASSERT_QD_OK(qd_context_default_stream(a, &da));
        ASSERT_QD_OK(qd_context_default_stream(b, &db));
        ASSERT_QD_OK(qd_stream_create(b, nullptr, &sb));
        uint64_t dst = 0, src = 0;
        ASSERT_QD_OK(qd_mem_alloc_async(da, 64, &dst));
        ASSERT_QD_OK(qd_mem_alloc_async(db, 64, &src));
        ASSERT_QD_OK(qd_memset_async(db, src, 0x5a, 64));
        ASSERT_QD_OK(qd_stream_synchronize(db));
        ASSERT_QD_OK(qd_stream_synchronize(da));
        Barrier start(kCopiers + 2);
        std::atomic<bool> destroyed{false};
        std::vector<qd_status> unlisted;
        std::mutex mutex;
        auto note = [&](const char *call, qd_status st) {
            if (st == QD_SUCCESS || st == QD_ERROR_INVALID_HANDLE) return;
            std::lock_guard<std::mutex> lock(mutex);
            unlisted.push_back(st);
            ADD_FAILURE() << call << ": " << qd_status_name(st) << ": " << qd_last_error_message();
        };
        std::vector<std::thread> threads;
        for (int c = 0; c < kCopiers; ++c)
            threads.emplace_back([&] {
                start.arrive_and_wait();
                for (int n = 0; n < 100000; ++n) {
                    const qd_status st = qd_memcpy_peer_async(da, dst, a, src, b, 64);
                    note("qd_memcpy_peer_async", st);
                    if (st != QD_SUCCESS || destroyed.load()) break;
                }
            });
        threads.emplace_back([&] {
            start.arrive_and_wait();
            for (int n = 0; n < 100000; ++n) {
                qd_status st = qd_stream_begin_capture(sb);
                note("qd_stream_begin_capture", st);
                if (st != QD_SUCCESS) break;
                qd_graph g = 0;
                st = qd_stream_end_capture(sb, &g);
                note("qd_stream_end_capture", st);
                if (st != QD_SUCCESS) break;
                note("qd_graph_destroy", qd_graph_destroy(g));  // the destroy may have gone first
                if (destroyed.load()) break;
            }
        });
        start.arrive_and_wait();
        EXPECT_QD_OK(qd_context_destroy(b));
        destroyed = true;
        for (std::thread &t : threads) t.join();
        uint8_t back[64] = {};
        EXPECT_QD_OK(qd_memcpy_async(da, (uint64_t)(uintptr_t)back, dst, sizeof back));
        EXPECT_QD_OK(qd_stream_synchronize(da));
        EXPECT_QD_OK(qd_context_destroy(a));
        if (!unlisted.empty()) break;
    }
}

// ---------------------------------------------------------------------------------------------
// Module constructors and destructors (tests/cpu_module/qd_test_hook_module.cpp)
// ---------------------------------------------------------------------------------------------

struct ModuleHook {
    static inline std::atomic<qd_context> ctx{0};
    static inline std::atomic<qd_context> replacement{0};
    static inline std::atomic<qd_stream> stream{0};
    static inline std::atomic<int> ran{0};
    static inline std::atomic<qd_status> status{QD_ERROR_INTERNAL};
    static void on_load(int phase) {
        if (phase != 0) return;
        status = qd_context_destroy(ctx.load());
        // A new context right after: had the destroy freed the loading context, this one could
        // take its place in memory, and the load would put the module into it.
        replacement = make_context(0);
        ran = 1;
    }
    static void on_unload(int phase) {
        if (phase != 1) return;
        status = qd_stream_synchronize(stream.load());
        ran = 1;
    }
    static void set(void (*hook)(int)) {
        char value[32];
        std::snprintf(value, sizeof value, "%llx", (unsigned long long)(uintptr_t)hook);
        setenv("QDT_MODULE_HOOK", value, 1);
        ran = 0;
        status = QD_ERROR_INTERNAL;
    }
    ~ModuleHook() { unsetenv("QDT_MODULE_HOOK"); }
};

const char *hook_module_path() {
    const char *p = std::getenv("QD_TEST_HOOK_MODULE");
    return p && *p ? p : nullptr;
}

// The constructor runs inside dlopen, under the dynamic loader's lock, which a worker of the
// context may need (releasing another module): a destroy there would wait for its drain, so for
// itself. It is refused as from a callback of the context, and the load goes on.
TEST(ReentrancyTest, ModuleConstructor_DestroyOfTheLoadingContext_RefusedAndTheLoadCompletes) {
    const char *path = hook_module_path();
    if (!path) GTEST_SKIP() << "QD_TEST_HOOK_MODULE is not set (meson test sets it)";
    qd_context ctx = make_context(0);
    ModuleHook hook;
    ModuleHook::ctx = ctx;
    ModuleHook::set(&ModuleHook::on_load);
    qd_module m = 0;
    EXPECT_QD_OK(qd_module_load(ctx, path, std::strlen(path), &m));
    EXPECT_EQ(ModuleHook::ran.load(), 1);
    EXPECT_EQ(ModuleHook::status.load(), QD_ERROR_INVALID_OPERATION);
    EXPECT_EQ(get_stats(ctx).live_modules, 1u);
    EXPECT_EQ(get_stats(ModuleHook::replacement).live_modules, 0u);
    EXPECT_QD_OK(qd_module_unload(m));
    EXPECT_QD_OK(qd_context_destroy(ModuleHook::replacement));
    EXPECT_QD_OK(qd_context_destroy(ctx));
}

TEST(ReentrancyTest, ModuleDestructorOnAWorker_BlockingCallOnItsContext_Refused) {
    const char *path = hook_module_path();
    if (!path) GTEST_SKIP() << "QD_TEST_HOOK_MODULE is not set (meson test sets it)";
    qd_context ctx = make_context(0);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(ctx, nullptr, &s));
    ModuleHook hook;
    ModuleHook::stream = s;
    ModuleHook::set(&ModuleHook::on_unload);
    qd_module m = 0;
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_module_load(ctx, path, std::strlen(path), &m));
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_hook_noop", &k));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    uint64_t word = 0;
    qd_arg arg = {&word, sizeof word};
    ASSERT_QD_OK(qd_launch(s, k, &cfg, &arg, 1));
    // The queued launch now holds the module's last reference: it is unloaded on the worker
    // that ran the launch, and its destructor's blocking call on that context is refused.
    ASSERT_QD_OK(qd_module_unload(m));
    // This thread's next call releases what it resolved (the module and kernel objects).
    EXPECT_QD(QD_NOT_READY, qd_stream_query(s));
    EXPECT_EQ(ModuleHook::ran.load(), 0);
    gate.open();
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!ModuleHook::ran.load() && std::chrono::steady_clock::now() < limit)
        std::this_thread::yield();
    ASSERT_EQ(ModuleHook::ran.load(), 1);
    EXPECT_EQ(ModuleHook::status.load(), QD_ERROR_INVALID_OPERATION);
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_context_destroy(ctx));
}

}  // namespace
}  // namespace qdt
