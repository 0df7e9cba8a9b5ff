// Launch attributes (qd.h, "Launch attributes"; qd_launch_ex and qd_task's attrs): every
// refusal names the attribute and queues nothing; on the CPU backend each attribute has its
// documented meaning (a cluster runs its blocks as any grid, PDL is plain stream order, a
// priority orders ready work, a completion event completes as the last block starts).
//
// No test depends on timing: orderings are observed from inside the kernels (a completion
// event queried by the launch's own blocks) or forced with one worker thread and a gate.
#include <qd/qd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "qd_test.h"

namespace qdt {
namespace {

class LaunchAttrTest : public BackendTest {};

qd_launch_attr attr(qd_launch_attr_kind kind) {
    qd_launch_attr a;
    std::memset(&a, 0, sizeof a);
    a.kind = kind;
    return a;
}
qd_launch_attr cluster(uint32_t x, uint32_t y, uint32_t z) {
    qd_launch_attr a = attr(QD_LAUNCH_ATTR_CLUSTER_DIM);
    a.cluster[0] = x;
    a.cluster[1] = y;
    a.cluster[2] = z;
    return a;
}
qd_launch_attr programmatic(int32_t on = 1) {
    qd_launch_attr a = attr(QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION);
    a.value = on;
    return a;
}
qd_launch_attr priority(int32_t p) {
    qd_launch_attr a = attr(QD_LAUNCH_ATTR_PRIORITY);
    a.value = p;
    return a;
}
qd_launch_attr completion(qd_event e) {
    qd_launch_attr a = attr(QD_LAUNCH_ATTR_COMPLETION_EVENT);
    a.event = e;
    return a;
}

qd_launch_config grid(uint32_t x, uint32_t y = 1, uint32_t z = 1) {
    qd_launch_config c = QD_LAUNCH_CONFIG_INIT;
    c.grid[0] = x;
    c.grid[1] = y;
    c.grid[2] = z;
    return c;
}

bool says(const char *part) {
    return std::string(qd_last_error_message()).find(part) != std::string::npos;
}

// --- CPU host kernels ------------------------------------------------------------------------

// args[0]: std::atomic<int> *: counts calls (blocks).
int32_t count_blocks(const qd_host_kernel_info *, void *const *args) {
    (*static_cast<std::atomic<int> **>(args[0]))->fetch_add(1);
    return 0;
}

// args[0]: std::vector<uint32_t> * (x of each block, in call order); one worker runs a launch.
int32_t log_block_x(const qd_host_kernel_info *info, void *const *args) {
    (*static_cast<std::vector<uint32_t> **>(args[0]))->push_back(info->block_idx[0]);
    return 0;
}

// args[0]: qd_event; args[1]: int * of grid_dim[0] entries: what qd_event_query said as each
// block started.
int32_t query_event_per_block(const qd_host_kernel_info *info, void *const *args) {
    const qd_event e = *static_cast<const qd_event *>(args[0]);
    int *seen = *static_cast<int **>(args[1]);
    seen[info->block_idx[0]] = (int)qd_event_query(e);
    return 0;
}

// args[0]: std::atomic<int> *: spins (bounded) in its last block until it is set, so a stream
// that waits on the launch's completion event must run while the launch has not ended.
int32_t last_block_waits_for_flag(const qd_host_kernel_info *info, void *const *args) {
    auto *flag = *static_cast<std::atomic<int> **>(args[0]);
    if (info->block_idx[0] + 1 != info->grid_dim[0]) return 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (flag->load() == 0 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
    return 0;
}

// args[0]: Order *: appends args[1] (uint32_t) under its lock.
struct Order {
    std::mutex mutex;
    std::vector<uint32_t> ids;
};
int32_t append_id(const qd_host_kernel_info *, void *const *args) {
    auto *order = *static_cast<Order **>(args[0]);
    std::lock_guard<std::mutex> lock(order->mutex);
    order->ids.push_back(*static_cast<const uint32_t *>(args[1]));
    return 0;
}

qd_kernel host_kernel(qd_context ctx, qd_host_kernel_fn fn, const char *name) {
    qd_kernel k = 0;
    EXPECT_QD_OK(qd_kernel_from_host_fn(ctx, fn, name, &k));
    return k;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Refusals: each names attrs[i], and a refused call queues nothing
// ---------------------------------------------------------------------------------------------

TEST_P(LaunchAttrTest, NoAttributes_IsQdLaunch) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    EXPECT_QD_OK(qd_launch_ex(s, kernels_->noop(), nullptr, nullptr, 0, nullptr, 0));
    const qd_launch_attr off = programmatic(0);  // given, but asks for nothing
    EXPECT_QD_OK(qd_launch_ex(s, kernels_->noop(), nullptr, &off, 1, nullptr, 0));
    EXPECT_QD_OK(qd_stream_synchronize(s));
}

TEST_P(LaunchAttrTest, UnknownKind_InvalidArgumentNamingItsIndex) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_launch_attr a[2] = {programmatic(), attr((qd_launch_attr_kind)99)};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "attrs[1]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, a, 2, nullptr, 0));
    a[1] = attr((qd_launch_attr_kind)0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "attrs[1]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, a, 2, nullptr, 0));
}

TEST_P(LaunchAttrTest, DuplicatedKind_InvalidArgumentNamingTheSecond) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const qd_launch_attr a[3] = {priority(0), programmatic(), priority(-1)};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "attrs[2]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, a, 3, nullptr, 0));
    EXPECT_TRUE(says("twice")) << qd_last_error_message();
}

TEST_P(LaunchAttrTest, NonzeroReservedOrUnusedField_InvalidArgumentNamingTheField) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_launch_attr a = programmatic();
    a.reserved[1] = 1;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "attrs[0]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
    EXPECT_TRUE(says("reserved")) << qd_last_error_message();
    a = programmatic();
    a.reserved0 = 3;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "reserved0",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
    a = priority(-1);
    a.cluster[2] = 1;  // a field PRIORITY does not use
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "cluster",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
    a = cluster(1, 1, 1);
    a.value = 1;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "value",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
    a = programmatic();
    a.event = 0x1234;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "event",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
}

TEST_P(LaunchAttrTest, BadClusterOrProgrammaticValue_InvalidArgument) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const qd_launch_config c = grid(4, 2);
    qd_launch_attr a = cluster(2, 0, 1);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "cluster[1] is 0",
                  qd_launch_ex(s, kernels_->noop(), &c, &a, 1, nullptr, 0));
    a = cluster(3, 1, 1);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "does not divide grid[0]",
                  qd_launch_ex(s, kernels_->noop(), &c, &a, 1, nullptr, 0));
    a = programmatic(2);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "PROGRAMMATIC_SERIALIZATION",
                  qd_launch_ex(s, kernels_->noop(), &c, &a, 1, nullptr, 0));
}

