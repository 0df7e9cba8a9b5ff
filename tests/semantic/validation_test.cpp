// The validation mode (qd.h, "Validation"; docs/reliability.md, category 18): every planted
// hazard is reported once, naming both operations; every correctly ordered pattern gets no
// report. Parameterised over the backends like the rest of the semantic suite.
//
// No test depends on timing. Where a planted race must not be a real data race in the test's
// own kernels (the CPU backend runs them on threads; TSan watches), the test waits for the
// first kernel with a host-callback Flag, which the model does not count as ordering.
#include <qd/qd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hazard_log.h"
#include "qd_test.h"
#include "sizes_named.h"

namespace qdt {
namespace {

class ValidationTest : public ValidationFixture {
  protected:
    void SetUp() override {
        skip_unless_available();
        if (IsSkipped()) return;
        create(QD_CONTEXT_VALIDATE);
    }
    void TearDown() override {
        if (skipped_ || !ctx_) return;
        EXPECT_QD_OK(qd_context_synchronize(ctx_));
        kernels_.reset();
        EXPECT_QD_OK(qd_context_destroy(ctx_));
    }

    void create(uint32_t flags) {
        if (ctx_) {
            kernels_.reset();
            ASSERT_QD_OK(qd_context_destroy(ctx_));
            ctx_ = 0;
        }
        qd_context_desc desc = make_desc(GetParam(), 8, 4);
        desc.flags = flags;
        ASSERT_QD_OK(qd_context_create(&desc, &ctx_));
        ASSERT_QD_OK(qd_context_default_stream(ctx_, &default_));
        only_context = ctx_;
        ASSERT_QD_OK(install(ctx_));
        std::string why;
        kernels_ = make_test_kernels(GetParam(), ctx_, &why);
        if (!kernels_) {
            if (GetParam() == QD_BACKEND_CPU) FAIL() << why;
            GTEST_SKIP() << "no test kernels for " << backend_name(GetParam()) << ": " << why;
        }
        clear_seen();
    }

    qd_stream stream() {
        qd_stream s = 0;
        EXPECT_QD_OK(qd_stream_create(ctx_, nullptr, &s));
        streams_.push_back(s);
        return s;
    }

    qd_event event() {
        qd_event e = 0;
        EXPECT_QD_OK(qd_event_create(ctx_, 0, &e));
        return e;
    }

    // A block of device memory, zeroed, that every stream may use (the host synchronized).
    uint64_t block(uint64_t bytes = 256) { return zeroed_block(default_, bytes); }

    uint64_t reported() { return get_stats(ctx_).hazards_reported; }

    qd_context ctx_ = 0;
    qd_stream default_ = 0;
    std::unique_ptr<TestKernels> kernels_;
    std::vector<qd_stream> streams_;
};

// ---------------------------------------------------------------------------------------------
// Planted hazards: each reported once, naming both operations
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationTest, PlantedRace_ProducerOnA_ConsumerOnB_NoEvent_OneReportNamingBothKernels) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 7));
    ran(a);
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_RACE);
    EXPECT_TRUE(contains(s[0].operation, "qd_test_add_value")) << s[0].operation;
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_write_value")) << s[0].other_operation;
    EXPECT_EQ(s[0].stream, b);
    EXPECT_EQ(s[0].other_stream, a);
    EXPECT_EQ(s[0].allocation, in);
    EXPECT_EQ(s[0].bytes, 256u);
    EXPECT_EQ(s[0].offset, 0u);
    EXPECT_TRUE(contains(s[0].message, "qd: hazard: race")) << s[0].message;
    EXPECT_EQ(reported(), 1u);
}

TEST_P(ValidationTest, PlantedRace_WithEvent_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_event e = event();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 7));
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 8u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    EXPECT_EQ(reported(), 0u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

TEST_P(ValidationTest, TwoWritersOnTwoStreams_ReportedOnce) {
    const uint64_t x = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), x, 1));
    ran(a);
    ASSERT_QD_OK(qd_memset_async(b, x + 16, 0xff, 4));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].operation, "memset (write)");
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_write_value"));
    EXPECT_EQ(s[0].offset, 16u);  // the kernel's access runs from its pointer to the block's end
}

// A hazard report names the block's size as it was asked for, never with qd's end guard (the
// byte kept past each block): in its allocation_bytes and in its message. An odd size, so that
// n and n + 1 cannot be confused; the kernel's access runs from its pointer to the block's end.
// The message is read for the sizes it names (sizes_named), not searched for digits: its stream
// handles and the block's address, in hex, may hold "1002" in any run.
TEST_P(ValidationTest, HazardReport_NamesTheSizeAskedFor_NotTheEndGuard) {
    constexpr uint64_t kBytes = 1001;
    const uint64_t x = block(kBytes);
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), x, 1));
    ran(a);
    ASSERT_QD_OK(qd_memset_async(b, x + kBytes - 1, 0xff, 1));  // the last byte: the block's
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].allocation, x);
    EXPECT_EQ(s[0].bytes, kBytes);
    EXPECT_EQ(s[0].offset, kBytes - 1);
    EXPECT_EQ(sizes_named(s[0].message), std::vector<uint64_t>{kBytes}) << s[0].message;
}

