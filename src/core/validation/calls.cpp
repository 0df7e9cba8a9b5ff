// The C API's validation calls (calls.h).
#include "core/validation/calls.h"

#include <atomic>
#include <cinttypes>

#include "common/error.h"
#include "core/context.h"
#include "core/validation/observer.h"

namespace qd::core {

qd_status set_hazard_handler(Context &ctx, qd_hazard_fn fn, void *user_data) {
    ValidationObserver *v = validation_observer(ctx);
    if (!v)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "validation is off for context 0x%016" PRIx64
                    " (create it with QD_CONTEXT_VALIDATE, or set QD_VALIDATE=1)",
                    ctx.handle());
    v->set_handler(fn, user_data);
    return QD_SUCCESS;
}

void set_param_access(Kernel &kernel, uint32_t index, uint32_t access) {
    kernel.param_access[index].store(uint8_t(access), std::memory_order_relaxed);
}

}  // namespace qd::core
