// A graph written as DOT (qd.h, qd_graph_debug_dot): every recorded operation a node in its
// lane's cluster, the lanes' order and the fork and join edges as recorded, a conditional's
// bodies as clusters; bad arguments refused with nothing written. The DOT text is parsed here
// (no Graphviz needed).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "qd_test.h"

using namespace qdt;

namespace {

// What a test checks of a DOT file: its node statements and its edges by label.
struct Dot {
    std::string text;
    int nodes = 0;          // statements "ID [label=...]" (no "(empty)" body marker)
    int edges = 0;          // "A -> B" statements
    int lane_clusters = 0;  // "subgraph cluster_lane<N>"
    int body_clusters = 0;  // a conditional's bodies
    int labelled(const std::string &label) const {
        int n = 0;
        std::regex re("-> [A-Za-z0-9_]+ \\[[^\\]]*label=\"" + label + "\"");
        for (auto it = std::sregex_iterator(text.begin(), text.end(), re);
             it != std::sregex_iterator(); ++it)
            ++n;
        return n;
    }
    int with(const std::string &needle) const {
        int n = 0;
        for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
            ++n;
        return n;
    }
};

Dot parse(const std::string &path) {
    Dot d;
    std::ifstream in(path);
    std::stringstream all;
    all << in.rdbuf();
    d.text = all.str();
    std::istringstream lines(d.text);
    std::string line;
    const std::regex node("^\\s*n[0-9_bn]*[0-9] \\[label=");
    const std::regex edge("^\\s*[A-Za-z0-9_]+ -> [A-Za-z0-9_]+");
    while (std::getline(lines, line)) {
        if (std::regex_search(line, node)) ++d.nodes;
        if (std::regex_search(line, edge)) ++d.edges;
        if (line.find("subgraph cluster_lane") != std::string::npos) ++d.lane_clusters;
        if (line.find("subgraph cluster_n") != std::string::npos) ++d.body_clusters;
    }
    return d;
}

class GraphDotTest : public BackendTest {
  protected:
    void SetUp() override {
        BackendTest::SetUp();
        char dir[] = "/tmp/qd_graph_dot_XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        dir_ = dir;
    }
    void TearDown() override {
        for (const std::string &f : files_) std::remove(f.c_str());
        ::rmdir(dir_.c_str());
        BackendTest::TearDown();
    }
    std::string path(const char *name) {
        files_.push_back(dir_ + "/" + name);
        return files_.back();
    }

    std::string dir_;
    std::vector<std::string> files_;
};

}  // namespace

