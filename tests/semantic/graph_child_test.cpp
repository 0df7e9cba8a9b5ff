// Child graphs (qd.h, "Graphs", "Child graphs"): qd_graph_launch on a capturing stream records
// the graph into the capture. The parent's replay equals the child launched directly, ordered
// after the stream's earlier work and before its later work; the child's nodes are copied at
// the launch (its destroy, update, rebind or relaunch afterwards leaves the parent as it was);
// on a forked lane of the parent's capture; nested three deep; inside a conditional's body;
// the child's fork/join lanes keep their concurrency; the parent's DOT and kernel nodes include
// the child's; the validation mode checks the child's operations in the parent's replay; what
// cannot be a child (a graph that allocates, one with conditionals) is refused and the capture
// goes on unchanged.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

constexpr uint64_t kWord = sizeof(uint32_t);

class GraphChildTest : public BackendTest {
  protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (IsSkipped() || !kernels_) return;
        k_ = kernels_->add_value();
        w_ = kernels_->write_value();
        declare_slots(k_, {0, 1});
    }

    // The child's work on `s`: word 0 = word 15 + a; a fork of two lanes, lane i writing word
    // 1 + i = word 0 + 10 (i + 1); joined back; and, with `calls`, a host callback that counts.
    qd_status child_step(qd_stream s, uint64_t buf, uint32_t a, std::atomic<int> *calls) {
        qd_status st = launch_add_value(s, k_, buf, buf + 15 * kWord, a);
        if (st != QD_SUCCESS) return st;
        qd_stream kids[2] = {0, 0};
        st = qd_stream_fork(s, 2, kids);
        if (st != QD_SUCCESS) return st;
        for (uint32_t i = 0; i < 2; ++i) {
            st = launch_add_value(kids[i], k_, buf + (1 + i) * kWord, buf, 10 * (i + 1));
            if (st != QD_SUCCESS) return st;
        }
        st = qd_stream_join(s, kids, 2);
        if (st != QD_SUCCESS || !calls) return st;
        return qd_launch_host_fn(s, &count_cb, calls);
    }
    qd_graph capture_child(qd_stream s, uint64_t buf, uint32_t a, std::atomic<int> *calls) {
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_begin_capture(s));
        EXPECT_QD_OK(child_step(s, buf, a, calls));
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        return g;
    }
    static void count_cb(void *user) { static_cast<std::atomic<int> *>(user)->fetch_add(1); }

    std::vector<uint32_t> words(qd_stream s, uint64_t buf, uint32_t n = 16) {
        std::vector<uint8_t> b = read_back(s, buf, n * kWord);
        std::vector<uint32_t> out(n);
        std::memcpy(out.data(), b.data(), b.size());
        return out;
    }
    void zero(qd_stream s, uint64_t buf) {
        ASSERT_QD_OK(qd_memset_async(s, buf, 0, 16 * kWord));
        ASSERT_QD_OK(qd_stream_synchronize(s));
    }
    std::string dot_of(qd_graph g) {
        char path[] = "/tmp/qd_child_dot_XXXXXX";
        const int fd = mkstemp(path);
        EXPECT_GE(fd, 0);
        if (fd >= 0) close(fd);
        EXPECT_QD_OK(qd_graph_debug_dot(g, path, 0));
        std::ifstream in(path);
        std::stringstream all;
        all << in.rdbuf();
        std::remove(path);
        return all.str();
    }
    static int count(const std::string &text, const std::string &needle) {
        int n = 0;
        for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
            ++n;
        return n;
    }

    qd_kernel k_ = 0, w_ = 0;
};

}  // namespace

TEST_P(GraphChildTest, ParentReplay_EqualsTheChildLaunchedDirectly_BetweenEarlierAndLaterWork) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord);
    std::atomic<int> calls{0};
    qd_graph child = capture_child(s, buf, 5, &calls);
    ASSERT_NE(child, 0u);
    // The child launched directly, after a seed of 7 in word 15.
    zero(s, buf);
    ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 7));
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 14 * kWord, buf + 2 * kWord, 1000));
    const std::vector<uint32_t> want = words(s, buf);
    ASSERT_EQ(want[0], 12u);
    ASSERT_EQ(want[2], 32u);
    ASSERT_EQ(want[14], 1032u);
    ASSERT_EQ(calls.load(), 1);

    // The same three calls captured: the child launched on the capturing stream is recorded.
    qd_graph parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 7));
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 14 * kWord, buf + 2 * kWord, 1000));
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    EXPECT_EQ(calls.load(), 1) << "the child's callback ran during the parent's capture";
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u) << "the child's lanes kept their leases";
    // The child changes after the launch: the parent keeps the nodes it copied.
    std::atomic<int> other_calls{0};
    qd_graph other = capture_child(s, buf, 99, &other_calls);
    ASSERT_QD_OK(qd_graph_update(child, other));
    ASSERT_QD_OK(qd_graph_destroy(other));
    ASSERT_QD_OK(qd_graph_destroy(child));

    qd_stream t = new_stream();
    for (int i = 0; i < 10; ++i) {
        qd_stream on = i % 2 ? t : s;
        zero(on, buf);
        ASSERT_QD_OK(qd_graph_launch(parent, on));
        ASSERT_EQ(words(on, buf), want) << "replay " << i;
        EXPECT_EQ(calls.load(), 2 + i) << "the child's callback runs once per parent replay";
    }
    EXPECT_EQ(other_calls.load(), 0) << "the parent took the values the child was updated to";
    EXPECT_QD_OK(qd_graph_destroy(parent));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
}

