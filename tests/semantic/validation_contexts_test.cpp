// The validation mode across contexts (qd.h, "Validation" and "Several devices"): validating
// contexts of one backend share one happens-before domain. An event recorded on one context's
// stream and waited on another's orders them, a host synchronize of any context orders the
// host, and a block is checked wherever it is touched (a peer copy, a copy on the other
// context's stream, a free while the other context copies from it). A context that does not
// validate is outside the domain; a wait on its events orders the waiting stream after
// everything queued so far. Parameterised over the backends; on a GPU backend the second
// context is on device 1 when there is one.
//
// No test depends on timing: a planted race waits for the first operation with a host-callback
// Flag, which the model does not count as ordering (as in validation_test.cpp).
#include <qd/qd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hazard_log.h"
#include "qd_test.h"

namespace qdt {
namespace {

class ValidationContextsTest : public ValidationFixture {
  protected:
    void SetUp() override {
        skip_unless_available();
        if (IsSkipped()) return;
        one_ = create(QD_CONTEXT_VALIDATE, 0);
        two_ = create(QD_CONTEXT_VALIDATE, 1);
        ASSERT_NE(one_, 0u);
        ASSERT_NE(two_, 0u);
        k1_ = kernels(one_);
        k2_ = kernels(two_);
    }
    void TearDown() override {
        if (skipped_) return;
        for (qd_context c : contexts_) EXPECT_QD_OK(qd_context_synchronize(c));
        kernels_.clear();
        for (qd_context c : contexts_) EXPECT_QD_OK(qd_context_destroy(c));
    }

    // A context on device `device` when the backend has it, else on device 0.
    qd_context create(uint32_t flags, uint32_t device) {
        uint32_t devices = 0;
        (void)qd_device_count(GetParam(), &devices);
        qd_context_desc desc = make_desc(GetParam(), 8, 4);
        desc.device = device < devices ? device : 0u;
        desc.flags = flags;
        qd_context c = 0;
        EXPECT_QD_OK(qd_context_create(&desc, &c));
        if (!c) return 0;
        contexts_.push_back(c);
        if (flags & QD_CONTEXT_VALIDATE) {
            EXPECT_QD_OK(install(c));
        }
        return c;
    }

    TestKernels *kernels(qd_context c) {
        std::string why;
        auto k = make_test_kernels(GetParam(), c, &why);
        if (!k) {
            if (GetParam() == QD_BACKEND_CPU) ADD_FAILURE() << why;
            return nullptr;
        }
        kernels_.push_back(std::move(k));
        return kernels_.back().get();
    }

    qd_stream stream(qd_context c) {
        qd_stream s = 0;
        EXPECT_QD_OK(qd_stream_create(c, nullptr, &s));
        return s;
    }

    qd_event event(qd_context c) {
        qd_event e = 0;
        EXPECT_QD_OK(qd_event_create(c, 0, &e));
        events_.push_back(e);
        return e;
    }

    // A zeroed block of c that every stream of every context may use (the host synchronized).
    uint64_t block(qd_context c, uint64_t bytes = 256) {
        qd_stream s = 0;
        EXPECT_QD_OK(qd_context_default_stream(c, &s));
        return zeroed_block(s, bytes);
    }

    uint64_t reported(qd_context c) { return get_stats(c).hazards_reported; }

    // Lets streams of ctx copy from memory of peer with qd_memcpy_async (CPU: nothing to do).
    bool peer_access(qd_context ctx, qd_context peer) {
        const qd_status st = qd_context_enable_peer_access(ctx, peer);
        EXPECT_TRUE(st == QD_SUCCESS || st == QD_ERROR_NOT_SUPPORTED) << qd_last_error_message();
        return st == QD_SUCCESS;
    }

    qd_context one_ = 0, two_ = 0;
    TestKernels *k1_ = nullptr, *k2_ = nullptr;
    std::vector<qd_context> contexts_;
    std::vector<std::unique_ptr<TestKernels>> kernels_;
    std::vector<qd_event> events_;
};

#define NEED_KERNELS()                                                                             \
    do {                                                                                           \
        if (!k1_ || !k2_) GTEST_SKIP() << "no test kernels for " << backend_name(GetParam());      \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Ordering through another context: no report
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationContextsTest, EventChainThroughAStreamOfTheOtherContext_NoReport) {
    NEED_KERNELS();
    const uint64_t in = block(one_), out = block(one_);
    qd_stream a = stream(one_), b = stream(one_), x = stream(two_);
    qd_event e1 = event(one_), e2 = event(two_);
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), in, 7));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(x, e1));
    ASSERT_QD_OK(qd_event_record(x, e2));
    ASSERT_QD_OK(qd_stream_wait_event(b, e2));
    ASSERT_QD_OK(launch_add_value(b, k1_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 8u);
    EXPECT_TRUE(seen().empty()) << first_message();
    EXPECT_EQ(reported(one_), 0u);
}

