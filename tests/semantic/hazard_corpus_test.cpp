// The hazard corpus (qd.h, "Validation" and "Several devices"): two tables of small programs,
// run on every backend with validating contexts. Each planted hazard must be reported exactly
// once, and the report must match the expected one field by field (kind, context, both
// streams, block, size, offset, both operations). Each correct shape must report nothing, and
// where it computes something its result is checked: the value proves the ordering held.
//
// How an entry keeps the program itself free of data races (the CPU backend runs kernels on
// threads; TSan watches): a planted race either waits for the first operation with a host
// callback (Corpus::ran) or orders the two with device work the validation model does not see
// (a DeviceGate opened by a host function, or the wait_flag kernel as a one-shot signal inside
// a parallel launch or a graph). The model counts events, joins and host synchronizations as
// ordering, never host callbacks or flags in memory, so the hazard is still a hazard for it.
//
// Adding an entry: write `void hazard_Name(Corpus &c)` (plant, then c.expect(...) the one
// report) or `void shape_Name(Corpus &c)` (a correct program that checks its values), and add
// Name to QDT_HAZARDS or QDT_SHAPES at the end. tests/README.md, "The hazard corpus".
#include <qd/qd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "hazard_log.h"
#include "qd_test.h"

namespace qdt {
namespace {

constexpr uint64_t kSignalTimeoutUs = 10 * 1000 * 1000;

// What an entry expects; compared field by field with the report.
struct Want {
    uint32_t kind = 0;
    qd_context context = 0;
    qd_stream stream = 0, other_stream = 0;
    uint64_t allocation = 0, bytes = 0, offset = 0;
    std::string operation, other_operation;
};

const char *kind_label(uint32_t kind) {
    switch (kind) {
    case QD_HAZARD_RACE: return "race";
    case QD_HAZARD_FREE_IN_USE: return "free in use";
    case QD_HAZARD_USE_AFTER_FREE: return "use after free";
    }
    return "?";
}

// The operations as reports name them (the fixture declares every parameter honestly: see
// Corpus::open).
const std::string kWrite = "kernel 'qd_test_write_value' (write)";
const std::string kRead = "kernel 'qd_test_add_value' (read)";
const std::string kMemsetW = "memset (write)";
const std::string kMemcpyR = "memcpy (read)";
const std::string kMemcpyW = "memcpy (write)";

// The program an entry runs against: one validating context (pool of 8 streams), and on
// demand a second one of the same backend (on device 1 where there are two, as
// MultiContextTest does), both reporting to the same handler.
class Corpus : public HazardLog, public RanFlags {
  public:
    qd_backend backend = QD_BACKEND_CPU;
    qd_context ctx = 0;
    qd_stream def = 0;  // ctx's default stream
    std::unique_ptr<TestKernels> k;
    std::vector<Want> wants;

    // Creates ctx and its kernels; false and *why to skip.
    bool open(qd_backend b, std::string *why) {
        backend = b;
        if (!backend_available(b, why)) return false;
        ctx = context(8);
        if (!ctx) return false;
        EXPECT_QD_OK(qd_context_default_stream(ctx, &def));
        k = make_test_kernels(b, ctx, why);
        if (!k) return false;
        // Honest declarations: write_value only writes its dst, add_value reads its src and
        // writes its dst, wait_flag's words are a signal, not data. add_one stays read-write.
        EXPECT_QD_OK(qd_kernel_set_param_access(k->write_value(), 0, QD_PARAM_WRITE));
        EXPECT_QD_OK(qd_kernel_set_param_access(k->add_value(), 0, QD_PARAM_WRITE));
        EXPECT_QD_OK(qd_kernel_set_param_access(k->add_value(), 1, QD_PARAM_READ));
        EXPECT_QD_OK(qd_kernel_set_param_access(k->wait_flag(), 0, QD_PARAM_IGNORE));
        return true;
    }

    void close() {
        settle();
        clear_flags();
        gates_.clear();
        for (auto &hb : host_blocks_) EXPECT_QD_OK(qd_host_free(hb.first, hb.second));
        host_blocks_.clear();
        k.reset();
        for (auto it = contexts_.rbegin(); it != contexts_.rend(); ++it)
            EXPECT_QD_OK(qd_context_destroy(*it));
        contexts_.clear();
        ctx = ctx2_ = 0;
    }

    // A validating context of this backend with `pool` pooled streams, reporting here.
    qd_context context(uint32_t pool, uint32_t device = 0) {
        qd_context_desc desc = make_desc(backend, pool, 4);
        desc.device = device;
        desc.flags = QD_CONTEXT_VALIDATE;
        qd_context c = 0;
        EXPECT_QD_OK(qd_context_create(&desc, &c));
        if (!c) return 0;
        contexts_.push_back(c);
        EXPECT_QD_OK(install(c));
        return c;
    }

    // The second context (created at the first call): device 1 where there are two. Peer
    // access is granted both ways, as a program that copies with qd_memcpy_async between
    // devices must (qd.h, qd_memcpy_async); where two devices cannot reach each other, the
    // second context shares device 0, so every entry still runs.
    qd_context ctx2() {
        if (ctx2_) return ctx2_;
        uint32_t devices = 0;
        (void)qd_device_count(backend, &devices);
        ctx2_ = context(8, devices >= 2 ? 1u : 0u);
        if (ctx2_ && !peer_both_ways(ctx, ctx2_) && devices >= 2) {
            ctx2_ = context(8, 0);
            if (ctx2_) {
                EXPECT_TRUE(peer_both_ways(ctx, ctx2_)) << qd_last_error_message();
            }
        }
        return ctx2_;
    }

    static bool peer_both_ways(qd_context one, qd_context two) {
        uint32_t a = 0, b = 0;
        if (qd_context_can_access_peer(one, two, &a) != QD_SUCCESS || !a) return false;
        if (qd_context_can_access_peer(two, one, &b) != QD_SUCCESS || !b) return false;
        return qd_context_enable_peer_access(one, two) == QD_SUCCESS &&
               qd_context_enable_peer_access(two, one) == QD_SUCCESS;
    }

    qd_stream default_of(qd_context c) {
        qd_stream s = 0;
        EXPECT_QD_OK(qd_context_default_stream(c, &s));
        return s;
    }

    qd_stream stream(qd_context c = 0) {
        qd_stream s = 0;
        EXPECT_QD_OK(qd_stream_create(c ? c : ctx, nullptr, &s));
        return s;
    }

    qd_event event(qd_context c = 0) {
        qd_event e = 0;
        EXPECT_QD_OK(qd_event_create(c ? c : ctx, 0, &e));
        return e;
    }

    // Device memory of c, zeroed, ordered before everything (the host synchronized with it).
    uint64_t block(qd_context c = 0, uint64_t bytes = 256) {
        return zeroed_block(default_of(c ? c : ctx), bytes);
    }

    // Pinned host memory of ctx, zeroed; freed at the end (after every stream is drained).
    void *host_block(uint64_t bytes) {
        void *p = nullptr;
        EXPECT_QD_OK(qd_host_alloc(ctx, bytes, &p));
        if (p) {
            std::memset(p, 0, bytes);
            host_blocks_.emplace_back(ctx, p);
        }
        return p;
    }

