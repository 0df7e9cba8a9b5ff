// White-box tests of the CPU backend, driven through backend.h alone (no handles, no core), so
// a failure here points at the scheduler, streams, markers or tasks rather than at the layers
// above them.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "common/error.h"

namespace qd::backend {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// --- Fixtures and helpers ----------------------------------------------------------------------

Driver &cpu_driver() {
    static std::unique_ptr<Driver> driver = [] {
        std::unique_ptr<Driver> d;
        EXPECT_EQ(make_cpu_driver(&d), QD_SUCCESS);
        return d;
    }();
    return *driver;
}

std::unique_ptr<Context> make_context(uint32_t workers = 2) {
    ContextParams params;
    params.worker_threads = workers;
    std::unique_ptr<Context> ctx;
    EXPECT_EQ(cpu_driver().create_context(params, &ctx), QD_SUCCESS);
    return ctx;
}

std::shared_ptr<Stream> make_stream(Context &ctx, int32_t priority = 0) {
    std::shared_ptr<Stream> s;
    EXPECT_EQ(ctx.create_stream(0, priority, &s), QD_SUCCESS);
    return s;
}

std::shared_ptr<Event> make_event(Context &ctx, bool timing = false) {
    std::shared_ptr<Event> e;
    EXPECT_EQ(ctx.create_event(timing, &e), QD_SUCCESS);
    return e;
}

std::shared_ptr<Kernel> make_kernel(Context &ctx, qd_host_kernel_fn fn, const char *name) {
    std::shared_ptr<Kernel> k;
    EXPECT_EQ(ctx.kernel_from_host_fn(fn, name, &k), QD_SUCCESS);
    return k;
}

constexpr LaunchDims kOneBlock = {{1, 1, 1}, {1, 1, 1}, 0};

// Destroys the context the way the core does: drain, then shut down.
void destroy(std::unique_ptr<Context> &ctx) {
    ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);
    ctx->shutdown();
    ctx.reset();
}

// Polls cond until it holds or the deadline passes; tests use it instead of blocking calls
// wherever a bug would otherwise hang the test rather than fail it.
template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit = 5000ms) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
        if (cond()) return true;
        std::this_thread::sleep_for(100us);
    }
    return cond();
}

// A gate a host callback blocks on until the test opens it: it occupies one worker on purpose.
struct Gate {
    std::atomic<bool> open{false};
    std::atomic<bool> entered{false};
    static void hold(void *p) {
        auto *gate = static_cast<Gate *>(p);
        gate->entered = true;
        while (!gate->open.load()) std::this_thread::sleep_for(50us);
    }
};

void sleep_fn(void *p) {
    std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<uintptr_t>(p)));
}

void *as_user_data(uintptr_t v) { return reinterpret_cast<void *>(v); }

void increment_fn(void *p) {
    static_cast<std::atomic<int> *>(p)->fetch_add(1, std::memory_order_relaxed);
}

// --- Ordering --------------------------------------------------------------------------------

struct OrderLog {
    std::mutex mutex;
    std::vector<int> seen;
};
struct OrderItem {
    OrderLog *log;
    int value;
};
void append_fn(void *p) {
    auto *item = static_cast<OrderItem *>(p);
    std::lock_guard<std::mutex> lock(item->log->mutex);
    item->log->seen.push_back(item->value);
}

TEST(CpuStream, TasksOfOneStreamRunInEnqueueOrder) {
    auto ctx = make_context(4);
    auto s = make_stream(*ctx);
    OrderLog log;
    std::vector<OrderItem> items(5000);
    for (int i = 0; i < 5000; ++i) {
        items[i] = {&log, i};
        ASSERT_EQ(s->host_fn(append_fn, &items[i]), QD_SUCCESS);
    }
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    ASSERT_EQ(log.seen.size(), 5000u);
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(log.seen[i], i);
    EXPECT_EQ(s->query(), QD_SUCCESS);
    destroy(ctx);
}

int32_t store_arg_kernel(const qd_host_kernel_info *, void *const *args) {
    int64_t *out = *static_cast<int64_t *const *>(args[0]);
    *out = *static_cast<const int64_t *>(args[1]);
    return 0;
}

TEST(CpuStream, LaunchCopiesArgumentsBeforeReturning) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto k = make_kernel(*ctx, store_arg_kernel, "store");
    Gate gate;
    ASSERT_EQ(s->host_fn(Gate::hold, &gate), QD_SUCCESS);  // launches queue up behind it
    std::vector<int64_t> results(100, -1);
    for (int i = 0; i < 100; ++i) {
        int64_t *dst = &results[i];
        int64_t value = i * 7;
        qd_arg args[2] = {{&dst, sizeof dst}, {&value, sizeof value}};
        ASSERT_EQ(s->launch(*k, kOneBlock, args, 2), QD_SUCCESS);
        dst = nullptr;  // the caller's storage is overwritten at once
        value = -99;
    }
    gate.open = true;
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(results[i], i * 7);
    destroy(ctx);
}