TEST_P(GraphChildTest, LaunchedOnAForkedLaneOfTheParent_OrderedByTheForkAndTheJoin) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord), side = alloc(s, 16 * kWord);
    qd_graph child = capture_child(s, buf, 3, nullptr);
    qd_graph parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 4));  // before the fork
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch_write_value(kids[0], w_, side, 77));
    ASSERT_QD_OK(qd_graph_launch(child, kids[1]));
    ASSERT_QD_OK(launch_add_value(kids[1], k_, buf + 13 * kWord, buf + 1 * kWord, 100));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 14 * kWord, buf + 2 * kWord, 1000));  // after
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    ASSERT_QD_OK(qd_graph_destroy(child));
    for (int i = 0; i < 5; ++i) {
        zero(s, buf);
        zero(s, side);
        ASSERT_QD_OK(qd_graph_launch(parent, s));
        const std::vector<uint32_t> w = words(s, buf);
        EXPECT_EQ(w[0], 7u);
        EXPECT_EQ(w[1], 17u);
        EXPECT_EQ(w[2], 27u);
        EXPECT_EQ(w[13], 117u) << "work after the child on its lane ran before it";
        EXPECT_EQ(w[14], 1027u) << "work after the join ran before the child";
        EXPECT_EQ(words(s, side, 1)[0], 77u);
    }
    EXPECT_QD_OK(qd_graph_destroy(parent));
}

TEST_P(GraphChildTest, Nested_AGraphWithAChildLaunchedInsideAThirdCapture) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord);
    std::atomic<int> calls{0};
    qd_graph c = capture_child(s, buf, 2, &calls);
    qd_graph b = 0, a = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_graph_launch(c, s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 13 * kWord, buf + 1 * kWord, 100));
    ASSERT_QD_OK(qd_stream_end_capture(s, &b));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 5));
    ASSERT_QD_OK(qd_graph_launch(b, s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf + 12 * kWord, buf + 13 * kWord, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &a));
    ASSERT_QD_OK(qd_graph_destroy(b));
    ASSERT_QD_OK(qd_graph_destroy(c));
    EXPECT_EQ(calls.load(), 0);
    for (int i = 0; i < 3; ++i) {
        zero(s, buf);
        ASSERT_QD_OK(qd_graph_launch(a, s));
        const std::vector<uint32_t> w = words(s, buf);
        EXPECT_EQ(w[0], 7u);
        EXPECT_EQ(w[1], 17u);
        EXPECT_EQ(w[2], 27u);
        EXPECT_EQ(w[13], 117u);
        EXPECT_EQ(w[12], 118u);
        EXPECT_EQ(calls.load(), i + 1);
    }
    EXPECT_QD_OK(qd_graph_destroy(a));
}

TEST_P(GraphChildTest, TakesTheChildsValuesAtTheLaunch_ItsKernelNodesBecomeTheParents) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord);
    qd_graph child = 0, parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_add_value(s, k_, buf, buf + 15 * kWord, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &child));
    uint64_t dst = buf, src = buf + 15 * kWord;
    uint32_t add = 50;
    qd_arg args[3] = {{&dst, sizeof dst}, {&src, sizeof src}, {&add, sizeof add}};
    ASSERT_QD_OK(qd_graph_set_kernel_args(child, 0, args, 3));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 0));
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    add = 99;  // a rebind of the child after the launch: not the parent's
    ASSERT_QD_OK(qd_graph_set_kernel_args(child, 0, args, 3));
    ASSERT_QD_OK(qd_graph_launch(child, s));  // relaunched: the parent is unchanged
    uint32_t nodes = 0;
    ASSERT_QD_OK(qd_graph_kernel_node_count(parent, &nodes));
    EXPECT_EQ(nodes, 2u) << "the parent's write and the child's launch";
    zero(s, buf);
    ASSERT_QD_OK(qd_graph_launch(parent, s));
    EXPECT_EQ(words(s, buf)[0], 50u);
    // The child's launch is the parent's kernel node 1, rebound like any other.
    add = 7;
    ASSERT_QD_OK(qd_graph_set_kernel_args(parent, 1, args, 3));
    ASSERT_QD_OK(qd_graph_launch(parent, s));
    EXPECT_EQ(words(s, buf)[0], 7u);
    EXPECT_QD_OK(qd_graph_destroy(child));
    EXPECT_QD_OK(qd_graph_destroy(parent));
}

