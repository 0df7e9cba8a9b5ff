// SM partitions (qd.h, "SM partitions"): qd_context_split makes parts that are full contexts
// over disjoint units, all or none. The CPU backend divides the parent's workers (how CI tests
// the semantics); on CUDA the parts are green contexts, and the test skips visibly where the
// driver has none.
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

class SplitTest : public BackendTest {
  protected:
    // Two counts this backend can split ctx_ into: 2 workers each of the fixture's 4 on the CPU;
    // on a GPU the smallest part the device allows, twice. Skips where the device cannot split.
    bool two_counts(uint32_t counts[2]) {
        qd_device_info info = QD_DEVICE_INFO_INIT;
        EXPECT_QD_OK(qd_device_get_info(backend(), 0, &info));
        if (info.split_granularity == 0) return false;
        uint32_t part = info.split_minimum;
        if (part % info.split_granularity)
            part += info.split_granularity - part % info.split_granularity;
        if (is_cpu()) part = 2;
        counts[0] = counts[1] = part;
        return true;
    }
    void destroy_all(const qd_context *parts, uint32_t n) {
        for (uint32_t i = 0; i < n; ++i) EXPECT_QD_OK(qd_context_destroy(parts[i]));
    }
};

#define QDT_TWO_COUNTS(counts)                                                                     \
    uint32_t counts[2] = {0, 0};                                                                   \
    do {                                                                                           \
        if (!two_counts(counts)) {                                                                 \
            qd_context probe_[2] = {0, 0};                                                         \
            const uint32_t one_[2] = {8, 8};                                                       \
            EXPECT_QD(QD_ERROR_NOT_SUPPORTED, qd_context_split(ctx_, one_, 2, probe_));            \
            GTEST_SKIP() << "the " << backend_name(backend())                                      \
                         << " device cannot be split: " << qd_last_error_message();                \
        }                                                                                          \
    } while (0)

// Records the worker thread a host callback ran on, and that thread's CPU mask.
struct ThreadLog {
    std::mutex mutex;
    std::set<std::thread::id> threads;
    std::set<std::vector<int>> masks;
    static void record(void *user) {
        auto *log = static_cast<ThreadLog *>(user);
        cpu_set_t set;
        CPU_ZERO(&set);
        std::vector<int> mask;
        if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; ++c)
                if (CPU_ISSET(c, &set)) mask.push_back(c);
        std::lock_guard<std::mutex> lock(log->mutex);
        log->threads.insert(std::this_thread::get_id());
        log->masks.insert(mask);
    }
};

// Queues `rounds` callbacks on each of `streams` new streams of ctx and waits for them.
void run_callbacks(qd_context ctx, ThreadLog *log, int streams, int rounds) {
    std::vector<qd_stream> made;
    for (int s = 0; s < streams; ++s) {
        qd_stream stream = 0;
        ASSERT_QD_OK(qd_stream_create(ctx, nullptr, &stream));
        made.push_back(stream);
    }
    for (int r = 0; r < rounds; ++r)
        for (qd_stream s : made) ASSERT_QD_OK(qd_launch_host_fn(s, &ThreadLog::record, log));
    for (qd_stream s : made) {
        EXPECT_QD_OK(qd_stream_synchronize(s));
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
}

size_t thread_count() {
    size_t n = 0;
    if (DIR *dir = opendir("/proc/self/task")) {
        while (dirent *e = readdir(dir))
            if (e->d_name[0] != '.') ++n;
        closedir(dir);
    }
    return n;
}

size_t usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return size_t(CPU_COUNT(&set));
}

TEST_P(SplitTest, DeviceInfo_ReportsTheSplitRule) {
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_QD_OK(qd_device_get_info(backend(), 0, &info));
    if (is_cpu()) {
        EXPECT_EQ(info.split_granularity, 1u);
        EXPECT_EQ(info.split_minimum, 1u);
    } else if (info.split_granularity != 0) {
        EXPECT_GE(info.split_minimum, info.split_granularity);
        EXPECT_EQ(info.split_minimum % info.split_granularity, 0u);
        EXPECT_LE(info.split_minimum, info.multiprocessors);
    } else {
        EXPECT_EQ(info.split_minimum, 0u);
    }
}

