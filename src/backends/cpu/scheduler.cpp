#include "backends/cpu/scheduler.h"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <new>

#include "backends/cpu/cpu_stream.h"
#include "backends/cpu/cpu_timeline.h"
#include "backends/cpu/host_memory.h"
#include "backends/cpu/spin.h"
#include "backends/cpu/task.h"
#include "backends/cpu/worker_affinity.h"

namespace qd::backend::cpu {

namespace {
// Blocks every asynchronous signal in this thread while it lives (the threads it starts
// inherit the mask), then restores the thread's mask: workers never take process-directed
// signals (README.md, "Signals"). The synchronous faults stay deliverable, and SIGPROF, which
// profilers aim at the thread that is running.
class AsyncSignalsBlocked {
  public:
    AsyncSignalsBlocked() {
        sigset_t block;
        sigfillset(&block);
        for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGPROF})
            sigdelset(&block, sig);
        restore_ = pthread_sigmask(SIG_BLOCK, &block, &saved_) == 0;
    }
    ~AsyncSignalsBlocked() {
        if (restore_) pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    }
    AsyncSignalsBlocked(const AsyncSignalsBlocked &) = delete;
    AsyncSignalsBlocked &operator=(const AsyncSignalsBlocked &) = delete;

  private:
    sigset_t saved_;
    bool restore_;
};
}  // namespace

std::shared_ptr<Scheduler> Scheduler::start(uint32_t threads, LostState *lost,
                                            const std::vector<int> &cpus) {
    std::shared_ptr<Scheduler> scheduler(new Scheduler(threads, lost));
    scheduler->workers_.reserve(threads);
    try {
        const AsyncSignalsBlocked blocked;  // the workers start with these signals blocked
        for (uint32_t i = 0; i < threads; ++i) {
            const int cpu = i < cpus.size() ? cpus[i] : -1;
            // Each worker holds the scheduler, so its state outlives every worker even if the
            // context's reference goes first.
            scheduler->workers_.emplace_back([self = scheduler, cpu] { self->worker_main(cpu); });
        }
    } catch (...) {
        scheduler->shutdown();
        throw;
    }
    return scheduler;
}

Scheduler::Scheduler(uint32_t threads, LostState *lost) : lost_(lost) {
    hot_.searching.store(static_cast<int>(threads), std::memory_order_relaxed);
}

Scheduler::~Scheduler() {
    // Normally shutdown() already ran. The last reference can be a worker's own (a worker
    // exiting after shutdown): shutdown() never joins the calling thread.
    shutdown();
}

// --- Readiness -------------------------------------------------------------------------------

void Scheduler::make_ready(std::shared_ptr<CpuStream> stream) noexcept {
    if (push_ready(stream)) wake_if_needed();
    // A stream refused during shutdown is released here, outside every lock: its destructor
    // takes the registry lock.
}

void Scheduler::make_ready(StreamList &streams) noexcept {
    bool pushed = false;
    // A record completes the streams parked on its marker, and a stream of another context
    // (qd_stream_wait_event across contexts) belongs to that context's workers, not these.
    StreamList foreign, dropped;
    {
        std::lock_guard<SpinLock> lock(hot_.ready_lock);
        const bool exiting = hot_.exiting.load(std::memory_order_relaxed);
        while (std::shared_ptr<CpuStream> stream = streams.pop_front()) {
            if (stream->scheduler() != this) {
                foreign.push_back(std::move(stream));
            } else if (exiting) {
                dropped.push_back(std::move(stream));  // released below, outside the lock
            } else {
                const int level = stream->level();
                hot_.ready[level].push_back(std::move(stream));
                hot_.ready_count.fetch_add(1, std::memory_order_seq_cst);
                pushed = true;
            }
        }
    }
    if (pushed) wake_if_needed();
    // Handed over outside this scheduler's lock, so a context being shut down still releases
    // the waits of other contexts' streams on its records.
    // The owner is held for the hand-over: once the stream is in its ready queue, that
    // context's destroy may release the stream, and with it the last reference to its
    // scheduler, while this thread is still waking its workers (a TSan report in CI).
    while (std::shared_ptr<CpuStream> stream = foreign.pop_front()) {
        const std::shared_ptr<Scheduler> owner = stream->scheduler_ref();
        owner->make_ready(std::move(stream));
    }
}