    // A gate of device work on a stream (DeviceGate), kept until the end.
    DeviceGate *gate() {
        gates_.push_back(std::make_unique<DeviceGate>(ctx, k->wait_flag()));
        return gates_.back().get();
    }

    // A one-shot signal made of device work: signal(s) queues wait_flag with a zero timeout on
    // words [0, 1] (it stores words[1] at once, with release), await(s) queues it on words
    // [1, 2] (it polls words[1] with acquire, then stores words[2]: 1, or 2 if it timed out).
    // wait_flag's words are declared QD_PARAM_IGNORE: the model sees no access, no ordering.
    uint64_t signal_words() { return (uint64_t)(uintptr_t)host_block(4 * sizeof(uint32_t)); }
    static bool signal_held(uint64_t words) {
        return __atomic_load_n(reinterpret_cast<uint32_t *>(words) + 2, __ATOMIC_ACQUIRE) == 1;
    }

    // Waits for every stream of every context here.
    void settle() {
        for (qd_context c : contexts_) EXPECT_QD_OK(qd_context_synchronize(c));
    }

    // The u32 at address, of context c, read once every stream is drained.
    uint32_t peek(uint64_t address, qd_context c = 0) {
        settle();
        const qd_stream s = default_of(c ? c : ctx);
        uint32_t v = 0xEEEEEEEEu;
        EXPECT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v, address, sizeof v));
        EXPECT_QD_OK(qd_stream_synchronize(s));
        return v;
    }

    void expect(Want w) { wants.push_back(std::move(w)); }

    uint64_t counted() {
        uint64_t n = 0;
        for (qd_context c : contexts_) n += get_stats(c).hazards_reported;
        return n;
    }

  private:
    qd_context ctx2_ = 0;
    std::vector<qd_context> contexts_;
    std::vector<std::pair<qd_context, void *>> host_blocks_;
    std::vector<std::unique_ptr<DeviceGate>> gates_;
};

Want want(uint32_t kind, qd_context ctx, qd_stream stream, qd_stream other, uint64_t block,
          uint64_t bytes, uint64_t offset, std::string op, std::string other_op) {
    Want w;
    w.kind = kind;
    w.context = ctx;
    w.stream = stream;
    w.other_stream = other;
    w.allocation = block;
    w.bytes = bytes;
    w.offset = offset;
    w.operation = std::move(op);
    w.other_operation = std::move(other_op);
    return w;
}

Want race(qd_context ctx, qd_stream stream, qd_stream other, uint64_t block, uint64_t offset,
          std::string op, std::string other_op, uint64_t bytes = 256) {
    return want(QD_HAZARD_RACE, ctx, stream, other, block, bytes, offset, std::move(op),
                std::move(other_op));
}

void open_gate(void *gate) { static_cast<DeviceGate *>(gate)->open(); }

// =============================================================================================
// Planted hazards: each reported exactly once, as expected
// =============================================================================================

// A kernel writes on A; a memset on B overlaps it with no ordering.
void hazard_WriteWrite_KernelOnA_MemsetOnB(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 1));
    c.ran(a);
    ASSERT_QD_OK(qd_memset_async(b, x + 16, 0xff, 4));
    // The kernel's access runs from its pointer to the block's end: they share byte 16 on.
    c.expect(race(c.ctx, b, a, x, 16, kMemsetW, kWrite));
}

// A write on A, then a read of it on B with no ordering.
void hazard_ReadAfterWrite_AcrossStreams(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 7));
    c.ran(a);
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 8u);
    c.expect(race(c.ctx, b, a, x, 0, kRead, kWrite));
}

// A read on A, then a write of the same bytes on B with no ordering.
void hazard_WriteAfterRead_AcrossStreams(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_add_value(a, c.k->add_value(), y, x, 1));
    c.ran(a);
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 4));
    EXPECT_EQ(c.peek(y), 1u);
    c.expect(race(c.ctx, b, a, x, 0, kMemsetW, kRead));
}

// The earlier access is a kernel whose parameter is read-write (undeclared): the report says so.
void hazard_ReadWriteKernelOnA_CopyOnB_NamedReadWrite(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_add_one(a, c.k->add_one(), x, 4));
    c.ran(a);
    ASSERT_QD_OK(qd_memcpy_async(b, y, x, 16));
    EXPECT_EQ(c.peek(y), 1u);
    c.expect(race(c.ctx, b, a, x, 0, kMemcpyR, "kernel 'qd_test_add_one' (read-write)"));
}

// A memset on A, a copy out of the same bytes on B.
void hazard_MemcpyVsMemset(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(qd_memset_async(a, x, 7, 64));
    c.ran(a);
    ASSERT_QD_OK(qd_memcpy_async(b, y, x, 64));
    EXPECT_EQ(c.peek(y), 0x07070707u);
    c.expect(race(c.ctx, b, a, x, 0, kMemcpyR, kMemsetW));
}

// Two memsets of overlapping ranges: the report names the first byte both touch.
void hazard_OverlappingMemsets_OffsetOfTheFirstSharedByte(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(qd_memset_async(a, x + 64, 1, 64));
    c.ran(a);
    ASSERT_QD_OK(qd_memset_async(b, x + 96, 2, 64));
    c.expect(race(c.ctx, b, a, x, 96, kMemsetW, kMemsetW));
}

// A free on A while a reader on B is not ordered before it.
void hazard_FreeInUse_ReaderOnB_FreeOnA(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    c.ran(b);
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    EXPECT_EQ(c.peek(y), 1u);
    c.expect(want(QD_HAZARD_FREE_IN_USE, c.ctx, a, b, x, 256, 0, "free", kRead));
}

// A kernel on the freeing stream itself, after the free.
void hazard_UseAfterFree_SameStream(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream();
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    ASSERT_QD_OK(launch_add_value(a, c.k->add_value(), y, x + 8, 1));
    c.expect(want(QD_HAZARD_USE_AFTER_FREE, c.ctx, a, a, x, 256, 8, kRead, "free"));
}

// A use on another stream, ordered after the free by an event: still a use after free.
void hazard_UseAfterFree_OtherStreamOrderedAfterTheFree(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(qd_memset_async(b, x + 32, 0, 4));
    c.expect(want(QD_HAZARD_USE_AFTER_FREE, c.ctx, b, a, x, 256, 32, kMemsetW, "free"));
    EXPECT_QD_OK(qd_event_destroy(e));
}

// The only ordering is a host function on A that opens B's device gate: real for the program
// (B reads the value A wrote), none for the model (host callbacks order nothing).
void hazard_RaceBehindAHostFunction(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    DeviceGate *gate = c.gate();
    ASSERT_QD_OK(gate->enqueue(b));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    ASSERT_QD_OK(qd_launch_host_fn(a, &open_gate, gate));
    EXPECT_EQ(c.peek(y), 6u);
    EXPECT_FALSE(gate->timed_out());
    c.expect(race(c.ctx, a, b, x, 0, kWrite, kRead));
}

// A stream leased from the pool writes; an owned stream reads with no ordering. The report
// names the lease's handle as it was then.
void hazard_ThroughAPooledLease(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream lease = 0, b = c.stream();
    ASSERT_QD_OK(qd_stream_acquire(c.ctx, &lease));
    ASSERT_QD_OK(launch_write_value(lease, c.k->write_value(), x, 3));
    c.ran(lease);
    ASSERT_QD_OK(qd_stream_release(lease));
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 4));
    c.expect(race(c.ctx, b, lease, x, 0, kMemsetW, kWrite));
}

