// A completion marker: the thing an event's record produces, and what waits wait on.
//
// Each record creates a fresh marker, so a wait captures exactly the record it was issued
// against; recording the event again makes a new marker and leaves earlier waits alone.
// Streams that reach a wait on an incomplete marker park on it (the marker holds a reference
// to each) and the worker moves on; completing the marker hands them back to the scheduler.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/spin_lock.h"
#include "backends/cpu/stream_list.h"

namespace qd::backend::cpu {

class Marker {
  public:
    using Clock = std::chrono::steady_clock;

    bool complete() const noexcept { return done_.load(std::memory_order_acquire); }
    // When the marker completed; meaningful only once complete() is true.
    Clock::time_point time() const noexcept { return time_; }

    // Completes a marker nobody else can see yet (a record on an idle stream): no waiter can
    // exist, so no lock is needed.
    void complete_unpublished(Clock::time_point now) noexcept;
    // Completes the marker: parked streams move to `woken` (the caller makes them ready) and
    // host threads blocked in wait() are woken. Called at most once.
    void complete(Clock::time_point now, StreamList &woken) noexcept {
        publish(now, woken);
        wake_host_waiters();
    }
    // complete() in two halves, for a caller that publishes under its own spin lock: publish()
    // takes only the marker's spin lock and never blocks; wake_host_waiters() may take a mutex.
    void publish(Clock::time_point now, StreamList &woken) noexcept;
    void wake_host_waiters() noexcept;
    // Parks `stream` until completion; false (and nothing parked) if already complete.
    bool park(const std::shared_ptr<CpuStream> &stream) noexcept;
    // Blocks the calling host thread until completion (a bounded spin first).
    void wait();

  private:
    std::atomic<bool> done_{false};
    Clock::time_point time_{};  // written before done_ is released
    SpinLock lock_;             // guards parked_ and the transition of done_
    StreamList parked_;
    // Host threads in wait(): the completer reads host_waiters_ after setting done_, a waiter
    // re-reads done_ after counting itself (both sequentially consistent), so a completion
    // never misses a waiter, and the mutex is taken only when someone waits.
    std::atomic<uint32_t> host_waiters_{0};
    std::mutex host_mutex_;
    std::condition_variable host_cv_;
};

}  // namespace qd::backend::cpu
