// Conditionals in graphs (qd.h, "Graphs", "Conditionals"): qd_stream_begin_conditional,
// qd_stream_next_branch, qd_stream_end_conditional, qd_conditional_handle. Each replay decides
// from the condition word as the graph runs (written by a kernel queued just before the
// replay, never by the host in between): IF taken and not taken, IF_ELSE, WHILE counting down
// to 0 and with no iteration, SWITCH with an out-of-range value, a WHILE nested in an IF, fork,
// join and a parallel launch inside a body; update keeps the conditional shape; every misuse is
// refused and leaves the capture as it was. Backends whose captures cannot hold conditionals
// (qd_stream_begin_conditional says QD_ERROR_NOT_SUPPORTED) skip with the reason.
#include <cstring>
#include <string>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

constexpr uint64_t kWord = sizeof(uint32_t);
constexpr uint32_t kMinusOne = 0xFFFFFFFFu;  // add_value's "- 1"

class GraphConditionalTest : public BackendTest {
  protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (IsSkipped() || !kernels_) return;
        k_ = kernels_->add_value();
        w_ = kernels_->write_value();
        log_k_ = kernels_->append_log();
    }

    // Begins a capture on s and opens a conditional; skips the test when this backend's
    // captures cannot hold one (the reason in the message).
    bool open(qd_stream s, qd_conditional_kind kind, uint64_t cond, uint32_t cases = 0) {
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        qd_conditional_desc d = QD_CONDITIONAL_DESC_INIT;
        d.kind = kind;
        d.num_cases = cases;
        d.condition = cond;
        const qd_status st = qd_stream_begin_conditional(s, &d);
        if (st == QD_ERROR_NOT_SUPPORTED) {
            reason_ = qd_last_error_message();
            qd_graph g = 0;
            EXPECT_QD_OK(qd_stream_end_capture(s, &g));
            EXPECT_QD_OK(qd_graph_destroy(g));
            return false;
        }
        EXPECT_QD_OK(st);
        return st == QD_SUCCESS;
    }
    qd_status begin(qd_stream s, qd_conditional_kind kind, uint64_t cond, uint32_t cases = 0) {
        qd_conditional_desc d = QD_CONDITIONAL_DESC_INIT;
        d.kind = kind;
        d.num_cases = cases;
        d.condition = cond;
        return qd_stream_begin_conditional(s, &d);
    }
    qd_graph end(qd_stream s) {
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        return g;
    }
    // The word is written on the device, in stream order, just before the replay.
    void set_word(qd_stream s, uint64_t word, uint32_t value) {
        ASSERT_QD_OK(launch_write_value(s, w_, word, value));
    }
    uint32_t word(qd_stream s, uint64_t address) { return read_value<uint32_t>(s, address); }
    void zero(qd_stream s, uint64_t buf, uint64_t bytes) {
        ASSERT_QD_OK(qd_memset_async(s, buf, 0, bytes));
    }

    qd_kernel k_ = 0, w_ = 0, log_k_ = 0;
    std::string reason_;
};

#define QDT_OPEN_OR_SKIP(s, kind, cond, ...)                                                       \
    do {                                                                                           \
        if (!open(s, kind, cond, ##__VA_ARGS__)) {                                                 \
            if (!reason_.empty()) GTEST_SKIP() << "conditionals: " << reason_;                     \
            FAIL() << "qd_stream_begin_conditional failed";                                        \
        }                                                                                          \
    } while (0)

}  // namespace