TEST_P(ValidationTest, FreeOnA_WhileConsumerOnB_Unordered_ReportsFreeInUse) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    ran(b);
    ASSERT_QD_OK(qd_mem_free_async(a, in));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_FREE_IN_USE);
    EXPECT_EQ(s[0].operation, "free");
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_add_value"));
    EXPECT_EQ(s[0].stream, a);
    EXPECT_EQ(s[0].other_stream, b);
    EXPECT_EQ(s[0].allocation, in);
}

TEST_P(ValidationTest, FreeOnA_AfterEventFromB_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_event e = event();
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    ASSERT_QD_OK(qd_event_record(b, e));
    ASSERT_QD_OK(qd_stream_wait_event(a, e));
    ASSERT_QD_OK(qd_mem_free_async(a, in));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_TRUE(seen().empty());
    EXPECT_QD_OK(qd_event_destroy(e));
}

TEST_P(ValidationTest, UseAfterFree_IsReportedNamingTheFree) {
    const uint64_t x = block(), out = block();
    qd_stream a = stream();
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    ASSERT_QD_OK(launch_add_value(a, kernels_->add_value(), out, x + 8, 1));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_USE_AFTER_FREE);
    EXPECT_TRUE(contains(s[0].operation, "qd_test_add_value"));
    EXPECT_EQ(s[0].other_operation, "free");
    EXPECT_EQ(s[0].allocation, x);
    EXPECT_EQ(s[0].offset, 8u);
}

TEST_P(ValidationTest, HostFree_WithAnUnorderedUse_ReportsFreeInUse) {
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx_, 64, &h));
    const uint64_t out = block();
    qd_stream a = stream();
    ASSERT_QD_OK(launch_add_value(a, kernels_->add_value(), out, (uint64_t)h, 1));
    ran(a);
    ASSERT_QD_OK(qd_host_free(ctx_, h));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_FREE_IN_USE);
    EXPECT_EQ(s[0].operation, "qd_host_free");
    EXPECT_EQ(s[0].stream, 0u);  // the host
    EXPECT_EQ(s[0].other_stream, a);
}

TEST_P(ValidationTest, UseOnAnotherStream_BeforeOrderingAfterItsAlloc_IsReported) {
    qd_stream a = stream(), b = stream();
    uint64_t x = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(a, 64, &x));
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 64));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].other_operation, "alloc (write)");
    ASSERT_QD_OK(qd_stream_synchronize(b));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_mem_free_async(a, x));
}

TEST_P(ValidationTest, RaceAgainstAnAllocation_NamesTheAllocatingStream) {
    qd_stream a = stream(), b = stream();
    uint64_t x = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(a, 64, &x));
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 64));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].other_operation, "alloc (write)");
    EXPECT_EQ(s[0].stream, b);
    EXPECT_EQ(s[0].other_stream, a);  // an owned stream: its handle, never 0
    char handle[32];
    std::snprintf(handle, sizeof handle, "stream 0x%016llx", (unsigned long long)a);
    EXPECT_TRUE(contains(s[0].message, handle)) << s[0].message;
    EXPECT_FALSE(contains(s[0].message, "pooled")) << s[0].message;
    ASSERT_QD_OK(qd_stream_synchronize(b));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_mem_free_async(a, x));
}

TEST_P(ValidationTest, EarlierKernel_IsLabelledWithItsDeclaredAccess) {
    const uint64_t x = block(), y = block();
    qd_stream a = stream(), b = stream();
    // Undeclared: read-write.
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), x, 1));
    ran(a);
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 4));
    // Declared write-only.
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->write_value(), 0, QD_PARAM_WRITE));
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), y, 1));
    ran(a);
    ASSERT_QD_OK(qd_memset_async(b, y, 0, 4));
    const auto s = seen();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_write_value")) << s[0].other_operation;
    EXPECT_TRUE(contains(s[0].other_operation, "' (read-write)")) << s[0].other_operation;
    EXPECT_TRUE(contains(s[0].message, "' (read-write) on")) << s[0].message;
    EXPECT_TRUE(contains(s[1].other_operation, "' (write)")) << s[1].other_operation;
}

// ---------------------------------------------------------------------------------------------
// Correctly ordered patterns: no report
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationTest, SameStream_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 3));
    ASSERT_QD_OK(launch_add_value(a, kernels_->add_value(), out, in, 1));
    ASSERT_QD_OK(qd_mem_free_async(a, in));
    EXPECT_EQ(read_u32(a, out), 4u);
    EXPECT_TRUE(seen().empty());
}

TEST_P(ValidationTest, HostSynchronize_StreamEventOrContext_OrdersLaterWork_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_event e = event();
    // Stream synchronize.
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 1));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    // Event synchronize.
    ASSERT_QD_OK(qd_event_record(b, e));
    ASSERT_QD_OK(qd_event_synchronize(e));
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), out, 2));
    // Context synchronize.
    ASSERT_QD_OK(qd_context_synchronize(ctx_));
    ASSERT_QD_OK(launch_write_value(b, kernels_->write_value(), in, 3));
    ASSERT_QD_OK(launch_write_value(b, kernels_->write_value(), out, 3));
    // A query that finds the stream idle.
    ASSERT_TRUE(wait_idle(b));
    ASSERT_QD_OK(qd_memset_async(a, in, 0, 4));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    EXPECT_QD_OK(qd_event_destroy(e));
}

