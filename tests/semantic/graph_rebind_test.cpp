// Rebinding one kernel node of a graph (qd.h, "Graphs": qd_graph_kernel_node_count,
// qd_graph_set_kernel_args): the nodes are the captured launches in queue order (a parallel
// launch's tasks in task order); a rebind changes every later replay and no replay queued
// before it (held back by a gate, never by timing); a refused rebind changes nothing; an update
// takes the other graph's values, its rebound ones included; the validation mode checks the
// rebound values at the next replay.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

class GraphRebindTest : public BackendTest {
  protected:
    // A context validating with `flags`, its test kernels, two streams (a, s) and two zeroed
    // 64-byte blocks allocated on s; skips when the backend has no test kernels.
    struct Validating {
        qd_context c = 0;
        std::unique_ptr<TestKernels> kernels;
        qd_stream a = 0, s = 0;
        uint64_t clean = 0, raced = 0;
    };
    void make_validating(uint32_t flags, Validating *v) {
        qd_context_desc desc = make_desc(backend(), 8, 4);
        desc.flags = flags;
        ASSERT_QD_OK(qd_context_create(&desc, &v->c));
        extra_contexts_.push_back(v->c);
        std::string why;
        v->kernels = make_test_kernels(backend(), v->c, &why);
        if (!v->kernels) {
            ASSERT_FALSE(is_cpu()) << why;
            GTEST_SKIP() << "no test kernels for " << backend_name(backend()) << ": " << why;
        }
        ASSERT_QD_OK(qd_stream_create(v->c, nullptr, &v->a));
        ASSERT_QD_OK(qd_stream_create(v->c, nullptr, &v->s));
        for (uint64_t *block : {&v->clean, &v->raced}) {
            ASSERT_QD_OK(qd_mem_alloc_async(v->s, 64, block));
            ASSERT_QD_OK(qd_memset_async(v->s, *block, 0, 64));
        }
        ASSERT_QD_OK(qd_context_synchronize(v->c));
    }

    // write_value(dst, value)'s arguments, kept alive by the caller.
    struct WriteArgs {
        uint64_t dst;
        uint32_t value;
        qd_arg args[2];
        WriteArgs(uint64_t d, uint32_t v) : dst(d), value(v) {
            args[0] = {&dst, sizeof dst};
            args[1] = {&value, sizeof value};
        }
    };

    qd_status rebind(qd_graph g, uint32_t node, uint64_t dst, uint32_t value) {
        WriteArgs a(dst, value);
        return qd_graph_set_kernel_args(g, node, a.args, 2);
    }

    // A graph of one write_value(dst, value).
    qd_graph capture_write(qd_stream s, uint64_t dst, uint32_t value) {
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        EXPECT_QD_OK(launch_write_value(s, kernels_->write_value(), dst, value));
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        return g;
    }

    // Whether this backend rebinds the nodes of its graphs: the CPU always does; a GPU driver
    // graph only where the driver has the entry points (qd.h: QD_ERROR_NOT_SUPPORTED naming
    // them otherwise). *why says why not.
    bool rebinds(std::string *why) {
        qd_stream s = new_stream();
        const uint64_t buf = block(s, 1);
        qd_graph g = capture_write(s, buf, 1);
        const qd_status st = rebind(g, 0, buf, 2);
        if (st != QD_SUCCESS) *why = qd_last_error_message();
        EXPECT_QD_OK(qd_graph_destroy(g));
        if (st == QD_ERROR_NOT_SUPPORTED && !is_cpu()) return false;
        EXPECT_QD_OK(st);
        return true;
    }

    uint32_t word(qd_stream s, uint64_t address) { return read_value<uint32_t>(s, address); }

    // A zeroed block of `words` uint32 words, the host ordered after its allocation.
    uint64_t block(qd_stream s, uint32_t words) {
        const uint64_t a = alloc(s, words * 4u);
        EXPECT_QD_OK(qd_memset_async(s, a, 0, words * 4u));
        EXPECT_QD_OK(qd_stream_synchronize(s));
        return a;
    }
};

}  // namespace

// Skip (visibly) where the backend's driver graphs cannot be rebound.
#define QDT_REQUIRE_REBIND()                                                                       \
    do {                                                                                           \
        QDT_REQUIRE_KERNELS();                                                                     \
        std::string why_;                                                                          \
        if (!rebinds(&why_)) GTEST_SKIP() << "no rebinding of driver graphs here: " << why_;       \
    } while (0)

