// The C API's validation calls (src/api/api_validation.cpp guards them; qd.h, "Validation", says
// what each promises).
#pragma once

#include <qd/qd.h>

#include <cstdint>

namespace qd::core {

qd_status set_hazard_handler(uint64_t ctx, qd_hazard_fn fn, void *user_data);
qd_status set_param_access(uint64_t kernel, uint32_t index, uint32_t access);

}  // namespace qd::core