TEST_P(ValidationTest, ForkJoin_NoReport) {
    const uint64_t in = block();
    const uint64_t o0 = block(), o1 = block();
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->add_value(), 1, QD_PARAM_READ));
    qd_stream parent = stream();
    ASSERT_QD_OK(launch_write_value(parent, kernels_->write_value(), in, 10));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(parent, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], kernels_->add_value(), o0, in, 1));
    ASSERT_QD_OK(launch_add_value(kids[1], kernels_->add_value(), o1, in, 2));
    ASSERT_QD_OK(qd_stream_join(parent, kids, 2));
    ASSERT_QD_OK(launch_write_value(parent, kernels_->write_value(), in, 0));
    ASSERT_QD_OK(launch_add_value(parent, kernels_->add_value(), in, o0, 0));
    EXPECT_EQ(read_u32(parent, o1), 12u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
}

TEST_P(ValidationTest, ParallelLaunch_WithReadOnlyInput_NoReport) {
    const uint64_t in = block();
    const uint64_t o0 = block(), o1 = block(), o2 = block();
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->add_value(), 1, QD_PARAM_READ));
    qd_stream s = stream();
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), in, 5));
    qd_task tasks[3] = {QD_TASK_INIT, QD_TASK_INIT, QD_TASK_INIT};
    TaskArgs args[3];
    task_add_value(&tasks[0], &args[0], 0, kernels_->add_value(), o0, in, 1);
    task_add_value(&tasks[1], &args[1], 1, kernels_->add_value(), o1, in, 2);
    task_add_value(&tasks[2], &args[2], 2, kernels_->add_value(), o2, in, 3);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 3));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), in, 0));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), o0, o2, 0));
    EXPECT_EQ(read_u32(s, o0), 8u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
}

TEST_P(ValidationTest, SameInputOnTwoStreams_ReportedUnlessDeclaredReadOnly) {
    const uint64_t in = block(), o0 = block(), o1 = block();
    qd_stream a = stream(), b = stream();
    // Undeclared, a pointer parameter is read-write: two streams "writing" one input.
    ASSERT_QD_OK(launch_add_value(a, kernels_->add_value(), o0, in, 1));
    ran(a);
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), o1, in, 1));
    ASSERT_EQ(seen().size(), 1u);
    EXPECT_TRUE(contains(seen()[0].operation, "(read-write)"));
    ASSERT_QD_OK(qd_context_synchronize(ctx_));
    // Declared read-only: the same launches are two reads.
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->add_value(), 1, QD_PARAM_READ));
    ASSERT_QD_OK(launch_add_value(a, kernels_->add_value(), o0, in, 1));
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), o1, in, 1));
    ASSERT_QD_OK(qd_context_synchronize(ctx_));
    EXPECT_EQ(seen().size(), 1u);
}

TEST_P(ValidationTest, PartitionedParameter_TasksOfOneKernel_NoReport_OtherKernelsStillChecked) {
    const uint64_t x = block();
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->write_value(), 0, QD_PARAM_PARTITIONED));
    qd_stream s = stream();
    qd_task tasks[2] = {QD_TASK_INIT, QD_TASK_INIT};
    uint64_t dst[2] = {x, x + 64};
    uint32_t value[2] = {1, 2};
    qd_arg args[2][2] = {{{&dst[0], 8}, {&value[0], 4}}, {{&dst[1], 8}, {&value[1], 4}}};
    for (int g = 0; g < 2; ++g) {
        tasks[g].group = uint32_t(g);
        tasks[g].kernel = kernels_->write_value();
        tasks[g].args = args[g];
        tasks[g].num_args = 2;
    }
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 2));
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    // Another operation on another stream is still checked against them.
    qd_stream b = stream();
    ran(s);
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 4));
    ASSERT_EQ(seen().size(), 1u);
    EXPECT_TRUE(contains(seen()[0].other_operation, "qd_test_write_value"));
}

TEST_P(ValidationTest, MemsetOfDisjointHalvesOnTwoStreams_NoReport_OverlapReported) {
    const uint64_t x = block(256);
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(qd_memset_async(a, x, 1, 128));
    ASSERT_QD_OK(qd_memset_async(b, x + 128, 2, 128));
    ASSERT_QD_OK(qd_memcpy_async(b, x + 192, x + 128, 64));  // b's own bytes
    EXPECT_TRUE(seen().empty());
    ran(a);
    ASSERT_QD_OK(qd_memcpy_async(b, x + 128, x + 64, 8));  // reads a's half
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].operation, "memcpy (read)");
    EXPECT_EQ(s[0].other_operation, "memset (write)");
    EXPECT_EQ(s[0].offset, 64u);
}