struct Big {
    unsigned char bytes[3000];
};
int32_t big_arg_kernel(const qd_host_kernel_info *, void *const *args) {
    const auto *big = static_cast<const Big *>(args[0]);
    uint64_t *sum = *static_cast<uint64_t *const *>(args[2]);
    const char c = *static_cast<const char *>(args[1]);
    uint64_t total = static_cast<unsigned char>(c);
    for (unsigned char b : big->bytes) total += b;
    *sum = total;
    // Every argument copy is aligned for its size.
    if (reinterpret_cast<uintptr_t>(args[2]) % alignof(uint64_t) != 0) return 1;
    return 0;
}

TEST(CpuStream, LargeArgumentsAreCopiedAndAligned) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto k = make_kernel(*ctx, big_arg_kernel, "big");
    auto big = std::make_unique<Big>();
    for (size_t i = 0; i < sizeof big->bytes; ++i) big->bytes[i] = static_cast<unsigned char>(i);
    uint64_t expected = 5;
    for (unsigned char b : big->bytes) expected += b;
    uint64_t sum = 0;
    uint64_t *sum_ptr = &sum;
    char c = 5;
    qd_arg args[3] = {{big.get(), sizeof(Big)}, {&c, 1}, {&sum_ptr, sizeof sum_ptr}};
    ASSERT_EQ(s->launch(*k, kOneBlock, args, 3), QD_SUCCESS);
    std::memset(big.get(), 0xff, sizeof(Big));
    c = 0;
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(sum, expected);
    EXPECT_FALSE(ctx->lost_state().lost()) << ctx->lost_state().message();
    destroy(ctx);
}

struct GridLog {
    std::vector<uint32_t> order;  // linear block index as seen, in call order
    bool shared_ok = true;
};
int32_t grid_kernel(const qd_host_kernel_info *info, void *const *args) {
    auto *log = *static_cast<GridLog *const *>(args[0]);
    const uint32_t *g = info->grid_dim;
    log->order.push_back(info->block_idx[0] +
                         g[0] * (info->block_idx[1] + g[1] * info->block_idx[2]));
    if (info->block_dim[0] != 4 || info->block_dim[1] != 2 || info->block_dim[2] != 1)
        log->shared_ok = false;
    if (info->shared_mem_bytes != 256 || info->shared_mem == nullptr) {
        log->shared_ok = false;
        return 0;
    }
    auto *bytes = static_cast<unsigned char *>(info->shared_mem);
    for (uint32_t i = 0; i < 256; ++i) {
        if (bytes[i] != 0) log->shared_ok = false;  // zeroed for every block
        bytes[i] = 0xab;
    }
    return 0;
}

TEST(CpuStream, LaunchCallsEveryBlockInRowMajorOrderWithZeroedSharedMemory) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto k = make_kernel(*ctx, grid_kernel, "grid");
    GridLog log;
    GridLog *ptr = &log;
    qd_arg arg = {&ptr, sizeof ptr};
    LaunchDims dims = {{3, 2, 2}, {4, 2, 1}, 256};
    ASSERT_EQ(s->launch(*k, dims, &arg, 1), QD_SUCCESS);
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    ASSERT_EQ(log.order.size(), 12u);
    for (uint32_t i = 0; i < 12; ++i) EXPECT_EQ(log.order[i], i);
    EXPECT_TRUE(log.shared_ok);
    destroy(ctx);
}

int32_t null_shared_kernel(const qd_host_kernel_info *info, void *const *) {
    return info->shared_mem == nullptr && info->shared_mem_bytes == 0 ? 0 : 1;
}

TEST(CpuStream, SharedMemoryIsNullWhenNoneRequested) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto k = make_kernel(*ctx, null_shared_kernel, "noshared");
    ASSERT_EQ(s->launch(*k, kOneBlock, nullptr, 0), QD_SUCCESS);
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_FALSE(ctx->lost_state().lost()) << ctx->lost_state().message();
    destroy(ctx);
}

// --- Events and cross-stream waits -------------------------------------------------------------