TEST_P(LaunchAttrTest, AttrsNullOrTooMany_InvalidArgument) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "attrs is NULL",
                  qd_launch_ex(s, kernels_->noop(), nullptr, nullptr, 1, nullptr, 0));
    const qd_launch_attr a[5] = {programmatic(), priority(0), programmatic(), priority(0),
                                 programmatic()};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "QD_MAX_LAUNCH_ATTRS",
                  qd_launch_ex(s, kernels_->noop(), nullptr, a, 5, nullptr, 0));
}

TEST_P(LaunchAttrTest, WhichErrorWins_AnAttributesOwnValueBeforeTheHandles) {
    QDT_REQUIRE_KERNELS();
    const qd_launch_attr a = attr((qd_launch_attr_kind)77);
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_launch_ex(0, 0, nullptr, &a, 1, nullptr, 0));
    const qd_launch_attr e = completion(0xdead);
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream",
                  qd_launch_ex(0, kernels_->noop(), nullptr, &e, 1, nullptr, 0));
}

TEST_P(LaunchAttrTest, CompletionEventNotAnEvent_InvalidHandleNamingIt) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_launch_attr a[2] = {programmatic(), completion(0)};
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "attrs[1]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, a, 2, nullptr, 0));
    a[1] = completion((qd_event)s);  // a stream is not an event
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "attrs[1]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, a, 2, nullptr, 0));
    // Alone too: the attribute is never dropped for a plain launch.
    const qd_launch_attr only = completion(0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "attrs[0]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &only, 1, nullptr, 0));
}

