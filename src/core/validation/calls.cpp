// The C API's validation calls (calls.h).
#include "core/validation/calls.h"

#include <atomic>
#include <cinttypes>

#include "common/error.h"
#include "core/context.h"
#include "core/validation/observer.h"

namespace qd::core {

qd_status set_hazard_handler(uint64_t ctx, qd_hazard_fn fn, void *user_data) {
    Context *c = nullptr;
    qd_status st = resolve(ctx, &c);
    if (st != QD_SUCCESS) return st;
    ValidationObserver *v = validation_observer(*c);
    if (!v)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "validation is off for context 0x%016" PRIx64
                    " (create it with QD_CONTEXT_VALIDATE, or set QD_VALIDATE=1)",
                    ctx);
    v->set_handler(fn, user_data);
    return QD_SUCCESS;
}

qd_status set_param_access(uint64_t kernel, uint32_t index, uint32_t access) {
    if (index >= QD_MAX_ARGS)
        return fail(QD_ERROR_INVALID_ARGUMENT, "parameter index %u is not below QD_MAX_ARGS (%u)",
                    index, QD_MAX_ARGS);
    if (access > QD_PARAM_PARTITIONED)
        return fail(QD_ERROR_INVALID_ARGUMENT, "access %u is not a qd_param_access value", access);
    Kernel *k = nullptr;
    qd_status st = resolve(kernel, &k);
    if (st != QD_SUCCESS) return st;
    k->param_access[index].store(uint8_t(access), std::memory_order_relaxed);
    return QD_SUCCESS;
}

}  // namespace qd::core
