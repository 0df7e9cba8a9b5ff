// Stream-ordered memory: success and every documented status of qd_mem_alloc_async,
// qd_mem_free_async, qd_memcpy_async, qd_memset_async, qd_host_alloc and qd_host_free, plus the
// cross-stream lifetime figure (alloc on A, use on delayed B, free on A, alloc again).
#include <cstring>
#include <string>
#include <thread>

#include "qd_test.h"
#include "sizes_named.h"

using namespace qdt;

namespace {
class MemoryTest : public BackendTest {};
inline uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }
}  // namespace

TEST_P(MemoryTest, AllocMemsetMemcpyFree_RoundTripsThroughHostBuffers) {
    qd_stream s = new_stream();
    const uint64_t n = 1 << 16;
    uint64_t a = alloc(s, n), b = alloc(s, n);
    ASSERT_NE(a, 0u);
    ASSERT_NE(a, b);
    std::vector<uint8_t> src(n), dst(n, 0);
    for (uint64_t i = 0; i < n; ++i) src[i] = (uint8_t)(i * 13 + 5);
    ASSERT_QD_OK(qd_memset_async(s, a, 0x11, n));
    ASSERT_QD_OK(qd_memcpy_async(s, a, addr(src.data()), n));  // host -> device
    ASSERT_QD_OK(qd_memcpy_async(s, b, a, n));                 // device -> device
    ASSERT_QD_OK(qd_memset_async(s, b + 100, 0xEE, 10));       // interior range
    ASSERT_QD_OK(qd_memcpy_async(s, addr(dst.data()), b, n));  // device -> host
    ASSERT_QD_OK(qd_stream_synchronize(s));
    for (uint64_t i = 0; i < n; ++i) {
        uint8_t expect = (i >= 100 && i < 110) ? 0xEE : src[i];
        ASSERT_EQ(dst[i], expect) << i;
    }
    EXPECT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD_OK(qd_mem_free_async(s, b));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, PinnedHostMemory_WorksAsCopySourceAndDestination) {
    qd_stream s = new_stream();
    const uint64_t n = 4096;
    uint8_t *h1 = static_cast<uint8_t *>(host_alloc(n));
    uint8_t *h2 = static_cast<uint8_t *>(host_alloc(n));
    ASSERT_NE(h1, nullptr);
    for (uint64_t i = 0; i < n; ++i) h1[i] = (uint8_t)i;
    memset(h2, 0, n);
    uint64_t d = alloc(s, n);
    ASSERT_QD_OK(qd_memcpy_async(s, d, addr(h1), n));
    ASSERT_QD_OK(qd_memcpy_async(s, addr(h2), d, n));
    ASSERT_QD_OK(qd_memset_async(s, addr(h1), 0x7F, n));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(memcmp(h2,
                     std::vector<uint8_t>([&] {
                         std::vector<uint8_t> v(n);
                         for (uint64_t i = 0; i < n; ++i) v[i] = (uint8_t)i;
                         return v;
                     }())
                         .data(),
                     n),
              0);
    for (uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(h1[i], 0x7F);
    }
    EXPECT_QD_OK(qd_mem_free_async(s, d));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// Moved from tests/gpu/gpu_test.cpp (Gpu.HostAlloc_IsPinnedAndUsableByKernelsCopies): data copied
// from pinned host memory to the device, changed by a kernel and copied back; the pinned bytes
// are counted in the context's stats.
TEST_P(MemoryTest, HostAlloc_KernelWorksOnDataCopiedFromAndBackToIt_StatsCountIt) {
    QDT_REQUIRE_KERNELS();
    const uint32_t n = 1024;
    int32_t *h = static_cast<int32_t *>(host_alloc(n * sizeof(int32_t)));
    ASSERT_NE(h, nullptr);
    for (uint32_t i = 0; i < n; ++i) h[i] = (int32_t)i;
    EXPECT_GE(get_stats(ctx_).host_bytes_allocated, n * sizeof(int32_t));
    qd_stream s = new_stream();
    uint64_t d = alloc(s, n * sizeof(int32_t));
    ASSERT_QD_OK(qd_memcpy_async(s, d, addr(h), n * sizeof(int32_t)));
    ASSERT_QD_OK(launch_add_one(s, kernels_->add_one(), d, n, 4, 256));
    ASSERT_QD_OK(qd_memcpy_async(s, addr(h), d, n * sizeof(int32_t)));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(h[i], (int32_t)i + 1) << i;
    }
    EXPECT_QD_OK(qd_mem_free_async(s, d));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, Stats_TrackAllocationsAndBytes) {
    qd_stream s = new_stream();
    const qd_context_stats base = get_stats(ctx_);
    uint64_t a = alloc(s, 1000), b = alloc(s, 24);
    qd_context_stats mid = get_stats(ctx_);
    EXPECT_EQ(mid.live_allocations, base.live_allocations + 2);
    EXPECT_EQ(mid.bytes_allocated, base.bytes_allocated + 1024);
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx_, 333, &h));
    EXPECT_EQ(get_stats(ctx_).host_bytes_allocated, base.host_bytes_allocated + 333);
    EXPECT_QD_OK(qd_host_free(ctx_, h));
    EXPECT_EQ(get_stats(ctx_).host_bytes_allocated, base.host_bytes_allocated);
    EXPECT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD_OK(qd_mem_free_async(s, b));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    qd_context_stats end = get_stats(ctx_);
    EXPECT_EQ(end.live_allocations, base.live_allocations);
    EXPECT_EQ(end.bytes_allocated, base.bytes_allocated);
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, Alloc_Errors) {
    qd_stream s = new_stream();
    uint64_t a = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "address|out|null",
                  qd_mem_alloc_async(s, 16, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "bytes|size|0|zero", qd_mem_alloc_async(s, 0, &a));
    for (uint64_t bytes : {kAllOnes, kAllOnes - 4095, (uint64_t)1 << 63})
        EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "bytes|size|overflow|address",
                      qd_mem_alloc_async(s, bytes, &a));
    qd_stream dead = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(dead));
    for (qd_stream x : {(qd_stream)0, dead, (qd_stream)ctx_})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_mem_alloc_async(x, 16, &a));
    EXPECT_EQ(a, 0x5555u);
    EXPECT_EQ(get_stats(ctx_).live_allocations, 0u);
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// A refused allocation's message names the bytes asked for, never qd's own end guard on top
// (2^56 is the largest size the API accepts; the CPU backend refuses it without asking the
// allocator, a GPU backend as beyond its largest block or from the driver).
TEST_P(MemoryTest, AllocRefused_MessageNamesTheBytesAskedFor) {
    constexpr uint64_t kLargest = uint64_t{1} << 56;
    const std::string asked = std::to_string(kLargest);
    const std::string with_guard = std::to_string(kLargest + 1);
    qd_stream s = new_stream();
    uint64_t a = 0;
    const qd_status st = qd_mem_alloc_async(s, kLargest, &a);
    EXPECT_TRUE(st == QD_ERROR_OUT_OF_MEMORY || st == QD_ERROR_OVERFLOW) << qd_status_name(st);
    std::string msg = qd_last_error_message();
    EXPECT_EQ(msg.find(with_guard), std::string::npos) << msg;
    if (GetParam() == QD_BACKEND_CPU) {
        EXPECT_NE(msg.find(asked), std::string::npos) << msg;
    }
    void *p = nullptr;
    const qd_status hst = qd_host_alloc(ctx_, kLargest, &p);
    EXPECT_TRUE(hst == QD_ERROR_OUT_OF_MEMORY || hst == QD_ERROR_OVERFLOW) << qd_status_name(hst);
    msg = qd_last_error_message();
    EXPECT_EQ(msg.find(with_guard), std::string::npos) << msg;
    if (GetParam() == QD_BACKEND_CPU) {
        EXPECT_NE(msg.find(asked), std::string::npos) << msg;
    }
    EXPECT_EQ(get_stats(ctx_).live_allocations, 0u);
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, Free_UnknownInteriorDoubleAndForeign_AreInvalidAddress) {
    qd_stream s = new_stream();
    uint64_t a = alloc(s, 256);
    int on_stack = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x", qd_mem_free_async(s, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x", qd_mem_free_async(s, addr(&on_stack)));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x", qd_mem_free_async(s, a + 1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x", qd_mem_free_async(s, 0x1000));
    void *h = host_alloc(64);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x", qd_mem_free_async(s, addr(h)))
        << "a host block is not a device allocation";
    qd_context c2 = other_context();
    qd_stream s2 = new_stream(c2);
    uint64_t foreign = alloc(s2, 64);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x|context", qd_mem_free_async(s, foreign));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x|context", qd_mem_free_async(s2, a));
    ASSERT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|0x|freed", qd_mem_free_async(s, a))
        << "double free";
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_mem_free_async(0, foreign));
    EXPECT_QD_OK(qd_mem_free_async(s2, foreign));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, Free_OnAnotherStreamOfTheSameContext_IsAllowed) {
    qd_stream a = new_stream(), b = new_stream();
    uint64_t p = alloc(a, 64);
    qd_event e = new_event();
    ASSERT_QD_OK(qd_memset_async(a, p, 1, 64));
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    EXPECT_QD_OK(qd_mem_free_async(b, p));
    EXPECT_QD_OK(qd_stream_synchronize(b));
    EXPECT_QD_OK(qd_event_destroy(e));
    EXPECT_QD_OK(qd_stream_destroy(a));
    EXPECT_QD_OK(qd_stream_destroy(b));
}