TEST_P(LaunchAttrTest, CompletionEventOfAnotherContext_WrongContextNamingIt) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_context other = other_context();
    ASSERT_NE(other, 0u);
    qd_event e = new_event(0, other);
    const qd_launch_attr a = completion(e);
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "attrs[0]",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
}

TEST_P(LaunchAttrTest, RefusedCall_QueuesNothingAndRecordsNoEvent) {
    QDT_REQUIRE_CPU();
    std::atomic<int> calls{0};
    std::atomic<int> *p = &calls;
    qd_kernel k = host_kernel(ctx_, &count_blocks, "count_blocks");
    qd_stream s = new_stream();
    qd_event e = new_event(QD_EVENT_TIMING);
    const qd_arg arg = {&p, sizeof p};
    const qd_launch_attr a[3] = {completion(e), programmatic(), programmatic()};
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_launch_ex(s, k, nullptr, a, 3, &arg, 1));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(calls.load(), 0);
    // The event was never recorded: timing it against itself says so.
    float ms = 0;
    EXPECT_QD(QD_ERROR_NOT_RECORDED, qd_event_elapsed_ms(e, e, &ms));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

// HIP has no launch attributes: each one is NOT_SUPPORTED naming it, and nothing is queued
// (tools/gpu-check's hip step runs this through the test runtime of tests/hip_runtime).
TEST_P(LaunchAttrTest, EveryAttribute_OnHip_NotSupportedNamingIt) {
    if (backend() != QD_BACKEND_HIP) GTEST_SKIP() << "HIP-backend behaviour";
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_event e = new_event();
    const qd_launch_config c = grid(2);
    const struct {
        qd_launch_attr attr;
        const char *name;
    } cases[] = {{cluster(2, 1, 1), "CLUSTER_DIM"},
                 {programmatic(), "PROGRAMMATIC_SERIALIZATION"},
                 {priority(-1), "PRIORITY"},
                 {completion(e), "COMPLETION_EVENT"}};
    for (const auto &k : cases) {
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, k.name,
                      qd_launch_ex(s, kernels_->noop(), &c, &k.attr, 1, nullptr, 0));
        EXPECT_TRUE(says("HIP")) << qd_last_error_message();
    }
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_event_query(e)) << "the refused launches recorded nothing";
}

// ---------------------------------------------------------------------------------------------
// The CPU meanings
// ---------------------------------------------------------------------------------------------