TEST_P(ValidationContextsTest, HostSynchronizeOfTheOtherContext_OrdersLaterWork_NoReport) {
    NEED_KERNELS();
    const uint64_t in = block(one_), out = block(one_);
    qd_stream a = stream(one_), b = stream(one_), x = stream(two_);
    qd_event e1 = event(one_), e2 = event(two_);
    // Stream synchronize of the other context's stream, which waited for a.
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), in, 1));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(x, e1));
    ASSERT_QD_OK(qd_stream_synchronize(x));
    ASSERT_QD_OK(launch_add_value(b, k1_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 2u);
    // Event synchronize of an event of the other context.
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), in, 2));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(x, e1));
    ASSERT_QD_OK(qd_event_record(x, e2));
    ASSERT_QD_OK(qd_event_synchronize(e2));
    ASSERT_QD_OK(launch_add_value(b, k1_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 3u);
    // Context synchronize of the other context.
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), in, 3));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(x, e1));
    ASSERT_QD_OK(qd_context_synchronize(two_));
    ASSERT_QD_OK(launch_add_value(b, k1_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 4u);
    EXPECT_TRUE(seen().empty()) << first_message();
}

TEST_P(ValidationContextsTest, PeerCopyOrderedByEventsBothWays_NoReport) {
    NEED_KERNELS();
    const uint64_t n = 256;
    const uint64_t mine = block(one_, n), theirs = block(two_, n);
    qd_stream a = stream(one_), x = stream(two_);
    qd_event e1 = event(one_), e2 = event(two_);
    ASSERT_QD_OK(launch_write_value(x, k2_->write_value(), theirs, 5));
    ASSERT_QD_OK(qd_event_record(x, e2));
    ASSERT_QD_OK(qd_stream_wait_event(a, e2));
    ASSERT_QD_OK(qd_memcpy_peer_async(a, mine, one_, theirs, two_, n));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(x, e1));
    ASSERT_QD_OK(qd_mem_free_async(x, theirs));
    EXPECT_EQ(read_u32(a, mine), 5u);
    ASSERT_QD_OK(qd_stream_synchronize(x));
    EXPECT_TRUE(seen().empty()) << first_message();
}

// ---------------------------------------------------------------------------------------------
// Hazards across contexts: each reported once, to the context whose call found it
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationContextsTest, PeerCopyFromTheOtherContextsBlock_Unordered_ReportedOnce) {
    NEED_KERNELS();
    const uint64_t n = 256;
    const uint64_t mine = block(one_, n), theirs = block(two_, n);
    qd_stream a = stream(one_), x = stream(two_);
    ASSERT_QD_OK(launch_write_value(x, k2_->write_value(), theirs + 16, 5));
    ran(x);
    ASSERT_QD_OK(qd_memcpy_peer_async(a, mine, one_, theirs, two_, n));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u) << first_message();
    EXPECT_EQ(s[0].context, one_);  // the context whose call found it
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_RACE);
    EXPECT_EQ(s[0].operation, "memcpy (read)");
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_write_value")) << s[0].other_operation;
    EXPECT_EQ(s[0].stream, a);
    EXPECT_EQ(s[0].other_stream, x);
    EXPECT_EQ(s[0].allocation, theirs);
    EXPECT_EQ(s[0].bytes, n);
    EXPECT_EQ(s[0].offset, 16u);
    EXPECT_EQ(reported(one_), 1u);
    EXPECT_EQ(reported(two_), 0u);
}

TEST_P(ValidationContextsTest, CopyOnTheOtherContextsStream_NamingThisContextsBlock_ReportedOnce) {
    NEED_KERNELS();
    const uint64_t n = 256;
    const uint64_t mine = block(one_, n), theirs = block(two_, n);
    if (!peer_access(two_, one_)) GTEST_SKIP() << "no peer access between the devices";
    qd_stream a = stream(one_), x = stream(two_);
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), mine + 32, 9));
    ran(a);
    ASSERT_QD_OK(qd_memcpy_async(x, theirs, mine, n));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u) << first_message();
    EXPECT_EQ(s[0].context, two_);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_RACE);
    EXPECT_EQ(s[0].operation, "memcpy (read)");
    EXPECT_TRUE(contains(s[0].other_operation, "qd_test_write_value")) << s[0].other_operation;
    EXPECT_EQ(s[0].stream, x);
    EXPECT_EQ(s[0].other_stream, a);
    EXPECT_EQ(s[0].allocation, mine);
    EXPECT_EQ(s[0].offset, 32u);
    EXPECT_EQ(reported(two_), 1u);
    EXPECT_EQ(reported(one_), 0u);
}