TEST_P(MemoryTest, MemcpyMemset_Errors) {
    qd_stream s = new_stream();
    uint64_t a = alloc(s, 256), b = alloc(s, 256);
    std::vector<uint8_t> host(512);
    // NULL sides with bytes > 0
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "dst|null|0", qd_memcpy_async(s, 0, a, 16));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "src|null|0", qd_memcpy_async(s, a, 0, 16));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "dst|null|0", qd_memset_async(s, 0, 1, 16));
    // bytes 0 is a successful no-op, even with NULL sides
    EXPECT_QD_OK(qd_memcpy_async(s, 0, 0, 0));
    EXPECT_QD_OK(qd_memcpy_async(s, a, b, 0));
    EXPECT_QD_OK(qd_memset_async(s, 0, 1, 0));
    // wrap-around
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "overflow|wrap", qd_memcpy_async(s, kAllOnes - 7, a, 16));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "overflow|wrap", qd_memcpy_async(s, a, kAllOnes - 7, 16));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "overflow|wrap", qd_memcpy_async(s, a, b, kAllOnes));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "overflow|wrap", qd_memset_async(s, kAllOnes - 7, 0, 16));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "overflow|wrap", qd_memset_async(s, a, 0, kAllOnes));
    // past the end of the allocation the range starts in
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|end|alloc",
                  qd_memcpy_async(s, a, addr(host.data()), 257));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|end|alloc",
                  qd_memcpy_async(s, a + 200, addr(host.data()), 57));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|end|alloc",
                  qd_memcpy_async(s, addr(host.data()), a + 255, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|end|alloc", qd_memcpy_async(s, b, a + 1, 256));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|end|alloc",
                  qd_memset_async(s, a + 128, 0, 129));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|end|alloc", qd_memset_async(s, b, 0, 257));
    // exactly to the end is fine
    EXPECT_QD_OK(qd_memset_async(s, a + 128, 3, 128));
    EXPECT_QD_OK(qd_memcpy_async(s, b, a, 256));
    // bad stream
    for (qd_stream x : {(qd_stream)0, (qd_stream)ctx_}) {
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_memcpy_async(x, a, b, 16));
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_memset_async(x, a, 0, 16));
    }
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD_OK(qd_mem_free_async(s, b));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// A copy on one context's stream that starts inside another context's block was treated as raw
// memory and not range-checked: a 4096-byte write into a 16-byte block (heap overflow).
TEST_P(MemoryTest, MemcpyMemset_IntoAnotherContextsAllocation_CheckedAgainstThatAllocation) {
    qd_stream s1 = new_stream();
    qd_context c2 = other_context();
    qd_stream s2 = new_stream(c2);
    uint64_t a = alloc(s1, 16);
    void *h = host_alloc(16);
    std::vector<uint8_t> src(4096, 0x5A);
    ASSERT_QD_OK(qd_memset_async(s1, a, 0, 16));
    ASSERT_QD_OK(qd_stream_synchronize(s1));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end|alloc",
                  qd_memcpy_async(s2, a + 8, addr(src.data()), 4096));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end|alloc",
                  qd_memcpy_async(s2, addr(src.data()), a + 8, 4096));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end|alloc", qd_memset_async(s2, a + 8, 1, 4096));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end|alloc",
                  qd_memcpy_async(s2, addr(h) + 8, addr(src.data()), 4096))
        << "host blocks of another context too";
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end|alloc", qd_memset_async(s2, addr(h), 1, 17));
    // A copy that stays inside the other context's block is allowed (unified addressing; the
    // caller orders the two contexts' streams with events, as for two streams of one context).
    EXPECT_QD_OK(qd_memcpy_async(s2, a + 8, addr(src.data()), 8));
    EXPECT_QD_OK(qd_memset_async(s2, a, 0x11, 4));
    ASSERT_QD_OK(qd_stream_synchronize(s2));
    std::vector<uint8_t> out(16, 0);
    ASSERT_QD_OK(qd_memcpy_async(s1, addr(out.data()), a, 16));
    ASSERT_QD_OK(qd_stream_synchronize(s1));
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], i < 4 ? 0x11 : i < 8 ? 0 : 0x5A) << i;
    EXPECT_QD_OK(qd_mem_free_async(s1, a));
}

