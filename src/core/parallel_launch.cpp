// qd_launch_parallel: fork to pooled streams, launch each group in order on its stream, join.
#include <vector>

#include "common/error.h"
#include "core/context.h"
#include "core/fork_join.h"
#include "core/launch_validation.h"

namespace qd::core {

namespace {
constexpr uint32_t kTaskV1Size = 64;

struct Prepared {
    backend::Kernel *kernel;
    backend::LaunchDims dims;
    uint32_t stream_index;  // group's position in order of first appearance
};
}  // namespace

qd_status launch_parallel(uint64_t stream, const qd_task *tasks, uint32_t num_tasks) {
    Stream *parent = nullptr;
    qd_status st = resolve_usable(stream, &parent);
    if (st != QD_SUCCESS) return st;
    if (num_tasks == 0) return QD_SUCCESS;
    if (!tasks) return fail(QD_ERROR_INVALID_ARGUMENT, "tasks is NULL but num_tasks is %u", num_tasks);
    Context &ctx = *parent->ctx;

    // Validate every task, and keep its kernel alive, before anything is queued.
    std::vector<Prepared> prepared(num_tasks);
    std::vector<Kernel *> kernels;  // borrowed for the call (resolve_cache.h)
    std::vector<uint32_t> groups;                  // distinct group ids, in order of appearance
    uint64_t last_kernel = 0;
    for (uint32_t i = 0; i < num_tasks; ++i) {
        const qd_task &t = tasks[i];
        if (t.struct_size < kTaskV1Size)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "tasks[%u].struct_size is %u; at least %u is required (use QD_TASK_INIT)",
                        i, t.struct_size, kTaskV1Size);
        if (kernels.empty() || t.kernel != last_kernel) {
            Kernel *k = nullptr;
            st = resolve(t.kernel, &k);
            if (st != QD_SUCCESS) {
                const std::string reason = last_error_message();
                return fail(st, "tasks[%u]: %s", i, reason.c_str());
            }
            if (k->ctx.get() != &ctx)
                return fail(QD_ERROR_WRONG_CONTEXT,
                            "tasks[%u].kernel belongs to another context than the stream", i);
            kernels.push_back(k);
            last_kernel = t.kernel;
        }
        prepared[i].kernel = kernels.back()->impl.get();
        st = validate_config(&t.config, &prepared[i].dims);
        if (st == QD_SUCCESS) st = validate_args(t.args, t.num_args);
        if (st != QD_SUCCESS) {
            const std::string reason = last_error_message();
            return fail(st, "tasks[%u]: %s", i, reason.c_str());
        }
        uint32_t g = 0;
        while (g < groups.size() && groups[g] != t.group) ++g;
        if (g == groups.size()) groups.push_back(t.group);
        prepared[i].stream_index = g;
    }

    std::vector<std::shared_ptr<Stream>> leases;  // held: a racing destroy may clear the pool
    st = ctx.stream_pool().acquire_internal(uint32_t(groups.size()), &leases);
    if (st != QD_SUCCESS) return st;
    const uint32_t k = uint32_t(leases.size());
    std::vector<backend::Stream *> impls(k);
    for (uint32_t i = 0; i < k; ++i) impls[i] = leases[i]->impl.get();

    // Fork: every lease waits for the work already on the parent.
    st = link_streams(ctx.event_pool(), *parent->impl, impls.data(), k);
    // Groups share streams round-robin when the pool had fewer free than there are groups;
    // a group always maps to one stream, so its tasks stay in order.
    for (uint32_t i = 0; st == QD_SUCCESS && i < num_tasks; ++i) {
        const qd_task &t = tasks[i];
        st = impls[prepared[i].stream_index % k]->launch(*prepared[i].kernel, prepared[i].dims,
                                                         t.args, t.num_args);
    }
    // Join, even after a failed launch: the parent must not run ahead of what was queued.
    const std::string reason = st != QD_SUCCESS ? last_error_message() : "";
    backend::Stream *target = parent->impl.get();
    for (uint32_t i = 0; i < k; ++i) {
        qd_status js = link_streams(ctx.event_pool(), *impls[i], &target, 1);
        if (st == QD_SUCCESS) st = js;
    }
    ctx.stream_pool().release_internal(leases);
    if (!reason.empty()) return fail(st, "%s", reason.c_str());
    return st;
}

}  // namespace qd::core