struct Handoff {
    std::atomic<int> produced{0};
    std::atomic<int> consumed_seen{-1};
    int trial = 0;
};
void produce_fn(void *p) {
    auto *h = static_cast<Handoff *>(p);
    h->produced.store(h->trial, std::memory_order_relaxed);  // the wait must order this
}
void consume_fn(void *p) {
    auto *h = static_cast<Handoff *>(p);
    h->consumed_seen.store(h->produced.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

TEST(CpuEvent, CrossStreamWaitOrdersConsumerAfterDelayedProducer) {
    auto ctx = make_context(3);
    auto producer = make_stream(*ctx);
    auto consumer = make_stream(*ctx);
    auto ev = make_event(*ctx);
    std::mt19937 rng(42);
    int wrong = 0;
    for (int trial = 1; trial <= 200; ++trial) {
        Handoff h;
        h.trial = trial;
        ASSERT_EQ(producer->host_fn(sleep_fn, as_user_data(rng() % 300)), QD_SUCCESS);
        ASSERT_EQ(producer->host_fn(produce_fn, &h), QD_SUCCESS);
        ASSERT_EQ(producer->record(*ev), QD_SUCCESS);
        ASSERT_EQ(consumer->wait(*ev), QD_SUCCESS);
        ASSERT_EQ(consumer->host_fn(consume_fn, &h), QD_SUCCESS);
        ASSERT_EQ(consumer->synchronize(), QD_SUCCESS);
        if (h.consumed_seen.load() != trial) ++wrong;
        ASSERT_EQ(producer->synchronize(), QD_SUCCESS);
    }
    EXPECT_EQ(wrong, 0);
    destroy(ctx);
}

TEST(CpuEvent, WaitParksOnlyTheStreamNotAWorker) {
    // Two workers. One is held by a gate on stream `held`; an event recorded behind the gate is
    // pending. Stream `waiter` waits on it. If the wait blocked a worker, no worker would be left
    // for stream `free`.
    auto ctx = make_context(2);
    auto held = make_stream(*ctx);
    auto waiter = make_stream(*ctx);
    auto free_stream = make_stream(*ctx);
    auto ev = make_event(*ctx);
    Gate gate;
    ASSERT_EQ(held->host_fn(Gate::hold, &gate), QD_SUCCESS);
    ASSERT_EQ(held->record(*ev), QD_SUCCESS);
    ASSERT_TRUE(eventually([&] { return gate.entered.load(); }));

    ASSERT_EQ(waiter->wait(*ev), QD_SUCCESS);
    std::atomic<int> after_wait{0};
    ASSERT_EQ(waiter->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &after_wait),
              QD_SUCCESS);

    std::atomic<int> progressed{0};
    for (int i = 0; i < 100; ++i)
        ASSERT_EQ(free_stream->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); },
                                       &progressed),
                  QD_SUCCESS);
    EXPECT_TRUE(eventually([&] { return progressed.load() == 100; }));
    EXPECT_EQ(free_stream->query(), QD_SUCCESS);
    EXPECT_EQ(after_wait.load(), 0);
    EXPECT_EQ(waiter->query(), QD_NOT_READY);
    EXPECT_EQ(ev->query(), QD_NOT_READY);

    gate.open = true;
    ASSERT_EQ(waiter->synchronize(), QD_SUCCESS);
    EXPECT_EQ(after_wait.load(), 1);
    EXPECT_EQ(ev->query(), QD_SUCCESS);
    destroy(ctx);
}

TEST(CpuEvent, WaitCapturesTheRecordCurrentAtTheCall) {
    auto ctx = make_context(2);
    auto a = make_stream(*ctx);
    auto b = make_stream(*ctx);
    auto c = make_stream(*ctx);
    auto ev = make_event(*ctx);
    Gate first;
    Gate second;
    ASSERT_EQ(a->host_fn(Gate::hold, &first), QD_SUCCESS);
    ASSERT_EQ(a->record(*ev), QD_SUCCESS);
    ASSERT_EQ(b->wait(*ev), QD_SUCCESS);  // waits for the record behind `first`
    std::atomic<int> ran{0};
    ASSERT_EQ(b->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &ran), QD_SUCCESS);
    // Re-record behind a second gate on another stream: b must not be affected.
    ASSERT_EQ(c->host_fn(Gate::hold, &second), QD_SUCCESS);
    ASSERT_EQ(c->record(*ev), QD_SUCCESS);
    first.open = true;
    EXPECT_TRUE(eventually([&] { return ran.load() == 1; }));
    EXPECT_EQ(ev->query(), QD_NOT_READY);  // query follows the latest record
    second.open = true;
    ASSERT_EQ(ev->synchronize(), QD_SUCCESS);
    EXPECT_EQ(ev->query(), QD_SUCCESS);
    destroy(ctx);
}

TEST(CpuEvent, RecordOnIdleStreamCompletesAtOnce) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto ev = make_event(*ctx);
    EXPECT_FALSE(ev->recorded());
    EXPECT_EQ(ev->query(), QD_SUCCESS);        // never recorded
    EXPECT_EQ(ev->synchronize(), QD_SUCCESS);  // returns at once
    ASSERT_EQ(s->record(*ev), QD_SUCCESS);
    EXPECT_TRUE(ev->recorded());
    EXPECT_EQ(ev->query(), QD_SUCCESS);
    EXPECT_EQ(s->query(), QD_SUCCESS);  // nothing was queued for it
    // A wait on a completed record queues nothing either.
    auto other = make_stream(*ctx);
    ASSERT_EQ(other->wait(*ev), QD_SUCCESS);
    EXPECT_EQ(other->query(), QD_SUCCESS);
    destroy(ctx);
}

TEST(CpuEvent, ElapsedTimeCoversASleepTask) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto start = make_event(*ctx, true);
    auto end = make_event(*ctx, true);
    ASSERT_EQ(s->record(*start), QD_SUCCESS);
    ASSERT_EQ(s->host_fn(sleep_fn, as_user_data(5000)), QD_SUCCESS);
    ASSERT_EQ(s->record(*end), QD_SUCCESS);
    float ms = -1;
    const qd_status early = ctx->elapsed_ms(*start, *end, &ms);
    EXPECT_TRUE(early == QD_NOT_READY || early == QD_SUCCESS);
    ASSERT_EQ(end->synchronize(), QD_SUCCESS);
    ASSERT_EQ(ctx->elapsed_ms(*start, *end, &ms), QD_SUCCESS);
    EXPECT_GE(ms, 4.9f);
    EXPECT_LT(ms, 1000.0f);
    float back = 0;
    ASSERT_EQ(ctx->elapsed_ms(*end, *start, &back), QD_SUCCESS);
    EXPECT_FLOAT_EQ(back, -ms);
    destroy(ctx);
}