// A range that starts one past a block's last byte was unchecked raw memory, so a copy there
// overflowed the heap silently. It is refused as the block's end, on any context's stream.
TEST_P(MemoryTest, MemcpyMemset_StartingExactlyAtAnAllocationsEnd_InvalidAddress) {
    qd_stream s = new_stream();
    qd_stream s2 = new_stream(other_context());
    uint64_t a = alloc(s, 64);
    void *h = host_alloc(32);
    std::vector<uint8_t> host(64);
    for (qd_stream x : {s, s2}) {
        EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end",
                      qd_memcpy_async(x, a + 64, addr(host.data()), 1));
        EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end",
                      qd_memcpy_async(x, addr(host.data()), a + 64, 8));
        EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end", qd_memset_async(x, a + 64, 0, 1));
        EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "end", qd_memset_async(x, addr(h) + 32, 0, 1));
    }
    EXPECT_QD_OK(qd_memcpy_async(s, a + 63, addr(host.data()), 1))
        << "the last byte is the block's";
    EXPECT_QD_OK(qd_memset_async(s, a + 64, 0, 0)) << "0 bytes is a no-op anywhere";
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_mem_free_async(s, a));
}

// The end guard (the byte qd keeps past each block, so that a range may not start at a block's
// end) stays out of what users see: every message about a block names the size asked for, and
// the statistics count it. Odd sizes, so that n and n + 1 cannot be confused.
TEST_P(MemoryTest, BlockSizeInMessagesAndStats_IsTheSizeAskedFor_NotTheEndGuard) {
    constexpr uint64_t kDevice = 1001, kHost = 333;
    // The one size the message names (its addresses and handles, in hex, may hold any digits).
    const auto names_size = [](uint64_t n) {
        const std::string msg = qd_last_error_message();
        return ::testing::AssertionResult(sizes_named(msg) == std::vector<uint64_t>{n})
               << "message: " << msg;
    };
    qd_stream s = new_stream();
    qd_context c2 = other_context();
    qd_stream s2 = new_stream(c2);
    const qd_context_stats base = get_stats(ctx_);
    uint64_t a = alloc(s, kDevice);
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx_, kHost, &h));
    const qd_context_stats mid = get_stats(ctx_);
    EXPECT_EQ(mid.bytes_allocated - base.bytes_allocated, kDevice);
    EXPECT_EQ(mid.host_bytes_allocated - base.host_bytes_allocated, kHost);
    std::vector<uint8_t> host(64);
    // A range that runs past the end, and one that starts at it, on this context's stream and on
    // another context's (the registries of every context are checked).
    for (qd_stream x : {s, s2}) {
        EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_memset_async(x, a + kDevice - 4, 0, 8));
        EXPECT_TRUE(names_size(kDevice));
        EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_memcpy_async(x, addr(host.data()), a + kDevice, 1));
        EXPECT_TRUE(names_size(kDevice));
        EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_memset_async(x, addr(h) + kHost - 1, 0, 2));
        EXPECT_TRUE(names_size(kHost));
        EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_memset_async(x, addr(h) + kHost, 0, 1));
        EXPECT_TRUE(names_size(kHost));
    }
    // A peer copy: each side must lie inside one block of its context.
    uint64_t b = alloc(s2, 64);
    EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_memcpy_peer_async(s, a + kDevice - 8, ctx_, b, c2, 16));
    EXPECT_TRUE(names_size(kDevice));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD_OK(qd_mem_free_async(s2, b));
    EXPECT_QD_OK(qd_host_free(ctx_, h));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(get_stats(ctx_).bytes_allocated, base.bytes_allocated);
    EXPECT_EQ(get_stats(ctx_).host_bytes_allocated, base.host_bytes_allocated);
}