// Two groups of one qd_launch_parallel: group 1 overwrites what group 0 reads. A signal in
// device work makes the program correct; the model sees two unordered pooled streams.
void hazard_BetweenTasksOfAParallelLaunch(Corpus &c) {
    const uint64_t x = c.block(), y = c.block(), words = c.signal_words();
    qd_stream s = c.stream();
    qd_task tasks[4];
    TaskArgs args[4];
    task_add_value(&tasks[0], &args[0], 0, c.k->add_value(), y, x, 1);
    task_wait_flag(&tasks[1], &args[1], 0, c.k->wait_flag(), words, 0);
    task_wait_flag(&tasks[2], &args[2], 1, c.k->wait_flag(), words + 4, kSignalTimeoutUs);
    task_write_value(&tasks[3], &args[3], 1, c.k->write_value(), x, 9);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 4));
    EXPECT_EQ(c.peek(y), 1u);
    EXPECT_EQ(c.peek(x), 9u);
    EXPECT_TRUE(Corpus::signal_held(words));
    c.expect(race(c.ctx, 0, 0, x, 0, kWrite, kRead));  // both on pooled streams
}

// A graph's replay writes on s; B reads with no ordering after the replay.
void hazard_AfterAGraphReplay(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream s = c.stream(), b = c.stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, c.k->write_value(), x, 4));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    c.ran(s);
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 5u);
    c.expect(race(c.ctx, b, s, x, 0, kRead, kWrite));
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// Two branches of a graph (a fork's children): one overwrites what the other reads. Ordered
// for the program by a signal in device work, not for the model.
void hazard_BetweenTwoBranchesOfAGraph(Corpus &c) {
    const uint64_t x = c.block(), y = c.block(), words = c.signal_words();
    qd_stream s = c.stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(launch_wait_flag(kids[0], c.k->wait_flag(), words, 0));
    ASSERT_QD_OK(launch_wait_flag(kids[1], c.k->wait_flag(), words + 4, kSignalTimeoutUs));
    ASSERT_QD_OK(launch_write_value(kids[1], c.k->write_value(), x, 9));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    EXPECT_TRUE(c.seen().empty()) << "a capture runs nothing";
    ASSERT_QD_OK(qd_graph_launch(g, s));
    EXPECT_EQ(c.peek(y), 1u);
    EXPECT_EQ(c.peek(x), 9u);
    EXPECT_TRUE(Corpus::signal_held(words));
    c.expect(race(c.ctx, 0, 0, x, 0, kWrite, kRead));  // both on pooled streams of the replay
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// B reads first and waits on A's event only afterwards.
void hazard_AWaitThatCameTooLate(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 2));
    ASSERT_QD_OK(qd_event_record(a, e));
    c.ran(a);
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    EXPECT_EQ(c.peek(y), 3u);
    c.expect(race(c.ctx, b, a, x, 0, kRead, kWrite));
    EXPECT_QD_OK(qd_event_destroy(e));
}

// B waits on a record A made before its write.
void hazard_AWaitOnARecordMadeBeforeTheWrite(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 2));
    c.ran(a);
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 3u);
    c.expect(race(c.ctx, b, a, x, 0, kRead, kWrite));
    EXPECT_QD_OK(qd_event_destroy(e));
}

// B waits on an event of a third stream, not of the writer.
void hazard_AWaitOnTheWrongStreamsEvent(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream(), third = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 2));
    ASSERT_QD_OK(qd_event_record(third, e));
    c.ran(a);
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 3u);
    c.expect(race(c.ctx, b, a, x, 0, kRead, kWrite));
    EXPECT_QD_OK(qd_event_destroy(e));
}

// qd_host_free of a block a kernel still uses, with no synchronization.
void hazard_HostFreeInUse(Corpus &c) {
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(c.ctx, 64, &h));
    qd_stream a = c.stream();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), (uint64_t)(uintptr_t)h, 1));
    c.ran(a);
    ASSERT_QD_OK(qd_host_free(c.ctx, h));
    c.expect(want(QD_HAZARD_FREE_IN_USE, c.ctx, 0, a, (uint64_t)(uintptr_t)h, 64, 0, "qd_host_free",
                  kWrite));
}

// A kernel uses a host block after qd_host_free.
void hazard_UseAfterHostFree(Corpus &c) {
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(c.ctx, 64, &h));
    qd_stream a = c.stream();
    ASSERT_QD_OK(qd_host_free(c.ctx, h));
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), (uint64_t)(uintptr_t)h + 8, 1));
    c.expect(want(QD_HAZARD_USE_AFTER_FREE, c.ctx, a, 0, (uint64_t)(uintptr_t)h, 64, 8, kWrite,
                  "qd_host_free"));
}

// A block allocated on A is used on B before B is ordered after the allocation; the report
// names the allocating (owned) stream.
void hazard_UseOnAnotherStreamBeforeItsAllocation(Corpus &c) {
    qd_stream a = c.stream(), b = c.stream();
    uint64_t x = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(a, 64, &x));
    ASSERT_QD_OK(qd_memset_async(b, x, 0, 64));
    c.expect(race(c.ctx, b, a, x, 0, kMemsetW, "alloc (write)", 64));
    c.settle();
    ASSERT_QD_OK(qd_mem_free_async(a, x));
}

// A fork's child writes; the parent touches the block before joining it.
void hazard_ForkChildVsParentBeforeTheJoin(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream p = c.stream();
    qd_stream kid = 0;
    ASSERT_QD_OK(qd_stream_fork(p, 1, &kid));
    ASSERT_QD_OK(launch_write_value(kid, c.k->write_value(), x, 1));
    c.ran(kid);
    ASSERT_QD_OK(qd_memset_async(p, x, 0, 4));
    c.expect(race(c.ctx, p, kid, x, 0, kMemsetW, kWrite));
    ASSERT_QD_OK(qd_stream_join(p, &kid, 1));
}

// Two children of one fork: one overwrites what the other read.
void hazard_BetweenTwoForkChildren(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream p = c.stream();
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(p, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], c.k->add_value(), y, x, 1));
    c.ran(kids[0]);
    ASSERT_QD_OK(launch_write_value(kids[1], c.k->write_value(), x, 9));
    c.expect(race(c.ctx, kids[1], kids[0], x, 0, kWrite, kRead));
    ASSERT_QD_OK(qd_stream_join(p, kids, 2));
    EXPECT_EQ(c.peek(y), 1u);
}

// The join leaves out the child that wrote; the parent reads.
void hazard_AJoinThatLeavesTheWriterOut(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream p = c.stream();
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(p, 2, kids));
    ASSERT_QD_OK(launch_write_value(kids[1], c.k->write_value(), x, 4));
    ASSERT_QD_OK(qd_stream_join(p, &kids[0], 1));
    c.ran(kids[1]);
    ASSERT_QD_OK(launch_add_value(p, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 5u);
    c.expect(race(c.ctx, p, kids[1], x, 0, kRead, kWrite));
    ASSERT_QD_OK(qd_stream_join(p, &kids[1], 1));
}

