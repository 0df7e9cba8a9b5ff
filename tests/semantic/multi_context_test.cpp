// Several contexts of one backend in one program (qd.h, "Several devices"): a stream of one
// context waits on an event of another, peer access between two contexts, and copies between
// their memory. On a GPU backend the second context is on device 1 when there is one, else a
// second context on device 0; the CPU backend runs everything between two CPU contexts, which is
// how CI tests the semantics.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

class MultiContextTest : public BackendTest {
  protected:
    // A second context of this backend: on device 1 when there is one (destroyed in TearDown).
    qd_context peer_context() {
        uint32_t devices = 0;
        (void)qd_device_count(backend(), &devices);
        qd_context_desc desc = make_desc(backend(), 8, 2);
        desc.device = devices >= 2 ? 1u : 0u;
        qd_context c = 0;
        qd_status st = qd_context_create(&desc, &c);
        EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
        if (st == QD_SUCCESS) extra_contexts_.push_back(c);
        return c;
    }
    // A context of a backend other than this one, or 0 (the caller skips) when none is here.
    qd_context foreign_context(std::string *why) {
        const qd_backend other = is_cpu() ? QD_BACKEND_CUDA : QD_BACKEND_CPU;
        if (!backend_available(other, why)) return 0;
        qd_context_desc desc = make_desc(other, 8, 2);
        qd_context c = 0;
        EXPECT_QD_OK(qd_context_create(&desc, &c));
        if (c) extra_contexts_.push_back(c);
        return c;
    }
    qd_stream default_of(qd_context c) {
        qd_stream s = 0;
        EXPECT_QD_OK(qd_context_default_stream(c, &s));
        return s;
    }
    uint64_t alloc_on(qd_stream s, uint64_t bytes) {
        uint64_t a = 0;
        EXPECT_QD_OK(qd_mem_alloc_async(s, bytes, &a));
        return a;
    }
};

std::vector<uint8_t> copy_out(qd_stream s, uint64_t address, size_t bytes) {
    std::vector<uint8_t> out(bytes, 0xEE);
    EXPECT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)out.data(), address, bytes));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    return out;
}

size_t count_not(const std::vector<uint8_t> &v, uint8_t value) {
    size_t n = 0;
    for (uint8_t b : v) n += b != value;
    return n;
}

// ---------------------------------------------------------------------------------------------
// Cross-context waits
// ---------------------------------------------------------------------------------------------

TEST_P(MultiContextTest, CrossContextWait_DelayedProducer_ConsumerOfTheOtherContextSeesItsData) {
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    qd_stream producer = new_stream(), consumer = new_stream(other);
    qd_event e = new_event();  // of ctx_, waited on by other's stream
    const int trials = (int)scaled(50, 10);
    const uint64_t n = 4096;
    uint64_t buf = alloc_on(producer, n);
    uint8_t *host = static_cast<uint8_t *>(host_alloc(n));
    ASSERT_QD_OK(qd_stream_synchronize(producer));
    int wrong = 0;
    for (int t = 0; t < trials; ++t) {
        const uint8_t value = (uint8_t)(t * 13 + 1);
        ASSERT_QD_OK(enqueue_sleep_us(producer, 200 + (t % 5) * 300));
        ASSERT_QD_OK(qd_memset_async(producer, buf, value, n));
        ASSERT_QD_OK(qd_event_record(producer, e));
        ASSERT_QD_OK(qd_stream_wait_event(consumer, e));
        ASSERT_QD_OK(qd_memcpy_async(consumer, (uint64_t)(uintptr_t)host, buf, n));
        ASSERT_QD_OK(qd_stream_synchronize(consumer));
        for (uint64_t i = 0; i < n; ++i)
            if (host[i] != value) {
                ++wrong;
                break;
            }
        ASSERT_QD_OK(qd_stream_synchronize(producer));
    }
    EXPECT_EQ(wrong, 0) << "of " << trials << " trials";
    EXPECT_QD_OK(qd_mem_free_async(producer, buf));
    EXPECT_QD_OK(qd_event_destroy(e));
}