TEST_P(GraphConditionalTest, If_RunsTheBodyOnlyOnReplaysWhoseWordIsNonZero) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 2 * kWord);  // [0] condition, [1] counter
    zero(s, buf, 2 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF, buf);
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 1));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    EXPECT_EQ(word(s, buf + kWord), 0u) << "the body ran during the capture";
    const uint32_t values[] = {1, 0, 7, 0, 0, 1};
    uint32_t want = 0;
    for (uint32_t v : values) {
        set_word(s, buf, v);
        ASSERT_QD_OK(qd_graph_launch(g, s));
        want += v != 0;
    }
    EXPECT_EQ(word(s, buf + kWord), want);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, IfElse_RunsTheThenBodyOrTheElseBody) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 2 * kWord);
    zero(s, buf, 2 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF_ELSE, buf);
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 1));
    ASSERT_QD_OK(qd_stream_next_branch(s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 100));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 10000));  // after the node
    qd_graph g = end(s);
    set_word(s, buf, 3);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 10001u);
    set_word(s, buf, 0);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 20101u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, While_RunsTheBodyUntilItCountsTheWordDownToZero) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint32_t n = 25;
    uint64_t cond = alloc(s, kWord), log = alloc(s, (2 + 2 * n) * kWord);
    zero(s, log, (2 + 2 * n) * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_WHILE, cond);
    ASSERT_QD_OK(launch_append_log(s, log_k_, log, 7));
    ASSERT_QD_OK(launch_add_value(s, k_, cond, cond, kMinusOne));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    set_word(s, cond, n);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, cond), 0u);
    EXPECT_EQ(word(s, log), n) << "iterations";
    set_word(s, cond, n);  // a second replay decides again from the new word
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, log), 2 * n);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, While_WordZeroBeforeTheLoop_RunsNoIteration) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t cond = alloc(s, kWord), log = alloc(s, 4 * kWord);
    zero(s, log, 4 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_WHILE, cond);
    ASSERT_QD_OK(launch_append_log(s, log_k_, log, 7));
    ASSERT_QD_OK(launch_add_value(s, k_, cond, cond, kMinusOne));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(launch_append_log(s, log_k_, log, 9));  // after the loop
    qd_graph g = end(s);
    set_word(s, cond, 0);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, cond), 0u);
    EXPECT_EQ(word(s, log), 1u);
    EXPECT_EQ(word(s, log + kWord), 9u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, Switch_RunsTheCaseOfTheValue_AndNoCaseOutOfRange) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 2 * kWord);  // [0] condition, [1] out
    zero(s, buf, 2 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_SWITCH, buf, 3);
    for (uint32_t c = 0; c < 3; ++c) {
        if (c > 0) {
            ASSERT_QD_OK(qd_stream_next_branch(s));
        }
        ASSERT_QD_OK(launch_write_value(s, w_, buf + kWord, 10 + c));
    }
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    for (uint32_t v : {2u, 0u, 1u}) {
        set_word(s, buf, v);
        ASSERT_QD_OK(qd_graph_launch(g, s));
        EXPECT_EQ(word(s, buf + kWord), 10 + v) << "value " << v;
    }
    for (uint32_t v : {3u, 1000u, kMinusOne}) {
        set_word(s, buf + kWord, 55);
        set_word(s, buf, v);
        ASSERT_QD_OK(qd_graph_launch(g, s));
        EXPECT_EQ(word(s, buf + kWord), 55u) << "value " << v << " ran a case";
    }
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, WhileNestedInIf_RunsOnlyWhenTheOuterIsTaken) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 3 * kWord);  // [0] outer flag, [1] loop counter, [2] iterations
    zero(s, buf, 3 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF, buf);
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_WHILE, buf + kWord));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 2 * kWord, buf + 2 * kWord, 1));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, kMinusOne));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    set_word(s, buf + kWord, 4);
    set_word(s, buf, 0);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 2 * kWord), 0u) << "the outer IF was not taken";
    EXPECT_EQ(word(s, buf + kWord), 4u);
    set_word(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + 2 * kWord), 4u);
    EXPECT_EQ(word(s, buf + kWord), 0u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, ForkJoinAndParallelLaunchInsideABody_RunEveryIteration) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 8 * kWord);  // [0] counter, [1..2] fork children, [3..6] tasks
    zero(s, buf, 8 * kWord);
    declare_slots(k_, {0, 1});
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_WHILE, buf);
    qd_stream kids[2] = {0, 0};
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    for (uint32_t i = 0; i < 2; ++i)
        ASSERT_QD_OK(
            launch_add_value(kids[i], k_, buf + (1 + i) * kWord, buf + (1 + i) * kWord, i + 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "joined back", qd_stream_end_conditional(s));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    qd_task tasks[4];
    TaskArgs store[4];
    for (uint32_t t = 0; t < 4; ++t)
        task_add_value(&tasks[t], &store[t], t, k_, buf + (3 + t) * kWord, buf + (3 + t) * kWord,
                       10);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 4));
    ASSERT_QD_OK(launch_add_value(s, k_, buf, buf, kMinusOne));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    set_word(s, buf, 3);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    std::vector<uint8_t> bytes = read_back(s, buf, 8 * kWord);
    std::vector<uint32_t> w(8);
    std::memcpy(w.data(), bytes.data(), bytes.size());
    EXPECT_EQ(w, (std::vector<uint32_t>{0, 3, 6, 30, 30, 30, 30, 0}));
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

