// The rules of qd.h's Conventions that cut across functions: which error wins when several
// arguments are bad ("Which error wins"), NULL input pointers, and arrays of growable structs
// ("Arrays of structs": qd_task is read at the stride of tasks[0].struct_size).
#include <cstdio>
#include <cstring>
#include <string>

#include "qd_test.h"

using namespace qdt;

namespace {
class ContractTest : public BackendTest {};
inline uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }
int32_t fault_kernel(const qd_host_kernel_info *, void *const *) { return 5; }

// A qd_task as a newer caller might build it: the same fields, then fields this library does
// not know. Its struct_size (16 bytes more than this header's qd_task) is the array's stride.
struct NewerTask {
    qd_task base;
    uint64_t future_a;
    uint64_t future_b;
};
static_assert(sizeof(NewerTask) == sizeof(qd_task) + 16, "a stride past the known fields");

qd_task write_task(qd_kernel k, uint32_t group, const qd_arg *args) {
    qd_task t = QD_TASK_INIT;
    t.kernel = k;
    t.group = group;
    t.args = args;
    t.num_args = 2;
    return t;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Arrays of structs
// ---------------------------------------------------------------------------------------------

TEST_P(ContractTest, LaunchParallel_TasksOfALargerNewerStruct_ReadAtTheirOwnStride) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t dst = alloc(s, 3 * sizeof(uint32_t));
    ASSERT_QD_OK(qd_memset_async(s, dst, 0, 3 * sizeof(uint32_t)));
    declare_slots(kernels_->write_value(), {0});  // each task its own word of `dst`
    uint64_t where[3];
    uint32_t value[3];
    qd_arg args[3][2];
    NewerTask tasks[3];
    std::memset(tasks, 0x5c, sizeof tasks);  // the unknown fields hold garbage
    for (int i = 0; i < 3; ++i) {
        where[i] = dst + 4 * i;
        value[i] = 100 + i;
        args[i][0] = {&where[i], sizeof where[i]};
        args[i][1] = {&value[i], sizeof value[i]};
        tasks[i].base = write_task(kernels_->write_value(), uint32_t(i), args[i]);
        tasks[i].base.struct_size = sizeof(NewerTask);
    }
    ASSERT_QD_OK(qd_launch_parallel(s, &tasks[0].base, 3));
    std::vector<uint8_t> out = read_back(s, dst, 12);
    uint32_t got[3];
    std::memcpy(got, out.data(), sizeof got);
    EXPECT_EQ(got[0], 100u);
    EXPECT_EQ(got[1], 101u);
    EXPECT_EQ(got[2], 102u);
}

TEST_P(ContractTest, LaunchParallel_StrideRules_MixedOddOrHugeStructSize_InvalidArgument) {
    QDT_REQUIRE_KERNELS();
    uint64_t dst = alloc(default_stream_, 4);
    uint32_t v = 1;
    qd_arg args[2] = {{&dst, sizeof dst}, {&v, sizeof v}};
    qd_task tasks[2] = {write_task(kernels_->write_value(), 0, args),
                        write_task(kernels_->write_value(), 1, args)};
    tasks[1].struct_size = sizeof(qd_task) + 8;  // differs from tasks[0]
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks[1].struct_size",
                  qd_launch_parallel(default_stream_, tasks, 2));
    tasks[1].struct_size = sizeof(qd_task);
    tasks[0].struct_size = sizeof(qd_task) + 4;  // not a multiple of the alignment
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks[0].struct_size",
                  qd_launch_parallel(default_stream_, tasks, 2));
    tasks[0].struct_size = 0x7fffffff;  // garbage: stepping by it would read far past the array
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks[0].struct_size",
                  qd_launch_parallel(default_stream_, tasks, 2));
    tasks[0].struct_size = 32;  // smaller than the first released qd_task
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks[0].struct_size",
                  qd_launch_parallel(default_stream_, tasks, 2));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

// ---------------------------------------------------------------------------------------------
// Which error wins: value checks, then handles, then contexts, then the context's state, then
// the rest
// ---------------------------------------------------------------------------------------------