TEST_P(ValidationTest, GraphReplay_OrdersLikeTheCapturedCalls_NoReport) {
    const uint64_t in = block(), o0 = block(), o1 = block();
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->add_value(), 1, QD_PARAM_READ));
    qd_stream s = stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), in, 4));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], kernels_->add_value(), o0, in, 1));
    ASSERT_QD_OK(launch_add_value(kids[1], kernels_->add_value(), o1, in, 2));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    for (int i = 0; i < 3; ++i) ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), o0, o1, 0));
    EXPECT_EQ(read_u32(s, o0), 6u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// Memory inside a graph: a replay's alloc and free bound the block's life; in between, the
// ordinary checks.
TEST_P(ValidationTest, GraphMemory_AKernelReadingTheBlockAfterTheCapturedFree_IsAUseAfterFree) {
    const uint64_t out = block();
    qd_stream s = stream();
    uint64_t b = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &b));
    ASSERT_QD_OK(qd_memset_async(s, b, 0, 64));
    ASSERT_QD_OK(qd_mem_free_async(s, b));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), out, b, 1));  // reads b: freed
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_TRUE(seen().empty()) << "captured work touches nothing";
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const auto r = seen();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].kind, (uint32_t)QD_HAZARD_USE_AFTER_FREE);
    EXPECT_EQ(r[0].allocation, b);
    EXPECT_TRUE(contains(r[0].operation, "qd_test_add_value")) << r[0].operation;
    EXPECT_EQ(r[0].other_operation, "free");
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(ValidationTest, GraphMemory_ReplaysOnTwoStreams_AreOrdered_AUseBetweenThemIsAfterFree) {
    const uint64_t out = block();
    qd_stream s = stream(), t = stream();
    uint64_t b = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &b));
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), b, 5));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), out, b, 1));
    ASSERT_QD_OK(qd_mem_free_async(s, b));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    // Each replay runs after the one before, whatever its stream: no race on b or out.
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_graph_launch(g, t));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(read_u32(s, out), 6u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    // Between replays the block is freed: a use of it then is a use after free.
    ASSERT_QD_OK(qd_memset_async(s, b, 0, 4));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    const auto r = seen();
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].kind, (uint32_t)QD_HAZARD_USE_AFTER_FREE);
    EXPECT_EQ(r[0].allocation, b);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// A hazard handler that launches the graph whose replay it reports, once.
struct LaunchAgain {
    qd_graph graph = 0;
    qd_stream stream = 0;
    int calls = 0;
    qd_status status = QD_SUCCESS;
    std::string message;
    static void handler(const qd_hazard *, void *user) {
        auto *self = static_cast<LaunchAgain *>(user);
        if (self->calls++ > 0) return;
        self->status = qd_graph_launch(self->graph, self->stream);
        if (self->status != QD_SUCCESS) self->message = qd_last_error_message();
    }
};

// Replays of a graph that allocates run one after the other; one nested in another (from the
// hazard handler of its replay) is refused, not a deadlock.
TEST_P(ValidationTest, GraphMemory_ALaunchNestedInAReplayOfTheSameGraph_IsRefusedNotADeadlock) {
    const uint64_t out = block();
    qd_stream s = stream();
    uint64_t b = 0;
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_mem_alloc_async(s, 64, &b));
    ASSERT_QD_OK(qd_memset_async(s, b, 0, 64));
    ASSERT_QD_OK(qd_mem_free_async(s, b));
    ASSERT_QD_OK(launch_add_value(s, kernels_->add_value(), out, b, 1));  // a use after free
    LaunchAgain again;
    ASSERT_QD_OK(qd_stream_end_capture(s, &again.graph));
    again.stream = s;
    ASSERT_QD_OK(qd_context_set_hazard_handler(ctx_, &LaunchAgain::handler, &again));
    ASSERT_QD_OK(qd_graph_launch(again.graph, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(again.calls, 1);
    EXPECT_EQ(again.status, QD_ERROR_INVALID_OPERATION);
    EXPECT_TRUE(contains(again.message, "nested")) << again.message;
    ASSERT_QD_OK(install(ctx_));
    EXPECT_QD_OK(qd_graph_destroy(again.graph));
}

TEST_P(ValidationTest, ContextDestroy_WithWorkInFlight_IsNoHazard) {
    const uint64_t x = block(), y = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), x, 1));
    ASSERT_QD_OK(launch_write_value(b, kernels_->write_value(), y, 2));
    kernels_.reset();
    ASSERT_QD_OK(qd_context_destroy(ctx_));
    ctx_ = 0;
    EXPECT_TRUE(seen().empty());
}

