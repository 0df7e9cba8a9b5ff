// bench_cpu: benchmark B7 (CPU backend), see docs/benchmarks.md and bench/README.md.
//
// Figures (one line each, then a summary table):
//   enqueue/*   cost of queueing an empty task onto a busy stream (bar <= 100 ns per call);
//               reference: pushing a std::function into a mutex-protected std::deque
//   wake/*      cross-stream event hand-off, per hop, against a mutex + condition_variable;
//               wake/timeline-hop (B14's CPU figure) the same through a timeline, against it
//               ping-pong between two std::threads (bar <= 1.2x)
//   forkjoin/8  fork 8 children, one empty task each, join, synchronize (bar <= 10 us);
//               reference: 8 tasks on a mutex+cv thread pool (as many threads as the context
//               has workers) and a wait for them
//   fanout/8x1ms  8 tasks spinning 1 ms each, qd_launch_parallel (8 groups) against the same
//               8 tasks serially on one stream, 2 worker threads (bar: speedup >= 1.8x)
//   plus INFO figures and '#' lines that break the costs down (enqueue onto an idle stream,
//   enqueue-only fork/join and its pieces, launch+sync round trip, synchronize on an idle
//   stream, where the fan-out tasks ran) to explain a miss.
//
// Every figure is a median of >= 5 repeats after a warm-up, qd and anchor alternated.
#include <qd/qd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#endif
#include <vector>

#include "harness.h"

using namespace qdbench;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        qd_status st_ = (call);                                                                    \
        if (st_ != QD_SUCCESS) fail_call(#call, st_, __FILE__, __LINE__);                          \
    } while (0)

[[noreturn]] static void fail_call(const char *what, qd_status st, const char *file, int line) {
    std::fprintf(stderr, "%s:%d: %s -> %s: %s\n", file, line, what, qd_status_name(st),
                 qd_last_error_message());
    std::exit(2);
}

