// Lost contexts (a CPU kernel returning non-zero makes every later call DEVICE_LOST, naming the
// kernel; destroy/release/unload still succeed) and blocking calls from inside host callbacks
// and host kernels (INVALID_OPERATION instead of a deadlock).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

class LostTest : public BackendTest {};
class CallbackTest : public BackendTest {};

int32_t named_fault(const qd_host_kernel_info *, void *const *) { return 3; }
int32_t ok_kernel(const qd_host_kernel_info *, void *const *) { return 0; }

// A CPU context of 2 workers with two streams and a kernel that faults ("fault").
void make_faulting_context(qd_context *c, qd_stream *s, qd_stream *t, qd_kernel *fault) {
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 2);
    ASSERT_QD_OK(qd_context_create(&desc, c));
    ASSERT_QD_OK(qd_stream_create(*c, nullptr, s));
    ASSERT_QD_OK(qd_stream_create(*c, nullptr, t));
    ASSERT_QD_OK(qd_kernel_from_host_fn(*c, &named_fault, "fault", fault));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DEVICE_LOST
// ---------------------------------------------------------------------------------------------

TEST_P(LostTest, FaultingCpuKernel_EveryLaterCallIsDeviceLostNamingTheKernel) {
    QDT_REQUIRE_CPU();
    const char *kName = "qd_test_named_fault_kernel";
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    // Objects made before the fault.
    qd_stream def = 0, s = 0, other = 0, lease = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &def));
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &other));
    ASSERT_QD_OK(qd_stream_acquire(c, &lease));
    qd_stream kids[1] = {0};
    ASSERT_QD_OK(qd_stream_fork(def, 1, kids));
    qd_event e = 0, t0 = 0, t1 = 0;
    ASSERT_QD_OK(qd_event_create(c, 0, &e));
    ASSERT_QD_OK(qd_event_create(c, QD_EVENT_TIMING, &t0));
    ASSERT_QD_OK(qd_event_create(c, QD_EVENT_TIMING, &t1));
    ASSERT_QD_OK(qd_event_record(other, t0));
    ASSERT_QD_OK(qd_event_record(other, t1));
    ASSERT_QD_OK(qd_stream_synchronize(other));
    std::string path = cpu_module_path();
    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(c, path.data(), path.size(), &m));
    qd_kernel km = 0, ok = 0, fault = 0;
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &km));
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &ok_kernel, "ok_kernel", &ok));
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &named_fault, kName, &fault));
    uint64_t a = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(s, 256, &a));
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(c, 64, &h));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const qd_context_stats before = get_stats(c);

    // The fault.
    ASSERT_QD_OK(launch0(s, fault));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_synchronize(s));

    // Every later call that names the context or one of its objects.
    uint8_t buf[64];
    uint64_t hostaddr = (uint64_t)(uintptr_t)buf;
    qd_stream out_s = 0x5555;
    qd_event out_e = 0x5555;
    qd_module out_m = 0x5555;
    qd_kernel out_k = 0x5555;
    uint64_t out_a = 0x5555;
    void *out_h = nullptr;
    float ms = 1.0f;
    qd_task task = QD_TASK_INIT;
    task.kernel = ok;
    qd_stream two[1];
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_context_synchronize(c));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_context_default_stream(c, &out_s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_create(c, nullptr, &out_s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_synchronize(other));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_synchronize(def));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_query(s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_query(lease));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_wait_event(other, e));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_acquire(c, &out_s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_fork(def, 1, two));
    {
        // Both NOT_SUPPORTED (CPU) and DEVICE_LOST describe this call; either is fine.
        qd_status st = qd_stream_import(c, 0x1000, &out_s);
        EXPECT_TRUE(st == QD_ERROR_DEVICE_LOST || st == QD_ERROR_NOT_SUPPORTED)
            << qd_status_name(st);
    }
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_event_create(c, 0, &out_e));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_event_record(other, e));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_event_query(e));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_event_synchronize(e));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_event_elapsed_ms(t0, t1, &ms));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_module_load(c, path.data(), path.size(), &out_m));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_kernel_get(m, "qd_test_noop", &out_k));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_kernel_from_host_fn(c, &ok_kernel, "x", &out_k));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, launch0(other, ok));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, launch0(other, km));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_launch_parallel(other, &task, 1));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName,
                  qd_launch_host_fn(other, &qdt::noop_host_fn, nullptr));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_mem_alloc_async(other, 16, &out_a));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_memcpy_async(other, hostaddr, a, 64));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_memset_async(other, a, 0, 64));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_host_alloc(c, 16, &out_h));
    // qd_mem_free_async lists DEVICE_LOST itself (it is not a destroy/release/unload); the block
    // is then freed by qd_context_destroy.
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_mem_free_async(s, a));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, kName, qd_stream_join(def, kids, 1));
    EXPECT_EQ(out_s, 0x5555u);
    EXPECT_EQ(out_e, 0x5555u);
    EXPECT_EQ(out_m, 0x5555u);
    EXPECT_EQ(out_k, 0x5555u);
    EXPECT_EQ(out_a, 0x5555u);
    EXPECT_EQ(out_h, nullptr);
    EXPECT_EQ(ms, 1.0f);

    // The message is written per failing call, so another thread sees it too.
    std::string other_thread_msg;
    qd_status other_thread_status = 0;
    std::thread([&] {
        other_thread_status = qd_stream_query(s);
        other_thread_msg = qd_last_error_message();
    }).join();
    EXPECT_EQ(other_thread_status, QD_ERROR_DEVICE_LOST);
    EXPECT_NE(other_thread_msg.find(kName), std::string::npos) << other_thread_msg;

    // Statistics stay readable.
    qd_context_stats after = QD_CONTEXT_STATS_INIT;
    EXPECT_QD_OK(qd_context_get_stats(c, &after));
    EXPECT_EQ(after.live_streams, before.live_streams);

    // Cleanup always works.
    EXPECT_QD_OK(qd_kernel_destroy(fault));
    EXPECT_QD_OK(qd_kernel_destroy(ok));
    EXPECT_QD_OK(qd_module_unload(m));
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_event_destroy(t0));
    EXPECT_QD_OK(qd_event_destroy(t1));
    EXPECT_QD_OK(qd_stream_release(lease));
    EXPECT_QD_OK(qd_stream_release(kids[0]));
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_OK(qd_stream_destroy(other));
    EXPECT_QD_OK(qd_context_destroy(c));
    (void)h;  // freed by context destroy
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_stream_query(def));
}

