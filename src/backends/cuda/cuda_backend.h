// The CUDA backend: loads the NVIDIA driver (libcuda.so.1) at run time and fills the shared GPU
// implementation's driver table with it. libqd links no CUDA library and includes no CUDA
// header.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace qd::backend {

// Loads libcuda.so.1 by soname, resolves the driver functions, calls cuInit(0) and counts the
// devices. QD_ERROR_BACKEND_UNAVAILABLE, with dlerror()'s or the driver's reason, when the
// library is missing, lacks a function, fails to initialise, or reports no device.
qd_status make_cuda_driver(std::unique_ptr<Driver> *out);

}  // namespace qd::backend
