// Launches: single kernels, stream-parallel launches and host callbacks.
#include "api/guard.h"
#include "api/resolve.h"
#include "core/context.h"
#include "core/launch_validation.h"
#include "core/parallel_launch.h"
#include "core/submit.h"

using namespace qd;
using core::Kernel;
using core::Stream;

extern "C" {

QD_API qd_status qd_launch(qd_stream stream, qd_kernel kernel, const qd_launch_config *config,
                           const qd_arg *args, uint32_t num_args) {
    return api::guarded([&]() -> qd_status {
        // Order of checks: qd.h, Conventions, "Which error wins".
        backend::LaunchDims dims;
        qd_status st = core::validate_config(config, &dims);
        if (st == QD_SUCCESS) st = core::validate_args(args, num_args);
        if (st != QD_SUCCESS) return st;
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Kernel> k{{"kernel"}, kernel};
        st = api::resolve_same_context(s, k);
        if (st != QD_SUCCESS) return st;
        return core::submit_launch(*s.obj, *k.obj, dims, args, num_args);
    });
}

QD_API qd_status qd_launch_parallel(qd_stream stream, const qd_task *tasks, uint32_t num_tasks) {
    return api::guarded([&]() -> qd_status {
        core::ParallelPlan plan;
        qd_status st = core::plan_parallel(tasks, num_tasks, &plan);
        if (st != QD_SUCCESS) return st;
        Stream *s = nullptr;
        st = core::resolve(stream, &s);
        if (st != QD_SUCCESS) return st;
        // Every kernel, before any context is compared (qd.h, "Which error wins").
        for (uint32_t i = 0; i < num_tasks; ++i) {
            core::ParallelPlan::Task &t = plan.tasks[i];
            if (i > 0 && t.task->kernel == plan.tasks[i - 1].task->kernel) {
                t.kernel = plan.tasks[i - 1].kernel;
                continue;
            }
            st = api::resolve_element({"tasks", i, ".kernel"}, t.task->kernel, &t.kernel);
            if (st != QD_SUCCESS) return st;
        }
        for (uint32_t i = 0; i < num_tasks; ++i) {
            st = api::check_mix(api::Mix::SameContext, {"stream"}, stream, *s->ctx,
                                {"tasks", i, ".kernel"}, plan.tasks[i].task->kernel,
                                *plan.tasks[i].kernel->ctx);
            if (st != QD_SUCCESS) return st;
        }
        st = s->ctx->usable();
        if (st != QD_SUCCESS) return st;
        return core::launch_parallel(*s, plan);
    });
}

QD_API qd_status qd_launch_host_fn(qd_stream stream, qd_host_fn fn, void *user_data) {
    return api::guarded([&]() -> qd_status {
        if (!fn) return api::null_argument("fn");
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::submit_host_fn(*s, fn, user_data);
    });
}

QD_API qd_status qd_launch_host_status_fn(qd_stream stream, qd_host_status_fn fn, void *user_data) {
    return api::guarded([&]() -> qd_status {
        if (!fn) return api::null_argument("fn");
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        // The capture refuses it too (a capture begun during the call); this names the call.
        if (s->capturing())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "qd_launch_host_status_fn on capturing stream 0x%016llx: a graph's host "
                        "node runs once per replay, and a replay a loss drops could not call it; "
                        "nothing was queued, the capture goes on (use qd_launch_host_fn)",
                        (unsigned long long)stream);
        return core::submit_host_status_fn(*s, stream, fn, user_data);
    });
}

}  // extern "C"