namespace {

constexpr int kEnqueueN = 100000;  // enqueues per timed repeat
constexpr int kWakeRounds = 5000;  // ping-pong rounds (2 hops each)
constexpr int kForkJoinIters = 2000;
constexpr int kRoundTripIters = 5000;
constexpr int kFanoutTasks = 8;
constexpr double kSpinNs = 1e6;  // 1 ms per fan-out task

// --------------------------------------------------------------------------------------------
// Host kernels and callbacks
// --------------------------------------------------------------------------------------------

extern "C" int32_t empty_kernel(const qd_host_kernel_info *, void *const *) { return 0; }

// Where and when one fan-out task ran (for the '#' placement line under the fan-out figure).
struct TaskTrace {
    Clock::time_point start, end;
    int cpu_start = -1, cpu_end = -1;
    std::thread::id thread;
};

int current_cpu() {
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

// args[0]: uint64_t nanoseconds to spin; args[1] (optional): TaskTrace * to fill.
extern "C" int32_t spin_kernel(const qd_host_kernel_info *, void *const *args) {
    uint64_t ns;
    std::memcpy(&ns, args[0], sizeof ns);
    TaskTrace *trace = nullptr;
    if (args[1]) std::memcpy(&trace, args[1], sizeof trace);
    if (trace) {
        trace->start = Clock::now();
        trace->cpu_start = current_cpu();
        trace->thread = std::this_thread::get_id();
    }
    spin_for_ns(static_cast<double>(ns));
    if (trace) {
        trace->end = Clock::now();
        trace->cpu_end = current_cpu();
    }
    return 0;
}

extern "C" void noop_host_fn(void *) {}

// A host callback that blocks its stream (sleeping, not spinning, so it steals no core) until
// the benchmark opens it.
struct Gate {
    std::mutex m;
    std::condition_variable cv;
    bool open = false;
    std::atomic<bool> entered{false};

    static void wait_fn(void *p) {
        Gate *g = static_cast<Gate *>(p);
        g->entered.store(true, std::memory_order_release);
        std::unique_lock<std::mutex> lock(g->m);
        g->cv.wait(lock, [g] { return g->open; });
    }
    // Queue the gate on `s` and wait until a worker is inside it (the stream is busy).
    void close_on(qd_stream s) {
        {
            std::lock_guard<std::mutex> lock(m);
            open = false;
        }
        entered.store(false, std::memory_order_relaxed);
        CHECK(qd_launch_host_fn(s, &Gate::wait_fn, this));
        while (!entered.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    void release() {
        {
            std::lock_guard<std::mutex> lock(m);
            open = true;
        }
        cv.notify_all();
    }
};

// --------------------------------------------------------------------------------------------
// Anchors written with the standard library only
// --------------------------------------------------------------------------------------------

// A mutex-protected std::deque of std::function: the reference for one enqueue.
struct FunctionQueue {
    std::mutex m;
    std::deque<std::function<void()>> q;
    void push(std::function<void()> f) {
        std::lock_guard<std::mutex> lock(m);
        q.push_back(std::move(f));
    }
    void drain() {
        std::deque<std::function<void()>> local;
        {
            std::lock_guard<std::mutex> lock(m);
            local.swap(q);
        }
        for (auto &f : local) f();
    }
};

// A minimal thread pool (mutex + condition_variable + deque), the reference for fork/join.
class MiniPool {
  public:
    explicit MiniPool(unsigned n) {
        for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
    }
    ~MiniPool() {
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto &t : threads_) t.join();
    }
    void post(std::function<void()> f) {
        {
            std::lock_guard<std::mutex> lock(m_);
            q_.push_back(std::move(f));
        }
        cv_.notify_one();
    }

  private:
    void run() {
        for (;;) {
            std::function<void()> f;
            {
                std::unique_lock<std::mutex> lock(m_);
                cv_.wait(lock, [this] { return stop_ || !q_.empty(); });
                if (q_.empty()) return;
                f = std::move(q_.front());
                q_.pop_front();
            }
            f();
        }
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> q_;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

// Counts down tasks; the host waits until all are done.
struct Latch {
    std::mutex m;
    std::condition_variable cv;
    int remaining = 0;
    void reset(int n) { remaining = n; }
    void count_down() {
        bool last;
        {
            std::lock_guard<std::mutex> lock(m);
            last = --remaining == 0;
        }
        if (last) cv.notify_one();
    }
    void wait() {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [this] { return remaining == 0; });
    }
};

// Pin the calling thread to one CPU (Linux); used only for the placement note of the wake
// anchor, never for a figure.
void pin_to_cpu(int cpu) {
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#else
    (void)cpu;
#endif
}

// Two std::threads alternating through a mutex, a turn variable and one condition_variable
// per thread; 2 * rounds hops. Returns ns per hop. Thread start-up is outside the clock.
// cpus: -1 = let the scheduler place them (the anchor); otherwise pin thread i to cpus / 10
// (i = 0) or cpus % 10 (i = 1), e.g. 0 = both on CPU 0, 1 = CPUs 0 and 1.
double cv_pingpong_ns_per_hop(int rounds, int cpus = -1) {
    std::mutex m;
    std::condition_variable cv[2];
    int turn = -1;  // nobody's turn until the clock starts
    std::atomic<int> ready{0};
    auto player = [&](int me) {
        if (cpus >= 0) pin_to_cpu(me == 0 ? cpus / 10 : cpus % 10);
        ready.fetch_add(1);
        for (int i = 0; i < rounds; ++i) {
            {
                std::unique_lock<std::mutex> lock(m);
                cv[me].wait(lock, [&] { return turn == me; });
                turn = 1 - me;
            }
            cv[1 - me].notify_one();
        }
    };
    std::thread t0(player, 0), t1(player, 1);
    while (ready.load() < 2) std::this_thread::yield();
    const auto a = Clock::now();
    {
        std::lock_guard<std::mutex> lock(m);
        turn = 0;
    }
    cv[0].notify_one();
    t0.join();
    t1.join();
    const auto b = Clock::now();
    return elapsed_ns(a, b) / (2.0 * rounds);
}

// --------------------------------------------------------------------------------------------
// Benchmarks
// --------------------------------------------------------------------------------------------

struct Env {
    qd_context ctx = 0;
    qd_kernel empty = 0;
};

Figure make(const char *name, double qd, const char *unit) {
    Figure f;
    f.bench = "B7";
    f.name = name;
    f.qd = qd;
    f.unit = unit;
    return f;
}

void with_anchor(Figure &f, double anchor, const char *unit, double ratio) {
    f.has_anchor = true;
    f.anchor = anchor;
    f.anchor_unit = unit;
    f.has_ratio = true;
    f.ratio = ratio;
}

// 1. Enqueue onto a busy stream.
void bench_enqueue(const Options &opt, Report &rep, const Env &env) {
    qd_stream s;
    CHECK(qd_stream_create(env.ctx, nullptr, &s));
    Gate gate;
    FunctionQueue fq;

    uint64_t argv8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    qd_arg args8[8];
    for (int i = 0; i < 8; ++i) args8[i] = qd_arg{&argv8[i], sizeof(uint64_t)};

    enum Mode { Launch0, Launch8, HostFn };
    struct Variant {
        const char *name;
        Mode mode;
    } variants[] = {{"enqueue/launch-0args", Launch0},
                    {"enqueue/launch-8args", Launch8},
                    {"enqueue/host_fn", HostFn}};

    for (const Variant &v : variants) {
        if (!opt.selected(v.name)) continue;
        auto qd_fn = [&]() -> double {
            gate.close_on(s);
            const auto a = Clock::now();
            switch (v.mode) {
            case Launch0:
                for (int i = 0; i < kEnqueueN; ++i)
                    CHECK(qd_launch(s, env.empty, nullptr, nullptr, 0));
                break;
            case Launch8:
                for (int i = 0; i < kEnqueueN; ++i)
                    CHECK(qd_launch(s, env.empty, nullptr, args8, 8));
                break;
            case HostFn:
                for (int i = 0; i < kEnqueueN; ++i)
                    CHECK(qd_launch_host_fn(s, &noop_host_fn, nullptr));
                break;
            }
            const auto b = Clock::now();  // stop before the drain
            gate.release();
            CHECK(qd_stream_synchronize(s));
            return elapsed_ns(a, b) / kEnqueueN;
        };
        auto anchor_fn = [&]() -> double {
            const auto a = Clock::now();
            switch (v.mode) {
            case Launch0:
                for (int i = 0; i < kEnqueueN; ++i)
                    fq.push([] { (void)empty_kernel(nullptr, nullptr); });
                break;
            case Launch8: {
                for (int i = 0; i < kEnqueueN; ++i) {
                    std::array<uint64_t, 8> copy;  // copied by value, as qd copies args
                    std::memcpy(copy.data(), argv8, sizeof argv8);
                    fq.push([copy] { (void)copy; });
                }
                break;
            }
            case HostFn:
                for (int i = 0; i < kEnqueueN; ++i) {
                    qd_host_fn fn = &noop_host_fn;
                    void *ud = nullptr;
                    fq.push([fn, ud] { fn(ud); });
                }
                break;
            }
            const auto b = Clock::now();
            fq.drain();
            return elapsed_ns(a, b) / kEnqueueN;
        };
        Samples smp = alternate(opt, qd_fn, anchor_fn);
        Figure f = make(v.name, median(smp.qd), "ns");
        with_anchor(f, median(smp.anchor), "ns (std::function into mutex+deque, reference)",
                    median(smp.qd) / median(smp.anchor));
        f.bar = "<= 100 ns per enqueue";
        f.verdict = f.qd <= 100.0 ? Verdict::Pass : Verdict::Miss;
        rep.add(f, &smp);
    }
    // INFO: the same 0-arg launch in batches of 1000 behind the gate, so the stream's task
    // queue never grows past its first chunks (no allocation, no page faults): the steady-state
    // cost of the enqueue path itself.
    if (opt.selected("enqueue/launch-0args-batch1000")) {
        constexpr int kBatch = 1000, kBatches = 100;
        std::vector<double> v = repeat(opt, [&]() -> double {
            double ns = 0;
            for (int b = 0; b < kBatches; ++b) {
                gate.close_on(s);
                const auto a = Clock::now();
                for (int i = 0; i < kBatch; ++i)
                    CHECK(qd_launch(s, env.empty, nullptr, nullptr, 0));
                ns += elapsed_ns(a, Clock::now());
                gate.release();
                CHECK(qd_stream_synchronize(s));
            }
            return ns / (kBatch * kBatches);
        });
        Samples smp{v, {}};
        rep.add(make("enqueue/launch-0args-batch1000", median(v), "ns"), &smp);
    }
    // INFO: what a call costs before it reaches the stream: qd_stream_query resolves the handle
    // (handle table slot lock + shared_ptr copy) and checks that the context is usable.
    if (opt.selected("call/stream_query")) {
        std::vector<double> v = repeat(opt, [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kEnqueueN; ++i) CHECK(qd_stream_query(s));
            return elapsed_ns(a, Clock::now()) / kEnqueueN;
        });
        Samples smp{v, {}};
        rep.add(make("call/stream_query", median(v), "ns"), &smp);
    }
    CHECK(qd_stream_synchronize(s));
    CHECK(qd_stream_destroy(s));
}

// Context switches so far (voluntary + involuntary): every time a thread blocked in a futex
// (a condition variable, a contended mutex) or was preempted. For the '#' breakdown lines.
struct Switches {
    long process = 0;      // all threads of the process
    long main_thread = 0;  // the calling thread
};
Switches context_switches() {
    Switches s;
#ifdef __linux__
    rusage u{};
    if (getrusage(RUSAGE_SELF, &u) == 0) s.process = u.ru_nvcsw + u.ru_nivcsw;
    if (getrusage(RUSAGE_THREAD, &u) == 0) s.main_thread = u.ru_nvcsw + u.ru_nivcsw;
#endif
    return s;
}

// Wait for a stream by polling qd_stream_query (the host never sleeps): separates the cost of
// the work from the cost of waking a host thread blocked in qd_stream_synchronize. After 256
// polls it yields between polls: a pure spin can starve a worker pinned to the host's CPU for a
// whole time slice when the other CPUs are busy (seen on a loaded 2-core machine: 1.5 ms per
// round trip instead of 1.5 us).
void poll_until_idle(qd_stream s) {
    for (uint32_t polls = 0;; ++polls) {
        const qd_status st = qd_stream_query(s);
        if (st == QD_SUCCESS) return;
        if (st != QD_NOT_READY) fail_call("qd_stream_query", st, __FILE__, __LINE__);
        if (polls >= 256) std::this_thread::yield();
    }
}

// 2. Event wake-up across two streams.
void bench_wake(const Options &opt, Report &rep, const Env &env) {
    const bool plain = opt.selected("wake/event-hop");
    const bool with_kernel = opt.selected("wake/event-hop+kernel");
    const bool timeline_hop = opt.selected("wake/timeline-hop");
    if (!plain && !with_kernel && !timeline_hop) return;

    qd_stream A, B;
    CHECK(qd_stream_create(env.ctx, nullptr, &A));
    CHECK(qd_stream_create(env.ctx, nullptr, &B));
    std::vector<qd_event> eA(kWakeRounds), eB(kWakeRounds);
    for (int i = 0; i < kWakeRounds; ++i) {
        CHECK(qd_event_create(env.ctx, 0, &eA[i]));
        CHECK(qd_event_create(env.ctx, 0, &eB[i]));
    }
    Gate gate;

    // The whole chain is queued behind a gate on A, then the clock runs from opening the gate
    // until B has drained: 2 * rounds cross-stream hand-offs.
    auto chain = [&](bool kernels) -> double {
        gate.close_on(A);
        for (int i = 0; i < kWakeRounds; ++i) {
            if (i > 0) CHECK(qd_stream_wait_event(A, eB[i - 1]));
            if (kernels) CHECK(qd_launch(A, env.empty, nullptr, nullptr, 0));
            CHECK(qd_event_record(A, eA[i]));
            CHECK(qd_stream_wait_event(B, eA[i]));
            if (kernels) CHECK(qd_launch(B, env.empty, nullptr, nullptr, 0));
            CHECK(qd_event_record(B, eB[i]));
        }
        const auto a = Clock::now();
        gate.release();
        CHECK(qd_stream_synchronize(B));
        const auto b = Clock::now();
        CHECK(qd_stream_synchronize(A));
        return elapsed_ns(a, b) / (2.0 * kWakeRounds);
    };
    auto anchor = [] { return cv_pingpong_ns_per_hop(kWakeRounds); };

    if (plain) {
        Samples smp = alternate(
            opt, [&] { return chain(false); }, anchor);
        Figure f = make("wake/event-hop", median(smp.qd), "ns/hop");
        const double ratio = median(smp.qd) / median(smp.anchor);
        with_anchor(f, median(smp.anchor), "ns/hop (mutex+condvar ping-pong)", ratio);
        f.bar = "<= 1.2x anchor";
        f.verdict = ratio <= 1.2 ? Verdict::Pass : Verdict::Miss;
        rep.add(f, &smp);
        // Where the scheduler puts the two anchor threads decides the anchor's figure (on a
        // VM, waking an idle vCPU costs far more than a switch on one core): say both.
        if (std::thread::hardware_concurrency() >= 2) {
            std::vector<double> same, two;
            for (int r = 0; r < 3; ++r) {
                same.push_back(cv_pingpong_ns_per_hop(kWakeRounds / 5, 0));
                two.push_back(cv_pingpong_ns_per_hop(kWakeRounds / 5, 1));
            }
            char buf[200];
            std::snprintf(buf, sizeof buf,
                          "wake anchor by placement (median of 3): both threads pinned to CPU 0 "
                          "%s ns/hop, pinned to CPUs 0 and 1 %s ns/hop",
                          fmt(median(same)).c_str(), fmt(median(two)).c_str());
            rep.note(buf);
        }
    }
    if (with_kernel) {
        Samples smp = alternate(
            opt, [&] { return chain(true); }, anchor);
        Figure f = make("wake/event-hop+kernel", median(smp.qd), "ns/hop");
        with_anchor(f, median(smp.anchor), "ns/hop (mutex+condvar ping-pong)",
                    median(smp.qd) / median(smp.anchor));
        rep.add(f, &smp);  // informational: an empty kernel on each side of every hop
    }
    if (timeline_hop) {
        // B14's CPU figure: the same ping-pong through one timeline (A waits 2i and signals
        // 2i+1, B waits 2i+1 and signals 2i+2), against the event hop above, alternated in this
        // process. A timeline's values only grow, so each sample gets a fresh one.
        auto timeline_chain = [&]() -> double {
            qd_timeline t;
            CHECK(qd_timeline_create(env.ctx, 0, &t));
            gate.close_on(A);
            for (int i = 0; i < kWakeRounds; ++i) {
                const uint64_t v = 2 * uint64_t(i);
                if (i > 0) CHECK(qd_timeline_wait(A, t, v));
                CHECK(qd_timeline_signal(A, t, v + 1));
                CHECK(qd_timeline_wait(B, t, v + 1));
                CHECK(qd_timeline_signal(B, t, v + 2));
            }
            const auto a = Clock::now();
            gate.release();
            CHECK(qd_stream_synchronize(B));
            const auto b = Clock::now();
            CHECK(qd_stream_synchronize(A));
            CHECK(qd_timeline_destroy(t));
            return elapsed_ns(a, b) / (2.0 * kWakeRounds);
        };
        Samples smp = alternate(opt, timeline_chain, [&] { return chain(false); });
        Figure f = make("wake/timeline-hop", median(smp.qd), "ns/hop");
        const double ratio = median(smp.qd) / median(smp.anchor);
        with_anchor(f, median(smp.anchor), "ns/hop (wake/event-hop, qd events)", ratio);
        f.bar = "<= 1.2x event hop";
        f.verdict = ratio <= 1.2 ? Verdict::Pass : Verdict::Miss;
        rep.add(f, &smp);
    }
    for (int i = 0; i < kWakeRounds; ++i) {
        CHECK(qd_event_destroy(eA[i]));
        CHECK(qd_event_destroy(eB[i]));
    }
    CHECK(qd_stream_destroy(A));
    CHECK(qd_stream_destroy(B));
}

// 3. Fork/join of 8 empty tasks, plus the pieces that make it up.
void bench_forkjoin(const Options &opt, Report &rep, const Env &env, unsigned workers) {
    qd_stream parent;
    CHECK(qd_stream_create(env.ctx, nullptr, &parent));
    qd_stream kids[8];
    MiniPool pool(workers);
    Latch latch;

    auto fork_launch_join = [&] {
        CHECK(qd_stream_fork(parent, 8, kids));
        for (int k = 0; k < 8; ++k) CHECK(qd_launch(kids[k], env.empty, nullptr, nullptr, 0));
        CHECK(qd_stream_join(parent, kids, 8));
    };

    if (opt.selected("forkjoin/8")) {
        auto qd_fn = [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kForkJoinIters; ++i) {
                fork_launch_join();
                CHECK(qd_stream_synchronize(parent));
            }
            return elapsed_ns(a, Clock::now()) / kForkJoinIters / 1000.0;
        };
        auto anchor_fn = [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kForkJoinIters; ++i) {
                latch.reset(8);
                for (int k = 0; k < 8; ++k)
                    pool.post([&latch] {
                        (void)empty_kernel(nullptr, nullptr);
                        latch.count_down();
                    });
                latch.wait();
            }
            return elapsed_ns(a, Clock::now()) / kForkJoinIters / 1000.0;
        };
        Samples smp = alternate(opt, qd_fn, anchor_fn);
        Figure f = make("forkjoin/8", median(smp.qd), "us");
        with_anchor(f, median(smp.anchor), "us (8 tasks on a mutex+cv pool + wait, reference)",
                    median(smp.qd) / median(smp.anchor));
        f.bar = "<= 10 us per fork+8 tasks+join+sync";
        f.verdict = f.qd <= 10.0 ? Verdict::Pass : Verdict::Miss;
        rep.add(f, &smp);
    }

    // Where the time of one fork/join iteration goes: the same loop with a clock read between
    // the pieces (a '#' line; each clock read adds ~20 ns to the piece before it).
    if (opt.selected("forkjoin/8") && !opt.quiet) {
        std::vector<double> fork_us, launch_us, join_us, sync_us, csw_proc, csw_main;
        for (int r = 0; r < opt.warmup + opt.repeats; ++r) {
            double t[4] = {0, 0, 0, 0};
            const Switches s0 = context_switches();
            for (int i = 0; i < kForkJoinIters; ++i) {
                const auto a = Clock::now();
                CHECK(qd_stream_fork(parent, 8, kids));
                const auto b = Clock::now();
                for (int k = 0; k < 8; ++k)
                    CHECK(qd_launch(kids[k], env.empty, nullptr, nullptr, 0));
                const auto c = Clock::now();
                CHECK(qd_stream_join(parent, kids, 8));
                const auto d = Clock::now();
                CHECK(qd_stream_synchronize(parent));
                const auto e = Clock::now();
                t[0] += elapsed_ns(a, b);
                t[1] += elapsed_ns(b, c);
                t[2] += elapsed_ns(c, d);
                t[3] += elapsed_ns(d, e);
            }
            const Switches s1 = context_switches();
            if (r < opt.warmup) continue;
            csw_proc.push_back(double(s1.process - s0.process) / kForkJoinIters);
            csw_main.push_back(double(s1.main_thread - s0.main_thread) / kForkJoinIters);
            fork_us.push_back(t[0] / kForkJoinIters / 1000.0);
            launch_us.push_back(t[1] / kForkJoinIters / 1000.0);
            join_us.push_back(t[2] / kForkJoinIters / 1000.0);
            sync_us.push_back(t[3] / kForkJoinIters / 1000.0);
        }
        char buf[400];
        std::snprintf(
            buf, sizeof buf,
            "forkjoin/8 pieces (median of per-iteration means): fork %s us, 8 launches %s "
            "us, join %s us, synchronize %s us; context switches per iteration: %s "
            "(all threads), %s (host thread)",
            fmt(median(fork_us)).c_str(), fmt(median(launch_us)).c_str(),
            fmt(median(join_us)).c_str(), fmt(median(sync_us)).c_str(),
            fmt(median(csw_proc)).c_str(), fmt(median(csw_main)).c_str());
        rep.note(buf);
    }

    // INFO: the same, but the host polls qd_stream_query instead of sleeping in synchronize.
    if (opt.selected("forkjoin/8-poll")) {
        std::vector<double> v = repeat(opt, [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kForkJoinIters; ++i) {
                fork_launch_join();
                poll_until_idle(parent);
            }
            return elapsed_ns(a, Clock::now()) / kForkJoinIters / 1000.0;
        });
        Samples smp{v, {}};
        rep.add(make("forkjoin/8-poll", median(v), "us"), &smp);
    }