TEST(CpuEvent, ElapsedIsNotReadyWhileARecordIsPending) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto start = make_event(*ctx, true);
    auto end = make_event(*ctx, true);
    Gate gate;
    ASSERT_EQ(s->record(*start), QD_SUCCESS);
    ASSERT_EQ(s->host_fn(Gate::hold, &gate), QD_SUCCESS);
    ASSERT_EQ(s->record(*end), QD_SUCCESS);
    float ms = 123;
    EXPECT_EQ(ctx->elapsed_ms(*start, *end, &ms), QD_NOT_READY);
    EXPECT_EQ(ms, 123);
    gate.open = true;
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(ctx->elapsed_ms(*start, *end, &ms), QD_SUCCESS);
    destroy(ctx);
}

// --- Lifetime ------------------------------------------------------------------------------

TEST(CpuLifetime, DroppingStreamAndEventWithPendingWorkReturnsAtOnceAndWorkCompletes) {
    auto ctx = make_context();
    std::atomic<int> done{0};
    auto s = make_stream(*ctx);
    auto ev = make_event(*ctx);
    auto later = make_stream(*ctx);
    ASSERT_EQ(s->host_fn(sleep_fn, as_user_data(20000)), QD_SUCCESS);
    for (int i = 0; i < 10; ++i)
        ASSERT_EQ(s->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &done),
                  QD_SUCCESS);
    ASSERT_EQ(s->record(*ev), QD_SUCCESS);
    ASSERT_EQ(later->wait(*ev), QD_SUCCESS);
    ASSERT_EQ(later->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &done),
              QD_SUCCESS);
    const auto t0 = Clock::now();
    s.reset();
    ev.reset();
    later.reset();
    EXPECT_LT(Clock::now() - t0, 10ms);
    EXPECT_LT(done.load(), 11);
    ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);  // covers streams no one references any more
    EXPECT_EQ(done.load(), 11);
    destroy(ctx);
}

TEST(CpuLifetime, QueuedLaunchKeepsItsKernelAlive) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    std::atomic<int> calls{0};
    auto k = make_kernel(
        *ctx,
        [](const qd_host_kernel_info *, void *const *args) -> int32_t {
            ++**static_cast<std::atomic<int> *const *>(args[0]);
            return 0;
        },
        nullptr);
    EXPECT_EQ(std::string(k->name()).rfind("<host fn 0x", 0), 0u) << k->name();
    Gate gate;
    ASSERT_EQ(s->host_fn(Gate::hold, &gate), QD_SUCCESS);
    std::atomic<int> *counter = &calls;
    qd_arg arg = {&counter, sizeof counter};
    ASSERT_EQ(s->launch(*k, kOneBlock, &arg, 1), QD_SUCCESS);
    std::weak_ptr<Kernel> weak = k;
    k.reset();
    EXPECT_FALSE(weak.expired());
    gate.open = true;
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(calls.load(), 1);
    EXPECT_TRUE(eventually([&] { return weak.expired(); }));
    destroy(ctx);
}

TEST(CpuLifetime, ContextSynchronizeWaitsForEveryStream) {
    auto ctx = make_context(4);
    std::atomic<int> done{0};
    std::vector<std::shared_ptr<Stream>> streams;
    for (int i = 0; i < 16; ++i) {
        streams.push_back(make_stream(*ctx, -(i % 3)));
        ASSERT_EQ(streams.back()->host_fn(sleep_fn, as_user_data(1000)), QD_SUCCESS);
        ASSERT_EQ(
            streams.back()->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &done),
            QD_SUCCESS);
        if (i % 2) streams.back().reset();
    }
    ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);
    EXPECT_EQ(done.load(), 16);
    destroy(ctx);
}

// --- Faults and shutdown -------------------------------------------------------------------

int32_t faulting_kernel(const qd_host_kernel_info *info, void *const *args) {
    ++**static_cast<std::atomic<int> *const *>(args[0]);
    return info->block_idx[0] == 2 ? 7 : 0;
}