// ---------------------------------------------------------------------------------------------
// Modes, errors and threads
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationTest, FailMode_RefusesTheRacingCall_WithHazardAndQueuesNothing) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 7));
    ran(a);
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "qd_test_write_value",
                  launch_add_value(b, kernels_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 0u);  // the consumer never ran
    EXPECT_EQ(seen().size(), 1u);
    // The refused launch left no access behind: ordered now, the same launch is clean.
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 8u);
    EXPECT_EQ(seen().size(), 1u);
    // A host free of a block in unordered use is refused too, and the block stays live.
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx_, 64, &h));
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), (uint64_t)h, 1));
    ran(a);
    EXPECT_QD(QD_ERROR_HAZARD, qd_host_free(ctx_, h));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_QD_OK(qd_host_free(ctx_, h));
    EXPECT_EQ(reported(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Fail mode: a multi-part call queues all of its parts or none
// ---------------------------------------------------------------------------------------------

// Two groups: the first reads a clean block, the second the block `raced` that stream `a`
// wrote with no ordering; group g adds 11 * (g + 1) into out[g].
void two_groups(qd_kernel add_value, uint64_t clean, uint64_t raced, const uint64_t out[2],
                qd_task tasks[2], TaskArgs args[2]) {
    task_add_value(&tasks[0], &args[0], 0, add_value, out[0], clean, 11);
    task_add_value(&tasks[1], &args[1], 1, add_value, out[1], raced, 22);
}

TEST_P(ValidationTest, FailMode_ParallelLaunchRefusedByAHazard_QueuesNoGroup_WithoutItQueuesAll) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    const uint64_t clean = block(), raced = block();
    const uint64_t out[2] = {block(), block()};
    qd_stream a = stream(), s = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), raced, 7));
    ran(a);
    qd_task tasks[2];
    TaskArgs args[2];
    two_groups(kernels_->add_value(), clean, raced, out, tasks, args);
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "qd_test_write_value", qd_launch_parallel(s, tasks, 2));
    EXPECT_EQ(read_u32(s, out[0]), 0u);  // the group checked before the conflicting one
    EXPECT_EQ(read_u32(s, out[1]), 0u);
    EXPECT_QD_OK(qd_stream_query(s));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
    EXPECT_EQ(reported(), 1u);
    ASSERT_EQ(seen().size(), 1u);
    EXPECT_TRUE(contains(seen()[0].operation, "qd_test_add_value")) << seen()[0].operation;
    // Ordered now, the same call queues every group.
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 2));
    EXPECT_EQ(read_u32(s, out[0]), 11u);
    EXPECT_EQ(read_u32(s, out[1]), 29u);
    EXPECT_EQ(reported(), 1u);
}

TEST_P(ValidationTest, FailMode_RefusedParallelLaunch_LeavesNoAccessBehind) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    const uint64_t clean = block(), raced = block();
    const uint64_t out[2] = {block(), block()};
    qd_stream a = stream(), s = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), raced, 7));
    ran(a);
    qd_task tasks[2];
    TaskArgs args[2];
    two_groups(kernels_->add_value(), clean, raced, out, tasks, args);
    EXPECT_QD(QD_ERROR_HAZARD, qd_launch_parallel(s, tasks, 2));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    // The first group's write of out[0] and read of `clean` were rolled back: another stream,
    // ordered after nothing of the refused call, writes both and nothing is reported.
    ASSERT_QD_OK(qd_memset_async(b, out[0], 1, 4));
    ASSERT_QD_OK(qd_memset_async(b, clean, 1, 4));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_EQ(reported(), 1u);
}

// A graph of two branches: the first reads a clean block, the second `raced`.
qd_graph two_branch_graph(qd_stream s, qd_kernel add_value, uint64_t clean, uint64_t raced,
                          const uint64_t out[2]) {
    qd_graph g = 0;
    EXPECT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    EXPECT_QD_OK(qd_stream_fork(s, 2, kids));
    EXPECT_QD_OK(launch_add_value(kids[0], add_value, out[0], clean, 11));
    EXPECT_QD_OK(launch_add_value(kids[1], add_value, out[1], raced, 22));
    EXPECT_QD_OK(qd_stream_join(s, kids, 2));
    EXPECT_QD_OK(qd_stream_end_capture(s, &g));
    return g;
}

TEST_P(ValidationTest, FailMode_GraphLaunchRefusedByAHazard_QueuesNoBranch_WithoutItQueuesAll) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    const uint64_t clean = block(), raced = block();
    const uint64_t out[2] = {block(), block()};
    qd_stream a = stream(), s = stream();
    qd_graph g = two_branch_graph(s, kernels_->add_value(), clean, raced, out);
    ASSERT_NE(g, 0u);
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), raced, 7));
    ran(a);
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "qd_test_write_value", qd_graph_launch(g, s));
    EXPECT_EQ(read_u32(s, out[0]), 0u);  // the branch checked before the conflicting one
    EXPECT_EQ(read_u32(s, out[1]), 0u);
    EXPECT_QD_OK(qd_stream_query(s));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
    EXPECT_EQ(reported(), 1u);
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(read_u32(s, out[0]), 11u);
    EXPECT_EQ(read_u32(s, out[1]), 29u);
    EXPECT_EQ(reported(), 1u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(ValidationTest, FailMode_RefusedGraphLaunch_LeavesNoAccessBehind) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    const uint64_t clean = block(), raced = block();
    const uint64_t out[2] = {block(), block()};
    qd_stream a = stream(), s = stream(), b = stream();
    qd_graph g = two_branch_graph(s, kernels_->add_value(), clean, raced, out);
    ASSERT_NE(g, 0u);
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), raced, 7));
    ran(a);
    EXPECT_QD(QD_ERROR_HAZARD, qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_memset_async(b, out[0], 1, 4));
    ASSERT_QD_OK(qd_memset_async(b, clean, 1, 4));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_EQ(reported(), 1u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

TEST_P(ValidationTest,
       FailMode_ForkRefusedByAnExhaustedPool_QueuesNothing_ValidationNeverRefusesIt) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    qd_stream parent = stream();
    const uint64_t capacity = get_stats(ctx_).stream_pool_capacity;
    std::vector<qd_stream> held(capacity - 1);
    for (auto &h : held) ASSERT_QD_OK(qd_stream_acquire(ctx_, &h));
    qd_stream kids[2] = {0, 0};
    EXPECT_QD(QD_ERROR_POOL_EXHAUSTED, qd_stream_fork(parent, 2, kids));
    EXPECT_EQ(kids[0], 0u);
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, capacity - 1);
    EXPECT_QD_OK(qd_stream_query(parent));
    for (auto &h : held) ASSERT_QD_OK(qd_stream_release(h));
    // Fork and join touch no memory: validation orders them and never refuses them.
    ASSERT_QD_OK(qd_stream_fork(parent, 2, kids));
    ASSERT_QD_OK(qd_stream_join(parent, kids, 2));
    EXPECT_EQ(get_stats(ctx_).stream_pool_leased, 0u);
    EXPECT_EQ(reported(), 0u);
}

