// Shape checks for launches, shared by qd_launch and qd_launch_parallel so both reject the same
// inputs with the same statuses before anything is queued.
#pragma once

#include <qd/qd.h>

#include "backends/backend.h"

namespace qd::core {

// config may be NULL (one block of one thread).
qd_status validate_config(const qd_launch_config *config, backend::LaunchDims *out);
qd_status validate_args(const qd_arg *args, uint32_t num_args);

}  // namespace qd::core
