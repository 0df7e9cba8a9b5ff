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
#include "common/spin_lock.h"
#include "backends/common/live_registry.h"
#include "backends/cpu/stream_list.h"
#include "backends/cpu/task_queue.h"

namespace qd::backend::cpu {

class CpuStream;
class CpuTimeline;
class Scheduler;

// Streams have three priority levels: 0 (least urgent, the default), -1, -2 (most urgent).
inline constexpr int32_t kLeastPriority = 0;
inline constexpr int32_t kGreatestPriority = -2;
inline constexpr int kPriorityLevels = 3;
// Aging: a ready stream of a less urgent level is taken instead once its level has been passed
// over this many times while it waited (a more urgent stream was taken), so that always-busy
// urgent streams cannot starve it: it is served within kAgingPasses + 2 pops.
inline constexpr uint32_t kAgingPasses = 8;

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
    // Starts `threads` workers, worker i pinned to cpus[i] (cpus empty: they float). Throws
    // std::system_error when a thread cannot be started and std::bad_alloc; nothing is left
    // running then.
    static std::shared_ptr<Scheduler> start(uint32_t threads, LostState *lost,
                                            const std::vector<int> &cpus);
    ~Scheduler();
    Scheduler(const Scheduler &) = delete;
    Scheduler &operator=(const Scheduler &) = delete;

    // Hands an idle stream that just got work (or whose wait completed) to the workers.
    void make_ready(std::shared_ptr<CpuStream> stream) noexcept;
    void make_ready(StreamList &streams) noexcept;
    // Whether some stream waits for a worker; read by a running worker to decide whether to
    // yield at the end of its fairness budget.
    bool has_ready() const noexcept { return hot_.ready_count.load(std::memory_order_relaxed) > 0; }
    // Where the task queues of this context's streams get their chunks.
    ChunkPool &chunk_pool() noexcept { return chunk_pool_; }
    // Set once shutdown begins: enqueues check it under their stream's lock and fail.
    bool stopping() const noexcept { return hot_.stopping.load(std::memory_order_relaxed); }

    // Streams register for their whole life so that live_streams() finds streams whose last
    // outside reference is gone but whose work is still pending. Registration is refused
    // (false) once shutdown has begun, so every stream shutdown() does not drain was refused.
    bool register_stream(CpuStream *stream, LiveRegistry<CpuStream>::Entry *entry) {
        return streams_.add(stream, entry);
    }
    void unregister_stream(LiveRegistry<CpuStream>::Entry entry) noexcept {
        streams_.remove(entry);
    }
    // Every live stream, with a reference each.
    std::vector<std::shared_ptr<CpuStream>> live_streams();
    // Timelines register for their whole life too (cpu_timeline.h), so that a loss of the
    // context releases their waits: release_timelines() is the context's LostState hook.
    bool register_timeline(CpuTimeline *timeline, LiveRegistry<CpuTimeline>::Entry *entry) {
        return timelines_.add(timeline, entry);
    }
    void unregister_timeline(LiveRegistry<CpuTimeline>::Entry entry) noexcept {
        timelines_.remove(entry);
    }
    void release_timelines() noexcept;

    // Refuses new work, lets the workers finish every task accepted before that (so each
    // enqueue that succeeded has run when this returns), then stops and joins the workers.
    // Idempotent. Not from a worker of this scheduler (there it cannot drain: it only stops
    // the others and disposes of what is left, completing markers so no waiter hangs).
    void shutdown();

  private:
    Scheduler(uint32_t threads, LostState *lost);
    void worker_main(int cpu);  // cpu: where to pin the worker, -1 to let it float
    // Spins for work, then sleeps until woken or stopped.
    void idle();
    // Pushes under the ready lock; false (stream untouched) once the workers exit.
    bool push_ready(std::shared_ptr<CpuStream> &stream) noexcept;
    std::shared_ptr<CpuStream> pop_ready() noexcept;
    // Wakes sleeping workers for ready streams that no awake worker is going to take.
    void wake_if_needed() noexcept;

    LostState *const lost_;  // the context's; used only by workers, which the context outlives

    // The fields that every hand-over of a stream touches (an enqueue onto an idle stream, a
    // worker's pop), on one cache line, so that a hand-over between cores moves one line.
    // The counts behind the wake-up decisions are read without the lock. A producer increments
    // ready_count and then reads searching and sleepers; a worker about to sleep updates those
    // two and then re-reads ready_count. All sequentially consistent, so at least one side sees
    // the other: either the worker finds the stream or the producer wakes a worker.
    struct alignas(64) Hot {
        SpinLock ready_lock;                // guards ready
        std::atomic<bool> stopping{false};  // no new work is accepted
        std::atomic<bool> exiting{false};   // the drain is over: workers leave
        std::atomic<int> ready_count{0};    // streams on ready
        std::atomic<int> searching{0};      // workers awake and not running a stream (spinners too)
        std::atomic<int> sleepers{0};       // workers asleep (or committed to it), not yet woken
        StreamList ready[kPriorityLevels];  // index = -priority: 2 is the most urgent
    } hot_;
    static_assert(sizeof(Hot) == 64, "the hand-over fields should fill exactly one cache line");
    // Per level: how often a stream of a more urgent level was taken while this level had a
    // ready stream (aging, kAgingPasses). Guarded by hot_.ready_lock; touched only while
    // streams of two levels are ready at once.
    uint32_t passed_over_[kPriorityLevels] = {};

    // Only for sleeping: never taken on a path that has work to do.
    std::mutex sleep_mutex_;
    std::condition_variable sleep_cv_;
    int wakeups_ = 0;  // wake-ups granted and not yet taken by a sleeper

    std::vector<std::thread> workers_;
    ChunkPool chunk_pool_;

    LiveRegistry<CpuStream> streams_;      // closed by shutdown()
    LiveRegistry<CpuTimeline> timelines_;  // closed by shutdown()
};

}  // namespace qd::backend::cpu