TEST_P(ValidationTest, FailMode_JoinRefusedByCapture_ChildOutsideIt_RecordsNoPart) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    const uint64_t x = block();
    qd_stream s = stream();
    qd_stream outside = 0;
    ASSERT_QD_OK(qd_stream_acquire(ctx_, &outside));
    // The same capture twice; the first also tries to join a lease from outside it.
    qd_graph g[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
        ASSERT_QD_OK(qd_stream_begin_capture(s));
        qd_stream kid = 0;
        ASSERT_QD_OK(qd_stream_fork(s, 1, &kid));
        ASSERT_QD_OK(launch_write_value(kid, kernels_->write_value(), x, 5));
        if (i == 0) {
            const qd_stream both[2] = {kid, outside};
            EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "children[1]", qd_stream_join(s, both, 2));
        }
        ASSERT_QD_OK(qd_stream_join(s, &kid, 1));
        ASSERT_QD_OK(qd_stream_end_capture(s, &g[i]));
    }
    // The refused join recorded none of its parts: both graphs have one shape.
    EXPECT_QD_OK(qd_graph_update(g[0], g[1]));
    EXPECT_QD_OK(qd_stream_query(outside));
    ASSERT_QD_OK(qd_graph_launch(g[0], s));
    EXPECT_EQ(read_u32(s, x), 5u);
    EXPECT_QD_OK(qd_stream_release(outside));
    EXPECT_QD_OK(qd_graph_destroy(g[0]));
    EXPECT_QD_OK(qd_graph_destroy(g[1]));
    EXPECT_EQ(reported(), 0u);
}

TEST_P(ValidationTest, FailMode_PeerCopyRefusedByAHazard_QueuesNothing_WithoutItCopies) {
    create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL);
    qd_context_desc desc = make_desc(GetParam(), 8, 4);
    qd_context other = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &other));
    qd_stream theirs = 0;
    ASSERT_QD_OK(qd_context_default_stream(other, &theirs));
    uint64_t dst = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(theirs, 256, &dst));
    ASSERT_QD_OK(qd_memset_async(theirs, dst, 0, 256));
    ASSERT_QD_OK(qd_stream_synchronize(theirs));
    const uint64_t raced = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), raced, 7));
    ran(a);
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "qd_test_write_value",
                  qd_memcpy_peer_async(b, dst, other, raced, ctx_, 4));
    EXPECT_QD_OK(qd_stream_query(b));
    EXPECT_EQ(read_u32(theirs, dst), 0u);
    EXPECT_EQ(reported(), 1u);
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_memcpy_peer_async(b, dst, other, raced, ctx_, 4));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_EQ(read_u32(theirs, dst), 7u);
    EXPECT_EQ(reported(), 1u);
    ASSERT_QD_OK(qd_mem_free_async(theirs, dst));
    ASSERT_QD_OK(qd_context_destroy(other));
}

TEST_P(ValidationTest, DefaultHandler_RestoredByNull) {
    EXPECT_QD_OK(qd_context_set_hazard_handler(ctx_, nullptr, nullptr));
    const uint64_t x = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), x, 1));
    ran(a);
    ::testing::internal::CaptureStderr();
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 4));
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(contains(err, "qd: hazard: race: memset (write) on stream 0x")) << err;
    EXPECT_TRUE(contains(err, "qd_test_write_value")) << err;
    EXPECT_TRUE(seen().empty());
    EXPECT_EQ(reported(), 1u);
}