TEST(CpuFault, KernelFaultMarksTheContextLostAndSyncStillDrains) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto other = make_stream(*ctx);
    auto ev = make_event(*ctx);
    auto k = make_kernel(*ctx, faulting_kernel, "bad_kernel");
    std::atomic<int> blocks{0};
    std::atomic<int> *counter = &blocks;
    qd_arg arg = {&counter, sizeof counter};
    LaunchDims dims = {{10, 1, 1}, {1, 1, 1}, 0};
    ASSERT_EQ(s->launch(*k, dims, &arg, 1), QD_SUCCESS);
    std::atomic<int> after{0};
    ASSERT_EQ(s->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &after),
              QD_SUCCESS);
    ASSERT_EQ(s->record(*ev), QD_SUCCESS);
    ASSERT_EQ(other->wait(*ev), QD_SUCCESS);
    ASSERT_EQ(other->host_fn([](void *p) { ++*static_cast<std::atomic<int> *>(p); }, &after),
              QD_SUCCESS);
    const qd_status st = ctx->synchronize();
    EXPECT_TRUE(st == QD_SUCCESS || st == QD_ERROR_DEVICE_LOST);
    EXPECT_TRUE(ctx->lost_state().lost());
    const std::string message = ctx->lost_state().message();
    EXPECT_NE(message.find("kernel 'bad_kernel' returned 7 (device fault)"), std::string::npos)
        << message;
    EXPECT_EQ(blocks.load(), 3);         // blocks 0, 1, 2 ran; the launch stopped at the fault
    EXPECT_EQ(after.load(), 0);          // later user work is skipped
    EXPECT_EQ(ev->query(), QD_SUCCESS);  // but markers still complete
    EXPECT_EQ(other->query(), QD_SUCCESS);
    destroy(ctx);
}

TEST(CpuShutdown, EnqueueAfterShutdownFailsCleanly) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    auto ev = make_event(*ctx);
    auto k = make_kernel(*ctx, null_shared_kernel, "k");
    ASSERT_EQ(s->record(*ev), QD_SUCCESS);
    ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);
    ctx->shutdown();
    EXPECT_EQ(s->launch(*k, kOneBlock, nullptr, 0), QD_ERROR_INVALID_HANDLE);
    EXPECT_STREQ(last_error_message(), "the context was destroyed");
    EXPECT_EQ(s->host_fn(sleep_fn, nullptr), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->record(*ev), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->wait(*ev), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->memset(1, 0, 0), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->memcpy(1, 1, 0), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->mem_free(1), QD_ERROR_INVALID_HANDLE);
    uint64_t address = 0;
    EXPECT_EQ(s->mem_alloc(64, &address), QD_ERROR_INVALID_HANDLE);
    std::shared_ptr<Stream> late;
    EXPECT_EQ(ctx->create_stream(0, 0, &late), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(s->query(), QD_SUCCESS);
    ctx->shutdown();  // idempotent
    ctx.reset();      // streams and events may outlive the context
    EXPECT_EQ(s->host_fn(sleep_fn, nullptr), QD_ERROR_INVALID_HANDLE);
    s.reset();
}

TEST(CpuShutdown, ShutdownRacingWithEnqueues_RunsEveryAcceptedTaskAndNeverHangs) {
    for (int round = 0; round < 20; ++round) {
        auto ctx = make_context(2);
        auto a = make_stream(*ctx);
        auto b = make_stream(*ctx);
        auto ev = make_event(*ctx);
        std::atomic<bool> stop{false};
        std::atomic<int> executed{0};
        std::atomic<int> accepted{0};
        std::thread producer([&] {
            // Bounded, so the backlog the shutdown drains stays small.
            for (int i = 0; i < 20000 && !stop.load(); ++i) {
                if (a->host_fn(increment_fn, &executed) != QD_SUCCESS) break;
                accepted.fetch_add(1);
                if (a->record(*ev) != QD_SUCCESS) break;
                if (b->wait(*ev) != QD_SUCCESS) break;
                if (b->host_fn(sleep_fn, nullptr) != QD_SUCCESS) break;
            }
        });
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
        ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);
        ctx->shutdown();
        // Every enqueue that succeeded has run by the time shutdown returns.
        const int ran_at_shutdown = executed.load();
        stop = true;
        producer.join();
        EXPECT_EQ(ran_at_shutdown, accepted.load()) << "round " << round;
        EXPECT_EQ(executed.load(), ran_at_shutdown) << "round " << round;
        EXPECT_EQ(a->synchronize(), QD_SUCCESS);
        EXPECT_EQ(b->synchronize(), QD_SUCCESS);
        EXPECT_EQ(ev->synchronize(), QD_SUCCESS);
        EXPECT_EQ(b->query(), QD_SUCCESS);
        ctx.reset();
    }
}

// Streams created on another thread while the context shuts down: each creation is refused
// (INVALID_HANDLE) or yields a stream whose accepted work ran by the time shutdown returned.
// Under TSan this caught a stream registering itself with the scheduler from its constructor,
// before make_shared had written the weak self-reference that the shutdown's drain reads.
TEST(CpuShutdown, StreamCreationsRacingShutdown_AreRefusedOrDrained) {
    for (int round = 0; round < 20; ++round) {
        auto ctx = make_context(2);
        std::atomic<int> executed{0};
        std::atomic<int> accepted{0};
        std::atomic<bool> first_created{false};
        std::vector<std::shared_ptr<Stream>> made;  // the creator's, read after join
        std::thread creator([&] {
            for (int i = 0; i < 2000; ++i) {
                std::shared_ptr<Stream> s;
                const qd_status st = ctx->create_stream(0, 0, &s);
                if (st != QD_SUCCESS) {
                    EXPECT_EQ(st, QD_ERROR_INVALID_HANDLE);
                    break;
                }
                if (s->host_fn(increment_fn, &executed) == QD_SUCCESS) accepted.fetch_add(1);
                made.push_back(std::move(s));
                first_created.store(true);
            }
        });
        while (!first_created.load()) std::this_thread::yield();  // a condition, not a clock
        ctx->shutdown();
        const int ran_at_shutdown = executed.load();
        creator.join();
        EXPECT_EQ(ran_at_shutdown, accepted.load()) << "round " << round;
        for (auto &s : made) EXPECT_EQ(s->synchronize(), QD_SUCCESS);
        made.clear();
        ctx.reset();
    }
}