TEST_P(SplitTest, Parts_AreFullContexts) {
    QDT_TWO_COUNTS(counts);
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    ASSERT_NE(parts[0], 0u);
    ASSERT_NE(parts[1], 0u);
    EXPECT_NE(parts[0], parts[1]);
    EXPECT_NE(parts[0], ctx_);
    for (qd_context part : parts) {
        qd_stream s = 0, leased = 0, def = 0;
        ASSERT_QD_OK(qd_stream_create(part, nullptr, &s));
        ASSERT_QD_OK(qd_stream_acquire(part, &leased));
        ASSERT_QD_OK(qd_context_default_stream(part, &def));
        qd_context owner = 0;
        ASSERT_QD_OK(qd_stream_get_context(s, &owner));
        EXPECT_EQ(owner, part);
        qd_event e = 0;
        ASSERT_QD_OK(qd_event_create(part, 0, &e));
        uint64_t block = 0;
        ASSERT_QD_OK(qd_mem_alloc_async(s, 256, &block));
        ASSERT_QD_OK(qd_memset_async(s, block, 7, 256));
        ASSERT_QD_OK(qd_event_record(s, e));
        ASSERT_QD_OK(qd_stream_wait_event(leased, e));
        ASSERT_QD_OK(qd_mem_free_async(leased, block));
        EXPECT_QD_OK(qd_context_synchronize(part));
        EXPECT_QD_OK(qd_event_query(e));
        qd_context_stats stats = get_stats(part);
        EXPECT_EQ(stats.live_events, 1u);
        EXPECT_EQ(stats.live_allocations, 0u);
        EXPECT_QD_OK(qd_event_destroy(e));
        EXPECT_QD_OK(qd_stream_release(leased));
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
    // A part's handles are its own: mixing them with the parent's is refused.
    qd_stream of_part = 0;
    ASSERT_QD_OK(qd_context_default_stream(parts[0], &of_part));
    qd_event of_parent = new_event();
    EXPECT_QD(QD_ERROR_WRONG_CONTEXT, qd_event_record(of_part, of_parent));
    destroy_all(parts, 2);
}

TEST_P(SplitTest, CpuParts_RunOnDisjointWorkers) {
    QDT_REQUIRE_CPU();
    const uint32_t counts[2] = {2, 2};
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    ThreadLog logs[2];
    for (int i = 0; i < 2; ++i) run_callbacks(parts[i], &logs[i], 3, 20);
    for (const ThreadLog &log : logs) {
        EXPECT_GE(log.threads.size(), 1u);
        EXPECT_LE(log.threads.size(), 2u) << "a part runs on its own workers only";
    }
    for (const std::thread::id &t : logs[0].threads)
        EXPECT_EQ(logs[1].threads.count(t), 0u) << "a worker served two parts";
    destroy_all(parts, 2);
}

TEST_P(SplitTest, CpuParts_ArePinnedToDisjointCpus_WhereTheProcessHasEnough) {
    QDT_REQUIRE_CPU();
    const char *pin = std::getenv("QD_CPU_PIN_WORKERS");
    if (pin && std::strcmp(pin, "0") == 0) GTEST_SKIP() << "QD_CPU_PIN_WORKERS=0";
    if (usable_cpus() < 2) GTEST_SKIP() << "the process may use fewer than 2 CPUs";
    const uint32_t counts[2] = {1, 1};
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    ThreadLog logs[2];
    for (int i = 0; i < 2; ++i) run_callbacks(parts[i], &logs[i], 2, 5);
    ASSERT_EQ(logs[0].masks.size(), 1u);
    ASSERT_EQ(logs[1].masks.size(), 1u);
    const std::vector<int> a = *logs[0].masks.begin(), b = *logs[1].masks.begin();
    EXPECT_EQ(a.size(), 1u) << "a part's worker is pinned to one CPU";
    EXPECT_EQ(b.size(), 1u);
    EXPECT_NE(a, b) << "the parts' workers share a CPU";
    destroy_all(parts, 2);
}

// Work of two parts is ordered by an event recorded in one and waited on in the other: the
// waiting part's callback cannot run before the gate in the first part opens.
TEST_P(SplitTest, CrossContextWait_OrdersWorkOfTwoParts) {
    QDT_TWO_COUNTS(counts);
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    qd_stream a = 0, b = 0;
    ASSERT_QD_OK(qd_stream_create(parts[0], nullptr, &a));
    ASSERT_QD_OK(qd_stream_create(parts[1], nullptr, &b));
    qd_event done_a = 0;
    ASSERT_QD_OK(qd_event_create(parts[0], 0, &done_a));
    struct Order {
        std::mutex mutex;
        std::vector<int> seen;
    } order;
    struct Mark {
        Order *order;
        int value;
        static void run(void *user) {
            auto *m = static_cast<Mark *>(user);
            std::lock_guard<std::mutex> lock(m->order->mutex);
            m->order->seen.push_back(m->value);
        }
    } first{&order, 1}, second{&order, 2};
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(a));
    ASSERT_QD_OK(qd_launch_host_fn(a, &Mark::run, &first));
    ASSERT_QD_OK(qd_event_record(a, done_a));
    ASSERT_QD_OK(qd_stream_wait_event(b, done_a));
    ASSERT_QD_OK(qd_launch_host_fn(b, &Mark::run, &second));
    EXPECT_QD(QD_NOT_READY, qd_stream_query(b)) << "part 1 ran before part 0's gate opened";
    gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(b));
    EXPECT_QD_OK(qd_stream_synchronize(a));
    EXPECT_FALSE(gate.timed_out());
    {
        std::lock_guard<std::mutex> lock(order.mutex);
        EXPECT_EQ(order.seen, (std::vector<int>{1, 2}));
    }
    EXPECT_QD_OK(qd_event_destroy(done_a));
    destroy_all(parts, 2);
}

