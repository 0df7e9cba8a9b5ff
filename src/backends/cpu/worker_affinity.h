// Placement of a context's worker threads on CPUs.
//
// When a context has exactly one worker per CPU the process may use (the default worker count
// on a machine the process has to itself), each worker is pinned to its own CPU. Left to float,
// workers woken from their futex are often stacked by the kernel on one CPU while another sits
// idle, and both then look cache-hot, so the load balancer leaves them there for milliseconds:
// on a two-CPU machine two workers then run in series. With any other worker count the
// workers float. QD_CPU_PIN_WORKERS=0 in the environment turns pinning off (for processes that
// manage CPU placement themselves).
#pragma once

#include <cstdint>
#include <vector>

namespace qd::backend::cpu {

// The CPU for each of `threads` workers, or empty when the workers should float. Reads the
// calling thread's CPU mask, so call it on the thread that creates the context.
std::vector<int> worker_cpus(uint32_t threads);
// The CPUs of the workers of each part of a split (qd.h, "SM partitions"): part i's counts[i]
// workers each get a CPU no other part's worker has, from the calling thread's CPU mask in
// order. Empty when the workers should float: QD_CPU_PIN_WORKERS=0, or fewer usable CPUs than
// the counts add up to.
std::vector<std::vector<int>> split_cpus(const uint32_t *counts, uint32_t n);
// Pins the calling thread to `cpu`; on failure the thread floats, which is only slower.
void pin_current_thread(int cpu) noexcept;

}  // namespace qd::backend::cpu