TEST_P(MultiContextTest, CrossContextWait_GatedProducer_ConsumerRunsOnlyAfterTheGateOpens) {
    // A device-side gate: on CUDA a record queued behind a blocked host function is deferred.
    QDT_REQUIRE_KERNELS();
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    std::string why;
    std::unique_ptr<TestKernels> other_kernels = make_test_kernels(backend(), other, &why);
    ASSERT_TRUE(other_kernels) << why;
    qd_stream a = new_stream(), b = new_stream(other);
    qd_event e = new_event();
    uint32_t *marker = static_cast<uint32_t *>(host_alloc(sizeof(uint32_t)));
    *marker = 0;
    {
        DeviceGate gate(ctx_, kernels_->wait_flag());
        ASSERT_QD_OK(gate.enqueue(a));
        ASSERT_QD_OK(qd_event_record(a, e));
        ASSERT_QD_OK(qd_stream_wait_event(b, e));
        ASSERT_QD_OK(
            launch_write_value(b, other_kernels->write_value(), (uint64_t)(uintptr_t)marker, 1));
        // The gate is closed until open() below, so b cannot have run its kernel.
        EXPECT_EQ(qd_stream_query(b), QD_NOT_READY);
        EXPECT_EQ(__atomic_load_n(marker, __ATOMIC_ACQUIRE), 0u)
            << "the other context's kernel ran before the event it waits on";
        gate.open();
        ASSERT_QD_OK(qd_stream_synchronize(b));
        EXPECT_FALSE(gate.timed_out()) << "the gate had to open itself";
    }
    EXPECT_EQ(__atomic_load_n(marker, __ATOMIC_ACQUIRE), 1u);
    EXPECT_QD_OK(qd_event_destroy(e));
    other_kernels.reset();
}

TEST_P(MultiContextTest, CrossContextWait_EventOfADestroyedContext_IsInvalidHandle) {
    qd_context_desc desc = make_desc(backend(), 8, 2);
    qd_context doomed = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &doomed));
    qd_event e = 0;
    ASSERT_QD_OK(qd_event_create(doomed, 0, &e));
    qd_stream s = new_stream();
    ASSERT_QD_OK(qd_stream_wait_event(s, e));  // never recorded: a no-op, across contexts too
    ASSERT_QD_OK(qd_context_destroy(doomed));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_stream_wait_event(s, e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_stream_wait_event(0, new_event()));
}

TEST_P(MultiContextTest, CrossContextWait_EventOfAnotherBackend_IsWrongContext) {
    std::string why;
    qd_context foreign = foreign_context(&why);
    if (!foreign) GTEST_SKIP() << "no second backend here: " << why;
    qd_event fe = 0;
    ASSERT_QD_OK(qd_event_create(foreign, 0, &fe));
    qd_stream fs = default_of(foreign);
    qd_event e = new_event();
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "backend", qd_stream_wait_event(default_stream_, fe));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "backend", qd_stream_wait_event(fs, e));
}

// The context whose event is waited on is destroyed while the other context's stream waits:
// the destroy drains (the record completes), and the waiter runs on.
TEST_P(MultiContextTest, DestroyTheEventsContext_WhileAnotherWaitsOnIt_BothComplete) {
    qd_context_desc desc = make_desc(backend(), 8, 2);
    qd_context producer_ctx = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &producer_ctx));
    qd_stream producer = default_of(producer_ctx);
    qd_event e = 0;
    ASSERT_QD_OK(qd_event_create(producer_ctx, 0, &e));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(producer));
    ASSERT_QD_OK(qd_event_record(producer, e));
    qd_stream waiter = new_stream();
    ASSERT_QD_OK(qd_stream_wait_event(waiter, e));
    Flag after;
    ASSERT_QD_OK(after.enqueue(waiter));
    qd_status destroyed = QD_ERROR_INTERNAL;
    std::thread destroyer([&] { destroyed = qd_context_destroy(producer_ctx); });
    gate.open();
    destroyer.join();
    EXPECT_EQ(destroyed, QD_SUCCESS) << qd_last_error_message();
    EXPECT_TRUE(after.wait()) << "the waiting stream never ran on";
    EXPECT_QD_OK(qd_stream_synchronize(waiter));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "event", qd_stream_wait_event(waiter, e));
    EXPECT_FALSE(gate.timed_out());
}

