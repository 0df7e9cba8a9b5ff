// Validation: the hazard handler and kernel parameter declarations (qd.h, "Validation";
// core/validation/ does the work).
#include "api/guard.h"
#include "core/validation/calls.h"

using namespace qd;

extern "C" {

QD_API qd_status qd_context_set_hazard_handler(qd_context ctx, qd_hazard_fn fn, void *user_data) {
    return api::guarded([&]() -> qd_status { return core::set_hazard_handler(ctx, fn, user_data); });
}

QD_API qd_status qd_kernel_set_param_access(qd_kernel kernel, uint32_t index, uint32_t access) {
    return api::guarded([&]() -> qd_status { return core::set_param_access(kernel, index, access); });
}

}  // extern "C"