TEST_P(ValidationContextsTest, FreeWhileTheOtherContextCopiesFromTheBlock_ReportsFreeInUse) {
    NEED_KERNELS();
    const uint64_t n = 256;
    const uint64_t mine = block(one_, n), theirs = block(two_, n);
    qd_stream a = stream(one_), x = stream(two_);
    ASSERT_QD_OK(qd_memcpy_peer_async(x, theirs + 64, two_, mine + 64, one_, 64));
    ran(x);
    ASSERT_QD_OK(qd_mem_free_async(a, mine));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u) << first_message();
    EXPECT_EQ(s[0].context, one_);
    EXPECT_EQ(s[0].kind, (uint32_t)QD_HAZARD_FREE_IN_USE);
    EXPECT_EQ(s[0].operation, "free");
    EXPECT_EQ(s[0].other_operation, "memcpy (read)");
    EXPECT_EQ(s[0].stream, a);
    EXPECT_EQ(s[0].other_stream, x);
    EXPECT_EQ(s[0].allocation, mine);
    EXPECT_EQ(s[0].offset, 64u);
    ASSERT_QD_OK(qd_stream_synchronize(a));
}

TEST_P(ValidationContextsTest, FailModeOfTheCallingContext_RefusesACopyAcrossContexts) {
    NEED_KERNELS();
    qd_context strict = create(QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL, 1);
    ASSERT_NE(strict, 0u);
    if (!peer_access(strict, one_)) GTEST_SKIP() << "no peer access between the devices";
    const uint64_t n = 256;
    const uint64_t mine = block(one_, n), theirs = block(strict, n);
    qd_stream a = stream(one_), y = stream(strict);
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), mine + 32, 9));
    ran(a);
    // The strict context's call finds the race with the first context's kernel: refused,
    // reported to the strict context, and nothing queued.
    EXPECT_QD_ERR(QD_ERROR_HAZARD, "race", qd_memcpy_async(y, theirs, mine, n));
    EXPECT_EQ(read_u32(y, theirs + 32), 0u);
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u) << first_message();
    EXPECT_EQ(s[0].context, strict);
    EXPECT_EQ(s[0].stream, y);
    EXPECT_EQ(s[0].other_stream, a);
    EXPECT_EQ(s[0].allocation, mine);
    // The first context only reports: the same copy on its own stream goes through.
    qd_stream b = stream(one_);
    ASSERT_QD_OK(qd_memcpy_peer_async(b, theirs, strict, mine, one_, n));
    EXPECT_EQ(seen().size(), 2u);
    // Read on the strict context's own stream (one_ was given no access to its memory), after
    // the host waited for the copy.
    ASSERT_QD_OK(qd_stream_synchronize(b));
    EXPECT_EQ(read_u32(y, theirs + 32), 9u);
}

// ---------------------------------------------------------------------------------------------
// A context that does not validate; one validating context destroyed while another validates
// ---------------------------------------------------------------------------------------------

TEST_P(ValidationContextsTest, WaitOnAnEventOfANonValidatingContext_OrdersAfterEverythingQueued) {
    NEED_KERNELS();
    qd_context plain = create(0, 1);
    ASSERT_NE(plain, 0u);
    const uint64_t in = block(one_), out = block(one_);
    qd_stream a = stream(one_), b = stream(one_), p = stream(plain);
    qd_event e1 = event(one_), ep = event(plain);
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), in, 4));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(p, e1));
    ASSERT_QD_OK(qd_event_record(p, ep));
    ASSERT_QD_OK(qd_stream_wait_event(b, ep));
    ASSERT_QD_OK(launch_add_value(b, k1_->add_value(), out, in, 1));
    EXPECT_EQ(read_u32(b, out), 5u);
    EXPECT_TRUE(seen().empty()) << first_message();
    // Its own accesses are not seen: a copy on its stream from a block of a validating context,
    // unordered with a kernel writing it, reports nothing.
    const uint64_t other = block(plain);
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), in, 6));
    ran(a);
    ASSERT_QD_OK(qd_memcpy_peer_async(p, other, plain, in, one_, 4));
    ASSERT_QD_OK(qd_stream_synchronize(p));
    EXPECT_TRUE(seen().empty()) << first_message();
}