TEST_P(GraphChildTest, InsideAConditionalBody_RunsWhenTheBodyRuns) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord), cond = alloc(s, kWord);
    qd_graph child = capture_child(s, buf, 1, nullptr);
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_conditional_desc d = QD_CONDITIONAL_DESC_INIT;
    d.kind = QD_CONDITIONAL_IF;
    d.condition = cond;
    const qd_status opened = qd_stream_begin_conditional(s, &d);
    if (opened == QD_ERROR_NOT_SUPPORTED) {
        const std::string why = qd_last_error_message();
        qd_graph g = 0;
        EXPECT_QD_OK(qd_stream_end_capture(s, &g));
        EXPECT_QD_OK(qd_graph_destroy(g));
        EXPECT_QD_OK(qd_graph_destroy(child));
        GTEST_SKIP() << "conditionals: " << why;
    }
    ASSERT_QD_OK(opened);
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    qd_graph parent = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    ASSERT_QD_OK(qd_graph_destroy(child));
    for (uint32_t taken : {1u, 0u, 1u}) {
        zero(s, buf);
        ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 6));
        ASSERT_QD_OK(launch_write_value(s, w_, cond, taken));
        ASSERT_QD_OK(qd_graph_launch(parent, s));
        const std::vector<uint32_t> w = words(s, buf);
        EXPECT_EQ(w[0], taken ? 7u : 0u);
        EXPECT_EQ(w[1], taken ? 17u : 0u);
        EXPECT_EQ(w[2], taken ? 27u : 0u);
    }
    EXPECT_QD_OK(qd_graph_destroy(parent));
}

TEST_P(GraphChildTest, DebugDot_OfTheParent_ShowsTheChildsNodes) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord);
    qd_graph child = capture_child(s, buf, 1, nullptr);
    qd_graph parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, w_, buf + 15 * kWord, 6));
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    const std::string c = dot_of(child), p = dot_of(parent);
    EXPECT_EQ(count(c, "qd_test_add_value"), 3) << c;
    EXPECT_EQ(count(p, "qd_test_add_value"), 3) << p;
    EXPECT_EQ(count(p, "qd_test_write_value"), 1) << p;
    EXPECT_EQ(count(p, "subgraph cluster_lane"), count(c, "subgraph cluster_lane"))
        << "the child's fork lanes are not the parent's:\n"
        << p;
    EXPECT_QD_OK(qd_graph_destroy(child));
    EXPECT_QD_OK(qd_graph_destroy(parent));
}