TEST_P(MemoryTest, MemcpyMemset_FreedAllocation_IsNoLongerRegistered) {
    // After a free, an address range that started in the block is just an unregistered address;
    // a copy that ran past the old end cannot be checked any more, so only check the registry
    // through a second free.
    qd_stream s = new_stream();
    uint64_t a = alloc(s, 64);
    ASSERT_QD_OK(qd_mem_free_async(s, a));
    EXPECT_QD(QD_ERROR_INVALID_ADDRESS, qd_mem_free_async(s, a));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, HostAlloc_Errors) {
    void *p = reinterpret_cast<void *>(0x5555);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_host_alloc(ctx_, 16, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "bytes|size|0|zero", qd_host_alloc(ctx_, 0, &p));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "bytes|size|overflow", qd_host_alloc(ctx_, kAllOnes, &p));
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "bytes|size|overflow", qd_host_alloc(ctx_, 1ull << 63, &p));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_host_alloc(0, 16, &p));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_host_alloc(default_stream_, 16, &p));
    EXPECT_EQ(p, reinterpret_cast<void *>(0x5555));
    EXPECT_EQ(get_stats(ctx_).host_bytes_allocated, 0u);
}

TEST_P(MemoryTest, HostFree_Errors) {
    void *p = nullptr;
    ASSERT_QD_OK(qd_host_alloc(ctx_, 128, &p));
    int on_stack = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "ptr|null", qd_host_free(ctx_, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|ptr|0x", qd_host_free(ctx_, &on_stack));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|ptr|0x",
                  qd_host_free(ctx_, static_cast<char *>(p) + 1));
    qd_stream s = new_stream();
    uint64_t dev = alloc(s, 64);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|ptr|0x",
                  qd_host_free(ctx_, reinterpret_cast<void *>(dev)))
        << "a device allocation is not a host block";
    qd_context c2 = other_context();
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|ptr|0x|context", qd_host_free(c2, p))
        << "another context's block";
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_host_free(0, p));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx", qd_host_free(s, p));
    ASSERT_QD_OK(qd_host_free(ctx_, p));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ADDRESS, "address|ptr|0x", qd_host_free(ctx_, p))
        << "double free";
    EXPECT_QD_OK(qd_mem_free_async(s, dev));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, Free_IsStreamOrdered_MemoryUsableUntilEarlierWorkCompletes) {
    QDT_REQUIRE_CPU();  // on the CPU an address is a host pointer we can read in a callback
    qd_stream s = new_stream();
    uint64_t p = alloc(s, 4096);
    ASSERT_QD_OK(qd_memset_async(s, p, 0x42, 4096));
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    struct Check {
        uint64_t p;
        std::atomic<int> ok{0};
        static void run(void *u) {
            Check *c = static_cast<Check *>(u);
            const uint8_t *b = reinterpret_cast<const uint8_t *>((uintptr_t)c->p);
            int good = 1;
            for (int i = 0; i < 4096; ++i) good &= b[i] == 0x42;
            c->ok.store(good ? 1 : 2);
        }
    } check;
    check.p = p;
    ASSERT_QD_OK(qd_launch_host_fn(s, &Check::run, &check));
    ASSERT_QD_OK(qd_mem_free_async(s, p));  // after the check in stream order
    // Allocate again while the free is pending: must not hand out the same block yet... the
    // allocation is stream-ordered too, so only the data matters: write a different pattern.
    uint64_t q = alloc(s, 4096);
    ASSERT_QD_OK(qd_memset_async(s, q, 0x99, 4096));
    gate.open();
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(check.ok.load(), 1)
        << "the block was released or overwritten before earlier work ran";
    EXPECT_QD_OK(qd_mem_free_async(s, q));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(MemoryTest, CrossStreamLifetime_AllocOnA_UseOnDelayedB_FreeOnA_AllocAgain) {
    qd_stream A = new_stream(), B = new_stream();
    qd_event allocated = new_event(), used = new_event();
    const int trials = (int)scaled(100, 10);
    const uint64_t n = 4096;
    std::vector<uint8_t> first(n), second(n);
    int wrong = 0;
    for (int t = 0; t < trials; ++t) {
        const uint8_t v1 = (uint8_t)(2 * t + 1), v2 = (uint8_t)(2 * t + 2);
        uint64_t x = alloc(A, n);
        ASSERT_QD_OK(qd_event_record(A, allocated));
        ASSERT_QD_OK(qd_stream_wait_event(B, allocated));
        // B is delayed, then uses the block.
        if (kernels_)
            ASSERT_QD_OK(launch_spin(B, kernels_->spin(), 300 + (t % 3) * 500));
        else
            ASSERT_QD_OK(enqueue_sleep_us(B, 300 + (t % 3) * 500));
        ASSERT_QD_OK(qd_memset_async(B, x, v1, n));
        ASSERT_QD_OK(qd_memcpy_async(B, addr(first.data()), x, n));
        ASSERT_QD_OK(qd_event_record(B, used));
        ASSERT_QD_OK(qd_stream_wait_event(A, used));
        ASSERT_QD_OK(qd_mem_free_async(A, x));
        uint64_t y = alloc(A, n);
        ASSERT_QD_OK(qd_memset_async(A, y, v2, n));
        ASSERT_QD_OK(qd_memcpy_async(A, addr(second.data()), y, n));
        ASSERT_QD_OK(qd_mem_free_async(A, y));
        ASSERT_QD_OK(qd_stream_synchronize(A));
        ASSERT_QD_OK(qd_stream_synchronize(B));
        bool ok = true;
        for (uint64_t i = 0; i < n; ++i) ok &= first[i] == v1 && second[i] == v2;
        wrong += !ok;
    }
    EXPECT_EQ(wrong, 0) << "of " << trials << " trials";
    EXPECT_EQ(get_stats(ctx_).live_allocations, 0u);
    for (qd_event e : {allocated, used}) {
        EXPECT_QD_OK(qd_event_destroy(e));
    }
    for (qd_stream s : {A, B}) {
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
}

QDT_INSTANTIATE_BACKENDS(MemoryTest);
