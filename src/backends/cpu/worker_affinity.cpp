#include "backends/cpu/worker_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>

namespace qd::backend::cpu {

std::vector<int> worker_cpus(uint32_t threads) {
    // secure_getenv: in a setuid program the environment belongs to the caller.
    const char *setting = ::secure_getenv("QD_CPU_PIN_WORKERS");
    if (setting && std::strcmp(setting, "0") == 0) return {};
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
    if (static_cast<uint32_t>(CPU_COUNT(&allowed)) != threads) return {};
    std::vector<int> cpus;
    cpus.reserve(threads);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
    return cpus;
}

void pin_current_thread(int cpu) noexcept {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)::pthread_setaffinity_np(::pthread_self(), sizeof one, &one);
}

}  // namespace qd::backend::cpu