TEST_P(GraphRebindTest, KernelNodes_AreTheLaunchesInQueueOrder_ParallelTasksInTaskOrder) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 8);
    qd_kernel k = kernels_->write_value();
    declare_slots(k, {0});  // the parallel tasks write their own words of one block
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, k, buf + 0, 1));  // node 0
    ASSERT_QD_OK(qd_memset_async(s, buf + 28, 0, 4));    // not a kernel node
    qd_task tasks[3];
    TaskArgs store[3];
    const uint32_t groups[3] = {0, 1, 0};
    for (uint32_t i = 0; i < 3; ++i)  // nodes 1, 2, 3
        task_write_value(&tasks[i], &store[i], groups[i], k, buf + 4 * (1 + i), 10 + i);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 3));
    ASSERT_QD_OK(qd_launch_host_fn(s, &noop_host_fn, nullptr));  // not a kernel node
    ASSERT_QD_OK(launch_write_value(s, k, buf + 16, 5));         // node 4
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));

    uint32_t count = 0;
    ASSERT_QD_OK(qd_graph_kernel_node_count(g, &count));
    EXPECT_EQ(count, 5u);
    // Node i rebound to write 100 + i into word 4 + i... of a second block: where each value
    // lands names the launch that node i is.
    const uint64_t out = block(s, 8);
    for (uint32_t i = 0; i < count; ++i) ASSERT_QD_OK(rebind(g, i, out + 4 * i, 100 + i));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    std::vector<uint8_t> bytes = read_back(s, out, 32);
    std::vector<uint32_t> w(8);
    std::memcpy(w.data(), bytes.data(), 32);
    for (uint32_t i = 0; i < count; ++i) EXPECT_EQ(w[i], 100 + i) << "node " << i;
    EXPECT_EQ(word(s, buf + 0), 0u) << "the first launch still wrote its captured address";
    EXPECT_QD_OK(qd_graph_destroy(g));

    // A graph without kernels has none.
    qd_graph empty = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_memset_async(s, buf, 0, 4));
    ASSERT_QD_OK(qd_stream_end_capture(s, &empty));
    ASSERT_QD_OK(qd_graph_kernel_node_count(empty, &count));
    EXPECT_EQ(count, 0u);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out of range", rebind(empty, 0, buf, 1));
    EXPECT_QD_OK(qd_graph_destroy(empty));
}