// Two threads enqueue on two streams, one after the other, with no event between them.
void hazard_TwoThreadsWithoutAnEvent(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream a = c.stream(), b = c.stream();
    std::thread first([&] {
        EXPECT_QD_OK(launch_write_value(a, c.k->write_value(), x, 1));
        c.ran(a);
    });
    first.join();
    std::thread second([&] { EXPECT_QD_OK(qd_memset_async(b, x + 4, 0, 4)); });
    second.join();
    c.expect(race(c.ctx, b, a, x, 4, kMemsetW, kWrite));
}

// A kernel declared QD_PARAM_PARTITIONED is not checked against its own launches, but every
// other operation is still checked against it.
void hazard_PartitionedLaunchVsAnotherOperation(Corpus &c) {
    const uint64_t x = c.block();
    ASSERT_QD_OK(qd_kernel_set_param_access(c.k->write_value(), 0, QD_PARAM_PARTITIONED));
    qd_stream s = c.stream(), b = c.stream();
    qd_task tasks[2];
    TaskArgs args[2];
    task_write_value(&tasks[0], &args[0], 0, c.k->write_value(), x, 1);
    task_write_value(&tasks[1], &args[1], 1, c.k->write_value(), x + 64, 2);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 2));
    c.ran(s);
    ASSERT_QD_OK(qd_memset_async(b, x + 64, 0, 4));
    // Both tasks conflict; the report names the first (its access starts at 0).
    c.expect(race(c.ctx, b, 0, x, 64, kMemsetW, "kernel 'qd_test_write_value' (read-write)"));
}

// The tasks of a parallel launch read a block; another stream frees it unordered.
void hazard_FreeWhileAParallelLaunchReads(Corpus &c) {
    const uint64_t x = c.block(), y0 = c.block(), y1 = c.block();
    qd_stream s = c.stream(), a = c.stream();
    qd_task tasks[2];
    TaskArgs args[2];
    task_add_value(&tasks[0], &args[0], 0, c.k->add_value(), y0, x, 1);
    task_add_value(&tasks[1], &args[1], 1, c.k->add_value(), y1, x, 2);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 2));
    c.ran(s);
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    EXPECT_EQ(c.peek(y1), 2u);
    c.expect(want(QD_HAZARD_FREE_IN_USE, c.ctx, a, 0, x, 256, 0, "free", kRead));
}

// A synchronize of another context orders nothing of this one.
void hazard_SynchronizeOfTheOtherContextOrdersNothingHere(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 2));
    c.ran(a);
    ASSERT_QD_OK(qd_context_synchronize(other));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 3u);
    c.expect(race(c.ctx, b, a, x, 0, kRead, kWrite));
}

// Two contexts: a peer copy on the other context's stream reads a block this context writes.
void hazard_AcrossContexts_PeerCopyReadsUnordered(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), z = c.block(other);
    qd_stream a = c.stream(), s2 = c.stream(other);
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    c.ran(a);
    ASSERT_QD_OK(qd_memcpy_peer_async(s2, z, other, x, c.ctx, 64));
    EXPECT_EQ(c.peek(z, other), 5u);
    c.expect(race(other, s2, a, x, 0, kMemcpyR, kWrite));
}

// Two contexts: qd_memcpy_async on the other context's stream reads this context's block.
void hazard_AcrossContexts_CopyOnTheOtherContextsStream(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), z = c.block(other);
    qd_stream a = c.stream(), s2 = c.stream(other);
    ASSERT_QD_OK(qd_memset_async(a, x, 3, 64));
    c.ran(a);
    ASSERT_QD_OK(qd_memcpy_async(s2, z, x, 64));
    EXPECT_EQ(c.peek(z, other), 0x03030303u);
    c.expect(race(other, s2, a, x, 0, kMemcpyR, kMemsetW));
}

// Two contexts: this context's stream copies out of a block the other context writes.
void hazard_AcrossContexts_CopyHereOfABlockTheOtherWrites(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t z = c.block(other), y = c.block();
    qd_stream a = c.stream(), s2 = c.stream(other);
    ASSERT_QD_OK(qd_memset_async(s2, z, 6, 64));
    c.ran(s2);
    ASSERT_QD_OK(qd_memcpy_async(a, y, z, 64));
    EXPECT_EQ(c.peek(y), 0x06060606u);
    c.expect(race(c.ctx, a, s2, z, 0, kMemcpyR, kMemsetW));
}

// Two contexts: this context frees a block while the other context's stream copies from it.
void hazard_AcrossContexts_FreeWhileTheOtherCopiesFromIt(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), z = c.block(other);
    qd_stream a = c.stream(), s2 = c.stream(other);
    ASSERT_QD_OK(qd_memcpy_async(s2, z, x, 64));
    c.ran(s2);
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    c.expect(want(QD_HAZARD_FREE_IN_USE, c.ctx, a, s2, x, 256, 0, "free", kMemcpyR));
}

// Two contexts: a peer copy writes into this context's block while a kernel here reads it.
void hazard_AcrossContexts_PeerCopyWritesWhileAKernelReads(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), y = c.block(), z = c.block(other);
    qd_stream a = c.stream(), s2 = c.stream(other);
    ASSERT_QD_OK(launch_add_value(a, c.k->add_value(), y, x, 1));
    c.ran(a);
    ASSERT_QD_OK(qd_memcpy_peer_async(s2, x, c.ctx, z, other, 64));
    EXPECT_EQ(c.peek(y), 1u);
    c.expect(race(other, s2, a, x, 0, kMemcpyW, kRead));
}

// =============================================================================================
// Correct shapes: no report, and the values prove the ordering
// =============================================================================================

void shape_EventChain_AToB(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(qd_mem_free_async(b, x));
    EXPECT_EQ(c.peek(y), 6u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

void shape_EventRecordedTwice_TheWaitSeesTheLatest(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 1));
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 2));
    ASSERT_QD_OK(qd_event_record(a, e));
    ASSERT_QD_OK(qd_stream_wait_event(b, e));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 10));
    EXPECT_EQ(c.peek(y), 12u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

// a -> a stream of the other context -> b, by events only.
void shape_EventChainThroughAnotherContext(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream(), s2 = c.stream(other);
    qd_event e1 = c.event(), e2 = c.event(other);
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(s2, e1));
    ASSERT_QD_OK(qd_event_record(s2, e2));
    ASSERT_QD_OK(qd_stream_wait_event(b, e2));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(qd_mem_free_async(b, x));
    EXPECT_EQ(c.peek(y), 6u);
    EXPECT_QD_OK(qd_event_destroy(e1));
    EXPECT_QD_OK(qd_event_destroy(e2));
}

// a -> a stream of the other context, then the host learns that stream's clock in one of the
// ways qd.h lists, then b (of this context) reads.
enum class HostSync { Stream, Event, Context, StreamQuery, EventQuery };

// Polls qd_event_query until it finds the record done (bounded): the host learns its clock.
qd_status query_until_done(qd_event e) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    qd_status st;
    while ((st = qd_event_query(e)) == QD_NOT_READY && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    return st;
}