    // INFO: one launch onto an idle stream, the step fork/join repeats 8 times: the stream goes
    // from idle to ready, so the launch also hands it to the scheduler (its lock, and a futex
    // wake when no worker is awake to take it). 8 owned idle streams, each launch timed alone;
    // the workers are either still spinning (launches right after the previous batch drained)
    // or parked (the host sleeps 2 ms first, far past the workers' idle spin).
    if (opt.selected("enqueue/launch-idle-stream")) {
        qd_stream idle[8];
        for (qd_stream &x : idle) CHECK(qd_stream_create(env.ctx, nullptr, &x));
        auto batch = [&](bool park_first, double *first, double *rest) {
            if (park_first) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            for (int k = 0; k < 8; ++k) {
                const auto a = Clock::now();
                CHECK(qd_launch(idle[k], env.empty, nullptr, nullptr, 0));
                const double ns = elapsed_ns(a, Clock::now());
                (k == 0 ? *first : *rest) += ns;
            }
            for (qd_stream x : idle) CHECK(qd_stream_synchronize(x));
        };
        constexpr int kHot = 2000, kParked = 100;
        std::vector<double> all, hot_first, hot_rest, parked_first, parked_rest;
        for (int r = 0; r < opt.warmup + opt.repeats; ++r) {
            double f = 0, rest = 0, pf = 0, pr = 0;
            for (int i = 0; i < kHot; ++i) batch(false, &f, &rest);
            for (int i = 0; i < kParked; ++i) batch(true, &pf, &pr);
            if (r < opt.warmup) continue;
            all.push_back((f + rest) / (8.0 * kHot));
            hot_first.push_back(f / kHot);
            hot_rest.push_back(rest / (7.0 * kHot));
            parked_first.push_back(pf / kParked);
            parked_rest.push_back(pr / (7.0 * kParked));
        }
        Samples smp{all, {}};
        rep.add(make("enqueue/launch-idle-stream", median(all), "ns"), &smp);
        char buf[300];
        std::snprintf(buf, sizeof buf,
                      "launch onto an idle stream, workers awake: first of 8 %s ns, others %s ns; "
                      "workers parked: first %s ns, others %s ns",
                      fmt(median(hot_first)).c_str(), fmt(median(hot_rest)).c_str(),
                      fmt(median(parked_first)).c_str(), fmt(median(parked_rest)).c_str());
        rep.note(buf);
        for (qd_stream x : idle) CHECK(qd_stream_destroy(x));
    }