TEST_P(GraphConditionalTest, Update_TakesTheValuesOfTheSameShape_RefusesAnother) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 2 * kWord);
    zero(s, buf, 2 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF, buf);
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 1));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_IF, buf));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 50));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph same = end(s);
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_WHILE, buf));
    ASSERT_QD_OK(launch_add_value(s, k_, buf, buf, kMinusOne));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph other = end(s);
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "shape", qd_graph_update(g, other));
    ASSERT_QD_OK(qd_graph_update(g, same));
    set_word(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 50u);
    for (qd_graph x : {g, same, other}) EXPECT_QD_OK(qd_graph_destroy(x));
}

TEST_P(GraphConditionalTest, Misuse_IsRefusedAndLeavesTheCaptureAsItWas) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 4 * kWord);  // [0] condition, [1] counter
    zero(s, buf, 4 * kWord);
    qd_conditional_desc d = QD_CONDITIONAL_DESC_INIT;
    d.condition = buf;
    uint64_t h = 0;
    // Not capturing.
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "not capturing", qd_stream_begin_conditional(s, &d));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "no conditional|not capturing",
                  qd_stream_next_branch(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "no conditional|not capturing",
                  qd_stream_end_conditional(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "handle", qd_conditional_handle(s, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_begin_conditional(0, &d));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_next_branch(0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_end_conditional(0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_conditional_handle(0, &h));

    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF, buf);
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 1));
    // Bad descriptions.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "desc", qd_stream_begin_conditional(s, nullptr));
    qd_conditional_desc bad = d;
    bad.struct_size = 4;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "struct_size", qd_stream_begin_conditional(s, &bad));
    bad = d;
    bad.kind = (qd_conditional_kind)9;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "kind", qd_stream_begin_conditional(s, &bad));
    bad = d;
    bad.num_cases = 2;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "num_cases", qd_stream_begin_conditional(s, &bad));
    bad.kind = QD_CONDITIONAL_SWITCH;
    bad.num_cases = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "num_cases", qd_stream_begin_conditional(s, &bad));
    bad.num_cases = QD_MAX_CONDITIONAL_CASES + 1;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "num_cases", qd_stream_begin_conditional(s, &bad));
    bad = d;
    bad.condition = buf + 2;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "aligned", qd_stream_begin_conditional(s, &bad));
    if (is_cpu()) {
        bad = d;
        bad.condition = 0;
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "condition word",
                      qd_stream_begin_conditional(s, &bad));
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "native handle", qd_conditional_handle(s, &h));
    } else {
        // A driver graph: the conditional has a native handle for the graph's own kernels.
        EXPECT_QD_OK(qd_conditional_handle(s, &h));
    }
    // One body only; the capture cannot end with the conditional open.
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "one body", qd_stream_next_branch(s));
    qd_graph g = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "still open", qd_stream_end_capture(s, &g));
    EXPECT_EQ(g, 0u);
    // A stream that joined the body calls on the conditional's stream only; a wait on a record
    // made outside the body is refused.
    qd_stream kid = 0;
    ASSERT_QD_OK(qd_stream_fork(s, 1, &kid));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "opened on stream", qd_stream_end_conditional(kid));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "opened on stream", qd_stream_next_branch(kid));
    // A conditional opened inside the body, on the stream that joined it, closes first.
    ASSERT_QD_OK(begin(kid, QD_CONDITIONAL_IF, buf));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "still open", qd_stream_end_conditional(s));
    ASSERT_QD_OK(qd_stream_end_conditional(kid));
    ASSERT_QD_OK(qd_stream_join(s, &kid, 1));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "no conditional", qd_stream_end_conditional(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "no conditional", qd_stream_next_branch(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "no conditional", qd_conditional_handle(s, &h));
    qd_event outside = new_event();
    ASSERT_QD_OK(qd_event_record(s, outside));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_IF_ELSE, buf));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "outside the conditional",
                  qd_stream_wait_event(s, outside));
    ASSERT_QD_OK(qd_stream_next_branch(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "last body", qd_stream_next_branch(s));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    // A stream forked outside the body cannot join into it, and joins after it.
    qd_stream outer = 0;
    ASSERT_QD_OK(qd_stream_fork(s, 1, &outer));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_WHILE, buf + 2 * kWord));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "different bodies", qd_stream_join(s, &outer, 1));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(qd_stream_join(s, &outer, 1));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_SWITCH, buf, 2));
    ASSERT_QD_OK(qd_stream_next_branch(s));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "last body", qd_stream_next_branch(s));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    // Nothing refused changed the graph: one IF adding 1, an empty IF_ELSE, an empty SWITCH.
    g = end(s);
    set_word(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 1u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, DestroyWithReplaysQueued_TheReplaysStillRunTheirBodies) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t cond = alloc(s, kWord), log = alloc(s, 64 * kWord);
    zero(s, log, 64 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_WHILE, cond);
    ASSERT_QD_OK(launch_append_log(s, log_k_, log, 3));
    ASSERT_QD_OK(launch_add_value(s, k_, cond, cond, kMinusOne));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = end(s);
    for (int i = 0; i < 4; ++i) {
        set_word(s, cond, 5);
        ASSERT_QD_OK(qd_graph_launch(g, s));
    }
    ASSERT_QD_OK(qd_graph_destroy(g));  // the four replays may not have run yet
    EXPECT_EQ(word(s, log), 20u);
    EXPECT_EQ(get_stats(ctx_).live_graphs, 0u);
}