void through_other_then_host(Corpus &c, HostSync how) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream(), s2 = c.stream(other);
    qd_event e1 = c.event(), e2 = c.event(other);
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(s2, e1));
    ASSERT_QD_OK(qd_event_record(s2, e2));
    switch (how) {
    case HostSync::Stream: ASSERT_QD_OK(qd_stream_synchronize(s2)); break;
    case HostSync::Event: ASSERT_QD_OK(qd_event_synchronize(e2)); break;
    case HostSync::Context: ASSERT_QD_OK(qd_context_synchronize(other)); break;
    case HostSync::StreamQuery: ASSERT_TRUE(wait_idle(s2)); break;
    case HostSync::EventQuery: ASSERT_QD_OK(query_until_done(e2)); break;
    }
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    EXPECT_EQ(c.peek(y), 6u);
    EXPECT_QD_OK(qd_event_destroy(e1));
    EXPECT_QD_OK(qd_event_destroy(e2));
}

void shape_ThroughAnotherContext_ThenItsStreamSynchronize(Corpus &c) {
    through_other_then_host(c, HostSync::Stream);
}
void shape_ThroughAnotherContext_ThenItsEventSynchronize(Corpus &c) {
    through_other_then_host(c, HostSync::Event);
}
void shape_ThroughAnotherContext_ThenItsContextSynchronize(Corpus &c) {
    through_other_then_host(c, HostSync::Context);
}
void shape_ThroughAnotherContext_ThenAQueryFoundItsStreamDone(Corpus &c) {
    through_other_then_host(c, HostSync::StreamQuery);
}
void shape_ThroughAnotherContext_ThenAQueryFoundItsEventDone(Corpus &c) {
    through_other_then_host(c, HostSync::EventQuery);
}

// a writes, the host learns it (one of qd.h's ways, on this context), then b reads.
void here_then_host(Corpus &c, HostSync how) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    ASSERT_QD_OK(qd_event_record(a, e));
    switch (how) {
    case HostSync::Stream: ASSERT_QD_OK(qd_stream_synchronize(a)); break;
    case HostSync::Event: ASSERT_QD_OK(qd_event_synchronize(e)); break;
    case HostSync::Context: ASSERT_QD_OK(qd_context_synchronize(c.ctx)); break;
    case HostSync::StreamQuery: ASSERT_TRUE(wait_idle(a)); break;
    case HostSync::EventQuery: ASSERT_QD_OK(query_until_done(e)); break;
    }
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(qd_mem_free_async(b, x));
    EXPECT_EQ(c.peek(y), 6u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

void shape_HostSynchronize_Stream(Corpus &c) { here_then_host(c, HostSync::Stream); }
void shape_HostSynchronize_Event(Corpus &c) { here_then_host(c, HostSync::Event); }
void shape_HostSynchronize_Context(Corpus &c) { here_then_host(c, HostSync::Context); }
void shape_HostQueryFoundTheStreamDone(Corpus &c) { here_then_host(c, HostSync::StreamQuery); }
void shape_HostQueryFoundTheEventDone(Corpus &c) { here_then_host(c, HostSync::EventQuery); }

void shape_ForkJoin(Corpus &c) {
    const uint64_t x = c.block(), y0 = c.block(), y1 = c.block();
    qd_stream p = c.stream();
    ASSERT_QD_OK(launch_write_value(p, c.k->write_value(), x, 10));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(p, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], c.k->add_value(), y0, x, 1));
    ASSERT_QD_OK(launch_add_value(kids[1], c.k->add_value(), y1, x, 2));
    ASSERT_QD_OK(qd_stream_join(p, kids, 2));
    ASSERT_QD_OK(launch_write_value(p, c.k->write_value(), x, 0));
    ASSERT_QD_OK(launch_add_value(p, c.k->add_value(), x, y1, 100));
    EXPECT_EQ(c.peek(y0), 11u);
    EXPECT_EQ(c.peek(x), 112u);
}

// Each group writes its own word of one block through a QD_PARAM_PARTITIONED parameter.
void shape_PartitionedParallelLaunch(Corpus &c) {
    const uint64_t x = c.block();
    ASSERT_QD_OK(qd_kernel_set_param_access(c.k->write_value(), 0, QD_PARAM_PARTITIONED));
    qd_stream s = c.stream();
    constexpr uint32_t kGroups = 4;
    qd_task tasks[kGroups];
    TaskArgs args[kGroups];
    for (uint32_t g = 0; g < kGroups; ++g)
        task_write_value(&tasks[g], &args[g], g, c.k->write_value(), x + 16 * g, 100 + g);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, kGroups));
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, kGroups));  // again, after the first
    uint32_t got[kGroups * 4] = {};
    ASSERT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)got, x, sizeof got));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    for (uint32_t g = 0; g < kGroups; ++g) EXPECT_EQ(got[4 * g], 100 + g) << "group " << g;
}

void shape_ParallelLaunch_ReadOnlyInput_ThenTheParentUsesTheResults(Corpus &c) {
    const uint64_t x = c.block(), y0 = c.block(), y1 = c.block(), y2 = c.block();
    qd_stream s = c.stream();
    ASSERT_QD_OK(launch_write_value(s, c.k->write_value(), x, 5));
    qd_task tasks[3];
    TaskArgs args[3];
    task_add_value(&tasks[0], &args[0], 0, c.k->add_value(), y0, x, 1);
    task_add_value(&tasks[1], &args[1], 1, c.k->add_value(), y1, x, 2);
    task_add_value(&tasks[2], &args[2], 2, c.k->add_value(), y2, x, 3);
    ASSERT_QD_OK(qd_launch_parallel(s, tasks, 3));
    ASSERT_QD_OK(launch_write_value(s, c.k->write_value(), x, 0));
    ASSERT_QD_OK(launch_add_value(s, c.k->add_value(), y0, y2, 10));
    EXPECT_EQ(c.peek(y0), 18u);
    EXPECT_EQ(c.peek(y1), 7u);
}

// A graph launched on s after a wait on A's event, and B waits on an event after the launch.
void shape_GraphOrderedByEvents(Corpus &c) {
    const uint64_t x = c.block(), y = c.block(), z = c.block();
    qd_stream a = c.stream(), s = c.stream(), b = c.stream();
    qd_event before = c.event(), after = c.event();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_add_value(s, c.k->add_value(), y, x, 1));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 3));
    ASSERT_QD_OK(qd_event_record(a, before));
    ASSERT_QD_OK(qd_stream_wait_event(s, before));
    ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(qd_event_record(s, after));
    ASSERT_QD_OK(qd_stream_wait_event(b, after));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), z, y, 10));
    ASSERT_QD_OK(launch_write_value(b, c.k->write_value(), x, 0));
    EXPECT_EQ(c.peek(z), 14u);
    EXPECT_QD_OK(qd_graph_destroy(g));
    EXPECT_QD_OK(qd_event_destroy(before));
    EXPECT_QD_OK(qd_event_destroy(after));
}