TEST_P(SplitTest, ParentDestroyedFirst_PartsKeepWorking) {
    QDT_TWO_COUNTS(counts);
    qd_context_desc desc = make_desc(backend(), 8, 4);
    qd_context parent = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &parent));
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(parent, counts, 2, parts));
    ASSERT_QD_OK(qd_context_destroy(parent));
    ThreadLog log;
    run_callbacks(parts[0], &log, 2, 4);
    EXPECT_GE(log.threads.size(), 1u);
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(parts[1], nullptr, &s));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    destroy_all(parts, 2);
}

TEST_P(SplitTest, PartDestroyedFirst_ParentKeepsWorking) {
    QDT_TWO_COUNTS(counts);
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    destroy_all(parts, 2);
    ThreadLog log;
    run_callbacks(ctx_, &log, 2, 4);
    EXPECT_GE(log.threads.size(), 1u);
}

// The trace and graphs work in a part as in any context: a traced part writes its trace, and a
// graph captured on a part's stream replays there.
TEST_P(SplitTest, Part_TracesAndReplaysGraphs) {
    QDT_TWO_COUNTS(counts);
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    char dir[] = "/tmp/qd-split-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/trace.json";
    ASSERT_QD_OK(qd_trace_start(parts[0], path.c_str()));
    qd_stream s = 0;
    ASSERT_QD_OK(qd_stream_create(parts[0], nullptr, &s));
    struct Counter {
        static void bump(void *user) { ++*static_cast<std::atomic<int> *>(user); }
    };
    std::atomic<int> runs{0};
    ASSERT_QD_OK(qd_stream_begin_capture(s));
    ASSERT_QD_OK(qd_launch_host_fn(s, &Counter::bump, &runs));
    qd_graph graph = 0;
    ASSERT_QD_OK(qd_stream_end_capture(s, &graph));
    EXPECT_EQ(runs.load(), 0) << "a captured callback ran at capture";
    ASSERT_QD_OK(qd_graph_launch(graph, s));
    ASSERT_QD_OK(qd_graph_launch(graph, s));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(runs.load(), 2);
    EXPECT_QD_OK(qd_graph_destroy(graph));
    ASSERT_QD_OK(qd_trace_stop(parts[0]));
    FILE *f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr) << "the part wrote no trace";
    std::fseek(f, 0, SEEK_END);
    EXPECT_GT(std::ftell(f), 0L);
    std::fclose(f);
    std::remove(path.c_str());
    ::rmdir(dir);
    EXPECT_QD_OK(qd_stream_destroy(s));
    destroy_all(parts, 2);
}

// A part validates as its parent does (it is made with the parent's flags): an unsynchronised
// write of one block from two of its streams is reported in the part.
TEST_P(SplitTest, PartOfAValidatingContext_Validates) {
    QDT_RACES_ON_PURPOSE();
    QDT_TWO_COUNTS(counts);
    qd_context_desc desc = make_desc(backend(), 8, 4);
    desc.flags = QD_CONTEXT_VALIDATE;
    qd_context parent = 0;
    ASSERT_QD_OK(qd_context_create(&desc, &parent));
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(parent, counts, 2, parts));
    struct Count {
        static void hazard(const qd_hazard *, void *user) { ++*static_cast<int *>(user); }
    };
    int reported = 0;
    ASSERT_QD_OK(qd_context_set_hazard_handler(parts[0], &Count::hazard, &reported));
    qd_stream a = 0, b = 0;
    ASSERT_QD_OK(qd_stream_create(parts[0], nullptr, &a));
    ASSERT_QD_OK(qd_stream_create(parts[0], nullptr, &b));
    uint64_t block = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(a, 64, &block));
    ASSERT_QD_OK(qd_stream_synchronize(a));
    ASSERT_QD_OK(qd_memset_async(a, block, 1, 64));
    ASSERT_QD_OK(qd_memset_async(b, block, 2, 64));  // no wait: a write-write race
    ASSERT_QD_OK(qd_context_synchronize(parts[0]));
    EXPECT_GE(reported, 1);
    EXPECT_GE(get_stats(parts[0]).hazards_reported, 1u);
    ASSERT_QD_OK(qd_mem_free_async(a, block));
    destroy_all(parts, 2);
    EXPECT_QD_OK(qd_context_destroy(parent));
}