TEST_P(GraphRebindTest, Rebind_EveryLaterReplayRunsTheNewValues) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 4), out = block(s, 4);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), buf, 1));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), out, buf, 10));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, out), 11u);

    ASSERT_QD_OK(rebind(g, 0, buf, 5));
    for (int i = 0; i < 3; ++i) {
        ASSERT_QD_OK(qd_memset_async(s, out, 0, 4));
        ASSERT_QD_OK(qd_graph_launch(g, s));
        EXPECT_EQ(word(s, out), 15u) << "replay " << i;
    }
    // The second node: every argument, a pointer among them.
    uint64_t dst = out + 4, src = buf;
    uint32_t add = 100;
    const qd_arg args[3] = {{&dst, 8}, {&src, 8}, {&add, 4}};
    ASSERT_QD_OK(qd_graph_set_kernel_args(g, 1, args, 3));
    dst = src = 0;  // copied at the call
    add = 0;
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, out + 4), 105u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, Rebind_AReplayQueuedBefore_KeepsItsValues) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 4), seen = block(s, 4);
    qd_graph g = capture_write(s, buf, 1);
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));  // holds every replay below until opened
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_memcpy_async(s, seen, buf, 4));  // what the first replay wrote
    ASSERT_QD_OK(rebind(g, 0, buf, 2));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_memcpy_async(s, seen + 4, buf, 4));  // what the second wrote
    ASSERT_QD_OK(rebind(g, 0, buf, 3));                  // the node rebound twice
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_FALSE(gate.done());
    gate.open();
    EXPECT_EQ(word(s, seen), 1u) << "a replay queued before the rebind ran the new values";
    EXPECT_EQ(word(s, seen + 4), 2u) << "a replay queued before the second rebind ran its values";
    EXPECT_EQ(word(s, buf), 3u);
    EXPECT_FALSE(gate.timed_out());
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, Rebind_ConcurrentWithReplays_EachReplayRunsOneRebindsValuesWhole) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint32_t n = uint32_t(scaled(200, 20));
    const uint64_t out = block(s, n);
    qd_graph g = capture_write(s, out, 1);
    // One thread rebinds node 0 to (out[i], i + 1) and replays; another replays meanwhile. A
    // replay runs the (address, value) pair of one rebind, never half of two, so whoever wrote
    // out[i] wrote i + 1, and the first thread's own replay after each rebind wrote it.
    std::atomic<bool> done{false};
    std::thread other([&] {
        while (!done.load()) EXPECT_QD_OK(qd_graph_launch(g, s));
    });
    for (uint32_t i = 0; i < n; ++i) {
        EXPECT_QD_OK(rebind(g, 0, out + 4 * i, i + 1));
        EXPECT_QD_OK(qd_graph_launch(g, s));
    }
    done = true;
    other.join();
    std::vector<uint8_t> bytes = read_back(s, out, 4 * n);
    std::vector<uint32_t> w(n);
    std::memcpy(w.data(), bytes.data(), bytes.size());
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(w[i], i + 1) << "word " << i;
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, Rebind_RefusesWrongCountSizeNodeOrHandle_AndChangesNothing) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 4), other = block(s, 4);
    qd_graph g = capture_write(s, buf, 1);
    WriteArgs a(other, 9);
    // Wrong count.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "num_args", qd_graph_set_kernel_args(g, 0, a.args, 1));
    const qd_arg three[3] = {a.args[0], a.args[1], a.args[1]};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "num_args", qd_graph_set_kernel_args(g, 0, three, 3));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "num_args",
                  qd_graph_set_kernel_args(g, 0, nullptr, 0));
    // Wrong size: the value as 8 bytes instead of 4.
    uint64_t wide = 9;
    const qd_arg wrong_size[2] = {a.args[0], {&wide, 8}};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "argument 1 has size 8",
                  qd_graph_set_kernel_args(g, 0, wrong_size, 2));
    // Bad node index.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out of range",
                  qd_graph_set_kernel_args(g, 1, a.args, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out of range",
                  qd_graph_set_kernel_args(g, UINT32_MAX, a.args, 2));
    // What qd_launch refuses in an argument list.
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_graph_set_kernel_args(g, 0, nullptr, 2));
    const qd_arg empty_arg[2] = {a.args[0], {&a.value, 0}};
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_graph_set_kernel_args(g, 0, empty_arg, 2));
    const qd_arg null_data[2] = {a.args[0], {nullptr, 4}};
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_graph_set_kernel_args(g, 0, null_data, 2));
    // Handles.
    uint32_t count = 0;
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_graph_kernel_node_count(g, nullptr));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_set_kernel_args(0, 0, a.args, 2));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_set_kernel_args(s, 0, a.args, 2));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_kernel_node_count(0, &count));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_kernel_node_count(s, &count));
    // Nothing changed: the replay writes the captured value at the captured address.
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf), 1u);
    EXPECT_EQ(word(s, other), 0u);
    // A destroyed graph.
    ASSERT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_set_kernel_args(g, 0, a.args, 2));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_kernel_node_count(g, &count));
}