// The waiting context is destroyed while its stream waits on the other's gated record: its
// destroy drains by waiting for that record, and returns once the gate opens.
TEST_P(MultiContextTest,
       DestroyTheWaitingContext_WhileItWaitsOnAnother_CompletesOnceTheRecordDoes) {
    qd_context_desc desc = make_desc(backend(), 8, 2);
    qd_context waiting_ctx = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &waiting_ctx));
    qd_stream producer = new_stream();
    qd_event e = new_event();
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(producer));
    ASSERT_QD_OK(qd_event_record(producer, e));
    qd_stream waiter = default_of(waiting_ctx);
    ASSERT_QD_OK(qd_stream_wait_event(waiter, e));
    Flag ran;
    ASSERT_QD_OK(ran.enqueue(waiter));
    qd_status destroyed = QD_ERROR_INTERNAL;
    std::thread destroyer([&] { destroyed = qd_context_destroy(waiting_ctx); });
    gate.open();
    destroyer.join();
    EXPECT_EQ(destroyed, QD_SUCCESS) << qd_last_error_message();
    EXPECT_TRUE(ran.is_set()) << "the destroy returned before the waiting stream drained";
    EXPECT_QD_OK(qd_stream_synchronize(producer));
    EXPECT_FALSE(gate.timed_out());
    EXPECT_QD_OK(qd_event_destroy(e));
}

TEST_P(MultiContextTest, CrossContextWait_OnARecordCapturedInTheEventsContext_IsRefused) {
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    qd_stream origin = new_stream(other);
    qd_event e = new_event(0, other);
    ASSERT_QD_OK(qd_stream_begin_capture(origin));
    ASSERT_QD_OK(qd_event_record(origin, e));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capture", qd_stream_wait_event(default_stream_, e));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(origin, &g));
    ASSERT_QD_OK(qd_graph_destroy(g));
    // A capturing stream cannot wait on another context's record: it was made outside it.
    qd_event mine = new_event();
    ASSERT_QD_OK(qd_event_record(default_stream_, mine));
    ASSERT_QD_OK(qd_stream_begin_capture(origin));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "outside", qd_stream_wait_event(origin, mine));
    ASSERT_QD_OK(qd_stream_end_capture(origin, &g));
    ASSERT_QD_OK(qd_graph_destroy(g));
}

// ---------------------------------------------------------------------------------------------
// Peer access
// ---------------------------------------------------------------------------------------------

TEST_P(MultiContextTest, PeerAccess_QueryAndEnable_SucceedOrSayWhyNot) {
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    uint32_t can = 7;
    ASSERT_QD_OK(qd_context_can_access_peer(ctx_, other, &can));
    ASSERT_TRUE(can == 0 || can == 1) << can;
    if (is_cpu()) {
        EXPECT_EQ(can, 1u) << "CPU contexts share the host's memory";
    }
    if (can) {
        EXPECT_QD_OK(qd_context_enable_peer_access(ctx_, other));
        EXPECT_QD_OK(qd_context_enable_peer_access(ctx_, other));  // again: a no-op
        EXPECT_QD_OK(qd_context_enable_peer_access(other, ctx_));
    } else {
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "peer", qd_context_enable_peer_access(ctx_, other));
    }
}

