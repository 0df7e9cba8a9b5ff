// The context's pool of worker threads and its ready queue of runnable streams.
//
// Workers run streams, not tasks: a worker pops a ready stream and runs tasks from its head
// until the stream is empty, parks on a marker, or has used its fairness budget while other
// streams wait. A stream is on the ready queue, being run, or parked (never two at once), so
// one worker at a time runs it and its tasks stay in order. See README.md for the full model.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/spin_lock.h"
#include "backends/cpu/stream_list.h"
#include "backends/cpu/task_queue.h"

namespace qd::backend::cpu {

class CpuStream;
class Scheduler;

// Streams have three priority levels: 0 (least urgent, the default), -1, -2 (most urgent).
inline constexpr int32_t kLeastPriority = 0;
inline constexpr int32_t kGreatestPriority = -2;
inline constexpr int kPriorityLevels = 3;

// Per-worker state the task code needs. Lives on the worker's stack.
struct WorkerState {
    explicit WorkerState(Scheduler *s, LostState *l) : scheduler(s), lost(l) {}
    // Zeroed per block by the launch code; grown on demand. Null when it cannot be allocated.
    void *scratch(uint32_t bytes) noexcept;

    Scheduler *scheduler;
    LostState *lost;
    // Streams this worker's marker completions made runnable, handed to the scheduler in one
    // batch so that the worker itself can often continue with one of them (no thread wake-up).
    StreamList woken;

  private:
    struct FreeDeleter {
        void operator()(void *p) const noexcept;
    };
    std::unique_ptr<void, FreeDeleter> scratch_;
    uint32_t scratch_bytes_ = 0;
};

class Scheduler : public std::enable_shared_from_this<Scheduler> {
  public:
    // Starts `threads` workers. Throws std::system_error when a thread cannot be started and
    // std::bad_alloc; nothing is left running then.
    static std::shared_ptr<Scheduler> start(uint32_t threads, LostState *lost);
    ~Scheduler();
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    // Hands an idle stream that just got work (or whose wait completed) to the workers.
    void make_ready(std::shared_ptr<CpuStream> stream) noexcept;
    void make_ready(StreamList &streams) noexcept;
    // Whether some stream waits for a worker; read by a running worker to decide whether to
    // yield at the end of its fairness budget.
    bool has_ready() const noexcept { return ready_count_.load(std::memory_order_relaxed) > 0; }
    // Where the task queues of this context's streams get their chunks.
    ChunkPool &chunk_pool() noexcept { return chunk_pool_; }
    // Set once shutdown begins; enqueues check it under their stream's lock.
    bool stopping() const noexcept { return stopping_.load(std::memory_order_relaxed); }

    // Streams register for their whole life so that live_streams() finds streams whose last
    // outside reference is gone but whose work is still pending.
    std::list<CpuStream *>::iterator register_stream(CpuStream *stream);
    void unregister_stream(std::list<CpuStream *>::iterator it) noexcept;
    // Every live stream, with a reference each.
    std::vector<std::shared_ptr<CpuStream>> live_streams();

    // Stops and joins the workers, then disposes of work that raced with the stop (completing
    // its markers so no host waiter hangs). Idempotent. Not from a worker of this scheduler.
    void shutdown();

  private:
    Scheduler(uint32_t threads, LostState *lost);
    void worker_main(int cpu);
    // Spins for work, then sleeps until woken or stopped.
    void idle();
    // Pushes under ready_lock_; false (stream untouched) once stopping.
    bool push_ready(std::shared_ptr<CpuStream> &stream) noexcept;
    std::shared_ptr<CpuStream> pop_ready() noexcept;
    // Wakes sleeping workers for ready streams that no awake worker is going to take.
    void wake_if_needed() noexcept;

    const uint32_t thread_count_;
    LostState *const lost_;  // the context's; used only by workers, which the context outlives

    SpinLock ready_lock_;
    StreamList ready_[kPriorityLevels];  // index = -priority: 2 is the most urgent
    // The counts behind the wake-up decisions, read without locks. A producer increments
    // ready_count_ and then reads searching_ and sleepers_; a worker about to sleep updates
    // those two and then re-reads ready_count_. All sequentially consistent, so at least one
    // side sees the other: either the worker finds the stream or the producer wakes a worker.
    std::atomic<int> ready_count_{0};  // streams on ready_
    std::atomic<int> searching_;       // workers awake and not running a stream (spinners too)
    std::atomic<int> sleepers_{0};     // workers asleep (or committed to it), not yet woken
    std::atomic<bool> stopping_{false};

    // Only for sleeping: never taken on a path that has work to do.
    std::mutex sleep_mutex_;
    std::condition_variable sleep_cv_;
    int wakeups_ = 0;  // wake-ups granted and not yet taken by a sleeper

    std::vector<std::thread> workers_;
    ChunkPool chunk_pool_;

    std::mutex registry_mutex_;
    std::list<CpuStream *> registry_;
};

}  // namespace qd::backend::cpu