TEST_P(ValidationContextsTest, DestroyOfOneValidatingContext_TheOtherKeepsValidating) {
    NEED_KERNELS();
    const uint64_t n = 256;
    const uint64_t mine = block(one_, n), spare = block(one_, n);
    {
        // The second context's streams, events and blocks enter the domain, then leave it.
        const uint64_t theirs = block(two_, n);
        qd_stream x = stream(two_);
        qd_event e2 = event(two_);
        ASSERT_QD_OK(qd_memcpy_peer_async(x, theirs, two_, mine, one_, n));
        ASSERT_QD_OK(qd_event_record(x, e2));
        qd_stream a = stream(one_);
        ASSERT_QD_OK(qd_stream_wait_event(a, e2));
        ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), mine, 1));
        ASSERT_QD_OK(qd_stream_synchronize(a));
        ASSERT_QD_OK(qd_memcpy_peer_async(x, theirs, two_, spare, one_, n));  // left in flight
    }
    kernels_.pop_back();  // the second context's kernels
    k2_ = nullptr;
    ASSERT_QD_OK(qd_context_destroy(two_));
    contexts_.erase(contexts_.begin() + 1);
    // Its destroy drained its work: nothing of it is a hazard now, and the first context's
    // checks go on (an ordered pattern reports nothing, a fresh planted race once).
    qd_stream a = stream(one_), b = stream(one_);
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), spare, 2));
    ASSERT_QD_OK(launch_write_value(a, k1_->write_value(), mine, 2));
    EXPECT_TRUE(seen().empty()) << first_message();
    ran(a);
    ASSERT_QD_OK(qd_memset_async(b, mine + 8, 0, 8));
    const auto s = seen();
    ASSERT_EQ(s.size(), 1u) << first_message();
    EXPECT_EQ(s[0].context, one_);
    EXPECT_EQ(s[0].stream, b);
    EXPECT_EQ(s[0].other_stream, a);
    EXPECT_EQ(s[0].offset, 8u);
    // A new validating context joins the same domain: its copy of the block, unordered with
    // a's kernel, is reported to it.
    qd_context three = create(QD_CONTEXT_VALIDATE, 1);
    ASSERT_NE(three, 0u);
    if (!peer_access(three, one_)) GTEST_SKIP() << "no peer access between the devices";
    qd_stream y = stream(three);
    ran(b);
    uint64_t word = 0;
    ASSERT_QD_OK(qd_memcpy_async(y, (uint64_t)(uintptr_t)&word, mine + 64, 8));
    ASSERT_QD_OK(qd_stream_synchronize(y));
    const auto t = seen();
    ASSERT_EQ(t.size(), 2u) << first_message();
    EXPECT_EQ(t[1].context, three);
    EXPECT_EQ(t[1].stream, y);
    EXPECT_EQ(t[1].other_stream, a);
    EXPECT_EQ(t[1].offset, 64u);
}

TEST_P(ValidationContextsTest, DestroyRacingTheOtherContextsSubmits_IsSafe) {
    NEED_KERNELS();
    const uint64_t mine = block(one_, 4096), spare = block(one_, 4096);
    const uint64_t theirs = block(two_, 4096);
    qd_stream a = stream(one_), x = stream(two_);
    qd_event e2 = event(two_);
    ASSERT_QD_OK(qd_memcpy_peer_async(x, theirs, two_, mine, one_, 4096));
    ASSERT_QD_OK(qd_event_record(x, e2));
    ASSERT_QD_OK(qd_stream_wait_event(a, e2));
    for (int i = 0; i < 16; ++i)  // in flight while the destroy drains
        ASSERT_QD_OK(qd_memcpy_peer_async(x, theirs, two_, spare, one_, 4096));
    std::atomic<bool> go{false};
    std::thread submitter([&] {
        while (!go.load()) std::this_thread::yield();
        // Every write of mine is on one stream, after the second context's copy of it: nothing
        // to report, wherever the destroy lands.
        for (int i = 0; i < 200; ++i)
            EXPECT_QD_OK(qd_memset_async(a, mine + (i % 64) * 64, uint8_t(i), 64));
        EXPECT_QD_OK(qd_stream_synchronize(a));
    });
    kernels_.pop_back();
    k2_ = nullptr;
    go.store(true);
    EXPECT_QD_OK(qd_context_destroy(two_));
    contexts_.erase(contexts_.begin() + 1);
    submitter.join();
    // The destroy drained the copies: spare is the first context's again.
    ASSERT_QD_OK(qd_memset_async(a, spare, 0, 4096));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_TRUE(seen().empty()) << first_message();
}

QDT_INSTANTIATE_BACKENDS(ValidationContextsTest);

}  // namespace
}  // namespace qdt