TEST_P(SplitTest, BadArguments_AreInvalidArgument) {
    const uint32_t counts[2] = {1, 1};
    qd_context parts[2] = {0, 0};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "counts", qd_context_split(ctx_, nullptr, 2, parts));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out", qd_context_split(ctx_, counts, 2, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "n is 0", qd_context_split(ctx_, counts, 0, parts));
    std::vector<uint32_t> many(QD_MAX_SPLIT_PARTS + 1, 1);
    std::vector<qd_context> many_out(many.size(), 0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "parts",
                  qd_context_split(ctx_, many.data(), uint32_t(many.size()), many_out.data()));
    const uint32_t zero[2] = {1, 0};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "counts[1] is 0",
                  qd_context_split(ctx_, zero, 2, parts));
    // The arguments' own values are checked before the handle (Conventions, "Which error wins").
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_context_split(0, zero, 2, parts));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_context_split(0, counts, 2, parts));
    EXPECT_EQ(parts[0], 0u);
    EXPECT_EQ(parts[1], 0u);
}

// An impossible split is refused naming the rule, and makes nothing: no context, no thread, and
// the outputs untouched.
TEST_P(SplitTest, ImpossibleSplit_IsRefusedAndMakesNothing) {
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_QD_OK(qd_device_get_info(backend(), 0, &info));
    if (!is_cpu() && info.split_granularity == 0) GTEST_SKIP() << "the device cannot be split";
    const uint32_t units = is_cpu() ? 4u : info.multiprocessors;
    const uint32_t part = is_cpu() ? 3u : info.split_minimum;
    // Too many units in all: the fixture's context has 4 workers (CPU), the device its SMs.
    const uint32_t over[2] = {part, units};
    qd_context parts[2] = {0xAB, 0xCD};
    const size_t threads_before = thread_count();
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "add up", qd_context_split(ctx_, over, 2, parts));
    EXPECT_EQ(parts[0], 0xABu);
    EXPECT_EQ(parts[1], 0xCDu);
    if (is_cpu()) EXPECT_EQ(thread_count(), threads_before) << "a refused split left threads";
    if (!is_cpu() && info.split_granularity > 1) {
        const uint32_t odd[1] = {info.split_minimum + 1};
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "multiple", qd_context_split(ctx_, odd, 1, parts));
        const uint32_t small[1] = {info.split_minimum - info.split_granularity > 0
                                       ? info.split_minimum - info.split_granularity
                                       : 1u};
        if (small[0] < info.split_minimum)
            EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "at least|multiple",
                          qd_context_split(ctx_, small, 1, parts));
    }
    EXPECT_EQ(parts[0], 0xABu);
    // The context is as it was: a split that fits still works.
    const uint32_t fits[1] = {is_cpu() ? 4u : info.split_minimum};
    qd_context one = 0;
    ASSERT_QD_OK(qd_context_split(ctx_, fits, 1, &one));
    EXPECT_QD_OK(qd_context_destroy(one));
}

TEST_P(SplitTest, Part_CannotBeSplitAgain) {
    QDT_TWO_COUNTS(counts);
    qd_context parts[2] = {0, 0};
    ASSERT_QD_OK(qd_context_split(ctx_, counts, 2, parts));
    qd_context again = 0;
    const uint32_t one[1] = {is_cpu() ? 1u : counts[0]};
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "part", qd_context_split(parts[0], one, 1, &again));
    EXPECT_EQ(again, 0u);
    destroy_all(parts, 2);
}

TEST_P(SplitTest, SplitFromAHostCallbackOfTheContext_IsInvalidOperation) {
    QDT_REQUIRE_CPU();
    struct Call {
        qd_context ctx;
        qd_status status = QD_SUCCESS;
        static void run(void *user) {
            auto *c = static_cast<Call *>(user);
            const uint32_t one[1] = {1};
            qd_context part = 0;
            c->status = qd_context_split(c->ctx, one, 1, &part);
        }
    } call{ctx_};
    ASSERT_QD_OK(qd_launch_host_fn(default_stream_, &Call::run, &call));
    ASSERT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_EQ(call.status, QD_ERROR_INVALID_OPERATION);
}

QDT_INSTANTIATE_BACKENDS(SplitTest);

}  // namespace
