// Placement of worker threads on CPUs.
//
// When a context has exactly one worker per CPU the process may use, each worker is pinned to
// its own CPU. Otherwise the kernel, waking workers from their futex, often stacks two of them
// on one CPU while another sits idle, and keeps them there for milliseconds because both look
// cache-hot; two workers on a two-CPU machine then run in series. With any other worker count
// the workers float. QD_CPU_PIN_WORKERS=0 in the environment turns pinning off.
#pragma once

#include <cstdint>
#include <vector>

namespace qd::backend::cpu {

// The CPU for each of `threads` workers, or empty when the workers should float.
std::vector<int> worker_cpus(uint32_t threads);
// Pins the calling thread to `cpu`; failures are ignored (the thread then floats).
void pin_current_thread(int cpu) noexcept;

}  // namespace qd::backend::cpu
