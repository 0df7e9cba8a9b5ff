// The CPU backend's spin bounds. Spinning itself (SpinLock, spin_until, cpu_relax) is shared:
// common/spin_lock.h.
//
// Bounded spinning before a blocking wait: a wake-up through a futex costs several microseconds,
// while the work that ends a wait (a task on another worker, the next enqueue of a tight loop)
// often lands within a few microseconds, so a short spin turns most waits into no sleep at all.
// The bound keeps an idle thread from burning a core: after it, callers block.
#pragma once

#include <chrono>

#include "common/spin_lock.h"

namespace qd::backend::cpu {

// How long an idle worker looks for work before it blocks on the scheduler's condition variable.
inline constexpr std::chrono::nanoseconds kWorkerSpin = std::chrono::microseconds(20);
// How long a host thread in a *_synchronize call polls before it blocks.
inline constexpr std::chrono::nanoseconds kHostSpin = std::chrono::microseconds(20);

}  // namespace qd::backend::cpu