    // INFO: the enqueue side alone (fork + 8 launches + join, no synchronize in the loop).
    if (opt.selected("forkjoin/enqueue-only")) {
        std::vector<double> v = repeat(opt, [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kForkJoinIters; ++i) fork_launch_join();
            const auto b = Clock::now();
            CHECK(qd_stream_synchronize(parent));
            return elapsed_ns(a, b) / kForkJoinIters / 1000.0;
        });
        Samples smp{v, {}};
        rep.add(make("forkjoin/enqueue-only", median(v), "us"), &smp);
    }

    // INFO: one empty launch + synchronize on an idle stream (the wake-up round trip), against
    // one task on the mutex+cv pool + wait.
    if (opt.selected("roundtrip/launch+sync")) {
        auto qd_fn = [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kRoundTripIters; ++i) {
                CHECK(qd_launch(parent, env.empty, nullptr, nullptr, 0));
                CHECK(qd_stream_synchronize(parent));
            }
            return elapsed_ns(a, Clock::now()) / kRoundTripIters / 1000.0;
        };
        auto anchor_fn = [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kRoundTripIters; ++i) {
                latch.reset(1);
                pool.post([&latch] { latch.count_down(); });
                latch.wait();
            }
            return elapsed_ns(a, Clock::now()) / kRoundTripIters / 1000.0;
        };
        Samples smp = alternate(opt, qd_fn, anchor_fn);
        Figure f = make("roundtrip/launch+sync", median(smp.qd), "us");
        with_anchor(f, median(smp.anchor), "us (1 task on a mutex+cv pool + wait)",
                    median(smp.qd) / median(smp.anchor));
        rep.add(f, &smp);
    }

    if (opt.selected("roundtrip/launch+poll")) {
        std::vector<double> v = repeat(opt, [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kRoundTripIters; ++i) {
                CHECK(qd_launch(parent, env.empty, nullptr, nullptr, 0));
                poll_until_idle(parent);
            }
            return elapsed_ns(a, Clock::now()) / kRoundTripIters / 1000.0;
        });
        Samples smp{v, {}};
        rep.add(make("roundtrip/launch+poll", median(v), "us"), &smp);
    }

    // INFO: synchronize on an idle stream, and fork+join with no task (pool + event cost).
    if (opt.selected("sync/idle")) {
        std::vector<double> v = repeat(opt, [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kRoundTripIters; ++i) CHECK(qd_stream_synchronize(parent));
            return elapsed_ns(a, Clock::now()) / kRoundTripIters;
        });
        Samples smp{v, {}};
        rep.add(make("sync/idle", median(v), "ns"), &smp);
    }
    if (opt.selected("forkjoin/no-task+sync")) {
        std::vector<double> v = repeat(opt, [&]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kForkJoinIters; ++i) {
                CHECK(qd_stream_fork(parent, 8, kids));
                CHECK(qd_stream_join(parent, kids, 8));
                CHECK(qd_stream_synchronize(parent));
            }
            return elapsed_ns(a, Clock::now()) / kForkJoinIters / 1000.0;
        });
        Samples smp{v, {}};
        rep.add(make("forkjoin/no-task+sync", median(v), "us"), &smp);
    }
    CHECK(qd_stream_synchronize(parent));
    CHECK(qd_stream_destroy(parent));
}

