// Spinning, shared by the CPU and GPU backends and the core (libuv's uv-common.h is the model:
// one copy of what every room needs).
//
// SpinLock guards the short critical sections on hot paths (a stream's queue, the ready queue,
// a pool's free list, the allocation registry, a handle slot). Those sections are a few pointer
// writes, but they are contended by several threads at once, and a std::mutex that finds its
// lock taken puts the thread to sleep on a futex: a sleep and wake-up cost microseconds, a
// hundred times the section itself. SpinLock spins instead, and yields the core after a few
// polls so that a lock holder preempted on the same core (more threads than cores) can finish.
// Nobody ever blocks while holding one.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace qd {

// Polls with a pause instruction before a spin starts yielding the core.
inline constexpr uint32_t kPausePolls = 64;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#else
    asm volatile("" ::: "memory");
#endif
}

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

using SpinGuard = std::lock_guard<SpinLock>;

// Polls done() until it returns true (then returns true) or limit has passed (then false).
// After the first polls it yields between polls: with more threads than cores (workers plus the
// host thread that issues work), a spinner that kept its core would starve the very thread it
// waits for. The clock is read only every 16 polls: a clock read costs more than a poll.
template <class Done>
bool spin_until(Done done, std::chrono::nanoseconds limit) {
    if (done()) return true;
    const auto start = std::chrono::steady_clock::now();
    for (uint32_t i = 1;; ++i) {
        if (i < kPausePolls) {
            cpu_relax();
        } else {
            sched_yield();
        }
        if (done()) return true;
        if ((i & 15u) == 0 && std::chrono::steady_clock::now() - start > limit) return false;
    }
}

// A statistics counter written by one thread at a time (under a lock) and read by any: a plain
// load and store, no locked instruction.
inline void bump_counter(std::atomic<uint64_t> &c, int64_t delta) noexcept {
    c.store(c.load(std::memory_order_relaxed) + uint64_t(delta), std::memory_order_relaxed);
}

}  // namespace qd