TEST_P(LaunchAttrTest, Cluster_Cpu_RunsEveryBlockInOrder) {
    QDT_REQUIRE_CPU();
    std::vector<uint32_t> xs;
    std::vector<uint32_t> *p = &xs;
    qd_kernel k = host_kernel(ctx_, &log_block_x, "log_block_x");
    qd_stream s = new_stream();
    const qd_launch_config c = grid(6);
    const qd_launch_attr a = cluster(2, 1, 1);
    const qd_arg arg = {&p, sizeof p};
    ASSERT_QD_OK(qd_launch_ex(s, k, &c, &a, 1, &arg, 1));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(xs, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(LaunchAttrTest, Programmatic_Cpu_IsPlainStreamOrder) {
    QDT_REQUIRE_CPU();
    Order order;
    Order *p = &order;
    qd_kernel k = host_kernel(ctx_, &append_id, "append_id");
    qd_stream s = new_stream();
    const qd_launch_attr a = programmatic();
    for (uint32_t i = 0; i < 50; ++i) {
        const qd_arg args[2] = {{&p, sizeof p}, {&i, sizeof i}};
        ASSERT_QD_OK(qd_launch_ex(s, k, nullptr, i % 2 ? &a : nullptr, i % 2, args, 2));
    }
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_EQ(order.ids.size(), 50u);
    for (uint32_t i = 0; i < 50; ++i) EXPECT_EQ(order.ids[i], i);
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(LaunchAttrTest, CompletionEvent_Cpu_CompletesAsTheLastBlockStarts) {
    QDT_REQUIRE_CPU();
    qd_kernel k = host_kernel(ctx_, &query_event_per_block, "query_event_per_block");
    qd_stream s = new_stream();
    qd_event e = new_event();
    int seen[4] = {-9, -9, -9, -9};
    int *p = seen;
    const qd_launch_config c = grid(4);
    const qd_launch_attr a = completion(e);
    const qd_arg args[2] = {{&e, sizeof e}, {&p, sizeof p}};
    ASSERT_QD_OK(qd_launch_ex(s, k, &c, &a, 1, args, 2));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(seen[0], (int)QD_NOT_READY);
    EXPECT_EQ(seen[1], (int)QD_NOT_READY);
    EXPECT_EQ(seen[2], (int)QD_NOT_READY);
    EXPECT_EQ(seen[3], (int)QD_SUCCESS) << "not complete as the last block started";
    EXPECT_QD_OK(qd_event_query(e));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(LaunchAttrTest, CompletionEvent_Cpu_AWaitingStreamRunsBeforeTheLaunchEnds) {
    QDT_REQUIRE_CPU();
    std::atomic<int> flag{0};
    std::atomic<int> *p = &flag;
    qd_kernel k = host_kernel(ctx_, &last_block_waits_for_flag, "last_block_waits");
    qd_stream s = new_stream(), w = new_stream();
    qd_event e = new_event();
    const qd_launch_config c = grid(3);
    const qd_launch_attr a = completion(e);
    const qd_arg arg = {&p, sizeof p};
    ASSERT_QD_OK(qd_launch_ex(s, k, &c, &a, 1, &arg, 1));
    ASSERT_QD_OK(qd_stream_wait_event(w, e));
    Flag done_on_w;
    ASSERT_QD_OK(qd_launch_host_fn(
        w, [](void *f) { static_cast<std::atomic<int> *>(f)->store(1); }, &flag));
    ASSERT_QD_OK(done_on_w.enqueue(w));
    ASSERT_TRUE(done_on_w.wait());
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(flag.load(), 1);
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

// One worker, held by a gate: two streams become ready behind it, the one whose launch is more
// urgent queued second. The worker, free again, takes the more urgent one first.
TEST_P(LaunchAttrTest, Priority_Cpu_TheWorkerTakesTheMoreUrgentReadyLaunchFirst) {
    QDT_REQUIRE_CPU();
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 8, 1);
    qd_context one = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &one));
    Order order;
    Order *p = &order;
    qd_kernel k = host_kernel(one, &append_id, "append_id");
    qd_stream held = 0, low = 0, urgent = 0;
    ASSERT_QD_OK(qd_stream_create(one, nullptr, &held));
    ASSERT_QD_OK(qd_stream_create(one, nullptr, &low));
    ASSERT_QD_OK(qd_stream_create(one, nullptr, &urgent));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(held));
    const uint32_t first = 1, second = 2;
    const qd_arg a1[2] = {{&p, sizeof p}, {&first, sizeof first}};
    const qd_arg a2[2] = {{&p, sizeof p}, {&second, sizeof second}};
    ASSERT_QD_OK(qd_launch(low, k, nullptr, a1, 2));
    const qd_launch_attr most = priority(-100);  // clamped to the most urgent level
    ASSERT_QD_OK(qd_launch_ex(urgent, k, nullptr, &most, 1, a2, 2));
    gate.open();
    ASSERT_QD_OK(qd_context_synchronize(one));
    EXPECT_EQ(order.ids, (std::vector<uint32_t>{2, 1}));
    // Once it ran, its stream is back at its own priority: a plain launch there queues behind.
    EXPECT_QD_OK(qd_kernel_destroy(k));
    EXPECT_QD_OK(qd_context_destroy(one));
}

// ---------------------------------------------------------------------------------------------
// Capture and parallel launch
// ---------------------------------------------------------------------------------------------

TEST_P(LaunchAttrTest, CompletionEventOnACapturingStream_NotSupported_CaptureGoesOn) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_event e = new_event();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    const qd_launch_attr a = completion(e);
    EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "COMPLETION_EVENT",
                  qd_launch_ex(s, kernels_->noop(), nullptr, &a, 1, nullptr, 0));
    EXPECT_QD_OK(qd_launch(s, kernels_->noop(), nullptr, nullptr, 0));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(LaunchAttrTest, Captured_Cpu_AttributesGoWithTheNodeIntoEveryReplay) {
    QDT_REQUIRE_CPU();
    Order order;
    Order *p = &order;
    qd_kernel k = host_kernel(ctx_, &append_id, "append_id");
    qd_stream s = new_stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    const uint32_t one = 1, two = 2;
    const qd_arg a1[2] = {{&p, sizeof p}, {&one, sizeof one}};
    const qd_arg a2[2] = {{&p, sizeof p}, {&two, sizeof two}};
    const qd_launch_attr a[2] = {programmatic(), priority(-1)};
    ASSERT_QD_OK(qd_launch(s, k, nullptr, a1, 2));
    ASSERT_QD_OK(qd_launch_ex(s, k, nullptr, a, 2, a2, 2));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(order.ids, (std::vector<uint32_t>{1, 2, 1, 2}));
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(LaunchAttrTest, ParallelTask_BadAttribute_InvalidArgumentNamingTaskAndIndex_NoTaskQueued) {
    QDT_REQUIRE_CPU();
    std::atomic<int> calls{0};
    std::atomic<int> *p = &calls;
    qd_kernel k = host_kernel(ctx_, &count_blocks, "count_blocks");
    qd_stream s = new_stream();
    const qd_arg arg = {&p, sizeof p};
    const qd_launch_attr good = programmatic();
    const qd_launch_attr bad[2] = {priority(-1), cluster(0, 1, 1)};
    qd_task t[2] = {QD_TASK_INIT, QD_TASK_INIT};
    for (int i = 0; i < 2; ++i) {
        t[i].kernel = k;
        t[i].group = (uint32_t)i;
        t[i].args = &arg;
        t[i].num_args = 1;
    }
    t[0].attrs = &good;
    t[0].num_attrs = 1;
    t[1].attrs = bad;
    t[1].num_attrs = 2;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks[1].attrs[1]", qd_launch_parallel(s, t, 2));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(calls.load(), 0);
    t[1].num_attrs = 1;
    t[1].reserved2 = 5;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks[1].reserved2", qd_launch_parallel(s, t, 2));
    t[1].reserved2 = 0;
    ASSERT_QD_OK(qd_launch_parallel(s, t, 2));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(calls.load(), 2);
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(LaunchAttrTest, ParallelTask_CompletionEvent_RecordedByItsLaunch) {
    QDT_REQUIRE_CPU();
    qd_kernel k = host_kernel(ctx_, &query_event_per_block, "query_event_per_block");
    qd_stream s = new_stream();
    qd_event e = new_event();
    int seen[2] = {-9, -9};
    int *p = seen;
    const qd_arg args[2] = {{&e, sizeof e}, {&p, sizeof p}};
    const qd_launch_attr a = completion(e);
    qd_task t = QD_TASK_INIT;
    t.kernel = k;
    t.config = grid(2);
    t.args = args;
    t.num_args = 2;
    t.attrs = &a;
    t.num_attrs = 1;
    ASSERT_QD_OK(qd_launch_parallel(s, &t, 1));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(seen[0], (int)QD_NOT_READY);
    EXPECT_EQ(seen[1], (int)QD_SUCCESS);
    // Another context's event, in a task: refused before anything is queued.
    qd_context other = other_context();
    ASSERT_NE(other, 0u);
    const qd_launch_attr foreign = completion(new_event(0, other));
    t.attrs = &foreign;
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "tasks[0].attrs[0].event", qd_launch_parallel(s, &t, 1));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

// A 0.2 caller's qd_task (64 bytes) has no attrs: whatever follows it in memory is not read.
TEST_P(LaunchAttrTest, ParallelTask_OldStructSize_AttributesNotRead) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    std::vector<unsigned char> bytes(2 * 64 + 16, 0xAB);
    for (int i = 0; i < 2; ++i) {
        qd_task t = QD_TASK_INIT;
        t.struct_size = 64;
        t.kernel = kernels_->noop();
        std::memcpy(bytes.data() + 64 * i, &t, 64);
    }
    EXPECT_QD_OK(qd_launch_parallel(s, reinterpret_cast<const qd_task *>(bytes.data()), 2));
    EXPECT_QD_OK(qd_stream_synchronize(s));
}

QDT_INSTANTIATE_BACKENDS(LaunchAttrTest);

}  // namespace qdt