TEST_P(ValidationTest, ThreadsEachOrderingTheirOwnStreams_NoReport) {
    constexpr int kThreads = 4;
    const int rounds = int(scaled(50, 5));
    std::vector<uint64_t> shared(kThreads);
    for (auto &s : shared) s = block();
    const uint64_t common = block();
    ASSERT_QD_OK(qd_kernel_set_param_access(kernels_->add_value(), 1, QD_PARAM_READ));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            qd_stream a = 0, b = 0;
            qd_event e = 0;
            EXPECT_QD_OK(qd_stream_create(ctx_, nullptr, &a));
            EXPECT_QD_OK(qd_stream_create(ctx_, nullptr, &b));
            EXPECT_QD_OK(qd_event_create(ctx_, 0, &e));
            uint64_t tmp = 0;
            for (int i = 0; i < rounds; ++i) {
                EXPECT_QD_OK(qd_mem_alloc_async(a, 64, &tmp));
                EXPECT_QD_OK(
                    launch_write_value(a, kernels_->write_value(), shared[t], uint32_t(i)));
                EXPECT_QD_OK(launch_add_value(a, kernels_->add_value(), tmp, common, 1));
                EXPECT_QD_OK(qd_event_record(a, e));
                EXPECT_QD_OK(qd_stream_wait_event(b, e));
                EXPECT_QD_OK(launch_add_value(b, kernels_->add_value(), shared[t], tmp, 1));
                EXPECT_QD_OK(qd_event_record(b, e));
                EXPECT_QD_OK(qd_stream_wait_event(a, e));
                EXPECT_QD_OK(qd_mem_free_async(a, tmp));
            }
            EXPECT_QD_OK(qd_stream_synchronize(a));
            EXPECT_QD_OK(qd_event_destroy(e));
            EXPECT_QD_OK(qd_stream_destroy(a));
            EXPECT_QD_OK(qd_stream_destroy(b));
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
}

TEST_P(ValidationTest, ThreadsRacingOnOneBlock_EveryRaceReported) {
    const uint64_t x = block();
    qd_stream a = stream(), b = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), x, 1));
    ran(a);
    std::thread t([&] { EXPECT_QD_OK(qd_memset_async(b, x, 0, 4)); });
    t.join();
    EXPECT_EQ(seen().size(), 1u);
}

TEST_P(ValidationTest, HandlerAndParamAccess_BadInput) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "QD_MAX_ARGS",
                  qd_kernel_set_param_access(kernels_->add_value(), QD_MAX_ARGS, QD_PARAM_READ));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "qd_param_access",
                  qd_kernel_set_param_access(kernels_->add_value(), 0, 5));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_kernel_set_param_access(0, 0, QD_PARAM_READ));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_kernel_set_param_access(default_, 0, QD_PARAM_READ));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_context_set_hazard_handler(0, nullptr, nullptr));
    qd_context_desc desc = make_desc(GetParam(), 0, 2);
    qd_context plain = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &plain));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "validation is off", install(plain));
    EXPECT_EQ(get_stats(plain).hazards_reported, 0u);
    EXPECT_QD_OK(qd_context_destroy(plain));
}

TEST_P(ValidationTest, EnvironmentVariable_TurnsValidationOn_AndUnknownValuesAreRefused) {
    qd_context_desc desc = make_desc(GetParam(), 0, 2);
    qd_context c = 0;
    ASSERT_EQ(setenv("QD_VALIDATE", "1", 1), 0);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    EXPECT_QD_OK(qd_context_set_hazard_handler(c, nullptr, nullptr));
    EXPECT_QD_OK(qd_context_destroy(c));
    ASSERT_EQ(setenv("QD_VALIDATE", "yes", 1), 0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "QD_VALIDATE", qd_context_create(&desc, &c));
    ASSERT_EQ(setenv("QD_VALIDATE", "0", 1), 0);
    ASSERT_QD_OK(qd_context_create(&desc, &c));
    EXPECT_QD(QD_ERROR_INVALID_OPERATION, qd_context_set_hazard_handler(c, nullptr, nullptr));
    EXPECT_QD_OK(qd_context_destroy(c));
    unsetenv("QD_VALIDATE");
}

// ---------------------------------------------------------------------------------------------
// Timelines (qd.h, "Timelines"): a signal and the wait it satisfies order their streams
// ---------------------------------------------------------------------------------------------

// A producer on a fills `in` and signals 1; a consumer on b waits for 1 and reads it; then a
// refills `in` for the next round (the buffer is reused). Returns the timeline, or 0 when the
// backend has none (the caller skips).
qd_timeline produce_consume_reuse(TestKernels &k, qd_stream a, qd_stream b, uint64_t in,
                                  uint64_t out, bool wait_before_reuse, qd_context ctx) {
    qd_timeline tl = 0;
    const qd_status st = qd_timeline_create(ctx, 0, &tl);
    if (st == QD_ERROR_NOT_SUPPORTED) return 0;
    EXPECT_QD_OK(st);
    EXPECT_QD_OK(launch_write_value(a, k.write_value(), in, 7));
    EXPECT_QD_OK(qd_timeline_signal(a, tl, 1));
    EXPECT_QD_OK(qd_timeline_wait(b, tl, 1));
    EXPECT_QD_OK(launch_add_value(b, k.add_value(), out, in, 1));
    EXPECT_QD_OK(qd_timeline_signal(b, tl, 2));
    if (wait_before_reuse) {
        EXPECT_QD_OK(qd_timeline_wait(a, tl, 2));
    } else {
        // A real order for the program (and TSan), none for the model (RanFlags::ran).
        Flag ran;
        EXPECT_QD_OK(ran.enqueue(b));
        EXPECT_TRUE(ran.wait());
    }
    EXPECT_QD_OK(launch_write_value(a, k.write_value(), in, 9));
    return tl;
}