TEST_P(MultiContextTest, PeerAccess_BadArguments_AreErrorsInTheDocumentedOrder) {
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    uint32_t can = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "can_access",
                  qd_context_can_access_peer(ctx_, other, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "same", qd_context_can_access_peer(ctx_, ctx_, &can));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "same", qd_context_enable_peer_access(other, other));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_context_can_access_peer(0, other, &can));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context",
                  qd_context_can_access_peer(ctx_, default_stream_, &can));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_context_enable_peer_access(ctx_, 0));
    qd_context_desc desc = make_desc(backend(), 8, 2);
    qd_context dead = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &dead));
    ASSERT_QD_OK(qd_context_destroy(dead));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_context_enable_peer_access(ctx_, dead));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_context_can_access_peer(dead, ctx_, &can));
}

TEST_P(MultiContextTest, PeerAccess_WithAContextOfAnotherBackend_IsWrongContext) {
    std::string why;
    qd_context foreign = foreign_context(&why);
    if (!foreign) GTEST_SKIP() << "no second backend here: " << why;
    uint32_t can = 0;
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "backend",
                  qd_context_can_access_peer(ctx_, foreign, &can));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "backend", qd_context_enable_peer_access(foreign, ctx_));
}

// ---------------------------------------------------------------------------------------------
// Peer copies
// ---------------------------------------------------------------------------------------------

TEST_P(MultiContextTest, PeerCopy_BothDirections_IssuedFromEitherSide_DataArrives) {
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    uint32_t can = 0;
    ASSERT_QD_OK(qd_context_can_access_peer(ctx_, other, &can));
    if (can) {  // not required for copies; covers the direct path where the devices allow it
        ASSERT_QD_OK(qd_context_enable_peer_access(ctx_, other));
        ASSERT_QD_OK(qd_context_enable_peer_access(other, ctx_));
    }
    const uint64_t n = 1 << 20;
    qd_stream sa = new_stream(), sb = new_stream(other);
    uint64_t a = alloc_on(sa, n), b = alloc_on(sb, n);
    qd_event ea = new_event(), eb = new_event(0, other);

    // a -> b, issued on the destination's stream after a cross-context wait.
    ASSERT_QD_OK(qd_memset_async(sa, a, 0x11, n));
    ASSERT_QD_OK(qd_event_record(sa, ea));
    ASSERT_QD_OK(qd_stream_wait_event(sb, ea));
    ASSERT_QD_OK(qd_memcpy_peer_async(sb, b, other, a, ctx_, n));
    std::vector<uint8_t> got = copy_out(sb, b, n);
    EXPECT_EQ(count_not(got, 0x11), 0u) << "a -> b: bytes wrong";

    // b -> a, issued on the source's stream; a's stream waits for it.
    ASSERT_QD_OK(qd_memset_async(sb, b + 4096, 0x22, n - 8192));
    ASSERT_QD_OK(qd_memcpy_peer_async(sb, a, ctx_, b, other, n));
    ASSERT_QD_OK(qd_event_record(sb, eb));
    ASSERT_QD_OK(qd_stream_wait_event(sa, eb));
    got = copy_out(sa, a, n);
    size_t wrong = 0;
    for (uint64_t i = 0; i < n; ++i) wrong += got[i] != ((i >= 4096 && i < n - 4096) ? 0x22 : 0x11);
    EXPECT_EQ(wrong, 0u) << "b -> a: bytes wrong";

    // Pinned host memory of the other context as the destination, a sub-range of a as source.
    uint8_t *pinned = nullptr;
    ASSERT_QD_OK(qd_host_alloc(other, 4096, reinterpret_cast<void **>(&pinned)));
    std::memset(pinned, 0, 4096);
    ASSERT_QD_OK(
        qd_memcpy_peer_async(sa, (uint64_t)(uintptr_t)pinned, other, a + 8192, ctx_, 4096));
    ASSERT_QD_OK(qd_stream_synchronize(sa));
    size_t host_wrong = 0;
    for (int i = 0; i < 4096; ++i) host_wrong += pinned[i] != 0x22;
    EXPECT_EQ(host_wrong, 0u);
    EXPECT_QD_OK(qd_host_free(other, pinned));

    EXPECT_QD_OK(qd_mem_free_async(sa, a));
    EXPECT_QD_OK(qd_mem_free_async(sb, b));
    EXPECT_QD_OK(qd_stream_synchronize(sb));
}

