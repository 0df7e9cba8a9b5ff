#include "common/fork_generation.h"

#include <pthread.h>

namespace qd {

std::atomic<uint64_t> g_fork_generation{0};

namespace {

void on_fork_child() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

// Registered at load time (this object is always linked: g_fork_generation is used by the core
// and the GPU layer).
[[maybe_unused]] const bool g_registered = [] {
    pthread_atfork(nullptr, nullptr, on_fork_child);
    return true;
}();

}  // namespace

}  // namespace qd