// A graph whose two branches (a fork's children) read one block and write their own, replayed
// three times; the stream then uses the results.
void shape_GraphBranchesForkJoin_ReplayedThreeTimes(Corpus &c) {
    const uint64_t x = c.block(), y0 = c.block(), y1 = c.block();
    qd_stream s = c.stream();
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(launch_write_value(s, c.k->write_value(), x, 4));
    qd_stream kids[2];
    ASSERT_QD_OK(qd_stream_fork(s, 2, kids));
    ASSERT_QD_OK(launch_add_value(kids[0], c.k->add_value(), y0, x, 1));
    ASSERT_QD_OK(launch_add_value(kids[1], c.k->add_value(), y1, x, 2));
    ASSERT_QD_OK(qd_stream_join(s, kids, 2));
    qd_graph g = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &g));
    for (int i = 0; i < 3; ++i) ASSERT_QD_OK(qd_graph_launch(g, s));
    ASSERT_QD_OK(launch_add_value(s, c.k->add_value(), y0, y1, 0));
    EXPECT_EQ(c.peek(y0), 6u);
    EXPECT_QD_OK(qd_graph_destroy(g));
}

// A context whose pool has one stream: a lease released with work queued, acquired again, and
// used: the same pooled stream, so the new work runs after the old (qd_stream_acquire).
void shape_PoolOfOne_LeaseReleasedAndAcquiredAgain(Corpus &c) {
    qd_context one = c.context(1);
    ASSERT_NE(one, 0u);
    const uint64_t x = c.block(one), y = c.block(one);
    qd_stream l1 = 0, l2 = 0;
    ASSERT_QD_OK(qd_stream_acquire(one, &l1));
    ASSERT_QD_OK(qd_memset_async(l1, x, 7, 16));
    ASSERT_QD_OK(qd_stream_release(l1));
    ASSERT_QD_OK(qd_stream_acquire(one, &l2));
    ASSERT_QD_OK(qd_memcpy_async(l2, y, x, 16));
    ASSERT_QD_OK(qd_memset_async(l2, x, 0, 16));
    ASSERT_QD_OK(qd_stream_release(l2));
    EXPECT_EQ(c.peek(y, one), 0x07070707u);
}

// The same pool of one: fork and join twice, each child touching the block the last wrote.
void shape_PoolOfOne_ForkJoinTwice(Corpus &c) {
    qd_context one = c.context(1);
    ASSERT_NE(one, 0u);
    const uint64_t x = c.block(one), y = c.block(one);
    qd_stream p = c.stream(one);
    qd_stream kid = 0;
    ASSERT_QD_OK(qd_stream_fork(p, 1, &kid));
    ASSERT_QD_OK(qd_memset_async(kid, x, 1, 16));
    ASSERT_QD_OK(qd_stream_join(p, &kid, 1));
    ASSERT_QD_OK(qd_memcpy_async(p, y, x, 16));
    ASSERT_QD_OK(qd_stream_fork(p, 1, &kid));
    ASSERT_QD_OK(qd_memset_async(kid, x, 2, 16));
    ASSERT_QD_OK(qd_memcpy_async(kid, y + 16, x, 16));
    ASSERT_QD_OK(qd_stream_join(p, &kid, 1));
    ASSERT_QD_OK(qd_memset_async(p, x, 0, 16));
    EXPECT_EQ(c.peek(y, one), 0x01010101u);
    EXPECT_EQ(c.peek(y + 16, one), 0x02020202u);
}

// Two threads: one writes and records, the other waits on that record and reads.
void shape_TwoThreadEnqueue_WithAnEvent(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    Barrier recorded(2);
    std::thread producer([&] {
        EXPECT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
        EXPECT_QD_OK(qd_event_record(a, e));
        recorded.arrive_and_wait();
    });
    std::thread consumer([&] {
        recorded.arrive_and_wait();
        EXPECT_QD_OK(qd_stream_wait_event(b, e));
        EXPECT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 1));
    });
    producer.join();
    consumer.join();
    EXPECT_EQ(c.peek(y), 6u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

// Stream-ordered allocation: allocated on A, used on B after an event, freed on A after B's
// event; three rounds (freed addresses may come back).
void shape_StreamOrderedAllocFreeReuse(Corpus &c) {
    const uint64_t sum = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event ea = c.event(), eb = c.event();
    for (uint32_t i = 0; i < 3; ++i) {
        uint64_t t = 0;
        ASSERT_QD_OK(qd_mem_alloc_async(a, 64, &t));
        ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), t, 10 * (i + 1)));
        ASSERT_QD_OK(qd_event_record(a, ea));
        ASSERT_QD_OK(qd_stream_wait_event(b, ea));
        ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), sum, t, i));
        ASSERT_QD_OK(qd_event_record(b, eb));
        ASSERT_QD_OK(qd_stream_wait_event(a, eb));
        ASSERT_QD_OK(qd_mem_free_async(a, t));
    }
    EXPECT_EQ(c.peek(sum), 32u);  // the last round: 30 + 2
    EXPECT_QD_OK(qd_event_destroy(ea));
    EXPECT_QD_OK(qd_event_destroy(eb));
}

// Write, read, free, all on one stream.
void shape_SameStream_WriteReadFree(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 3));
    ASSERT_QD_OK(launch_add_value(a, c.k->add_value(), y, x, 1));
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    EXPECT_EQ(c.peek(y), 4u);
}

// Two streams set disjoint halves of one block; each then copies within its own half.
void shape_DisjointRangesOnTwoStreams(Corpus &c) {
    const uint64_t x = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(qd_memset_async(a, x, 1, 128));
    ASSERT_QD_OK(qd_memset_async(b, x + 128, 2, 128));
    ASSERT_QD_OK(qd_memcpy_async(a, x + 64, x, 4));
    ASSERT_QD_OK(qd_memcpy_async(b, x + 192, x + 128, 4));
    EXPECT_EQ(c.peek(x + 64), 0x01010101u);
    EXPECT_EQ(c.peek(x + 192), 0x02020202u);
}

// Two streams read one block (declared QD_PARAM_READ) at once.
void shape_TwoReadersOnTwoStreams(Corpus &c) {
    const uint64_t x = c.block(), y0 = c.block(), y1 = c.block();
    qd_stream a = c.stream(), b = c.stream();
    ASSERT_QD_OK(launch_add_value(a, c.k->add_value(), y0, x, 1));
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y1, x, 2));
    ASSERT_QD_OK(qd_memcpy_async(a, y0 + 64, x, 16));
    EXPECT_EQ(c.peek(y0), 1u);
    EXPECT_EQ(c.peek(y1), 2u);
}

// The free waits on an event recorded after the last reader on another stream.
void shape_FreeAfterAnEventFromTheReader(Corpus &c) {
    const uint64_t x = c.block(), y = c.block();
    qd_stream a = c.stream(), b = c.stream();
    qd_event e = c.event();
    ASSERT_QD_OK(launch_add_value(b, c.k->add_value(), y, x, 4));
    ASSERT_QD_OK(qd_event_record(b, e));
    ASSERT_QD_OK(qd_stream_wait_event(a, e));
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    EXPECT_EQ(c.peek(y), 4u);
    EXPECT_QD_OK(qd_event_destroy(e));
}

// A host block used by a kernel, freed after the host synchronized with the stream.
void shape_HostFreeAfterStreamSynchronize(Corpus &c) {
    void *h = nullptr;
    ASSERT_QD_OK(qd_host_alloc(c.ctx, 64, &h));
    qd_stream a = c.stream();
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), (uint64_t)(uintptr_t)h, 9));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    EXPECT_EQ(*static_cast<volatile uint32_t *>(h), 9u);
    ASSERT_QD_OK(qd_host_free(c.ctx, h));
}

