// The CPU backend: real asynchronous streams on host threads. See cpu/README.md for the worker
// model.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace qd::backend {

// Creates the CPU driver (always succeeds unless memory is exhausted).
qd_status make_cpu_driver(std::unique_ptr<Driver> *out);

}  // namespace qd::backend