TEST_P(LostTest, AccessorsWithoutDeviceLostInTheirList_StillAnswerOrReportLost) {
    // qd_stream_get_context, qd_stream_get_priority, qd_stream_priority_range, the active
    // stream pair and qd_host_free do not list DEVICE_LOST. Either they still answer (SUCCESS)
    // or the Conventions' "every later call" applies (DEVICE_LOST); nothing else is acceptable.
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    qd_kernel fault = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &named_fault, "fault", &fault));
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(c, 64, &h));
    ASSERT_QD_OK(launch0(s, fault));
    EXPECT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(s));
    qd_context owner = 0;
    int32_t prio = 0, least = 0, greatest = 0;
    qd_stream active = 0;
    const std::pair<const char *, qd_status> results[] = {
        {"qd_stream_get_context", qd_stream_get_context(s, &owner)},
        {"qd_stream_get_priority", qd_stream_get_priority(s, &prio)},
        {"qd_stream_priority_range", qd_stream_priority_range(c, &least, &greatest)},
        {"qd_stream_set_active", qd_stream_set_active(c, s, nullptr)},
        {"qd_stream_get_active", qd_stream_get_active(c, &active)},
        {"qd_host_free", qd_host_free(c, h)},
    };
    for (const auto &r : results) {
        EXPECT_TRUE(r.second == QD_SUCCESS || r.second == QD_ERROR_DEVICE_LOST)
            << r.first << " returned " << qd_status_name(r.second);
        std::printf("[ info ] on a lost context %s returns %s\n", r.first,
                    qd_status_name(r.second));
    }
    EXPECT_QD_OK(qd_kernel_destroy(fault));
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_OK(qd_context_destroy(c));
}

