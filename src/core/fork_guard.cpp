// fork() detection. The child of a fork inherits contexts whose worker threads and driver state
// did not come along; using them could hang or corrupt the parent's device state. Every
// context remembers the fork generation it was created in, and a pthread_atfork child handler
// bumps the generation, so inherited contexts answer QD_ERROR_FORKED while new ones work.
#include <pthread.h>

#include <atomic>

#include "core/context.h"

namespace qd::core {

std::atomic<uint64_t> g_fork_generation{0};

namespace {

void on_fork_child() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

// Registered at load time so that a fork before any context exists is covered too.
[[maybe_unused]] const bool g_registered = [] {
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
}();

}  // namespace

}  // namespace qd::core
