// Fork (docs/reliability.md, category 11): in a child made with fork(), a context created in the
// parent returns QD_ERROR_FORKED from every call (destroy calls only forget it), while a context
// created in the child works. The child reports through its exit code (0 = all checks passed,
// otherwise the number of the first failing check, with a line on stderr).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

#if defined(__SANITIZE_THREAD__)
#define QDT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define QDT_TSAN 1
#endif
#endif

class ForkTest : public BackendTest {
  protected:
    void SetUp() override {
#ifdef QDT_TSAN
        // ThreadSanitizer cannot follow threads started in the child of a process that already
        // runs threads (it aborts with "dup thread with used id"): the child checks need them.
        GTEST_SKIP() << "fork of a multi-threaded process: not supported under ThreadSanitizer";
#endif
        BackendTest::SetUp();
    }
};

int g_check = 0;

#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        ++g_check;                                                                                 \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child check %d failed at line %d: %s (message: \"%s\")\n", g_check,   \
                    __LINE__, #cond, qd_last_error_message());                                     \
            _exit(g_check);                                                                        \
        }                                                                                          \
    } while (0)

#define CHILD_FORKED(call)                                                                         \
    do {                                                                                           \
        qd_status st_ = (call);                                                                    \
        ++g_check;                                                                                 \
        if (st_ != QD_ERROR_FORKED || !strstr(qd_last_error_message(), "fork")) {                  \
            fprintf(stderr,                                                                        \
                    "child check %d failed at line %d: %s returned %s (message: \"%s\")\n",        \
                    g_check, __LINE__, #call, qd_status_name(st_), qd_last_error_message());       \
            _exit(g_check);                                                                        \
        }                                                                                          \
    } while (0)

int32_t write_kernel(const qd_host_kernel_info *, void *const *args) {
    uint32_t *dst;
    memcpy(&dst, args[0], sizeof dst);
    *dst = 0xC0FFEE;
    return 0;
}

// Returns the child's exit code (or 1000 + signal).
int run_in_child(const std::function<void()> &body) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        body();
        _exit(0);
    }
    if (pid < 0) return -1;
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -2;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
    return -3;
}

// A fresh CPU context in the child must work end to end.
void child_new_cpu_context_works() {
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 2);
    CHILD_CHECK(qd_context_create(&desc, &c) == QD_SUCCESS);
    qd_stream s = 0;
    CHILD_CHECK(qd_stream_create(c, nullptr, &s) == QD_SUCCESS);
    qd_kernel k = 0;
    CHILD_CHECK(qd_kernel_from_host_fn(c, &write_kernel, "write", &k) == QD_SUCCESS);
    uint32_t value = 0;
    uint32_t *p = &value;
    qd_arg arg = {&p, sizeof p};
    CHILD_CHECK(qd_launch(s, k, nullptr, &arg, 1) == QD_SUCCESS);
    qd_stream kids[2];
    CHILD_CHECK(qd_stream_fork(s, 2, kids) == QD_SUCCESS);
    CHILD_CHECK(qd_stream_join(s, kids, 2) == QD_SUCCESS);
    qd_event e = 0;
    CHILD_CHECK(qd_event_create(c, QD_EVENT_TIMING, &e) == QD_SUCCESS);
    CHILD_CHECK(qd_event_record(s, e) == QD_SUCCESS);
    CHILD_CHECK(qd_stream_synchronize(s) == QD_SUCCESS);
    CHILD_CHECK(value == 0xC0FFEE);
    CHILD_CHECK(qd_event_query(e) == QD_SUCCESS);
    CHILD_CHECK(qd_event_destroy(e) == QD_SUCCESS);
    CHILD_CHECK(qd_kernel_destroy(k) == QD_SUCCESS);
    CHILD_CHECK(qd_stream_destroy(s) == QD_SUCCESS);
    CHILD_CHECK(qd_context_destroy(c) == QD_SUCCESS);
}

}  // namespace