TEST_P(LostTest, FaultInOneContext_LeavesOthersWorking) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_context_default_stream(c, &s));
    qd_kernel fault = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &named_fault, "fault", &fault));
    ASSERT_QD_OK(launch0(s, fault));
    EXPECT_QD(QD_ERROR_DEVICE_LOST, qd_context_synchronize(c));
    // The fixture context is unaffected.
    Flag f;
    ASSERT_QD_OK(f.enqueue(default_stream_));
    EXPECT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_TRUE(f.is_set());
    EXPECT_QD_OK(launch0(default_stream_, kernels_->noop()));
    EXPECT_QD_OK(qd_context_synchronize(ctx_));
    EXPECT_QD_OK(qd_context_destroy(c));
}

TEST_P(LostTest, FaultFromModuleKernel_MessageNamesTheSymbol) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    std::string path = cpu_module_path();
    std::string why;
    auto mk = make_module_kernels(c, path.data(), path.size(), &why);
    ASSERT_TRUE(mk) << why;
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(launch0(s, mk->fault()));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, mk->fault_name().c_str(), qd_stream_synchronize(s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, mk->fault_name().c_str(), qd_context_synchronize(c));
    mk.reset();  // kernel destroy + module unload must succeed on a lost context
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_OK(qd_context_destroy(c));
}

// A fault becomes visible asynchronously: enqueues made after the faulting launch may succeed
// (the fault has not run yet) or return DEVICE_LOST (it has). Either way the destroy drains
// without hanging. The two tests after this one make each outcome deterministic.
TEST_P(LostTest, ContextDestroy_WithPendingWorkAfterAFault_DoesNotHang) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_stream s = 0, t = 0;
    qd_kernel fault = 0;
    ASSERT_NO_FATAL_FAILURE(make_faulting_context(&c, &s, &t, &fault));
    ASSERT_QD_OK(launch0(s, fault));
    for (int i = 0; i < 10; ++i) {
        for (qd_stream x : {s, t}) {
            const qd_status st = enqueue_sleep_us(x, 1000);
            EXPECT_TRUE(st == QD_SUCCESS || st == QD_ERROR_DEVICE_LOST) << qd_status_name(st);
        }
    }
    EXPECT_QD_OK(qd_context_destroy(c));
}

// The fault is held behind a gate until every enqueue is in: they all succeed, and the destroy,
// with that work pending behind the fault, returns QD_SUCCESS.
TEST_P(LostTest, EnqueuesBeforeTheFaultRuns_Succeed_ThenDestroyDrainsWithoutHanging) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_stream s = 0, t = 0;
    qd_kernel fault = 0;
    ASSERT_NO_FATAL_FAILURE(make_faulting_context(&c, &s, &t, &fault));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(launch0(s, fault));  // cannot run before the gate opens
    for (int i = 0; i < 10; ++i) {
        EXPECT_QD_OK(enqueue_sleep_us(s, 100));
        EXPECT_QD_OK(enqueue_sleep_us(t, 100));
    }
    const qd_status q = qd_stream_query(t);
    EXPECT_TRUE(q == QD_SUCCESS || q == QD_NOT_READY)
        << qd_status_name(q) << ": the context is not lost while the fault waits";
    gate.open();
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_FALSE(gate.timed_out());
}