TEST_P(ContractTest, ValueChecksAndNullInputs_WinOverBadHandles) {
    const uint64_t bad = kAllOnes;
    uint64_t word = 0;
    qd_launch_config zero_dim = QD_LAUNCH_CONFIG_INIT;
    zero_dim.grid[1] = 0;
    qd_kernel k = 0x5555;
    qd_stream kids[2] = {0x77, 0x77};  // bad handles, and the same twice
    qd_task t = QD_TASK_INIT;
    t.struct_size = 8;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "grid", qd_launch(bad, bad, &zero_dim, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "args", qd_launch(bad, bad, nullptr, nullptr, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "tasks", qd_launch_parallel(bad, nullptr, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "struct_size", qd_launch_parallel(bad, &t, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "same", qd_stream_join(bad, kids, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "children", qd_stream_join(bad, nullptr, 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "dst", qd_memcpy_async(bad, 0, addr(&word), 8));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "dst", qd_memset_async(bad, 0, 1, 8));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "wrap", qd_memcpy_async(bad, addr(&word), kAllOnes - 3, 8));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "native", qd_stream_import(bad, 0, &k));
    // NULL input pointers are checked first, as NULL outputs are.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "ptr", qd_host_free(bad, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "name", qd_kernel_get(bad, nullptr, &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "image", qd_module_load(bad, nullptr, 4, &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "fn", qd_kernel_from_host_fn(bad, nullptr, "x", &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "fn", qd_launch_host_fn(bad, nullptr, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "desc", qd_context_create(nullptr, &k));
    EXPECT_EQ(k, 0x5555u);
}

TEST_P(ContractTest, InvalidHandleAnywhere_WinsOverWrongContext_InArraysAsInArguments) {
    QDT_REQUIRE_KERNELS();
    qd_context c2 = other_context();
    qd_stream foreign_lease = 0, foreign_stream = new_stream(c2);
    ASSERT_QD_OK(qd_stream_acquire(c2, &foreign_lease));
    qd_event foreign_event = new_event(0, c2);
    std::string why;
    std::unique_ptr<TestKernels> foreign = make_test_kernels(backend(), c2, &why);
    ASSERT_TRUE(foreign) << why;
    const qd_kernel foreign_kernel = foreign->noop();
    // Two separate handle arguments.
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream",
                  qd_launch(0, foreign_kernel, nullptr, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_record(foreign_stream, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_stream_wait_event(foreign_stream, kAllOnes));
    // Elements of an array, in either order.
    qd_stream kids[2] = {foreign_lease, 0};
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "children[1]", qd_stream_join(default_stream_, kids, 2));
    kids[0] = 0;
    kids[1] = foreign_lease;
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "children[0]", qd_stream_join(default_stream_, kids, 2));
    qd_task tasks[2] = {QD_TASK_INIT, QD_TASK_INIT};
    tasks[0].kernel = foreign_kernel;
    tasks[1].kernel = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "tasks[1]",
                  qd_launch_parallel(default_stream_, tasks, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_launch_parallel(0, tasks, 1))
        << "the stream is a handle too: checked before any context";
    // With every handle live, the context mismatch is reported.
    kids[0] = foreign_lease;
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "children[0]", qd_stream_join(default_stream_, kids, 1));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "tasks[0]",
                  qd_launch_parallel(default_stream_, tasks, 1));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context",
                  qd_launch(default_stream_, foreign_kernel, nullptr, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context",
                  qd_event_record(default_stream_, foreign_event));
    EXPECT_QD_OK(qd_stream_release(foreign_lease));
}

