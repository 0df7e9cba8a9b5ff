// fork() detection, one copy for the core and every backend. The child of a fork inherits
// contexts, streams and driver state whose threads and device state did not come along; using
// them could hang or corrupt the parent's device state. Each such object remembers the fork
// generation it was made in; one pthread_atfork child handler, registered when libqd loads (so a
// fork before any context exists is covered too), bumps the generation, so inherited objects
// answer QD_ERROR_FORKED while new ones work.
#pragma once

#include <atomic>
#include <cstdint>

namespace qd {

extern std::atomic<uint64_t> g_fork_generation;

// 0 in the process that loaded libqd; n in the child of its n-th generation of fork().
inline uint64_t fork_generation() noexcept {
    return g_fork_generation.load(std::memory_order_relaxed);
}

}  // namespace qd
