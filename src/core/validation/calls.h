// The C API's validation calls (src/api/api_validation.cpp guards them; qd.h, "Validation", says
// what each promises).
#pragma once

#include <qd/qd.h>

#include <cstdint>

namespace qd::core {

class Context;
class Kernel;

// On the objects src/api/api_validation.cpp resolved (and, for set_param_access, whose index
// and access it checked).
qd_status set_hazard_handler(Context &ctx, qd_hazard_fn fn, void *user_data);
void set_param_access(Kernel &kernel, uint32_t index, uint32_t access);

}  // namespace qd::core