bool Scheduler::push_ready(std::shared_ptr<CpuStream> &stream) noexcept {
    std::lock_guard<SpinLock> lock(hot_.ready_lock);
    if (hot_.exiting.load(std::memory_order_relaxed)) return false;
    const int level = stream->level();
    hot_.ready[level].push_back(std::move(stream));
    hot_.ready_count.fetch_add(1, std::memory_order_seq_cst);
    return true;
}

std::shared_ptr<CpuStream> Scheduler::pop_ready() noexcept {
    if (hot_.ready_count.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard<SpinLock> lock(hot_.ready_lock);
    int level = kPriorityLevels - 1;
    while (level >= 0 && hot_.ready[level].empty()) --level;
    if (level < 0) return nullptr;
    // Aging: every less urgent level with a ready stream is passed over once more; the most
    // urgent of them that has been passed over kAgingPasses times is taken instead.
    for (int lower = level - 1; lower >= 0; --lower) {
        if (hot_.ready[lower].empty()) continue;
        if (++passed_over_[lower] >= kAgingPasses) {
            passed_over_[lower] = 0;
            level = lower;
            break;
        }
    }
    hot_.ready_count.fetch_sub(1, std::memory_order_relaxed);
    return hot_.ready[level].pop_front();
}

// A thread wake-up costs microseconds, so a sleeping worker is woken only for a ready stream
// that no awake worker will take: awake searching workers (spinning ones included) take them.
void Scheduler::wake_if_needed() noexcept {
    while (hot_.ready_count.load(std::memory_order_seq_cst) >
               hot_.searching.load(std::memory_order_seq_cst) &&
           hot_.sleepers.load(std::memory_order_seq_cst) > 0) {
        {
            std::lock_guard<std::mutex> lock(sleep_mutex_);
            if (hot_.sleepers.load(std::memory_order_relaxed) == 0) return;
            // The woken worker counts as searching from now, so the next producer does not
            // wake a second worker for the same stream.
            hot_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
            hot_.searching.fetch_add(1, std::memory_order_seq_cst);
            ++wakeups_;
        }
        sleep_cv_.notify_one();
    }
}

// --- Workers ---------------------------------------------------------------------------------

void Scheduler::worker_main(int cpu) {
    if (cpu >= 0) pin_current_thread(cpu);
    WorkerState worker(this, lost_);
    while (!hot_.exiting.load(std::memory_order_relaxed)) {
        std::shared_ptr<CpuStream> stream = pop_ready();
        if (!stream) {
            idle();
            continue;
        }
        hot_.searching.fetch_sub(1, std::memory_order_seq_cst);
        wake_if_needed();  // chain: more ready streams than searchers left

        const CpuStream::RunResult result = stream->run(stream, worker);
        if (result != CpuStream::RunResult::kYield) stream.reset();

        hot_.searching.fetch_add(1, std::memory_order_seq_cst);
        // Streams this worker woke go first. It is searching again, so it takes the first of
        // them itself, with no thread wake-up; others are woken only for the rest.
        if (stream) worker.woken.push_back(std::move(stream));
        if (!worker.woken.empty()) make_ready(worker.woken);
    }
    worker.woken.clear();
}

void Scheduler::idle() {
    const auto work_or_stop = [this] {
        return hot_.ready_count.load(std::memory_order_relaxed) > 0 ||
               hot_.exiting.load(std::memory_order_relaxed);
    };
    if (spin_until(work_or_stop, kWorkerSpin)) return;
    std::unique_lock<std::mutex> lock(sleep_mutex_);
    hot_.sleepers.fetch_add(1, std::memory_order_seq_cst);
    hot_.searching.fetch_sub(1, std::memory_order_seq_cst);
    // Re-check after announcing the sleep: see the comment on Hot.
    if (hot_.ready_count.load(std::memory_order_seq_cst) > 0 ||
        hot_.exiting.load(std::memory_order_seq_cst)) {
        hot_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
        hot_.searching.fetch_add(1, std::memory_order_seq_cst);
        return;
    }
    sleep_cv_.wait(lock,
                   [this] { return wakeups_ > 0 || hot_.exiting.load(std::memory_order_relaxed); });
    if (wakeups_ > 0) {
        --wakeups_;  // the waker already moved one sleeper to searching
    } else {
        hot_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
        hot_.searching.fetch_add(1, std::memory_order_seq_cst);
    }
}

void *WorkerState::scratch(uint32_t bytes) noexcept {
    if (bytes > scratch_bytes_) {
        scratch_.reset(aligned_host_alloc(bytes));
        scratch_bytes_ = scratch_ ? bytes : 0;
    }
    return scratch_.get();
}

void WorkerState::FreeDeleter::operator()(void *p) const noexcept { std::free(p); }

// --- Registry and shutdown -------------------------------------------------------------------

std::vector<std::shared_ptr<CpuStream>> Scheduler::live_streams() { return streams_.snapshot(); }

void Scheduler::release_timelines() noexcept {
    StreamList woken;
    try {
        for (const std::shared_ptr<CpuTimeline> &timeline : timelines_.snapshot())
            timeline->release_all(woken);
    } catch (const std::bad_alloc &) {
        // The snapshot could not be made: the timelines release their waits when they go.
    }
    make_ready(woken);
}

void Scheduler::shutdown() {
    hot_.stopping.store(true, std::memory_order_seq_cst);
    // Every registration now either precedes this (and the snapshots below see the stream)
    // or is refused.
    streams_.close();
    // Timelines take no new waits, and a queued wait that no signal queued so far reaches is
    // released (cpu_timeline.h): the core closed them already before its drain; this covers a
    // context shut down without it.
    timelines_.close();
    for (const std::shared_ptr<CpuTimeline> &timeline : timelines_.snapshot()) timeline->close();
    // Drain: what was accepted before the stop runs to completion. Nothing new is accepted,
    // and every wait refers to a record or a signal queued before it, so this ends once the
    // tasks do.
    // A worker cannot wait for the streams it would have to run itself.
    if (!in_callback_of(this)) {
        for (const std::shared_ptr<CpuStream> &stream : live_streams()) stream->drain();
    }
    {
        std::lock_guard<SpinLock> lock(hot_.ready_lock);  // orders the flag with push_ready
        hot_.exiting.store(true, std::memory_order_seq_cst);
    }
    {
        std::lock_guard<std::mutex> lock(sleep_mutex_);  // a sleeper checks it under this lock
    }
    sleep_cv_.notify_all();
    const std::thread::id self = std::this_thread::get_id();
    for (std::thread &worker : workers_) {
        if (!worker.joinable()) continue;
        // A worker never joins itself (it may run the last reference's destructor).
        if (worker.get_id() == self) {
            worker.detach();
        } else {
            worker.join();
        }
    }
    // Normally nothing is left. After a shutdown from a callback, dispose of what is: its
    // markers complete, so no host waiter hangs, and every reference the scheduler held (ready
    // queues, parked streams) is released, so no stream <-> scheduler cycle outlives it.
    StreamList dropped;
    for (const std::shared_ptr<CpuStream> &stream : live_streams()) stream->abandon_all(dropped);
    {
        std::lock_guard<SpinLock> lock(hot_.ready_lock);
        for (StreamList &level : hot_.ready) dropped.splice_back(level);
        hot_.ready_count.store(0, std::memory_order_relaxed);
    }
    // Streams of other contexts parked on this context's records go back to their own
    // workers; this context's are released here, outside every lock.
    make_ready(dropped);
}

}  // namespace qd::backend::cpu
