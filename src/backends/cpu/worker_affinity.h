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
// Pins the calling thread to `cpu`; on failure the thread floats, which is only slower.
void pin_current_thread(int cpu) noexcept;

}  // namespace qd::backend::cpu
