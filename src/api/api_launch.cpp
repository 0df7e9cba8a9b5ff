// Launches: single kernels, stream-parallel launches and host callbacks.
#include <cstdio>

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

QD_API qd_status qd_launch_ex(qd_stream stream, qd_kernel kernel, const qd_launch_config *config,
                              const qd_launch_attr *attrs, uint32_t num_attrs, const qd_arg *args,
                              uint32_t num_args) {
    return api::guarded([&]() -> qd_status {
        // Order of checks: qd.h, Conventions, "Which error wins"; then "Launch attributes".
        backend::LaunchDims dims;
        core::CheckedAttrs checked;
        qd_status st = core::validate_config(config, &dims);
        if (st == QD_SUCCESS) st = core::validate_attrs(attrs, num_attrs, dims, "", &checked);
        if (st == QD_SUCCESS) st = core::validate_args(args, num_args);
        if (st != QD_SUCCESS) return st;
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Kernel> k{{"kernel"}, kernel};
        if (checked.attrs.empty() && !checked.has_event) {
            st = api::resolve_same_context(s, k);
            if (st != QD_SUCCESS) return st;
            return core::submit_launch(*s.obj, *k.obj, dims, args, num_args);
        }
        core::Event *event = nullptr;
        st = api::resolve_all(s, k);
        if (st == QD_SUCCESS && checked.has_event)
            st = api::resolve_element({"attrs", checked.event_index, ".event"}, checked.event,
                                      &event);
        if (st == QD_SUCCESS) st = api::check_contexts(api::Mix::SameContext, s, k);
        if (st == QD_SUCCESS && event)
            st = api::check_mix(api::Mix::SameContext, {"stream"}, stream, *s.obj->ctx,
                                {"attrs", checked.event_index, ".event"}, checked.event,
                                *event->ctx);
        if (st == QD_SUCCESS) st = api::check_usable(s, k);
        if (st != QD_SUCCESS) return st;
        if (event) core::set_completion_event(checked.attrs, *event);
        st = core::check_launch_attrs(*s.obj, checked.attrs, dims, "");
        if (st != QD_SUCCESS) return st;
        return core::submit_launch_ex(*s.obj, *k.obj, dims, checked.attrs, event, args, num_args);
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
        // Then every task's completion event (qd_launch_ex's rules, "Launch attributes").
        char member[40];
        for (uint32_t i = 0; i < num_tasks; ++i) {
            core::ParallelPlan::Task &t = plan.tasks[i];
            if (!t.attrs.has_event) continue;
            std::snprintf(member, sizeof member, ".attrs[%u].event", t.attrs.event_index);
            st = api::resolve_element({"tasks", i, member}, t.attrs.event, &t.event);
            if (st != QD_SUCCESS) return st;
        }
        for (uint32_t i = 0; i < num_tasks; ++i) {
            st = api::check_mix(api::Mix::SameContext, {"stream"}, stream, *s->ctx,
                                {"tasks", i, ".kernel"}, plan.tasks[i].task->kernel,
                                *plan.tasks[i].kernel->ctx);
            if (st != QD_SUCCESS) return st;
        }
        for (uint32_t i = 0; i < num_tasks; ++i) {
            core::ParallelPlan::Task &t = plan.tasks[i];
            if (!t.event) continue;
            std::snprintf(member, sizeof member, ".attrs[%u].event", t.attrs.event_index);
            st = api::check_mix(api::Mix::SameContext, {"stream"}, stream, *s->ctx,
                                {"tasks", i, member}, t.attrs.event, *t.event->ctx);
            if (st != QD_SUCCESS) return st;
            core::set_completion_event(t.attrs.attrs, *t.event);
        }
        st = s->ctx->usable();
        if (st != QD_SUCCESS) return st;
        // What the backend cannot honour, for every task before any is queued.
        for (uint32_t i = 0; i < num_tasks; ++i) {
            const core::ParallelPlan::Task &t = plan.tasks[i];
            if (t.attrs.attrs.empty()) continue;
            char prefix[32];
            std::snprintf(prefix, sizeof prefix, "tasks[%u].", i);
            st = core::check_launch_attrs(*s, t.attrs.attrs, t.dims, prefix);
            if (st != QD_SUCCESS) return st;
        }
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
