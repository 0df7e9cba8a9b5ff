// qd_launch_parallel: fork to pooled streams, launch each group in order on its stream, join.
#include "core/parallel_launch.h"

#include <cstddef>
#include <cstdio>
#include <vector>

#include "common/first_sizes.h"
#include "common/error.h"
#include "core/capture/capture.h"
#include "core/context.h"
#include "core/fork_join.h"
#include "core/launch_validation.h"
#include "core/task_groups.h"

namespace qd::core {

namespace {
// The most a newer caller's qd_task can have grown to; a larger struct_size is garbage, and
// stepping by it would read far past the caller's array.
constexpr uint32_t kMaxTaskSize = 1024;
// The size of a qd_task that has attrs, num_attrs and reserved2 (0.3): a smaller struct_size
// (a 0.1 or 0.2 caller's) has none, and they are not read.
constexpr uint32_t kTaskSizeWithAttrs = uint32_t(offsetof(qd_task, reserved2) + sizeof(uint32_t));
}  // namespace

qd_status plan_parallel(const qd_task *tasks, uint32_t num_tasks, ParallelPlan *plan) {
    // Each class of check runs over every task before the next class (qd.h, "Which error
    // wins"): the tasks' own values here; the handles, the contexts and the state in api/.
    if (!tasks && num_tasks > 0)
        return fail(QD_ERROR_INVALID_ARGUMENT, "tasks is NULL but num_tasks is %u", num_tasks);
    // The array's stride is tasks[0].struct_size, so a caller built against a newer, larger
    // qd_task is read correctly; every element must have the same struct_size.
    const uint32_t stride = num_tasks ? tasks[0].struct_size : 0;
    if (num_tasks &&
        (stride < first_size<qd_task>() || stride > kMaxTaskSize || stride % alignof(qd_task) != 0))
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "tasks[0].struct_size is %u; it must be a multiple of %zu from %u to %u (use "
                    "QD_TASK_INIT)",
                    stride, alignof(qd_task), first_size<qd_task>(), kMaxTaskSize);
    std::vector<ParallelPlan::Task> &prepared = plan->tasks;
    prepared.resize(num_tasks);
    std::vector<uint32_t> group_of(num_tasks);  // each task's group id
    for (uint32_t i = 0; i < num_tasks; ++i) {
        const qd_task &t = *reinterpret_cast<const qd_task *>(
            reinterpret_cast<const char *>(tasks) + uint64_t(i) * stride);
        if (t.struct_size != stride)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "tasks[%u].struct_size is %u but tasks[0].struct_size is %u; every task "
                        "of one array has the same struct_size (the array's stride)",
                        i, t.struct_size, stride);
        prepared[i].task = &t;
        qd_status st = validate_config(&t.config, &prepared[i].dims);
        if (st == QD_SUCCESS && stride >= kTaskSizeWithAttrs) {
            char prefix[32];
            std::snprintf(prefix, sizeof prefix, "tasks[%u].", i);
            if (t.reserved2 != 0)
                return fail(QD_ERROR_INVALID_ARGUMENT, "tasks[%u].reserved2 is %u; it must be 0", i,
                            t.reserved2);
            st = validate_attrs(t.attrs, t.num_attrs, prepared[i].dims, prefix, &prepared[i].attrs);
            if (st != QD_SUCCESS) return st;  // the message names the task already
        }
        if (st == QD_SUCCESS) st = validate_args(t.args, t.num_args);
        if (st != QD_SUCCESS) {
            const std::string reason = last_error_message();
            return fail(st, "tasks[%u]: %s", i, reason.c_str());
        }
        group_of[i] = t.group;
    }
    // Each task's group, numbered in order of first appearance (never a search over every
    // group per task: 1e5 groups would take seconds).
    std::vector<uint32_t> group_number;
    plan->num_groups = number_groups(group_of, &group_number);
    for (uint32_t i = 0; i < num_tasks; ++i) prepared[i].stream_index = group_number[i];
    return QD_SUCCESS;
}