namespace {
// Two tasks that meet: each arrives, then waits (bounded) for the other. Both finish "met" only
// if they ran at the same time; the bound only keeps a broken library from hanging the test.
std::atomic<int> g_arrived{0};
std::atomic<int> g_met{0};
int32_t rendezvous(const qd_host_kernel_info *, void *const *) {
    g_arrived.fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (g_arrived.load() < 2 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
    if (g_arrived.load() >= 2) g_met.fetch_add(1);
    return 0;
}
}  // namespace

TEST_P(GraphChildTest, Cpu_TheChildsForkedLanesRunConcurrentlyInTheParentsReplay) {
    QDT_REQUIRE_CPU();
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &rendezvous, "rendezvous", &k));
    qd_stream s = new_stream();
    qd_graph child = 0, parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch0(kids[0], k));
    ASSERT_QD_OK(launch0(kids[1], k));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    ASSERT_QD_OK(qd_stream_end_capture(s, &child));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    for (int i = 0; i < 5; ++i) {
        g_arrived = 0;
        g_met = 0;
        ASSERT_QD_OK(qd_graph_launch(parent, s));
        ASSERT_QD_OK(qd_stream_synchronize(s));
        ASSERT_EQ(g_met.load(), 2) << "the child's lanes did not overlap in replay " << i;
    }
    EXPECT_QD_OK(qd_graph_destroy(child));
    EXPECT_QD_OK(qd_graph_destroy(parent));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(GraphChildTest, Refused_AChildThatAllocates_OrHasConditionals_TheCaptureGoesOn) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t buf = alloc(s, 16 * kWord), cond = alloc(s, kWord);
    // A graph that allocates (where a native capture refuses the allocation, there is none).
    qd_graph allocating = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    uint64_t block = 0;
    const qd_status allocated = qd_mem_alloc_async(s, 64, &block);
    if (allocated == QD_SUCCESS) ASSERT_QD_OK(qd_mem_free_async(s, block));
    ASSERT_QD_OK(qd_stream_end_capture(s, &allocating));
    // A graph with a conditional (where this backend has them).
    qd_graph conditional = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_conditional_desc d = QD_CONDITIONAL_DESC_INIT;
    d.condition = cond;
    const qd_status opened = qd_stream_begin_conditional(s, &d);
    if (opened == QD_SUCCESS) {
        ASSERT_QD_OK(launch_add_value(s, k_, buf + 3 * kWord, buf + 3 * kWord, 1));
        ASSERT_QD_OK(qd_stream_end_conditional(s));
    }
    ASSERT_QD_OK(qd_stream_end_capture(s, &conditional));
    qd_graph empty = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &empty));

    qd_graph parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, w_, buf, 1));
    if (allocated == QD_SUCCESS)
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "allocates", qd_graph_launch(allocating, s));
    if (opened == QD_SUCCESS)
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "conditionals", qd_graph_launch(conditional, s));
    EXPECT_QD_OK(qd_graph_launch(empty, s)) << "an empty child records nothing";
    ASSERT_QD_OK(launch_add_value(s, k_, buf + kWord, buf, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    uint32_t nodes = 0;
    ASSERT_QD_OK(qd_graph_kernel_node_count(parent, &nodes));
    EXPECT_EQ(nodes, 2u) << "a refused child recorded something";
    zero(s, buf);
    ASSERT_QD_OK(qd_graph_launch(parent, s));
    EXPECT_EQ(words(s, buf, 2), (std::vector<uint32_t>{1u, 2u}));
    EXPECT_QD_OK(qd_graph_destroy(allocating));
    EXPECT_QD_OK(qd_graph_destroy(conditional));
    EXPECT_QD_OK(qd_graph_destroy(empty));
    EXPECT_QD_OK(qd_graph_destroy(parent));
}

TEST_P(GraphChildTest, Validation_TheParentsReplayChecksTheChildsOperations) {
    QDT_REQUIRE_KERNELS();
    QDT_RACES_ON_PURPOSE();
    qd_context_desc desc = make_desc(backend(), 8, 4);
    desc.flags = QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL;
    qd_context c = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    extra_contexts_.push_back(c);
    std::string why;
    std::unique_ptr<TestKernels> kernels = make_test_kernels(backend(), c, &why);
    ASSERT_TRUE(kernels) << why;
    qd_kernel add = kernels->add_value(), write = kernels->write_value();
    qd_stream s = new_stream(c), a = new_stream(c);
    uint64_t raced = 0, out = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(s, kWord, &raced));
    ASSERT_QD_OK(qd_mem_alloc_async(s, kWord, &out));
    ASSERT_QD_OK(qd_memset_async(s, raced, 0, kWord));
    ASSERT_QD_OK(qd_memset_async(s, out, 0, kWord));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    // The child reads `raced` on a forked lane; the parent only launches it.
    qd_graph child = 0, parent = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[1];
    ASSERT_QD_OK(qd_stream_fork(s, 1, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], add, out, raced, 1));
    ASSERT_QD_OK(qd_stream_join(s, kids, 1));
    ASSERT_QD_OK(qd_stream_end_capture(s, &child));
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_graph_launch(child, s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &parent));
    // A write of `raced` on another stream, not ordered before the replay (the Flag is no
    // ordering the validation mode counts): the child's read in the parent's replay races it.
    ASSERT_QD_OK(launch_write_value(a, write, raced, 7));
    Flag ran;
    ASSERT_QD_OK(ran.enqueue(a));
    ASSERT_TRUE(ran.wait());
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "qd_test_write_value", qd_graph_launch(parent, s));
    EXPECT_EQ(read_value<uint32_t>(s, out), 0u) << "the refused replay queued the child's read";
    // Ordered after the write: no hazard, and the child's read runs.
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_graph_launch(parent, s));
    EXPECT_EQ(read_value<uint32_t>(s, out), 8u);
    EXPECT_QD_OK(qd_graph_destroy(child));
    EXPECT_QD_OK(qd_graph_destroy(parent));
    ASSERT_QD_OK(qd_mem_free_async(s, raced));
    ASSERT_QD_OK(qd_mem_free_async(s, out));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    kernels.reset();
}

QDT_INSTANTIATE_BACKENDS(GraphChildTest);