TEST_P(ForkTest, ContextFromParent_IsForkedInChild_NewContextInChildWorks) {
    // Objects of the parent's context.
    qd_stream s = new_stream();
    qd_stream lease = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &lease));
    qd_event e = new_event(QD_EVENT_TIMING), e2 = new_event(QD_EVENT_TIMING);
    ASSERT_QD_OK(qd_event_record(s, e));
    ASSERT_QD_OK(qd_event_record(s, e2));
    uint64_t a = alloc(s, 64);
    void *h = host_alloc(64);
    qd_kernel k = kernels_ ? kernels_->noop() : 0;
    ASSERT_QD_OK(qd_context_synchronize(ctx_));
    const bool cpu = is_cpu();
    const std::string path = cpu_module_path();
    qd_module m = 0;
    if (cpu) {
        ASSERT_QD_OK(qd_module_load(ctx_, path.data(), path.size(), &m));
    }
    qd_context ctx = ctx_;
    qd_stream def = default_stream_;

    int code = run_in_child([&] {
        uint8_t buf[64];
        qd_stream os = 0;
        qd_event oe = 0;
        uint64_t oa = 0;
        void *oh = nullptr;
        qd_module om = 0;
        qd_kernel ok = 0;
        float ms = 0;
        qd_stream kids[1];
        CHILD_FORKED(qd_context_synchronize(ctx));
        CHILD_FORKED(qd_context_default_stream(ctx, &os));
        CHILD_FORKED(qd_stream_create(ctx, nullptr, &os));
        CHILD_FORKED(qd_stream_synchronize(s));
        CHILD_FORKED(qd_stream_query(def));
        CHILD_FORKED(qd_stream_wait_event(s, e));
        CHILD_FORKED(qd_stream_acquire(ctx, &os));
        CHILD_FORKED(qd_stream_fork(s, 1, kids));
        CHILD_FORKED(qd_stream_join(s, &lease, 1));
        CHILD_FORKED(qd_event_create(ctx, 0, &oe));
        CHILD_FORKED(qd_event_record(s, e));
        CHILD_FORKED(qd_event_query(e));
        CHILD_FORKED(qd_event_synchronize(e));
        CHILD_FORKED(qd_event_elapsed_ms(e, e2, &ms));
        CHILD_FORKED(qd_launch_host_fn(s, &qdt::noop_host_fn, nullptr));
        CHILD_FORKED(qd_mem_alloc_async(s, 16, &oa));
        CHILD_FORKED(qd_mem_free_async(s, a));
        CHILD_FORKED(qd_memcpy_async(s, (uint64_t)(uintptr_t)buf, a, 16));
        CHILD_FORKED(qd_memset_async(s, a, 0, 16));
        CHILD_FORKED(qd_host_alloc(ctx, 16, &oh));
        CHILD_FORKED(qd_module_load(ctx, path.data(), path.size(), &om));
        if (k) {
            CHILD_FORKED(qd_launch(s, k, nullptr, nullptr, 0));
            qd_task t = QD_TASK_INIT;
            t.kernel = k;
            CHILD_FORKED(qd_launch_parallel(s, &t, 1));
        }
        if (cpu) {
            CHILD_FORKED(qd_kernel_from_host_fn(ctx, &write_kernel, "w", &ok));
            CHILD_FORKED(qd_kernel_get(m, "qd_test_noop", &ok));
        }
        CHILD_CHECK(os == 0 && oe == 0 && oa == 0 && oh == nullptr && om == 0 && ok == 0);
        // Statistics stay readable.
        qd_context_stats stats = QD_CONTEXT_STATS_INIT;
        CHILD_CHECK(qd_context_get_stats(ctx, &stats) == QD_SUCCESS);
        // Destroy calls only forget the objects.
        CHILD_CHECK(qd_stream_release(lease) == QD_SUCCESS);
        CHILD_CHECK(qd_event_destroy(e) == QD_SUCCESS);
        CHILD_CHECK(qd_stream_destroy(s) == QD_SUCCESS);
        if (cpu) CHILD_CHECK(qd_module_unload(m) == QD_SUCCESS);
        CHILD_CHECK(qd_context_destroy(ctx) == QD_SUCCESS);
        CHILD_CHECK(qd_stream_query(def) == QD_ERROR_INVALID_HANDLE);
        (void)h;
        child_new_cpu_context_works();
    });
    EXPECT_EQ(code, 0)
        << "child failed (exit code = first failing check; see stderr; >= 1000 = signal)";

    // The parent's context is untouched by the child.
    Flag f;
    ASSERT_QD_OK(f.enqueue(s));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_TRUE(f.is_set());
    EXPECT_QD_OK(qd_event_query(e));
    EXPECT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD_OK(qd_stream_release(lease));
    if (m) {
        EXPECT_QD_OK(qd_module_unload(m));
    }
    for (qd_event x : {e, e2}) {
        EXPECT_QD_OK(qd_event_destroy(x));
    }
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(ForkTest, ForkWithWorkInFlight_ChildGetsForkedAndParentWorkCompletes) {
    QDT_REQUIRE_CPU();
    qd_stream s = new_stream();
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    Flag after;
    ASSERT_QD_OK(after.enqueue(s));
    qd_context ctx = ctx_;
    int code = run_in_child([&] {
        CHILD_FORKED(qd_stream_query(s));
        CHILD_FORKED(qd_stream_synchronize(s));  // must not wait for the parent's gate
        CHILD_FORKED(qd_context_synchronize(ctx));
        CHILD_CHECK(qd_stream_destroy(s) == QD_SUCCESS);
        CHILD_CHECK(qd_context_destroy(ctx) == QD_SUCCESS);  // forgets; must not drain
        child_new_cpu_context_works();
    });
    EXPECT_EQ(code, 0) << "child failed (exit code = first failing check; see stderr)";
    EXPECT_FALSE(after.is_set());
    gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_TRUE(after.is_set());
    EXPECT_QD_OK(qd_stream_destroy(s));
}

