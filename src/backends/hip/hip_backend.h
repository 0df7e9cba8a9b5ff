// The HIP backend: loads the HIP runtime (libamdhip64) at run time and fills the shared GPU
// implementation's driver table with it. libqd links no HIP library and includes no HIP header.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace qd::backend {

// Loads libamdhip64 by soname (.so.7, .so.6, .so.5, then the unversioned name), resolves the
// runtime functions (with adapters where HIP's signature differs from the table's), calls
// hipInit(0) and counts the devices. QD_ERROR_BACKEND_UNAVAILABLE, with the loader's or the
// runtime's reason, when no library loads, one lacks a function, it fails to initialise, or it
// reports no device (hipErrorNoDevice on a machine without an AMD GPU).
qd_status make_hip_driver(std::unique_ptr<Driver> *out);

}  // namespace qd::backend
