// qd_launch_parallel in two steps around api/'s resolution of the handles: plan_parallel checks
// the tasks' own values and numbers their groups (no handle is looked at), api/ resolves the
// stream and every task's kernel into the plan and checks their contexts, and launch_parallel
// forks to pooled streams, launches each group in order on its stream, and joins.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "core/context.h"
#include "core/launch_validation.h"

namespace qd::core {

struct ParallelPlan {
    struct Task {
        const qd_task *task = nullptr;  // the caller's element (the array's stride applied)
        Kernel *kernel = nullptr;       // task->kernel, resolved by api/
        backend::LaunchDims dims;
        uint32_t stream_index = 0;  // the task's group, numbered in order of first appearance
        // Its launch attributes (qd_task.attrs where struct_size covers them); the completion
        // event resolved by api/ into `event` and attrs.attrs.completion_event.
        CheckedAttrs attrs;
        Event *event = nullptr;
    };
    std::vector<Task> tasks;
    uint32_t num_groups = 0;
};

// The tasks' own values (qd.h, "Which error wins", step 1): the array, each task's struct_size,
// launch configuration and arguments; QD_ERROR_INVALID_ARGUMENT or QD_ERROR_OVERFLOW naming
// the task. Fills plan->tasks but for their kernels.
qd_status plan_parallel(const qd_task *tasks, uint32_t num_tasks, ParallelPlan *plan);

// Launches a plan whose kernels api/ resolved, all of `stream`'s context, which is usable.
qd_status launch_parallel(Stream &stream, const ParallelPlan &plan);

}  // namespace qd::core