// 4. Fan-out of 8 x 1 ms busy tasks on a context with 2 worker threads.
void bench_fanout(const Options &opt, Report &rep) {
    if (!opt.selected("fanout/8x1ms")) return;
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    desc.cpu_worker_threads = 2;  // the bar's setting, whatever --workers says
    qd_context ctx;
    CHECK(qd_context_create(&desc, &ctx));
    qd_kernel spin;
    CHECK(qd_kernel_from_host_fn(ctx, &spin_kernel, "spin_1ms", &spin));
    qd_stream s;
    CHECK(qd_stream_create(ctx, nullptr, &s));

    const uint64_t ns = static_cast<uint64_t>(kSpinNs);
    // Each task also gets a pointer to its trace slot (written by the kernel; read after the
    // synchronize). Serial tasks get a null one.
    std::vector<TaskTrace> traces(kFanoutTasks);
    std::vector<TaskTrace *> trace_ptrs(kFanoutTasks);
    std::vector<std::array<qd_arg, 2>> task_args(kFanoutTasks);
    TaskTrace *no_trace = nullptr;
    const qd_arg serial_args[2] = {{&ns, sizeof ns}, {&no_trace, sizeof no_trace}};
    std::vector<qd_task> tasks(kFanoutTasks);
    for (int i = 0; i < kFanoutTasks; ++i) {
        trace_ptrs[i] = &traces[i];
        task_args[i] = {qd_arg{&ns, sizeof ns}, qd_arg{&trace_ptrs[i], sizeof(TaskTrace *)}};
        qd_task t = QD_TASK_INIT;
        t.group = static_cast<uint32_t>(i);
        t.kernel = spin;
        t.args = task_args[i].data();
        t.num_args = 2;
        tasks[i] = t;
    }

    std::vector<std::string> placements;
    auto parallel = [&]() -> double {
        const auto a = Clock::now();
        CHECK(qd_launch_parallel(s, tasks.data(), kFanoutTasks));
        CHECK(qd_stream_synchronize(s));
        const auto b = Clock::now();
        // Placement: tasks per worker thread, CPUs seen, and how much the tasks overlapped
        // (sum of task times / span of the tasks: 2.0 = both workers busy throughout).
        std::vector<std::thread::id> ids;
        std::vector<int> per_thread;
        uint64_t cpu_mask = 0;
        double busy = 0;
        auto first = traces[0].start, last = traces[0].end;
        for (const TaskTrace &t : traces) {
            size_t k = 0;
            while (k < ids.size() && ids[k] != t.thread) ++k;
            if (k == ids.size()) {
                ids.push_back(t.thread);
                per_thread.push_back(0);
            }
            ++per_thread[k];
            for (int c : {t.cpu_start, t.cpu_end})
                if (c >= 0 && c < 64) cpu_mask |= uint64_t{1} << c;
            busy += elapsed_ns(t.start, t.end);
            first = std::min(first, t.start);
            last = std::max(last, t.end);
        }
        std::string p = fmt(elapsed_ns(a, b) / 1e6) + " ms: tasks per thread [";
        for (size_t k = 0; k < per_thread.size(); ++k)
            p += (k ? "," : "") + std::to_string(per_thread[k]);
        p += "], cpus {";
        bool any = false;
        for (int c = 0; c < 64; ++c)
            if (cpu_mask >> c & 1) {
                p += (any ? "," : "") + std::to_string(c);
                any = true;
            }
        p += "}, overlap " + fmt(busy / elapsed_ns(first, last)) + ", first task after " +
             fmt(elapsed_ns(a, first) / 1000.0) + " us";
        placements.push_back(p);
        return elapsed_ns(a, b) / 1e6;
    };
    auto serial = [&]() -> double {
        const auto a = Clock::now();
        for (int i = 0; i < kFanoutTasks; ++i) CHECK(qd_launch(s, spin, nullptr, serial_args, 2));
        CHECK(qd_stream_synchronize(s));
        return elapsed_ns(a, Clock::now()) / 1e6;
    };
    Samples smp = alternate(opt, parallel, serial);
    const double speedup = median(smp.anchor) / median(smp.qd);
    Figure f = make("fanout/8x1ms", median(smp.qd), "ms");
    with_anchor(f, median(smp.anchor), "ms (serial on one stream)", speedup);
    f.bar = "speedup (serial/parallel) >= 1.8x, 2 workers";
    f.verdict = speedup >= 1.8 ? Verdict::Pass : Verdict::Miss;
    rep.add(f, &smp);
    if (!opt.quiet)
        for (size_t i = static_cast<size_t>(opt.warmup); i < placements.size(); ++i)
            rep.note(("  parallel repeat " + placements[i]).c_str());

    CHECK(qd_stream_destroy(s));
    CHECK(qd_kernel_destroy(spin));
    CHECK(qd_context_destroy(ctx));
}

}  // namespace