TEST_P(GraphDotTest, DebugDot_ParallelLaunch_HasEveryOperationAndItsForkAndJoinEdges) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 64);
    qd_kernel k = kernels_->write_value();
    declare_slots(k, {0});
    qd_task tasks[3];
    TaskArgs store[3];
    for (uint32_t i = 0; i < 3; ++i) task_write_value(&tasks[i], &store[i], i, k, buf + 4 * i, i);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_memset_async(s, buf, 0, 64));
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 3));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));

    const std::string file = path("parallel.dot");
    ASSERT_QD_OK(qd_graph_debug_dot(g, file.c_str(), 0));
    const Dot d = parse(file);
    EXPECT_EQ(d.text.rfind("digraph qd_graph {", 0), 0u) << d.text;
    EXPECT_EQ(d.text.back(), '\n');
    // The memset, the fork's record on the origin and a wait per group, the 3 launches, and
    // the join's record per group with the origin's wait on each.
    EXPECT_EQ(d.nodes, 1 + 1 + 3 + 3 + 3 + 3) << d.text;
    EXPECT_EQ(d.lane_clusters, 4) << d.text;
    EXPECT_EQ(d.with("qd_test_write_value\\ngrid (1,1,1) block (1,1,1)"), 3) << d.text;
    EXPECT_EQ(d.with("memset\\n64 B = 0x00"), 1) << d.text;
    EXPECT_EQ(d.labelled("fork"), 3) << d.text;
    EXPECT_EQ(d.labelled("join"), 3) << d.text;
    EXPECT_EQ(d.labelled("event"), 0) << d.text;
    EXPECT_EQ(d.with("3 kernel nodes"), 1) << d.text;
    // Lane order: origin memset -> record -> 3 waits (5 nodes, 4 edges); each group's lane
    // wait -> launch -> record (2 edges each); fork 3 + join 3.
    EXPECT_EQ(d.edges, 4 + 3 * 2 + 3 + 3) << d.text;
    EXPECT_EQ(d.with(" args "), 0) << "no argument sizes without QD_GRAPH_DOT_VERBOSE";
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphDotTest, DebugDot_Verbose_LabelsLaunchesWithTheirArgumentSizes) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 4), copy = alloc(s, 4);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), buf, 7));
    ASSERT_QD_OK(qd_memcpy_async(s, copy, buf, 4));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    const std::string file = path("verbose.dot");
    ASSERT_QD_OK(qd_graph_debug_dot(g, file.c_str(), QD_GRAPH_DOT_VERBOSE));
    const Dot d = parse(file);
    EXPECT_EQ(d.nodes, 2) << d.text;
    EXPECT_EQ(d.edges, 1) << d.text;
    EXPECT_EQ(d.with("qd_test_write_value\\ngrid (1,1,1) block (1,1,1)\\nshared 0 B\\nargs 8, 4 B"),
              1)
        << d.text;
    EXPECT_EQ(d.with("memcpy\\n4 B\\n0x"), 1) << d.text;
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphDotTest, DebugDot_AllocAndFree_DrawTheBlockEdgeBetweenThem) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    qd_graph g = 0;
    uint64_t block = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    const qd_status st = qd_mem_alloc_async(s, 256, &block);
    if (st == QD_ERROR_NOT_SUPPORTED) {
        qd_graph ignored = 0;
        qd_stream_end_capture(s, &ignored);
        if (ignored) qd_graph_destroy(ignored);
        GTEST_SKIP() << "no graph memory nodes here: " << qd_last_error_message();
    }
    ASSERT_QD_OK(st);
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), block, 1));
    ASSERT_QD_OK(qd_mem_free_async(s, block));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    const std::string file = path("block.dot");
    ASSERT_QD_OK(qd_graph_debug_dot(g, file.c_str(), 0));
    const Dot d = parse(file);
    EXPECT_EQ(d.nodes, 3) << d.text;
    EXPECT_EQ(d.with("alloc\\n256 B"), 1) << d.text;
    EXPECT_EQ(d.labelled("block"), 1) << d.text;
    EXPECT_EQ(d.edges, 3) << d.text;
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphDotTest, DebugDot_Conditional_DrawsEachBodyAsAClusterEnteredFromItsNode) {
    QDT_REQUIRE_KERNELS();
    QDT_REQUIRE_CPU();  // qd.h, "Conditionals": GPU contexts refuse them in this release
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 16);
    qd_kernel k = kernels_->write_value();
    qd_conditional_desc desc = QD_CONDITIONAL_DESC_INIT;
    desc.kind = QD_CONDITIONAL_IF_ELSE;
    desc.condition = buf;
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_stream_begin_conditional(s, &desc));
    ASSERT_QD_OK(launch_write_value(s, k, buf + 4, 1));
    ASSERT_QD_OK(launch_write_value(s, k, buf + 8, 1));
    ASSERT_QD_OK(qd_stream_next_branch(s));
    ASSERT_QD_OK(launch_write_value(s, k, buf + 12, 2));
    ASSERT_QD_OK(qd_stream_end_conditional(s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    const std::string file = path("conditional.dot");
    ASSERT_QD_OK(qd_graph_debug_dot(g, file.c_str(), 0));
    const Dot d = parse(file);
    EXPECT_EQ(d.nodes, 1 + 2 + 1) << d.text;
    EXPECT_EQ(d.body_clusters, 2) << d.text;
    EXPECT_EQ(d.with("label=\"IF_ELSE then\""), 1) << d.text;
    EXPECT_EQ(d.with("label=\"IF_ELSE else\""), 1) << d.text;
    EXPECT_EQ(d.labelled("then"), 1) << d.text;
    EXPECT_EQ(d.labelled("else"), 1) << d.text;
    // The then body's two launches follow each other; the conditional enters each body once.
    EXPECT_EQ(d.edges, 1 + 2) << d.text;
    EXPECT_EQ(d.with("0 kernel nodes"), 1) << "a body's launches are no kernel nodes";
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphDotTest, DebugDot_EmptyGraph_IsAValidDigraphWithNoNodes) {
    qd_stream s = new_stream();
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    const std::string file = path("empty.dot");
    ASSERT_QD_OK(qd_graph_debug_dot(g, file.c_str(), 0));
    const Dot d = parse(file);
    EXPECT_EQ(d.nodes, 0);
    EXPECT_EQ(d.edges, 0);
    EXPECT_EQ(d.text.rfind("digraph qd_graph {", 0), 0u) << d.text;
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(GraphDotTest, DebugDot_BadArguments_AreRefusedAndWriteNothing) {
    qd_stream s = new_stream();
    const uint64_t buf = alloc(s, 4);
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_memset_async(s, buf, 0, 4));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    const std::string file = path("refused.dot");
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "path", qd_graph_debug_dot(g, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "path", qd_graph_debug_dot(g, "", 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "flags", qd_graph_debug_dot(g, file.c_str(), 2));
    // The argument's own checks come before the handle's (qd.h, "Which error wins").
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_graph_debug_dot(0, nullptr, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "directory", qd_graph_debug_dot(g, dir_.c_str(), 0));
    const std::string missing = dir_ + "/no/such/dir/g.dot";
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "cannot be written",
                  qd_graph_debug_dot(g, missing.c_str(), 0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_debug_dot(0, file.c_str(), 0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_debug_dot(qd_graph(s), file.c_str(), 0));
    EXPECT_EQ(::access(file.c_str(), F_OK), -1) << "a refused call wrote the file";
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_graph_debug_dot(g, file.c_str(), 0));
    EXPECT_EQ(::access(file.c_str(), F_OK), -1) << "a refused call wrote the file";
}

TEST_P(GraphDotTest, DebugDot_ExistingFile_IsReplacedWhole) {
    qd_stream s = new_stream();
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    const std::string file = path("replaced.dot");
    {
        std::ofstream old(file);
        old << std::string(100000, 'x');
    }
    ASSERT_QD_OK(qd_graph_debug_dot(g, file.c_str(), 0));
    const Dot d = parse(file);
    EXPECT_EQ(d.text.find("xx"), std::string::npos) << "old bytes remain";
    EXPECT_EQ(d.text.rfind("digraph qd_graph {", 0), 0u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

QDT_INSTANTIATE_BACKENDS(GraphDotTest);