// Every call that mixes handles of two contexts says so in one wording: both handles, each with
// its context, so the caller sees which object is the foreign one.
TEST_P(ContractTest, WrongContext_EveryCall_NamesBothHandlesAndTheirContexts) {
    QDT_REQUIRE_KERNELS();
    qd_context c2 = other_context();
    qd_stream foreign_lease = 0;
    ASSERT_QD_OK(qd_stream_acquire(c2, &foreign_lease));
    const qd_stream foreign_stream = new_stream(c2);
    const qd_event foreign_event = new_event(0, c2), event = new_event();
    std::string why;
    std::unique_ptr<TestKernels> foreign = make_test_kernels(backend(), c2, &why);
    ASSERT_TRUE(foreign) << why;
    const qd_kernel foreign_kernel = foreign->noop();
    auto hex = [](uint64_t h) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "0x%016llx", (unsigned long long)h);
        return std::string(buf);
    };
    // The message of `st` names every one of `names`.
    auto names_all = [&](qd_status st, std::initializer_list<uint64_t> names) {
        EXPECT_EQ(st, QD_ERROR_WRONG_CONTEXT);
        const std::string msg = qd_last_error_message();
        for (uint64_t h : names) EXPECT_NE(msg.find(hex(h)), std::string::npos) << msg;
        EXPECT_NE(msg.find("different contexts"), std::string::npos) << msg;
    };
    const uint64_t s = default_stream_, c1 = ctx_;
    names_all(qd_event_record(s, foreign_event), {s, c1, foreign_event, c2});
    names_all(qd_event_record(foreign_stream, event), {foreign_stream, c2, event, c1});
    float ms = 0;
    names_all(qd_event_elapsed_ms(event, foreign_event, &ms), {event, c1, foreign_event, c2});
    names_all(launch0(s, foreign_kernel), {s, c1, foreign_kernel, c2});
    qd_stream kids[1] = {foreign_lease};
    names_all(qd_stream_join(s, kids, 1), {s, c1, foreign_lease, c2});
    qd_task tasks[1] = {QD_TASK_INIT};
    tasks[0].kernel = foreign_kernel;
    names_all(qd_launch_parallel(s, tasks, 1), {s, c1, foreign_kernel, c2});
    names_all(qd_stream_set_active(ctx_, foreign_stream, nullptr), {c1, foreign_stream, c2});
    // Graphs: an empty capture in each context.
    auto empty_graph = [](qd_stream on) {
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(on));
        EXPECT_QD_OK(qd_stream_end_capture(on, &g));
        return g;
    };
    const qd_graph graph = empty_graph(new_stream()), foreign_graph = empty_graph(foreign_stream);
    names_all(qd_graph_launch(graph, foreign_stream), {graph, c1, foreign_stream, c2});
    names_all(qd_graph_update(graph, foreign_graph), {graph, c1, foreign_graph, c2});
    EXPECT_QD_OK(qd_graph_destroy(graph));
    EXPECT_QD_OK(qd_graph_destroy(foreign_graph));
    EXPECT_QD_OK(qd_stream_release(foreign_lease));
}

TEST_P(ContractTest, OnALostContext_HandleAndContextErrorsWin_ThenDeviceLost_ThenTheRest) {
    QDT_REQUIRE_CPU();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 4, 2);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    qd_stream s = 0, owned = 0, lease = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &owned));
    ASSERT_QD_OK(qd_stream_acquire(c, &lease));
    qd_kernel fault = 0, k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &fault_kernel, "fault", &fault));
    ASSERT_QD_OK(qd_kernel_from_host_fn(c, &fault_kernel, "k", &k));
    qd_event e = 0, t0 = 0;
    float ms = 0;
    ASSERT_QD_OK(qd_event_create(c, 0, &e));
    ASSERT_QD_OK(qd_event_create(c, 0, &t0));
    ASSERT_QD_OK(launch0(s, fault));
    ASSERT_QD(QD_ERROR_DEVICE_LOST, qd_stream_synchronize(s));  // lost from here on

    qd_event healthy_event = new_event();  // of ctx_, which is healthy
    qd_stream healthy_lease = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &healthy_lease));
    qd_kernel healthy_kernel = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &fault_kernel, "healthy", &healthy_kernel));
    // Handles first.
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", qd_launch(s, 0, nullptr, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_event_record(s, 0));
    qd_stream kids[1] = {0};
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "children[0]", qd_stream_join(s, kids, 1));
    // Then contexts.
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context",
                  qd_launch(s, healthy_kernel, nullptr, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_event_record(s, healthy_event));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", qd_event_elapsed_ms(t0, healthy_event, &ms));
    kids[0] = healthy_lease;
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "children[0]", qd_stream_join(s, kids, 1));
    // Then the context's state, before checks that need the objects (a join of an owned stream
    // is INVALID_OPERATION on a healthy context).
    kids[0] = owned;
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_stream_join(s, kids, 1));
    kids[0] = lease;
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_stream_join(s, kids, 1));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_launch(s, k, nullptr, nullptr, 0));
    // A wait may cross contexts of one backend, so there the contexts' state decides.
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_stream_wait_event(s, healthy_event));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, "fault", qd_event_record(s, e));
    EXPECT_QD_OK(qd_stream_release(healthy_lease));
    EXPECT_QD_OK(qd_kernel_destroy(healthy_kernel));
    EXPECT_QD_OK(qd_context_destroy(c));
}

QDT_INSTANTIATE_BACKENDS(ContractTest);