// A kernel that faults inside a body loses the context as one queued directly does, and the
// message names it; the context's destroy drains without hanging.
TEST_P(GraphConditionalTest, FaultInsideABody_LosesTheContextAndNamesTheKernel) {
    QDT_REQUIRE_CPU();
    QDT_REQUIRE_KERNELS();
    qd_context c = 0;
    qd_context_desc desc = make_desc(QD_BACKEND_CPU, 2, 1);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    std::string path = cpu_module_path();
    std::string why;
    auto mk = make_module_kernels(c, path.data(), path.size(), &why);
    ASSERT_TRUE(mk) << why;
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(c, nullptr, &s));
    uint64_t cond = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(s, kWord, &cond));
    ASSERT_QD_OK(launch_write_value(s, mk->write_value(), cond, 1));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_conditional_desc d = QD_CONDITIONAL_DESC_INIT;
    d.condition = cond;
    ASSERT_QD_OK(qd_stream_begin_conditional(s, &d));
    ASSERT_QD_OK(launch0(s, mk->fault()));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_QD_ERR(QD_ERROR_DEVICE_LOST, mk->fault_name().c_str(), qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_graph_destroy(g));
    mk.reset();
    EXPECT_QD_OK(qd_stream_destroy(s));
    EXPECT_QD_OK(qd_context_destroy(c));
}

