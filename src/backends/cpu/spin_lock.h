// The lock for the short critical sections on the enqueue and scheduling paths (a stream's
// queue, the ready queue, a marker's parked list, an event's latest record).
//
// Those sections are a few pointer writes, but they are contended by the host thread and the
// workers at once, and a std::mutex that finds its lock taken puts the thread to sleep on a
// futex: a sleep and wake-up cost microseconds, a hundred times the section itself. This lock
// spins instead, and yields the core after a few polls so that a lock holder preempted on the
// same core (more threads than cores) can finish. Nobody ever blocks while holding it.
#pragma once

#include <atomic>
#include <cstdint>

#include "backends/cpu/spin.h"

namespace qd::backend::cpu {

class SpinLock {
  public:
    void lock() noexcept {
        for (uint32_t polls = 0;;) {
            if (!locked_.exchange(true, std::memory_order_acquire)) return;
            // Wait on a plain load so the waiting cores share the cache line instead of
            // stealing it from the holder.
            while (locked_.load(std::memory_order_relaxed)) {
                if (++polls < kPausePolls) {
                    cpu_relax();
                } else {
                    sched_yield();
                }
            }
        }
    }
    bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) &&
               !locked_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }

  private:
    std::atomic<bool> locked_{false};
};

}  // namespace qd::backend::cpu
