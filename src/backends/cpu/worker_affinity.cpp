#include "backends/cpu/worker_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>

namespace qd::backend::cpu {

namespace {

// The CPUs the calling thread may run on, in order; empty when pinning is off or the mask
// cannot be read.
std::vector<int> pinnable_cpus() {
    // secure_getenv: in a setuid program the environment belongs to the caller.
    const char *setting = ::secure_getenv("QD_CPU_PIN_WORKERS");
    if (setting && std::strcmp(setting, "0") == 0) return {};
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
    std::vector<int> cpus;
    cpus.reserve(static_cast<size_t>(CPU_COUNT(&allowed)));
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
    return cpus;
}

}  // namespace

std::vector<int> worker_cpus(uint32_t threads) {
    std::vector<int> cpus = pinnable_cpus();
    if (cpus.size() != threads) return {};
    return cpus;
}

std::vector<std::vector<int>> split_cpus(const uint32_t *counts, uint32_t n) {
    const std::vector<int> cpus = pinnable_cpus();
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; ++i) total += counts[i];
    if (cpus.empty() || total > cpus.size()) return {};
    std::vector<std::vector<int>> parts(n);
    size_t next = 0;
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t k = 0; k < counts[i]; ++k) parts[i].push_back(cpus[next++]);
    return parts;
}

void pin_current_thread(int cpu) noexcept {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
}

}  // namespace qd::backend::cpu