qd_status launch_parallel(Stream &stream, const ParallelPlan &plan) {
    const std::vector<ParallelPlan::Task> &prepared = plan.tasks;
    const uint32_t num_tasks = uint32_t(prepared.size());
    const uint32_t num_groups = plan.num_groups;
    if (num_tasks == 0) return QD_SUCCESS;
    Stream *parent = &stream;
    Context &ctx = *parent->ctx;
    qd_status st = QD_SUCCESS;

    std::vector<std::shared_ptr<Stream>> leases;  // held: a racing destroy may clear the pool
    // Inside a capture the leases stay with the capture until it ends (core/capture/); the
    // ones it already holds from earlier parallel launches of the same capture are reused.
    CaptureRouter *capture = parent->capturing() ? ctx.capture() : nullptr;
    if (capture) capture->reuse_leases(*parent, num_groups, &leases);
    if (leases.size() < num_groups) {
        std::vector<std::shared_ptr<Stream>> more;
        st = ctx.stream_pool().acquire_internal(uint32_t(num_groups - leases.size()), &more);
        if (st != QD_SUCCESS && leases.empty()) return st;
        for (auto &m : more) leases.push_back(std::move(m));
        st = QD_SUCCESS;  // fewer streams than groups: groups share them (below)
    }
    const uint32_t k = uint32_t(leases.size());
    std::vector<Stream *> lanes(k);
    for (uint32_t i = 0; i < k; ++i) lanes[i] = leases[i].get();

    // One batch, all or nothing (core/submit.h): the fork (every lease waits for the work
    // already on the parent), the launches, the join (the parent waits for every lease), through
    // one pooled event (each wait captures the record before the next record is queued).
    std::shared_ptr<backend::Event> ev;
    st = ctx.event_pool().get(&ev);
    if (st == QD_SUCCESS) {
        OpBatch ops(size_t(num_tasks) + 3 * size_t(k) + 1);
        ops.record(*parent, *ev, OpOrigin::ParallelLaunch);
        for (uint32_t i = 0; i < k; ++i) ops.wait(*lanes[i], *ev, OpOrigin::ParallelLaunch);
        // Groups share streams round-robin when the pool had fewer free than there are groups;
        // a group always maps to one stream, so its tasks stay in order.
        for (uint32_t i = 0; i < num_tasks; ++i) {
            const qd_task &t = *prepared[i].task;
            Op &op = ops.add(OpKind::Launch, *lanes[prepared[i].stream_index % k],
                             OpOrigin::ParallelLaunch);
            op.kernel = prepared[i].kernel;
            op.dims = &prepared[i].dims;
            op.args = t.args;
            op.num_args = t.num_args;
            if (!prepared[i].attrs.attrs.empty()) {
                op.attrs = &prepared[i].attrs.attrs;
                op.completion_event = prepared[i].event;
            }
        }
        // The join runs even after a part failed in the backend: the parent must not run
        // ahead of what was queued.
        const size_t join_from = ops.size();
        for (uint32_t i = 0; i < k; ++i) {
            ops.record(*lanes[i], *ev, OpOrigin::ParallelLaunch);
            ops.wait(*parent, *ev, OpOrigin::ParallelLaunch);
        }
        st = ops.submit(ctx, join_from);
        ctx.event_pool().put(std::move(ev));
    }
    const std::string reason = st != QD_SUCCESS ? last_error_message() : "";
    if (capture) {
        std::vector<std::shared_ptr<Stream>> back;
        for (auto &l : leases)
            if (!capture->keep_lease(l)) back.push_back(std::move(l));
        leases.swap(back);
    }
    ctx.stream_pool().release_internal(leases);
    if (!reason.empty()) return fail(st, "%s", reason.c_str());
    return st;
}

}  // namespace qd::core