// Once the fault is visible (a synchronize reported it), every enqueue is DEVICE_LOST, and the
// destroy still returns QD_SUCCESS.
TEST_P(LostTest, EnqueuesAfterTheFaultIsVisible_AreDeviceLost_ThenDestroySucceeds) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_stream s = 0, t = 0;
    qd_kernel fault = 0;
    ASSERT_NO_FATAL_FAILURE(make_faulting_context(&c, &s, &t, &fault));
    ASSERT_QD_OK(launch0(s, fault));
    ASSERT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(s));
    for (int i = 0; i < 10; ++i) {
        EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", enqueue_sleep_us(s, 100));
        EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", enqueue_sleep_us(t, 100));
    }
    EXPECT_QD_OK(qd_context_destroy(c));
}

// qd.h, "Lost contexts": work queued before the fault that has not started when the context is
// lost never runs (a host callback's fn is never called, a copy or memset never writes), and
// the synchronize behind it still returns. The gate holds that work back, deterministically,
// until the fault on the other stream has been seen.
TEST_P(LostTest, WorkQueuedBeforeTheFault_NotStartedWhenLost_NeverRuns) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_stream s = 0, t = 0;
    qd_kernel fault = 0;
    ASSERT_NO_FATAL_FAILURE(make_faulting_context(&c, &s, &t, &fault));
    uint64_t d = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(s, 8, &d));
    ASSERT_QD_OK(qd_memset_async(s, d, 0x11, 8));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    uint8_t host[8];
    std::memset(host, 0x22, sizeof host);
    std::atomic<int> called{0};
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_TRUE(gate.wait_entered());
    ASSERT_QD_OK(qd_launch_host_fn(
        s, [](void *p) { static_cast<std::atomic<int> *>(p)->store(1); }, &called));
    ASSERT_QD_OK(qd_memset_async(s, d, 0x33, 8));
    ASSERT_QD_OK(qd_memcpy_async(s, uint64_t(uintptr_t(host)), d, 8));
    ASSERT_QD_OK(launch0(t, fault));
    ASSERT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(t));
    gate.open();
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_stream_synchronize(s));
    EXPECT_EQ(called.load(), 0) << "a callback queued before the fault ran after it";
    for (uint8_t b : host) {
        EXPECT_EQ(b, 0x22) << "a copy queued before the fault ran after it";
    }
    EXPECT_QD_OK(qd_context_destroy(c));
    EXPECT_EQ(called.load(), 0) << "the destroy's drain ran the callback";
    EXPECT_FALSE(gate.timed_out());
}

QDT_INSTANTIATE_BACKENDS(LostTest);

// ---------------------------------------------------------------------------------------------
// Blocking calls from inside callbacks and host kernels
// ---------------------------------------------------------------------------------------------

namespace {
struct InsideResults {
    bool gpu = false;  // CUDA/HIP forbid driver calls inside a host function: test only refusals
    qd_context ctx = 0, other_ctx = 0;
    qd_stream stream = 0, other_stream = 0, other_ctx_stream = 0;
    qd_event event = 0;
    std::atomic<int> ran{0};
    qd_status stream_sync = 1, other_stream_sync = 1, event_sync = 1, ctx_sync = 1, ctx_destroy = 1,
              other_ctx_sync = 1, query = 1, launch_host_fn = 1;
    std::string stream_sync_msg;
};
InsideResults *g_inside;

void call_blocking(InsideResults *r) {
    r->stream_sync = qd_stream_synchronize(r->stream);
    r->stream_sync_msg = qd_last_error_message();
    r->other_stream_sync = qd_stream_synchronize(r->other_stream);
    r->event_sync = qd_event_synchronize(r->event);
    r->ctx_sync = qd_context_synchronize(r->ctx);
    r->ctx_destroy = qd_context_destroy(r->ctx);
    if (!r->gpu) {
        r->other_ctx_sync = qd_stream_synchronize(r->other_ctx_stream);
        r->query = qd_stream_query(r->other_stream);
        r->launch_host_fn = qd_launch_host_fn(r->other_stream, &qdt::noop_host_fn, nullptr);
    }
    r->ran.store(1);
}

void blocking_callback(void *user) { call_blocking(static_cast<InsideResults *>(user)); }

int32_t blocking_kernel(const qd_host_kernel_info *, void *const *) {
    call_blocking(g_inside);
    return 0;
}

void check_inside(const InsideResults &r) {
    ASSERT_EQ(r.ran.load(), 1);
    EXPECT_EQ(r.stream_sync, QD_ERROR_INVALID_OPERATION) << qd_status_name(r.stream_sync);
    EXPECT_FALSE(r.stream_sync_msg.empty());
    EXPECT_EQ(r.other_stream_sync, QD_ERROR_INVALID_OPERATION)
        << "another stream of the same context";
    EXPECT_EQ(r.event_sync, QD_ERROR_INVALID_OPERATION) << qd_status_name(r.event_sync);
    EXPECT_EQ(r.ctx_sync, QD_ERROR_INVALID_OPERATION) << qd_status_name(r.ctx_sync);
    EXPECT_EQ(r.ctx_destroy, QD_ERROR_INVALID_OPERATION) << qd_status_name(r.ctx_destroy);
    if (r.gpu) return;
    EXPECT_EQ(r.other_ctx_sync, QD_SUCCESS)
        << "a different context may be synchronised: " << qd_status_name(r.other_ctx_sync);
    EXPECT_TRUE(r.query == QD_SUCCESS || r.query == QD_NOT_READY)
        << "non-blocking calls are allowed";
    EXPECT_EQ(r.launch_host_fn, QD_SUCCESS) << "enqueueing is allowed";
}
}  // namespace