QDT_INSTANTIATE_BACKENDS(ForkTest);

TEST(ForkNoContext, ForkWithNoLiveContext_ChildCanUseTheCpuBackend) {
    int code = run_in_child([] {
        uint32_t count = 0;
        CHILD_CHECK(qd_device_count(QD_BACKEND_CPU, &count) == QD_SUCCESS && count == 1);
        child_new_cpu_context_works();
    });
    EXPECT_EQ(code, 0);
}

TEST(ForkNoContext, ForkTwice_GrandchildStillWorks) {
    int code = run_in_child([] {
        child_new_cpu_context_works();
        int inner = run_in_child([] { child_new_cpu_context_works(); });
        CHILD_CHECK(inner == 0);
    });
    EXPECT_EQ(code, 0);
}

// fork() while other threads of the parent are inside qd: each thread may hold a lock at the
// fork (a handle slot's, the handle table's, a stream pool's, a stream's), and a child that
// waits for it hangs. Every child must destroy the inherited context (only forgetting it) and
// make and use a new one. A child still running after a generous bound (alarm) is killed and
// counted as hung; none may be.
TEST(ForkThreads, ForkWhileThreadsUseQd_EveryChildForgetsTheInheritedContextAndMakesANewOne) {
#ifdef QDT_TSAN
    GTEST_SKIP() << "fork of a multi-threaded process: not supported under ThreadSanitizer";
#endif
    qd_context ctx = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 8, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &ctx));
    qd_stream def = 0;
    ASSERT_QD_OK(qd_context_default_stream(ctx, &def));
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            // Each thread mostly stays on one kind of call, so its lock is held often: the
            // pool's (0, 1), the table's allocation mutex and the registries' list (2), the
            // slots' (3); every sixth call is of another kind.
            for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
                uint64_t h = 0;
                switch (i % 6 ? (t == 0 || t == 1 ? 2 : t == 2 ? 4 : 0) : (t + i / 6) % 6) {
                case 0:
                    if (qd_stream_create(ctx, nullptr, &h) == QD_SUCCESS) {
                        (void)qd_launch_host_fn(h, &qdt::noop_host_fn, nullptr);
                        (void)qd_stream_destroy(h);
                    }
                    break;
                case 1:
                    if (qd_event_create(ctx, 0, &h) == QD_SUCCESS) {
                        (void)qd_event_record(def, h);
                        (void)qd_event_destroy(h);
                    }
                    break;
                case 2:
                    if (qd_stream_acquire(ctx, &h) == QD_SUCCESS) {
                        (void)qd_launch_host_fn(h, &qdt::noop_host_fn, nullptr);
                        (void)qd_stream_release(h);
                    }
                    break;
                case 3: {
                    qd_stream kids[2];
                    if (qd_stream_fork(def, 2, kids) == QD_SUCCESS)
                        (void)qd_stream_join(def, kids, 2);
                    break;
                }
                case 4: {
                    qd_context other = 0;
                    qd_context_desc d = make_desc(QD_BACKEND_CPU, 2, 1);
                    if (qd_context_create(&d, &other) == QD_SUCCESS)
                        (void)qd_context_destroy(other);
                    break;
                }
                default:
                    (void)qd_launch_host_fn(def, &qdt::noop_host_fn, nullptr);
                    (void)qd_stream_query(def);
                    break;
                }
            }
        });
    }
    const int children = (int)scaled(120, 24);
    std::vector<pid_t> pids;
    fflush(stdout);
    fflush(stderr);
    for (int c = 0; c < children; ++c) {
        // Let the threads get going again between forks (a fork stops them only for its copy).
        for (int y = 0; y < 50; ++y) std::this_thread::yield();
        const pid_t pid = fork();
        if (pid == 0) {
            alarm(60);  // a bound on a hang, far above the child's few milliseconds of work
            CHILD_CHECK(qd_context_destroy(ctx) == QD_SUCCESS);
            CHILD_CHECK(qd_stream_query(def) == QD_ERROR_INVALID_HANDLE);
            child_new_cpu_context_works();
            _exit(0);
        }
        ASSERT_GT(pid, 0) << "fork failed";
        pids.push_back(pid);
    }
    stop.store(true);
    for (std::thread &th : threads) th.join();
    int hung = 0, failed = 0;
    for (pid_t pid : pids) {
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            ++hung;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            ++failed;
    }
    EXPECT_EQ(hung, 0) << "of " << children << " children, " << hung << " hung";
    EXPECT_EQ(failed, 0) << "of " << children << " children, " << failed
                         << " failed (see stderr for the failing check)";
    ASSERT_QD_OK(qd_context_destroy(ctx));
}