TEST_P(GraphConditionalTest, KernelNodes_AreTheGraphsOwnLaunches_NotThoseInsideABody) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 3 * kWord);  // [0] condition, [1] the graph's, [2] the body's
    zero(s, buf, 3 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF, buf);
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 2 * kWord, buf + 2 * kWord, 10));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 1));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_IF, buf));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 2 * kWord, buf + 2 * kWord, 20));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, 100));
    qd_graph g = end(s);
    uint32_t count = 0;
    ASSERT_QD_OK(qd_graph_kernel_node_count(g, &count));
    EXPECT_EQ(count, 2u) << "a launch inside a body was counted as a kernel node";
    // Node 1 is the second launch of the graph itself, not the one inside the bodies.
    uint64_t dst = buf + kWord, src = buf + kWord;
    uint32_t add = 1000;
    qd_arg args[3] = {{&dst, sizeof dst}, {&src, sizeof src}, {&add, sizeof add}};
    ASSERT_QD_OK(qd_graph_set_kernel_args(g, 1, args, 3));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "node", qd_graph_set_kernel_args(g, 2, args, 3));
    set_word(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 1001u);
    EXPECT_EQ(word(s, buf + 2 * kWord), 30u) << "the bodies' launches keep their values";
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, AllocAndFreeInsideABody_AreRefused_TheCaptureGoesOn) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 2 * kWord);  // [0] condition, [1] out
    zero(s, buf, 2 * kWord);
    QDT_OPEN_OR_SKIP(s, QD_CONDITIONAL_IF, buf);
    uint64_t block = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "conditional", qd_mem_alloc_async(s, 64, &block));
    EXPECT_EQ(block, 0u);
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    // A block of the graph, allocated before the conditional, is used inside it...
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &block));
    ASSERT_QD_OK(qd_memset_async(s, block, 0, 64));
    ASSERT_QD_OK(begin(s, QD_CONDITIONAL_IF, buf));
    ASSERT_QD_OK(qd_memset_async(s, block, 7, 4));
    // ...but not freed there: the free is refused and the block stays the capture's.
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "conditional", qd_mem_free_async(s, block));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(qd_memcpy_async(s, buf + kWord, block, kWord));
    ASSERT_QD_OK(qd_mem_free_async(s, block));
    // The capture ends: the refused alloc made no block that would now be unfreed.
    qd_graph g = end(s);
    ASSERT_NE(g, 0u);
    set_word(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 0x07070707u);
    set_word(s, buf, 0);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 0u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphConditionalTest, Update_WithConditionals_ChecksAllocationSizes_TakesReboundValues) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 3 * kWord);  // [0] condition, [1] the graph's, [2] the body's
    zero(s, buf, 3 * kWord);
    // alloc; add_value (kernel node 0); IF { add_value }; free.
    auto capture = [&](uint64_t bytes, uint32_t add, qd_graph *g) -> qd_status {
        uint64_t block = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        const qd_status alloc_st = qd_mem_alloc_async(s, bytes, &block);
        if (alloc_st == QD_ERROR_NOT_SUPPORTED) {  // no graph memory nodes in this driver
            reason_ = qd_last_error_message();
            EXPECT_QD_OK(qd_stream_end_capture(s, g));
            return alloc_st;
        }
        EXPECT_QD_OK(alloc_st);
        EXPECT_QD_OK(launch_add_value(s, k_, buf + kWord, buf + kWord, add));
        const qd_status st = begin(s, QD_CONDITIONAL_IF, buf);
        if (st == QD_SUCCESS) {
            EXPECT_QD_OK(launch_add_value(s, k_, buf + 2 * kWord, buf + 2 * kWord, 1));
            EXPECT_QD_OK(qd_stream_end_conditional(s));
        } else {
            reason_ = qd_last_error_message();
        }
        EXPECT_QD_OK(qd_mem_free_async(s, block));
        EXPECT_QD_OK(qd_stream_end_capture(s, g));
        return st;
    };
    qd_graph g = 0, bigger = 0, same = 0;
    const qd_status st = capture(64, 1, &g);
    if (st == QD_ERROR_NOT_SUPPORTED) {
        EXPECT_QD_OK(qd_graph_destroy(g));
        GTEST_SKIP() << "conditionals or graph memory: " << reason_;
    }
    ASSERT_QD_OK(st);
    ASSERT_QD_OK(capture(128, 2, &bigger));
    ASSERT_QD_OK(capture(64, 3, &same));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "allocation", qd_graph_update(g, bigger));
    uint64_t dst = buf + kWord, src = buf + kWord;
    uint32_t add = 500;
    qd_arg args[3] = {{&dst, sizeof dst}, {&src, sizeof src}, {&add, sizeof add}};
    ASSERT_QD_OK(qd_graph_set_kernel_args(same, 0, args, 3));
    const qd_status update_st = qd_graph_update(g, same);
    if (update_st == QD_ERROR_INVALID_OPERATION &&
        std::string(qd_last_error_message()).find("native driver graph") != std::string::npos) {
        // qd.h: a driver graph's blocks (graph memory nodes) cannot move to another graph.
        const std::string why = qd_last_error_message();
        for (qd_graph x : {g, bigger, same}) EXPECT_QD_OK(qd_graph_destroy(x));
        GTEST_SKIP() << "update of graphs that allocate in a driver graph: " << why;
    }
    ASSERT_QD_OK(update_st);
    set_word(s, buf, 1);
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(word(s, buf + kWord), 500u) << "the update did not take the rebound values";
    EXPECT_EQ(word(s, buf + 2 * kWord), 1u);
    for (qd_graph x : {g, bigger, same}) EXPECT_QD_OK(qd_graph_destroy(x));
}

QDT_INSTANTIATE_BACKENDS(GraphConditionalTest);