TEST_P(CallbackTest, BlockingCallsFromAHostCallback_AreInvalidOperation) {
    InsideResults r;
    r.gpu = !is_cpu();
    r.ctx = ctx_;
    r.stream = new_stream();
    r.other_stream = new_stream();
    r.event = new_event();
    qd_context c2 = other_context();
    ASSERT_QD_OK(qd_context_default_stream(c2, &r.other_ctx_stream));
    // The event's record has completed, so a real wait would not even block: the refusal does
    // not depend on whether the wait would deadlock.
    ASSERT_QD_OK(qd_event_record(r.other_stream, r.event));
    ASSERT_QD_OK(qd_stream_synchronize(r.other_stream));
    ASSERT_QD_OK(qd_launch_host_fn(r.stream, &blocking_callback, &r));
    EXPECT_QD_OK(qd_stream_synchronize(r.stream));
    check_inside(r);
    EXPECT_QD_OK(qd_stream_query(r.stream)) << "the context survived the refused destroy";
    EXPECT_QD_OK(qd_event_destroy(r.event));
    EXPECT_QD_OK(qd_stream_destroy(r.stream));
    EXPECT_QD_OK(qd_stream_synchronize(r.other_stream));
    EXPECT_QD_OK(qd_stream_destroy(r.other_stream));
}

TEST_P(CallbackTest, BlockingCallsFromACpuHostKernel_AreInvalidOperation) {
    QDT_REQUIRE_CPU();
    InsideResults r;
    g_inside = &r;
    r.ctx = ctx_;
    r.stream = new_stream();
    r.other_stream = new_stream();
    r.event = new_event();
    qd_context c2 = other_context();
    ASSERT_QD_OK(qd_context_default_stream(c2, &r.other_ctx_stream));
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &blocking_kernel, "blocking_kernel", &k));
    ASSERT_QD_OK(launch0(r.stream, k));
    EXPECT_QD_OK(qd_stream_synchronize(r.stream));
    check_inside(r);
    EXPECT_QD_OK(qd_kernel_destroy(k));
    EXPECT_QD_OK(qd_event_destroy(r.event));
    EXPECT_QD_OK(qd_stream_destroy(r.stream));
    EXPECT_QD_OK(qd_stream_synchronize(r.other_stream));
    EXPECT_QD_OK(qd_stream_destroy(r.other_stream));
}