TEST_P(ValidationTest, Timeline_SignalThenWait_OrdersConsumerAndReuse_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_timeline tl = produce_consume_reuse(*kernels_, a, b, in, out, true, ctx_);
    if (!tl) GTEST_SKIP() << "no timelines on " << backend_name(GetParam());
    EXPECT_EQ(read_u32(b, out), 8u);
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    EXPECT_EQ(reported(), 0u);
    EXPECT_QD_OK(qd_timeline_destroy(tl));
}

TEST_P(ValidationTest, Timeline_MissingWaitBeforeBufferReuse_ReportedOnce) {
    QDT_RACES_ON_PURPOSE();
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_timeline tl = produce_consume_reuse(*kernels_, a, b, in, out, false, ctx_);
    if (!tl) GTEST_SKIP() << "no timelines on " << backend_name(GetParam());
    ASSERT_QD_OK(qd_stream_synchronize(a));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_RACE);
    EXPECT_TRUE(contains(s[0].operation, "qd_test_write_value")) << s[0].operation;
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_add_value")) << s[0].other_operation;
    EXPECT_EQ(s[0].stream, a);
    EXPECT_EQ(s[0].other_stream, b);
    EXPECT_EQ(s[0].allocation, in);
    EXPECT_EQ(reported(), 1u);
    EXPECT_QD_OK(qd_timeline_destroy(tl));
}

TEST_P(ValidationTest, Timeline_WaitQueuedBeforeItsSignal_OrdersTheConsumer_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_timeline tl = 0;
    const qd_status st = qd_timeline_create(ctx_, 0, &tl);
    if (st == QD_ERROR_NOT_SUPPORTED) GTEST_SKIP() << "no timelines";
    ASSERT_QD_OK(st);
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 7));
    ASSERT_QD_OK(qd_timeline_wait(b, tl, 1));  // before the signal
    ASSERT_QD_OK(qd_timeline_signal(a, tl, 1));
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 8u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    EXPECT_QD_OK(qd_timeline_destroy(tl));
}

TEST_P(ValidationTest, Timeline_HostWait_OrdersTheHostsNextWork_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_timeline tl = 0;
    const qd_status st = qd_timeline_create(ctx_, 0, &tl);
    if (st == QD_ERROR_NOT_SUPPORTED) GTEST_SKIP() << "no timelines";
    ASSERT_QD_OK(st);
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 7));
    ASSERT_QD_OK(qd_timeline_signal(a, tl, 1));
    ASSERT_QD_OK(qd_timeline_host_wait(tl, 1, UINT64_MAX));
    // Work queued after the host's wait is ordered after what it waited for.
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 8u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
    EXPECT_QD_OK(qd_timeline_destroy(tl));
}

// ---------------------------------------------------------------------------------------------
// Launch attributes (qd.h, "Launch attributes"): a PDL launch is ordered after its predecessor;
// a completion event is a record made just before its launch
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationTest, ProgrammaticLaunch_OrderedAfterItsPredecessor_NoReport) {
    const uint64_t in = block(), out = block();
    qd_stream a = stream();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), in, 7));
    uint32_t add = 1;
    const qd_arg args[3] = {{&out, sizeof out}, {&in, sizeof in}, {&add, sizeof add}};
    qd_launch_attr pdl;
    std::memset(&pdl, 0, sizeof pdl);
    pdl.kind = QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION;
    pdl.value = 1;
    ASSERT_QD_OK(qd_launch_ex(a, kernels_->add_value(), nullptr, &pdl, 1, args, 3));
    EXPECT_EQ(read_u32(a, out), 8u);
    EXPECT_TRUE(seen().empty()) << seen()[0].message;
}

TEST_P(ValidationTest, CompletionEvent_OrdersAfterTheLaunchsPredecessors_NotAfterTheLaunch) {
    const uint64_t before = block(), during = block(), out = block();
    qd_stream a = stream(), b = stream();
    qd_event e = event();
    ASSERT_QD_OK(launch_write_value(a, kernels_->write_value(), before, 7));
    uint32_t value = 5;
    const qd_arg args[2] = {{&during, sizeof during}, {&value, sizeof value}};
    qd_launch_attr done;
    std::memset(&done, 0, sizeof done);
    done.kind = QD_LAUNCH_ATTR_COMPLETION_EVENT;
    done.event = e;
    const qd_status st = qd_launch_ex(a, kernels_->write_value(), nullptr, &done, 1, args, 2);
    if (st == QD_ERROR_NOT_SUPPORTED) GTEST_SKIP() << qd_last_error_message();
    ASSERT_QD_OK(st);
    ran(a);  // a real ordering for the program, none for the model
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, before, 1));
    EXPECT_TRUE(seen().empty()) << "the write before the launch is ordered: " << seen()[0].message;
    ASSERT_QD_OK(launch_add_value(b, kernels_->add_value(), out, during, 1));
    ASSERT_QD_OK(qd_stream_synchronize(b));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u) << "the launch's own write is not ordered before the event";
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_RACE);
    EXPECT_EQ(s[0].allocation, during);
    EXPECT_EQ(s[0].other_stream, a);
    EXPECT_QD_OK(qd_event_destroy(e));
}

QDT_INSTANTIATE_BACKENDS(ValidationTest);

}  // namespace
}  // namespace qdt
