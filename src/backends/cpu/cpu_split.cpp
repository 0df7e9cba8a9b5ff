// qd_context_split on the CPU backend (qd.h, "SM partitions"): the parent's worker count plays
// the SM count, and each part starts workers of its own, pinned to CPUs no other part uses
// where the process may run on enough CPUs (worker_affinity.h).
#include <memory>
#include <vector>

#include "backends/cpu/cpu_context.h"
#include "backends/cpu/worker_affinity.h"
#include "common/error.h"
#include "common/limits.h"

namespace qd::backend::cpu {

qd_status CpuContext::split(const uint32_t *counts, uint32_t n,
                            std::vector<std::unique_ptr<Context>> *out) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; ++i) total += counts[i];
    if (total > threads_)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "the counts add up to %llu workers, and the context has %u: on the CPU "
                    "backend a split divides the context's worker threads (its SM count)",
                    static_cast<unsigned long long>(total), threads_);
    if (scheduler_->stopping()) return fail_context_destroyed();
    const std::vector<std::vector<int>> cpus = split_cpus(counts, n);
    std::vector<std::unique_ptr<Context>> parts;
    parts.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        std::unique_ptr<Context> part;
        // A part that cannot start leaves none: the parts already made stop their workers as
        // `parts` goes out of scope.
        qd_status st = start(counts[i], cpus.empty() ? std::vector<int>{} : cpus[i], &part);
        if (st != QD_SUCCESS) return st;
        parts.push_back(std::move(part));
    }
    *out = std::move(parts);
    return QD_SUCCESS;
}

}  // namespace qd::backend::cpu