TEST_P(GraphRebindTest, Update_TakesFromsValues_RebindsAfterItApply) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 8);
    qd_graph g = capture_write(s, buf + 0, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));  // instantiated (CUDA) before the update
    ASSERT_QD_OK(rebind(g, 0, buf + 4, 2));
    // An update replaces the rebound values with from's.
    qd_graph fresh = capture_write(s, buf + 8, 3);
    ASSERT_QD_OK(qd_graph_update(g, fresh));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 8), 3u);
    EXPECT_EQ(word(s, buf + 4), 0u) << "the rebind before the update survived it";
    // A rebind after the update applies to the updated graph.
    ASSERT_QD_OK(rebind(g, 0, buf + 12, 4));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 12), 4u);
    // An update from a rebound graph takes its rebound values.
    ASSERT_QD_OK(rebind(fresh, 0, buf + 16, 5));
    ASSERT_QD_OK(qd_graph_update(g, fresh));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 16), 5u);
    uint32_t count = 0;
    ASSERT_QD_OK(qd_graph_kernel_node_count(g, &count));
    EXPECT_EQ(count, 1u);
    EXPECT_QD_OK(qd_graph_destroy(fresh));
    // g keeps them after from is gone.
    ASSERT_QD_OK(qd_memset_async(s, buf + 16, 0, 4));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 16), 5u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, Rebind_BeforeTheFirstReplay_Applies) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 4);
    qd_graph g = capture_write(s, buf, 1);
    ASSERT_QD_OK(rebind(g, 0, buf + 4, 6));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 4), 6u);
    EXPECT_EQ(word(s, buf), 0u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, Validation_SeesTheReboundPointer_FailModeRefusesTheReplay) {
    QDT_RACES_ON_PURPOSE();
    QDT_REQUIRE_KERNELS();
    Validating setup;
    make_validating(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL, &setup);
    if (IsSkipped() || HasFatalFailure()) return;
    auto &[c, kernels, a, s, clean, raced] = setup;

    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, kernels->write_value(), clean, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    // Stream a writes `raced`, ordered with nothing on s (a Flag proves it ran, so the test's
    // own kernels never race; the model does not count a host callback as ordering).
    ASSERT_QD_OK(launch_write_value(a, kernels->write_value(), raced, 7));
    Flag ran;
    ASSERT_QD_OK(ran.enqueue(a));
    ASSERT_TRUE(ran.wait());
    ASSERT_QD_OK(qd_graph_launch(g, s));  // the captured pointer does not race
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(get_stats(c).hazards_reported, 0u);

    WriteArgs w(raced, 2);
    ASSERT_QD_OK(qd_graph_set_kernel_args(g, 0, w.args, 2));
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "qd_test_write_value", qd_graph_launch(g, s));
    EXPECT_EQ(get_stats(c).hazards_reported, 1u);
    ASSERT_QD_OK(qd_stream_synchronize(s));
    // Nothing of the refused replay ran; ordered after a's write, it runs.
    ASSERT_QD_OK(qd_stream_synchronize(a));
    uint32_t v = 0;
    ASSERT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v, raced, 4));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(v, 7u) << "the refused replay ran";
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v, raced, 4));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(v, 2u);
    EXPECT_EQ(get_stats(c).hazards_reported, 1u);
    EXPECT_QD_OK(qd_graph_destroy(g));
    kernels.reset();
}