TEST(CpuShutdown, ContextDroppedWithoutShutdownStopsItsWorkers) {
    auto ctx = make_context(3);
    auto s = make_stream(*ctx);
    ASSERT_EQ(s->host_fn(sleep_fn, as_user_data(1000)), QD_SUCCESS);
    ctx.reset();  // joins the workers; the running task finishes first
    EXPECT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(s->host_fn(sleep_fn, nullptr), QD_ERROR_INVALID_HANDLE);
}

// --- Callbacks -------------------------------------------------------------------------------

struct CallbackProbe {
    Context *self = nullptr;
    Context *other = nullptr;
    std::atomic<int> in_self{-1};
    std::atomic<int> in_other{-1};
};

TEST(CpuCallback, InCallbackIsTrueOnlyInsideThisContextsCallbacks) {
    auto ctx = make_context();
    auto other = make_context();
    auto s = make_stream(*ctx);
    CallbackProbe probe;
    probe.self = ctx.get();
    probe.other = other.get();
    EXPECT_FALSE(ctx->in_callback());
    ASSERT_EQ(s->host_fn(
                  [](void *p) {
                      auto *probe = static_cast<CallbackProbe *>(p);
                      probe->in_self = probe->self->in_callback();
                      probe->in_other = probe->other->in_callback();
                  },
                  &probe),
              QD_SUCCESS);
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(probe.in_self.load(), 1);
    EXPECT_EQ(probe.in_other.load(), 0);
    destroy(other);
    destroy(ctx);
}

struct SelfEnqueue {
    Stream *stream;
    std::atomic<int> count{0};
};
void self_enqueue_fn(void *p) {
    auto *se = static_cast<SelfEnqueue *>(p);
    if (++se->count < 50) se->stream->host_fn(self_enqueue_fn, se);
}

TEST(CpuCallback, CallbackMayEnqueueOntoItsOwnStream) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    SelfEnqueue se{s.get()};
    ASSERT_EQ(s->host_fn(self_enqueue_fn, &se), QD_SUCCESS);
    ASSERT_TRUE(eventually([&] { return se.count.load() == 50; }));
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    destroy(ctx);
}

// --- Concurrency ---------------------------------------------------------------------------

struct Rendezvous {
    std::atomic<int> arrived{0};
    std::atomic<int> met{0};
};
void rendezvous_fn(void *p) {
    auto *r = static_cast<Rendezvous *>(p);
    ++r->arrived;
    const auto deadline = Clock::now() + 5s;
    while (r->arrived.load() < 2 && Clock::now() < deadline) std::this_thread::yield();
    if (r->arrived.load() >= 2) ++r->met;
}

TEST(CpuScheduler, DifferentStreamsRunConcurrently) {
    auto ctx = make_context(2);
    auto a = make_stream(*ctx);
    auto b = make_stream(*ctx);
    Rendezvous r;
    ASSERT_EQ(a->host_fn(rendezvous_fn, &r), QD_SUCCESS);
    ASSERT_EQ(b->host_fn(rendezvous_fn, &r), QD_SUCCESS);
    ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);
    EXPECT_EQ(r.met.load(), 2);
    destroy(ctx);
}

TEST(CpuScheduler, PriorityIsClampedToTheBackendRange) {
    auto ctx = make_context();
    int32_t least = 99, greatest = 99;
    ctx->priority_range(&least, &greatest);
    EXPECT_EQ(least, 0);
    EXPECT_EQ(greatest, -2);
    EXPECT_EQ(make_stream(*ctx, 5)->priority(), 0);
    EXPECT_EQ(make_stream(*ctx, -1)->priority(), -1);
    EXPECT_EQ(make_stream(*ctx, -100)->priority(), -2);
    std::shared_ptr<Stream> nb;
    EXPECT_EQ(ctx->create_stream(QD_STREAM_NON_BLOCKING, 0, &nb), QD_SUCCESS);
    std::shared_ptr<Stream> imported;
    EXPECT_EQ(ctx->import_stream(1234, &imported), QD_ERROR_NOT_SUPPORTED);
    destroy(ctx);
}