// Moved from tests/gpu/gpu_test.cpp (Gpu.HostFn_RunsInOrder_AndRefusesDriverCallsFromTheCallback):
// a host callback sees what a kernel and a copy queued before it wrote; from inside it, an
// enqueue on its own stream is allowed on the CPU backend and refused on GPU backends (CUDA and
// HIP forbid driver calls from a host function; qd refuses them rather than risk a hang).
TEST_P(CallbackTest, HostFn_SeesEarlierKernelAndCopy_EnqueueFromIt_CpuAllowedGpuRefused) {
    QDT_REQUIRE_KERNELS();
    struct Probe {
        qd_stream stream = 0;
        uint64_t d = 0;
        uint32_t *h = nullptr;
        std::atomic<int> ran{0};
        bool in_order = false;
        qd_status sync_status = QD_SUCCESS, enqueue_status = QD_SUCCESS;
    } probe;
    probe.stream = new_stream();
    probe.d = alloc(probe.stream, 4);
    probe.h = static_cast<uint32_t *>(host_alloc(4));
    *probe.h = 0;
    ASSERT_QD_OK(launch_write_value(probe.stream, kernels_->write_value(), probe.d, 5));
    ASSERT_QD_OK(qd_memcpy_async(probe.stream, (uint64_t)(uintptr_t)probe.h, probe.d, 4));
    ASSERT_QD_OK(qd_launch_host_fn(
        probe.stream,
        [](void *u) {
            auto *p = static_cast<Probe *>(u);
            p->in_order = *p->h == 5;
            p->sync_status = qd_stream_synchronize(p->stream);
            p->enqueue_status = qd_memset_async(p->stream, p->d, 0, 4);
            p->ran = 1;
        },
        &probe));
    ASSERT_QD_OK(qd_stream_synchronize(probe.stream));
    EXPECT_EQ(probe.ran.load(), 1);
    EXPECT_TRUE(probe.in_order) << "the callback ran before the kernel and the copy ahead of it";
    EXPECT_EQ(probe.sync_status, QD_ERROR_INVALID_OPERATION) << qd_status_name(probe.sync_status);
    const qd_status expected = is_cpu() ? QD_SUCCESS : QD_ERROR_INVALID_OPERATION;
    EXPECT_EQ(probe.enqueue_status, expected) << qd_status_name(probe.enqueue_status);
    EXPECT_QD_OK(qd_mem_free_async(probe.stream, probe.d));
    EXPECT_QD_OK(qd_stream_destroy(probe.stream));
}

TEST_P(CallbackTest, Cpu_WorkersBlockAsynchronousSignals_CreatorsMaskUnchanged) {
    // qd.h, "Threads and signals": a process-directed signal never lands on a worker (where a
    // handler calling qd could deadlock on the lock the worker holds); the synchronous faults
    // stay deliverable there, and the thread that created the context keeps its own mask.
    QDT_REQUIRE_CPU();
    sigset_t before;
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &before), 0);
    qd_context_desc desc = make_desc(backend(), 0, 2);
    qd_context c = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    extra_contexts_.push_back(c);
    sigset_t after;
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &after), 0);
    for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGALRM, SIGCHLD, SIGPROF})
        EXPECT_EQ(sigismember(&after, sig), sigismember(&before, sig)) << "signal " << sig;
    struct Probe {
        std::atomic<int> ran{0};
        sigset_t mask;
    } probe;
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(qd_launch_host_fn(
        s,
        [](void *p) {
            Probe &probe = *static_cast<Probe *>(p);
            pthread_sigmask(SIG_BLOCK, nullptr, &probe.mask);
            probe.ran = 1;
        },
        &probe));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_EQ(probe.ran.load(), 1);
    for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGPIPE})
        EXPECT_EQ(sigismember(&probe.mask, sig), 1) << "signal " << sig << " reaches a worker";
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGPROF})
        EXPECT_EQ(sigismember(&probe.mask, sig), 0) << "signal " << sig << " blocked on a worker";
    EXPECT_QD_OK(qd_stream_destroy(s));
}

QDT_INSTANTIATE_BACKENDS(CallbackTest);