TEST_P(GraphRebindTest, Rebind_ManyInARowThenOneReplay_RunsEachNodesLastValues) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 8);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), buf + 0, 1));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), buf + 4, 2));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    // The two nodes rebound in turn, each to a word of its own half, no replay between: only
    // the last values of each node run, written over what the earlier rebinds left.
    const uint32_t n = uint32_t(scaled(1000, 100));
    for (uint32_t i = 0; i < n; ++i) ASSERT_QD_OK(rebind(g, i % 2, buf + 8 + 4 * (i % 2), 10 + i));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 8), 10 + n - 2) << "node 0 ran other values than its last rebind's";
    EXPECT_EQ(word(s, buf + 12), 10 + n - 1) << "node 1 ran other values than its last rebind's";
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, RebindAfterUpdate_LeavesTheOtherGraphsValues) {
    QDT_REQUIRE_REBIND();
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 8);
    qd_graph g = capture_write(s, buf + 0, 1);
    qd_graph from = capture_write(s, buf + 4, 2);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(rebind(from, 0, buf + 8, 3));
    ASSERT_QD_OK(qd_graph_update(g, from));  // g takes from's rebound values
    // Each graph's later rebinds are its own.
    ASSERT_QD_OK(rebind(g, 0, buf + 12, 4));
    ASSERT_QD_OK(qd_graph_launch(from, s));
    EXPECT_EQ(word(s, buf + 8), 3u);
    EXPECT_EQ(word(s, buf + 12), 0u) << "a rebind of the updated graph changed the other one";
    ASSERT_QD_OK(rebind(from, 0, buf + 16, 5));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 12), 4u);
    EXPECT_EQ(word(s, buf + 16), 0u) << "a rebind of the other graph changed the updated one";
    EXPECT_QD_OK(qd_graph_destroy(from));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphRebindTest, Rebind_ThenATraceStarts_TheReissuedReplayRunsTheReboundValues) {
    QDT_REQUIRE_REBIND();
    // Captured and rebound with no observer attached (a driver graph on CUDA, whose replays
    // need no values of qd's); the trace attached afterwards needs replays re-issued, and the
    // next replay re-issues the nodes: with the rebound values.
    qd_stream s = new_stream();
    const uint64_t buf = block(s, 4);
    qd_graph g = capture_write(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(rebind(g, 0, buf + 4, 2));
    char dir[] = "/tmp/qd-rebind-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/trace.json";
    const qd_status started = qd_trace_start(ctx_, path.c_str());
    if (started == QD_ERROR_INVALID_OPERATION) {  // QD_TRACE traces this run already
        EXPECT_QD_OK(qd_graph_destroy(g));
        ::rmdir(dir);
        GTEST_SKIP() << "the context is traced already: " << qd_last_error_message();
    }
    ASSERT_QD_OK(started);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_trace_stop(ctx_));
    ::unlink(path.c_str());
    ::rmdir(dir);
    EXPECT_EQ(word(s, buf + 4), 2u) << "the replay after the trace started lost the rebind";
    EXPECT_EQ(word(s, buf), 1u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

namespace {

// Rebinds node 0 of a graph to (dst, value) from the first hazard report.
struct RebindFromHandler {
    qd_graph graph = 0;
    uint64_t dst = 0;
    uint32_t value = 0;
    int calls = 0;
    qd_status status = QD_SUCCESS;
    static void on_hazard(const qd_hazard *, void *user) {
        auto *r = static_cast<RebindFromHandler *>(user);
        if (r->calls++ != 0) return;
        const qd_arg args[2] = {{&r->dst, sizeof r->dst}, {&r->value, sizeof r->value}};
        r->status = qd_graph_set_kernel_args(r->graph, 0, args, 2);
    }
};

}  // namespace

TEST_P(GraphRebindTest, Rebind_DuringAReplaysSubmission_TheReplayKeepsTheValuesItTook) {
    QDT_RACES_ON_PURPOSE();
    QDT_REQUIRE_KERNELS();
    // The validation mode re-issues a replay's nodes and reports a hazard in it to the handler
    // before any of them is queued: the handler's rebind comes while the replay holds the
    // values it took.
    Validating setup;
    make_validating(QD_CONTEXT_VALIDATE, &setup);
    if (IsSkipped() || HasFatalFailure()) return;
    auto &[c, kernels, a, s, clean, raced] = setup;

    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, kernels->write_value(), clean, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    WriteArgs w(raced, 2);
    ASSERT_QD_OK(qd_graph_set_kernel_args(g, 0, w.args, 2));
    // Stream a writes `raced`, ordered with nothing on s (a Flag proves it ran first).
    ASSERT_QD_OK(launch_write_value(a, kernels->write_value(), raced, 7));
    Flag ran;
    ASSERT_QD_OK(ran.enqueue(a));
    ASSERT_TRUE(ran.wait());
    RebindFromHandler handler;
    handler.graph = g;
    handler.dst = clean + 4;
    handler.value = 3;
    ASSERT_QD_OK(qd_context_set_hazard_handler(c, &RebindFromHandler::on_hazard, &handler));
    ASSERT_QD_OK(qd_graph_launch(g, s));  // reported, not refused
    ASSERT_EQ(handler.calls, 1);
    ASSERT_QD_OK(handler.status);
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_QD_OK(qd_stream_synchronize(a));  // a's write ordered before the reads below
    uint32_t v[2] = {0, 0};
    ASSERT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v[0], raced, 4));
    ASSERT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v[1], clean + 4, 4));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(v[0], 2u) << "the replay did not run the values it took";
    EXPECT_EQ(v[1], 0u) << "the replay ran the values of a rebind that came after it took them";
    // The next replay runs the handler's values.
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v[1], clean + 4, 4));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(v[1], 3u);
    ASSERT_QD_OK(qd_context_set_hazard_handler(c, nullptr, nullptr));
    EXPECT_QD_OK(qd_graph_destroy(g));
    kernels.reset();
}

QDT_INSTANTIATE_BACKENDS(GraphRebindTest);
