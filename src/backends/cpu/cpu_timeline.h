// A CPU timeline (qd.h, "Timelines"): a 64-bit counter, and one marker (marker.h) per value a
// queued wait is waiting for.
//
// A wait for a value not reached yet takes that value's marker (made on first use, shared by
// every wait for the same value) and is queued as an event wait is: the stream parks on the
// marker and no worker blocks. A signal that reaches the value completes every marker at or
// below it, which hands their parked streams back to the scheduler, the path an event's record
// takes. Host waits sleep on the timeline's own condition variable, which a signal notifies
// only while a host thread waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <utility>
#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "backends/common/live_registry.h"
#include "backends/cpu/marker.h"
#include "backends/cpu/scheduler.h"
#include "common/spin_lock.h"

namespace qd::backend::cpu {

class CpuTimeline final : public Timeline, public std::enable_shared_from_this<CpuTimeline> {
  public:
    // A new timeline, registered with the scheduler (which releases its waits when the context
    // is lost), or nullptr once the scheduler is stopping. `lost` is the context's; the
    // timeline reads it only in host_wait and while a wait is queued, both of which the
    // context outlives (its destroy closes the timeline and drains before it goes).
    static std::shared_ptr<CpuTimeline> create(std::shared_ptr<Scheduler> scheduler,
                                               const LostState *lost, uint64_t initial);
    CpuTimeline(std::shared_ptr<Scheduler> scheduler, const LostState *lost,
                uint64_t initial);  // use create()
    ~CpuTimeline() override;

    uint64_t value() const override { return value_.load(std::memory_order_acquire); }
    qd_status host_signal(uint64_t value) override;
    qd_status host_wait(uint64_t value, uint64_t timeout_ns) override;
    void close() override;

    // --- Used by streams and the scheduler ---

    // A signal of `value` was queued on a stream (close() releases only the waits that no
    // queued signal reaches).
    void queued(uint64_t value) noexcept;
    // The marker a wait for `value` parks on, or null when there is nothing to wait for: the
    // value is reached, or can no longer be (the timeline is closed and no signal reaches it,
    // or the context is lost).
    std::shared_ptr<Marker> marker_for(uint64_t value);
    // The counter becomes at least `value`: the markers at or below it complete (their
    // streams move to `woken`, which the caller hands to the scheduler) and host waiters
    // wake. Never under a spin lock of the caller's (it may take the host mutex).
    void reach(uint64_t value, StreamList &woken) noexcept {
        if (raise(value, woken)) wake_host_waiters();
    }
    // reach() in two halves, for a worker that signals under its stream's spin lock (as a
    // record completes there): raise() takes only spin locks and says whether a host thread
    // waits; wake_host_waiters() may take a mutex, so it comes after the caller's lock.
    bool raise(uint64_t value, StreamList &woken) noexcept;
    void wake_host_waiters() noexcept;
    // The context is lost: every marker completes and host waiters wake (they return
    // QD_ERROR_DEVICE_LOST).
    void release_all(StreamList &woken) noexcept;

  private:
    // Completes the markers of values at or below `limit` (lock_ held).
    void complete_upto_locked(uint64_t limit, StreamList &woken) noexcept;

    const std::shared_ptr<Scheduler> scheduler_;
    const LostState *const lost_;
    std::atomic<uint64_t> value_;

    SpinLock lock_;  // guards pending_, queued_max_, released_; value_ changes under it
    // The markers of the values waited for, in value order, one per value. Waits mostly come
    // in value order, so a marker is appended and completed from the front: a deque, not a
    // tree (a tree's node per value cost a hop several cache misses, B7 wake/timeline-hop).
    std::deque<std::pair<uint64_t, std::shared_ptr<Marker>>> pending_;
    uint64_t queued_max_;    // the largest value signalled or queued for signalling
    bool released_ = false;  // lost: no wait parks any more
    std::atomic<bool> closed_{false};

    // Host threads in host_wait(): a signal reads host_waiters_ after publishing value_, a
    // waiter re-reads value_ after counting itself (both sequentially consistent), so a wake-up
    // is never missed and the mutex is taken only when someone waits.
    std::atomic<uint32_t> host_waiters_{0};
    std::mutex host_mutex_;
    std::condition_variable host_cv_;

    LiveRegistry<CpuTimeline>::Entry registry_entry_;
    bool registered_ = false;
};

}  // namespace qd::backend::cpu