TEST(CpuScheduler, ManyThreadsEnqueueRecordAndWaitAtOnce) {
    auto ctx = make_context(4);
    constexpr int kThreads = 8;
    constexpr int kRounds = 300;
    std::vector<std::shared_ptr<Stream>> streams;
    std::vector<std::shared_ptr<Event>> events;
    for (int i = 0; i < kThreads; ++i) {
        streams.push_back(make_stream(*ctx, -(i % 3)));
        events.push_back(make_event(*ctx));
    }
    std::atomic<int> count{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            auto own = make_stream(*ctx);
            for (int r = 0; r < kRounds; ++r) {
                Stream &s = *streams[(t + r) % kThreads];
                ASSERT_EQ(s.host_fn(increment_fn, &count), QD_SUCCESS);
                ASSERT_EQ(s.record(*events[t]), QD_SUCCESS);
                ASSERT_EQ(own->wait(*events[(t + 1) % kThreads]), QD_SUCCESS);
                ASSERT_EQ(own->host_fn(increment_fn, &count), QD_SUCCESS);
                if (r % 50 == 0) {
                    ASSERT_EQ(own->synchronize(), QD_SUCCESS);
                    ASSERT_EQ(events[t]->synchronize(), QD_SUCCESS);
                    own = make_stream(*ctx);  // drop a stream with work possibly pending
                }
            }
        });
    }
    for (auto &t : threads) t.join();
    ASSERT_EQ(ctx->synchronize(), QD_SUCCESS);
    EXPECT_EQ(count.load(), 2 * kThreads * kRounds);
    destroy(ctx);
}

TEST(CpuScheduler, ForkJoinThroughEventsCompletes) {
    auto ctx = make_context(2);
    auto parent = make_stream(*ctx);
    std::vector<std::shared_ptr<Stream>> children;
    std::vector<std::shared_ptr<Event>> joins;
    for (int i = 0; i < 8; ++i) {
        children.push_back(make_stream(*ctx));
        joins.push_back(make_event(*ctx));
    }
    auto fork = make_event(*ctx);
    std::atomic<int> count{0};
    for (int iter = 0; iter < 500; ++iter) {
        ASSERT_EQ(parent->host_fn(increment_fn, &count), QD_SUCCESS);
        ASSERT_EQ(parent->record(*fork), QD_SUCCESS);
        for (int i = 0; i < 8; ++i) {
            ASSERT_EQ(children[i]->wait(*fork), QD_SUCCESS);
            ASSERT_EQ(children[i]->host_fn(increment_fn, &count), QD_SUCCESS);
            ASSERT_EQ(children[i]->record(*joins[i]), QD_SUCCESS);
            ASSERT_EQ(parent->wait(*joins[i]), QD_SUCCESS);
        }
        ASSERT_EQ(parent->synchronize(), QD_SUCCESS);
        ASSERT_EQ(count.load(), 9 * (iter + 1));
    }
    destroy(ctx);
}

// --- Memory ----------------------------------------------------------------------------------

TEST(CpuMemory, AllocCopySetAndFreeInStreamOrder) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    uint64_t a = 0, b = 0;
    ASSERT_EQ(s->mem_alloc(1000, &a), QD_SUCCESS);
    ASSERT_EQ(s->mem_alloc(1000, &b), QD_SUCCESS);
    EXPECT_EQ(a % 64, 0u);
    EXPECT_EQ(b % 64, 0u);
    void *host = nullptr;
    ASSERT_EQ(ctx->host_alloc(1000, &host), QD_SUCCESS);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 64, 0u);
    Gate gate;
    ASSERT_EQ(s->host_fn(Gate::hold, &gate), QD_SUCCESS);
    ASSERT_EQ(s->memset(a, 0x5a, 1000), QD_SUCCESS);
    ASSERT_EQ(s->memcpy(b, a, 1000), QD_SUCCESS);
    ASSERT_EQ(s->memcpy(reinterpret_cast<uintptr_t>(host), b, 1000), QD_SUCCESS);
    ASSERT_EQ(s->mem_free(a), QD_SUCCESS);  // after the copies, in stream order
    ASSERT_EQ(s->mem_free(b), QD_SUCCESS);
    gate.open = true;
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    const auto *bytes = static_cast<const unsigned char *>(host);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0x5a);
    ctx->host_free(host);
    uint64_t c = 0;
    ASSERT_EQ(s->mem_alloc(1, &c), QD_SUCCESS);
    ctx->mem_free_now(c);
    destroy(ctx);
}