// 5. Graphs (issue 13): one replay of a captured step of 64 empty tasks in 8 groups
// (qd_launch_parallel, captured once) against the same 64 tasks launched directly with
// qd_launch_parallel, alternated; per step, with the synchronize (end to end) and the host
// call alone (enqueue, the clock stops before the synchronize).
void bench_graph(const Options &opt, Report &rep, const Env &env) {
    if (!opt.selected("graph/replay-64x8") && !opt.selected("graph/enqueue-64x8")) return;
    constexpr int kTasks = 64, kGroups = 8, kIters = 500;
    qd_stream s;
    CHECK(qd_stream_create(env.ctx, nullptr, &s));
    std::vector<qd_task> tasks(kTasks);
    for (int i = 0; i < kTasks; ++i) {
        tasks[i] = QD_TASK_INIT;
        tasks[i].kernel = env.empty;
        tasks[i].group = uint32_t(i % kGroups);
    }
    qd_graph g = 0;
    CHECK(qd_stream_begin_capture(s));
    CHECK(qd_launch_parallel(s, tasks.data(), kTasks));
    CHECK(qd_stream_end_capture(s, &g));

    auto end_to_end = [&](bool replay) {
        return [&, replay]() -> double {
            const auto a = Clock::now();
            for (int i = 0; i < kIters; ++i) {
                if (replay)
                    CHECK(qd_graph_launch(g, s));
                else
                    CHECK(qd_launch_parallel(s, tasks.data(), kTasks));
                CHECK(qd_stream_synchronize(s));
            }
            return elapsed_ns(a, Clock::now()) / kIters / 1000.0;
        };
    };
    auto enqueue_only = [&](bool replay) {
        return [&, replay]() -> double {
            double ns = 0;
            for (int i = 0; i < kIters; ++i) {
                const auto a = Clock::now();
                if (replay)
                    CHECK(qd_graph_launch(g, s));
                else
                    CHECK(qd_launch_parallel(s, tasks.data(), kTasks));
                ns += elapsed_ns(a, Clock::now());
                CHECK(qd_stream_synchronize(s));
            }
            return ns / kIters / 1000.0;
        };
    };
    if (opt.selected("graph/replay-64x8")) {
        Samples smp = alternate(opt, end_to_end(true), end_to_end(false));
        Figure f = make("graph/replay-64x8", median(smp.qd), "us");
        with_anchor(f, median(smp.anchor), "us (the same 64 tasks by qd_launch_parallel)",
                    median(smp.qd) / median(smp.anchor));
        f.bar = "none (replay + synchronize per step)";
        rep.add(f, &smp);
    }
    if (opt.selected("graph/enqueue-64x8")) {
        Samples smp = alternate(opt, enqueue_only(true), enqueue_only(false));
        Figure f = make("graph/enqueue-64x8", median(smp.qd), "us");
        with_anchor(f, median(smp.anchor), "us (the qd_launch_parallel call)",
                    median(smp.qd) / median(smp.anchor));
        f.bar = "none (host time of the call)";
        rep.add(f, &smp);
    }
    CHECK(qd_graph_destroy(g));
    CHECK(qd_stream_destroy(s));
}