TEST_P(MultiContextTest, PeerCopy_RangesAreCheckedAgainstTheirOwnContext) {
    qd_context other = peer_context();
    ASSERT_NE(other, 0u);
    const uint64_t n = 4096;
    qd_stream sa = new_stream(), sb = new_stream(other);
    uint64_t a = alloc_on(sa, n), b = alloc_on(sb, n);
    ASSERT_QD_OK(qd_stream_synchronize(sa));
    ASSERT_QD_OK(qd_stream_synchronize(sb));
    // Arguments first, then handles, then contexts, then addresses.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "dst", qd_memcpy_peer_async(0, 0, other, a, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "src", qd_memcpy_peer_async(sa, b, other, 0, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "wraps",
                  qd_memcpy_peer_async(sa, kAllOnes - 8, other, a, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_memcpy_peer_async(0, b, other, a, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_memcpy_peer_async(sa, b, 0, a, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context", qd_memcpy_peer_async(sa, b, other, a, sa, n));
    qd_context third = other_context();
    qd_stream s3 = default_of(third);
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "neither",
                  qd_memcpy_peer_async(s3, b, other, a, ctx_, n));
    // Each side inside an allocation of the context it names.
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "dst", qd_memcpy_peer_async(sb, a, other, b, other, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "src", qd_memcpy_peer_async(sa, b, other, b, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "past the end",
                  qd_memcpy_peer_async(sa, b + 1, other, a, ctx_, n));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "dst",
                  qd_memcpy_peer_async(sa, b + n, other, a, ctx_, 1));
    uint8_t raw[16];
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "dst",
                  qd_memcpy_peer_async(sa, (uint64_t)(uintptr_t)raw, other, a, ctx_, 16));
    // Zero bytes: a no-op once the handles are good; the same context on both sides: allowed.
    EXPECT_QD_OK(qd_memcpy_peer_async(sa, b, other, a, ctx_, 0));
    EXPECT_QD_OK(qd_memcpy_peer_async(sa, a, ctx_, a + 2048, ctx_, 2048));
    // Not captured.
    ASSERT_QD_OK(qd_stream_begin_capture(sa));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "capturing",
                  qd_memcpy_peer_async(sa, b, other, a, ctx_, n));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(sa, &g));
    ASSERT_QD_OK(qd_graph_destroy(g));
    // A destroyed context's handle.
    qd_context_desc desc = make_desc(backend(), 8, 2);
    qd_context dead = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &dead));
    ASSERT_QD_OK(qd_context_destroy(dead));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context",
                  qd_memcpy_peer_async(sa, b, dead, a, ctx_, n));
    EXPECT_QD_OK(qd_mem_free_async(sa, a));
    EXPECT_QD_OK(qd_mem_free_async(sb, b));
    EXPECT_QD_OK(qd_stream_synchronize(sb));
}

TEST_P(MultiContextTest, PeerCopy_WithAContextOfAnotherBackend_IsWrongContext) {
    std::string why;
    qd_context foreign = foreign_context(&why);
    if (!foreign) GTEST_SKIP() << "no second backend here: " << why;
    qd_stream fs = default_of(foreign);
    uint64_t fbuf = alloc_on(fs, 256), mine = alloc_on(default_stream_, 256);
    ASSERT_QD_OK(qd_stream_synchronize(fs));
    ASSERT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "backend",
                  qd_memcpy_peer_async(default_stream_, mine, ctx_, fbuf, foreign, 256));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "backend",
                  qd_memcpy_peer_async(fs, mine, ctx_, fbuf, foreign, 256));
    EXPECT_QD_OK(qd_mem_free_async(fs, fbuf));
    EXPECT_QD_OK(qd_mem_free_async(default_stream_, mine));
}

QDT_INSTANTIATE_BACKENDS(MultiContextTest);

}  // namespace