TEST(CpuMemory, ImpossibleSizesReportOutOfMemory) {
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    uint64_t address = 7;
    EXPECT_EQ(s->mem_alloc(UINT64_MAX - 8, &address), QD_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(address, 7u);
    void *host = nullptr;
    EXPECT_EQ(ctx->host_alloc(UINT64_MAX / 2, &host), QD_ERROR_OUT_OF_MEMORY);
    destroy(ctx);
}

// --- Modules and driver ----------------------------------------------------------------------

TEST(CpuModule, LoadReportsMissingFilesBadImagesAndMissingKernels) {
    auto ctx = make_context();
    std::shared_ptr<Module> module;
    const std::string missing = "/nonexistent/dir/libnothing.so";
    EXPECT_EQ(ctx->load_module(missing.data(), missing.size(), &module), QD_ERROR_NOT_FOUND);
    EXPECT_NE(std::string(last_error_message()).find(missing), std::string::npos);

    char path[] = "/tmp/qd_cpu_backend_test_XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "not a library", 13), 13);
    close(fd);
    EXPECT_EQ(ctx->load_module(path, std::strlen(path), &module), QD_ERROR_INVALID_IMAGE);
    unlink(path);

    // The C library is a real shared object everywhere: load it as a module by its path. Found
    // through a glibc function no sanitizer intercepts (under TSan, abort is libtsan's), and
    // "abs" is then a function libc itself defines, so a kernel of that module.
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void *>(&gnu_get_libc_version), &info), 0);
    const std::string libc = info.dli_fname;
    ASSERT_NE(libc.find('/'), std::string::npos);
    // Not NUL-terminated: the size bounds the path.
    std::string padded = libc + "garbage";
    ASSERT_EQ(ctx->load_module(padded.data(), libc.size(), &module), QD_SUCCESS)
        << last_error_message();
    std::shared_ptr<Kernel> kernel;
    EXPECT_EQ(module->get_kernel("qd_no_such_kernel", &kernel), QD_ERROR_NOT_FOUND);
    EXPECT_NE(std::string(last_error_message()).find("qd_no_such_kernel"), std::string::npos);
    ASSERT_EQ(module->get_kernel("abs", &kernel), QD_SUCCESS);
    EXPECT_STREQ(kernel->name(), "abs");
    module.reset();  // the kernel keeps the library loaded
    kernel.reset();
    destroy(ctx);
}

TEST(CpuModule, QueuedLaunchKeepsTheModuleLoaded) {
    // The project's CPU test module (tests/cpu_module), whose path meson passes in.
    const char *path = std::getenv("QD_TEST_CPU_MODULE");
    if (!path || !*path) GTEST_SKIP() << "QD_TEST_CPU_MODULE is not set";
    auto ctx = make_context();
    auto s = make_stream(*ctx);
    std::shared_ptr<Module> module;
    ASSERT_EQ(ctx->load_module(path, std::strlen(path), &module), QD_SUCCESS)
        << last_error_message();
    std::shared_ptr<Kernel> kernel;
    ASSERT_EQ(module->get_kernel("qd_test_write_value", &kernel), QD_SUCCESS)
        << last_error_message();
    Gate gate;
    ASSERT_EQ(s->host_fn(Gate::hold, &gate), QD_SUCCESS);
    uint32_t out = 0;
    uint64_t dst = reinterpret_cast<uintptr_t>(&out);
    uint32_t value = 0xC0FFEE;
    qd_arg args[2] = {{&dst, sizeof dst}, {&value, sizeof value}};
    ASSERT_EQ(s->launch(*kernel, kOneBlock, args, 2), QD_SUCCESS);
    kernel.reset();  // the queued launch keeps the kernel, and the kernel keeps the library
    module.reset();
    gate.open = true;
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    EXPECT_EQ(out, 0xC0FFEEu);
    EXPECT_FALSE(ctx->lost_state().lost()) << ctx->lost_state().message();
    destroy(ctx);
}

TEST(CpuDriver, ReportsOneDeviceAndRejectsOthers) {
    Driver &driver = cpu_driver();
    EXPECT_EQ(driver.kind(), QD_BACKEND_CPU);
    uint32_t count = 0;
    ASSERT_EQ(driver.device_count(&count), QD_SUCCESS);
    EXPECT_EQ(count, 1u);
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_EQ(driver.device_info(0, &info), QD_SUCCESS);
    EXPECT_EQ(info.backend, static_cast<uint32_t>(QD_BACKEND_CPU));
    EXPECT_GT(std::strlen(info.name), 0u);
    EXPECT_GE(info.multiprocessors, 1u);
    EXPECT_EQ(info.total_memory, 0u);
    EXPECT_EQ(driver.device_info(1, &info), QD_ERROR_INVALID_ARGUMENT);
    ContextParams params;
    params.device = 1;
    std::unique_ptr<Context> ctx;
    EXPECT_EQ(driver.create_context(params, &ctx), QD_ERROR_INVALID_ARGUMENT);
    params.device = 0;
    ASSERT_EQ(driver.create_context(params, &ctx), QD_SUCCESS);
    destroy(ctx);
}

// The worker cap is the CPU backend's own limit: the backend refuses more workers itself (the
// core checks nothing about them), with the field's name and the limit in the message.
TEST(CpuDriver, MoreWorkersThanItsCap_IsInvalidArgument) {
    Driver &driver = cpu_driver();
    for (uint32_t workers : {257u, 100000u, 0xffffffffu}) {  // qd.h: at most 256
        SCOPED_TRACE(workers);
        ContextParams params;
        params.worker_threads = workers;
        std::unique_ptr<Context> ctx;
        EXPECT_EQ(driver.create_context(params, &ctx), QD_ERROR_INVALID_ARGUMENT);
        EXPECT_EQ(ctx, nullptr);
        const std::string msg = last_error_message();
        EXPECT_NE(msg.find("cpu_worker_threads"), std::string::npos) << msg;
        EXPECT_NE(msg.find("256"), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace qd::backend