int main(int argc, char **argv) {
    Options opt;
    if (!opt.parse(argc, argv)) return 2;

    qd_device_info info = QD_DEVICE_INFO_INIT;
    CHECK(qd_device_get_info(QD_BACKEND_CPU, 0, &info));
    const unsigned hw = std::thread::hardware_concurrency();
    const uint32_t v = qd_version();
    std::printf(
        "# bench_cpu (B7): qd %u.%u.%u, device \"%s\", %u hardware threads "
        "(std::thread::hardware_concurrency %u), repeats %d (median), warm-up %d\n",
        v >> 16, (v >> 8) & 0xff, v & 0xff, info.name, info.multiprocessors, hw, opt.repeats,
        opt.warmup);

    Env env;
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;  // CPU, default worker count max(2, cores)
    desc.cpu_worker_threads = static_cast<uint32_t>(opt.workers);  // 0 (default) unless --workers
    CHECK(qd_context_create(&desc, &env.ctx));
    CHECK(qd_kernel_from_host_fn(env.ctx, &empty_kernel, "empty", &env.empty));
    // The reference thread pool gets as many threads as the context has workers.
    const unsigned workers = opt.workers > 0 ? unsigned(opt.workers) : (hw > 2 ? hw : 2);
    std::printf("# contexts: %u worker threads (fan-out: 2)%s\n", workers,
                opt.workers > 0 ? " (--workers)" : " (library default max(2, cores))");

    Report rep(opt);
    bench_enqueue(opt, rep, env);
    bench_wake(opt, rep, env);
    bench_forkjoin(opt, rep, env, workers);
    bench_fanout(opt, rep);
    bench_graph(opt, rep, env);
    rep.summary();

    CHECK(qd_kernel_destroy(env.empty));
    CHECK(qd_context_destroy(env.ctx));
    return 0;
}
