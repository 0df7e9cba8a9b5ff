// Validation: the hazard handler and kernel parameter declarations (qd.h, "Validation";
// core/validation/ does the work).
#include "api/guard.h"
#include "core/context.h"
#include "core/validation/calls.h"

using namespace qd;

extern "C" {

QD_API qd_status qd_context_set_hazard_handler(qd_context ctx, qd_hazard_fn fn, void *user_data) {
    return api::guarded([&]() -> qd_status {
        core::Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::set_hazard_handler(*c, fn, user_data);
    });
}

QD_API qd_status qd_kernel_set_param_access(qd_kernel kernel, uint32_t index, uint32_t access) {
    return api::guarded([&]() -> qd_status {
        if (index >= QD_MAX_ARGS)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "parameter index %u is not below QD_MAX_ARGS (%u)", index, QD_MAX_ARGS);
        if (access > QD_PARAM_PARTITIONED)
            return fail(QD_ERROR_INVALID_ARGUMENT, "access %u is not a qd_param_access value",
                        access);
        core::Kernel *k = nullptr;
        qd_status st = core::resolve(kernel, &k);
        if (st != QD_SUCCESS) return st;
        core::set_param_access(*k, index, access);
        return QD_SUCCESS;
    });
}

}  // extern "C"
