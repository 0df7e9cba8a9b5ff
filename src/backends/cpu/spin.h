// Bounded spinning before a blocking wait. A wake-up through a futex costs several microseconds,
// while the work that ends a wait (a task on another worker, the next enqueue of a tight loop)
// often lands within a few microseconds, so a short spin turns most waits into no sleep at all.
// The bound keeps an idle thread from burning a core: after it, callers block.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>

namespace qd::backend::cpu {

// How long an idle worker looks for work before it blocks on the scheduler's condition variable.
inline constexpr std::chrono::nanoseconds kWorkerSpin = std::chrono::microseconds(20);
// How long a host thread in a *_synchronize call polls before it blocks.
inline constexpr std::chrono::nanoseconds kHostSpin = std::chrono::microseconds(20);
// Polls with a pause instruction before the spin starts yielding the core.
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

}  // namespace qd::backend::cpu
