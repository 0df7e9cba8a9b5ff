// Launches: single kernels, stream-parallel launches and host callbacks.
#include "api/guard.h"
#include "core/context.h"
#include "core/fork_join.h"
#include "core/launch_validation.h"
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
        Stream *s = nullptr;
        Kernel *k = nullptr;
        st = core::resolve(stream, &s);
        if (st == QD_SUCCESS) st = core::resolve(kernel, &k);
        if (st != QD_SUCCESS) return st;
        if (k->ctx != s->ctx)
            return fail(QD_ERROR_WRONG_CONTEXT,
                        "kernel 0x%016llx belongs to another context than stream 0x%016llx",
                        (unsigned long long)kernel, (unsigned long long)stream);
        st = s->ctx->usable();
        if (st != QD_SUCCESS) return st;
        return core::submit_launch(*s, *k, dims, args, num_args);
    });
}

QD_API qd_status qd_launch_parallel(qd_stream stream, const qd_task *tasks, uint32_t num_tasks) {
    return api::guarded([&]() -> qd_status { return core::launch_parallel(stream, tasks, num_tasks); });
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

}  // extern "C"