// Two contexts: a peer copy on the other context's stream after a wait on this context's
// event, then this context waits on the other's event and frees the source.
void shape_AcrossContexts_PeerCopyOrderedByEvents(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), z = c.block(other);
    qd_stream a = c.stream(), s2 = c.stream(other);
    qd_event e1 = c.event(), e2 = c.event(other);
    ASSERT_QD_OK(launch_write_value(a, c.k->write_value(), x, 5));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(s2, e1));
    ASSERT_QD_OK(qd_memcpy_peer_async(s2, z, other, x, c.ctx, 64));
    ASSERT_QD_OK(qd_event_record(s2, e2));
    ASSERT_QD_OK(qd_stream_wait_event(a, e2));
    ASSERT_QD_OK(qd_mem_free_async(a, x));
    EXPECT_EQ(c.peek(z, other), 5u);
    EXPECT_QD_OK(qd_event_destroy(e1));
    EXPECT_QD_OK(qd_event_destroy(e2));
}

// Two contexts: the other context's stream copies this context's block after an event, and
// this context overwrites it only after waiting for that copy.
void shape_AcrossContexts_CopyOnTheOtherStreamThenOverwriteHere(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t x = c.block(), z = c.block(other);
    qd_stream a = c.stream(), s2 = c.stream(other);
    qd_event e1 = c.event(), e2 = c.event(other);
    ASSERT_QD_OK(qd_memset_async(a, x, 4, 64));
    ASSERT_QD_OK(qd_event_record(a, e1));
    ASSERT_QD_OK(qd_stream_wait_event(s2, e1));
    ASSERT_QD_OK(qd_memcpy_async(s2, z, x, 64));
    ASSERT_QD_OK(qd_event_record(s2, e2));
    ASSERT_QD_OK(qd_stream_wait_event(a, e2));
    ASSERT_QD_OK(qd_memset_async(a, x, 0, 64));
    EXPECT_EQ(c.peek(z, other), 0x04040404u);
    EXPECT_EQ(c.peek(x), 0u);
    EXPECT_QD_OK(qd_event_destroy(e1));
    EXPECT_QD_OK(qd_event_destroy(e2));
}

// Two contexts: the other context writes its block, this context copies it out after a wait
// on the other's event.
void shape_AcrossContexts_CopyHereAfterTheOthersEvent(Corpus &c) {
    qd_context other = c.ctx2();
    ASSERT_NE(other, 0u);
    const uint64_t z = c.block(other), y = c.block();
    qd_stream a = c.stream(), s2 = c.stream(other);
    qd_event e2 = c.event(other);
    ASSERT_QD_OK(qd_memset_async(s2, z, 8, 64));
    ASSERT_QD_OK(qd_event_record(s2, e2));
    ASSERT_QD_OK(qd_stream_wait_event(a, e2));
    ASSERT_QD_OK(qd_memcpy_async(a, y, z, 64));
    EXPECT_EQ(c.peek(y), 0x08080808u);
    EXPECT_QD_OK(qd_event_destroy(e2));
}

// =============================================================================================
// The tables, and the tests that run them
// =============================================================================================

#define QDT_HAZARDS(X)                                                                             \
    X(WriteWrite_KernelOnA_MemsetOnB)                                                              \
    X(ReadAfterWrite_AcrossStreams)                                                                \
    X(WriteAfterRead_AcrossStreams)                                                                \
    X(ReadWriteKernelOnA_CopyOnB_NamedReadWrite)                                                   \
    X(MemcpyVsMemset)                                                                              \
    X(OverlappingMemsets_OffsetOfTheFirstSharedByte)                                               \
    X(FreeInUse_ReaderOnB_FreeOnA)                                                                 \
    X(UseAfterFree_SameStream)                                                                     \
    X(UseAfterFree_OtherStreamOrderedAfterTheFree)                                                 \
    X(RaceBehindAHostFunction)                                                                     \
    X(ThroughAPooledLease)                                                                         \
    X(BetweenTasksOfAParallelLaunch)                                                               \
    X(AfterAGraphReplay)                                                                           \
    X(BetweenTwoBranchesOfAGraph)                                                                  \
    X(AWaitThatCameTooLate)                                                                        \
    X(AWaitOnARecordMadeBeforeTheWrite)                                                            \
    X(AWaitOnTheWrongStreamsEvent)                                                                 \
    X(HostFreeInUse)                                                                               \
    X(UseAfterHostFree)                                                                            \
    X(UseOnAnotherStreamBeforeItsAllocation)                                                       \
    X(ForkChildVsParentBeforeTheJoin)                                                              \
    X(BetweenTwoForkChildren)                                                                      \
    X(AJoinThatLeavesTheWriterOut)                                                                 \
    X(TwoThreadsWithoutAnEvent)                                                                    \
    X(PartitionedLaunchVsAnotherOperation)                                                         \
    X(FreeWhileAParallelLaunchReads)                                                               \
    X(SynchronizeOfTheOtherContextOrdersNothingHere)                                               \
    X(AcrossContexts_PeerCopyReadsUnordered)                                                       \
    X(AcrossContexts_CopyOnTheOtherContextsStream)                                                 \
    X(AcrossContexts_CopyHereOfABlockTheOtherWrites)                                               \
    X(AcrossContexts_FreeWhileTheOtherCopiesFromIt)                                                \
    X(AcrossContexts_PeerCopyWritesWhileAKernelReads)

#define QDT_SHAPES(X)                                                                              \
    X(EventChain_AToB)                                                                             \
    X(EventRecordedTwice_TheWaitSeesTheLatest)                                                     \
    X(EventChainThroughAnotherContext)                                                             \
    X(ThroughAnotherContext_ThenItsStreamSynchronize)                                              \
    X(ThroughAnotherContext_ThenItsEventSynchronize)                                               \
    X(ThroughAnotherContext_ThenItsContextSynchronize)                                             \
    X(ThroughAnotherContext_ThenAQueryFoundItsStreamDone)                                          \
    X(ThroughAnotherContext_ThenAQueryFoundItsEventDone)                                           \
    X(HostSynchronize_Stream)                                                                      \
    X(HostSynchronize_Event)                                                                       \
    X(HostSynchronize_Context)                                                                     \
    X(HostQueryFoundTheStreamDone)                                                                 \
    X(HostQueryFoundTheEventDone)                                                                  \
    X(ForkJoin)                                                                                    \
    X(PartitionedParallelLaunch)                                                                   \
    X(ParallelLaunch_ReadOnlyInput_ThenTheParentUsesTheResults)                                    \
    X(GraphOrderedByEvents)                                                                        \
    X(GraphBranchesForkJoin_ReplayedThreeTimes)                                                    \
    X(PoolOfOne_LeaseReleasedAndAcquiredAgain)                                                     \
    X(PoolOfOne_ForkJoinTwice)                                                                     \
    X(TwoThreadEnqueue_WithAnEvent)                                                                \
    X(StreamOrderedAllocFreeReuse)                                                                 \
    X(SameStream_WriteReadFree)                                                                    \
    X(DisjointRangesOnTwoStreams)                                                                  \
    X(TwoReadersOnTwoStreams)                                                                      \
    X(FreeAfterAnEventFromTheReader)                                                               \
    X(HostFreeAfterStreamSynchronize)                                                              \
    X(AcrossContexts_PeerCopyOrderedByEvents)                                                      \
    X(AcrossContexts_CopyOnTheOtherStreamThenOverwriteHere)                                        \
    X(AcrossContexts_CopyHereAfterTheOthersEvent)

