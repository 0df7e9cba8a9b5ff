// A CPU stream: an in-order queue of tasks that the context's workers run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "backends/cpu/scheduler.h"
#include "common/spin_lock.h"
#include "backends/cpu/stream_list.h"
#include "backends/cpu/task_queue.h"

namespace qd::backend::cpu {

class Marker;

class CpuStream final : public Stream, public std::enable_shared_from_this<CpuStream> {
  public:
    // A new stream, registered with the scheduler, or nullptr once the scheduler is stopping.
    // priority must already be clamped to [kGreatestPriority, kLeastPriority]. Registration
    // happens here, after make_shared has finished (it writes the weak self-reference that
    // Scheduler::live_streams() reads), never in the constructor.
    static std::shared_ptr<CpuStream> create(std::shared_ptr<Scheduler> scheduler,
                                             int32_t priority);
    CpuStream(std::shared_ptr<Scheduler> scheduler, int32_t priority);  // use create()
    ~CpuStream() override;

    qd_status launch(Kernel &kernel, const LaunchDims &dims, const qd_arg *args,
                     uint32_t num_args) override;
    qd_status launch_ex(Kernel &kernel, const LaunchDims &dims, const LaunchAttrs &attrs,
                        const qd_arg *args, uint32_t num_args) override;
    qd_status record(Event &event) override;
    qd_status wait(Event &event) override;
    qd_status signal(Timeline &timeline, uint64_t value) override;
    qd_status wait_value(Timeline &timeline, uint64_t value) override;
    qd_status synchronize() override;
    qd_status query() override;
    qd_status get_native_handle(uint64_t *out) const override;
    qd_status mem_alloc(uint64_t bytes, uint64_t *address) override;
    qd_status mem_free(uint64_t address) override;
    qd_status memcpy(uint64_t dst, uint64_t src, uint64_t bytes) override;
    qd_status memset(uint64_t dst, uint8_t value, uint64_t bytes) override;
    qd_status host_fn(qd_host_fn fn, void *user_data) override;
    qd_status host_status_fn(qd_host_status_fn fn, uint64_t handle, void *user_data) override;
    int32_t priority() const override { return priority_; }

    // --- Used by the scheduler ---

    // Index of this stream's ready queue: 0 (least urgent) .. kPriorityLevels - 1: its own
    // priority's, or, while it holds a queued launch of a more urgent PRIORITY attribute
    // (qd_launch_ex), that launch's.
    int level() const noexcept {
        if (__builtin_expect(urgent_total_.load(std::memory_order_relaxed) == 0, 1))
            return -priority_;
        return urgent_level();
    }
    // The scheduler whose workers run this stream (its context's).
    Scheduler *scheduler() const noexcept { return scheduler_.get(); }
    // The same, owned: for a thread of another context that hands this stream to its workers.
    std::shared_ptr<Scheduler> scheduler_ref() const noexcept { return scheduler_; }

    enum class RunResult {
        kIdle,    // the queue is empty; the stream is no longer scheduled
        kParked,  // the head waits on an incomplete marker, which now holds the stream
        kYield,   // the fairness budget ran out while other streams were ready: requeue it
    };
    // Runs tasks from the head. `self` is the worker's reference to this stream.
    RunResult run(const std::shared_ptr<CpuStream> &self, WorkerState &worker) noexcept;
    // Waits until every task accepted so far has run (shutdown: enqueues already fail, so
    // this reads the count under the lock to include any enqueue that got in before the stop).
    void drain() noexcept;
    // Disposes of every queued task without running it (the context shut down).
    void abandon_all(StreamList &woken) noexcept;

  private:
    friend class StreamList;

    template <class Build>
    qd_status enqueue(uint32_t bytes, Build &&build);
    // Queues a wait for `marker` (an event's record or a timeline's value); null: nothing to
    // wait for.
    qd_status wait_marker(std::shared_ptr<Marker> marker);
    // Counts one finished task (lock_ held); true if a host waiter must be woken, which the
    // caller does with wake_host_waiters() after releasing lock_.
    bool count_completion_locked() noexcept;
    void wake_host_waiters() noexcept;
    void wait_for(uint64_t target) noexcept;

    int urgent_level() const noexcept;

    const std::shared_ptr<Scheduler> scheduler_;
    const int32_t priority_;
    // Queued launches whose PRIORITY attribute is more urgent than priority_, per level, and
    // how many there are in all (level()'s fast path reads only that).
    std::atomic<uint32_t> urgent_[kPriorityLevels] = {};
    std::atomic<uint32_t> urgent_total_{0};

    SpinLock lock_;  // guards queue_ and scheduled_
    TaskQueue queue_;
    // True while the stream is on the ready queue, being run, or parked: exactly then the
    // scheduler holds a reference, and enqueuers must not hand it over again.
    bool scheduled_ = false;
    // Tasks enqueued and tasks finished; the stream is idle when they are equal. Written under
    // lock_, read without it by query() and synchronize().
    std::atomic<uint64_t> enqueued_{0};
    std::atomic<uint64_t> completed_{0};

    // Host threads blocked in synchronize(). wake_at_ is the smallest completion count one of
    // them waits for, so the worker takes wait_mutex_ only when it is reached, never per task.
    // A waiter publishes wake_at_ and then re-reads completed_; the worker publishes completed_
    // and then reads wake_at_ (both sequentially consistent), so one of them sees the other.
    std::atomic<uint64_t> wake_at_{UINT64_MAX};
    std::mutex wait_mutex_;
    std::condition_variable idle_cv_;

    // The link of whichever StreamList holds the stream (guarded by that list's owner).
    struct Link {
        CpuStream *next = nullptr;
        std::shared_ptr<CpuStream> self;
    } link_;

    LiveRegistry<CpuStream>::Entry registry_entry_;
    bool registered_ = false;
};

}  // namespace qd::backend::cpu