struct Entry {
    const char *name;
    void (*run)(Corpus &);
};

#define QDT_HAZARD_ENTRY_(name) {#name, &hazard_##name},
#define QDT_SHAPE_ENTRY_(name) {#name, &shape_##name},
const Entry kHazards[] = {QDT_HAZARDS(QDT_HAZARD_ENTRY_)};
const Entry kShapes[] = {QDT_SHAPES(QDT_SHAPE_ENTRY_)};
constexpr int kNumHazards = int(sizeof kHazards / sizeof kHazards[0]);
constexpr int kNumShapes = int(sizeof kShapes / sizeof kShapes[0]);
static_assert(kNumHazards >= 20 && kNumShapes >= 20, "the corpus keeps at least 20 of each");

// The tally behind the summary line printed at the end of the run (of the entries this
// process ran: one under the isolating runner, all of them when the binary runs directly).
struct Tally {
    int hazards = 0, reported_as_expected = 0, misses = 0, wrong = 0;
    int shapes = 0, false_positives = 0;
};
Tally &tally() {
    static Tally t;
    return t;
}

class SummaryPrinter : public ::testing::Environment {
  public:
    void TearDown() override {
        const Tally &t = tally();
        if (t.hazards + t.shapes == 0) return;
        std::printf(
            "hazard corpus: %d planted hazards (%d reported once as expected, %d missed, "
            "%d reported otherwise), %d correct shapes (%d with false positives)\n",
            t.hazards, t.reported_as_expected, t.misses, t.wrong, t.shapes, t.false_positives);
    }
};
const auto *const kSummary = ::testing::AddGlobalTestEnvironment(new SummaryPrinter);

using Param = std::tuple<qd_backend, int>;

template <const Entry *kTable>
std::string entry_name(const ::testing::TestParamInfo<Param> &info) {
    return std::string(kTable[std::get<1>(info.param)].name) + "_" +
           backend_name(std::get<0>(info.param));
}

class HazardCorpusBase : public ::testing::TestWithParam<Param> {
  protected:
    void SetUp() override {
        QDT_RACES_ON_PURPOSE();  // plants hazards, and sets the validation flags itself
        std::string why;
        if (!c_.open(std::get<0>(GetParam()), &why)) {
            const bool cpu = std::get<0>(GetParam()) == QD_BACKEND_CPU;
            if (cpu) FAIL() << why;
            GTEST_SKIP() << "no " << backend_name(std::get<0>(GetParam()))
                         << " device or kernels: " << why;
        }
    }
    void TearDown() override { c_.close(); }

    Corpus c_;
};

std::string describe(const HazardReport &r) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "[%s] ctx 0x%" PRIx64 " stream 0x%" PRIx64 " other 0x%" PRIx64 " block 0x%" PRIx64
                  " (%" PRIu64 " bytes) offset %" PRIu64 ": ",
                  kind_label(r.kind), r.context, r.stream, r.other_stream, r.allocation, r.bytes,
                  r.offset);
    return buf + r.operation + " / " + r.other_operation + "\n    " + r.message;
}

// ---------------------------------------------------------------------------------------------

class HazardCorpusPlanted : public HazardCorpusBase {};

TEST_P(HazardCorpusPlanted, ReportedOnce_AsExpected) {
    const Entry &entry = kHazards[std::get<1>(GetParam())];
    ++tally().hazards;
    entry.run(c_);
    c_.settle();
    const std::vector<HazardReport> got = c_.seen();
    ASSERT_EQ(c_.wants.size(), 1u) << entry.name << " must expect exactly one report";
    const Want &w = c_.wants[0];
    if (got.size() != 1) {
        ++(got.empty() ? tally().misses : tally().wrong);
        std::string all;
        for (const HazardReport &r : got) all += "\n  " + describe(r);
        FAIL() << entry.name << ": " << got.size() << " reports, 1 expected:" << all;
    }
    const HazardReport &r = got[0];
    const bool message_ok =
        r.message.rfind(std::string("qd: hazard: ") + kind_label(w.kind) + ": ", 0) == 0;
    EXPECT_EQ(r.kind, w.kind) << kind_label(r.kind) << " reported, " << kind_label(w.kind)
                              << " expected";
    EXPECT_EQ(r.context, w.context) << "the context whose call found it";
    EXPECT_EQ(r.stream, w.stream) << "the operation's stream";
    EXPECT_EQ(r.other_stream, w.other_stream) << "the other operation's stream";
    EXPECT_EQ(r.allocation, w.allocation) << "the block";
    EXPECT_EQ(r.bytes, w.bytes) << "the block's size";
    EXPECT_EQ(r.offset, w.offset) << "the first byte both touch";
    EXPECT_EQ(r.operation, w.operation);
    EXPECT_EQ(r.other_operation, w.other_operation);
    EXPECT_TRUE(message_ok) << r.message;
    EXPECT_EQ(c_.counted(), 1u) << "qd_context_stats.hazards_reported, over the contexts";
    const bool as_expected = r.kind == w.kind && r.context == w.context && r.stream == w.stream &&
                             r.other_stream == w.other_stream && r.allocation == w.allocation &&
                             r.bytes == w.bytes && r.offset == w.offset &&
                             r.operation == w.operation && r.other_operation == w.other_operation &&
                             message_ok;
    ++(as_expected ? tally().reported_as_expected : tally().wrong);
    if (!as_expected) std::printf("  the report: %s\n", describe(r).c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, HazardCorpusPlanted,
                         ::testing::Combine(::testing::Values(QD_BACKEND_CPU, QD_BACKEND_CUDA,
                                                              QD_BACKEND_HIP),
                                            ::testing::Range(0, kNumHazards)),
                         entry_name<kHazards>);

// ---------------------------------------------------------------------------------------------

class HazardCorpusShape : public HazardCorpusBase {};

TEST_P(HazardCorpusShape, ReportsNothing) {
    const Entry &entry = kShapes[std::get<1>(GetParam())];
    ++tally().shapes;
    entry.run(c_);
    c_.settle();
    EXPECT_TRUE(c_.wants.empty()) << "a shape expects no report";
    const std::vector<HazardReport> got = c_.seen();
    std::string all;
    for (const HazardReport &r : got) all += "\n  " + describe(r);
    EXPECT_TRUE(got.empty()) << entry.name << ": false positives:" << all;
    EXPECT_EQ(c_.counted(), got.size());
    if (!got.empty()) ++tally().false_positives;
}

INSTANTIATE_TEST_SUITE_P(Backends, HazardCorpusShape,
                         ::testing::Combine(::testing::Values(QD_BACKEND_CPU, QD_BACKEND_CUDA,
                                                              QD_BACKEND_HIP),
                                            ::testing::Range(0, kNumShapes)),
                         entry_name<kShapes>);

}  // namespace
}  // namespace qdt
