// The one file that knows every backend. Each driver is created on first use and lives for the
// rest of the process (drivers hold dlopen handles that must outlive every context).
#include <cstdio>
#include <mutex>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "common/error.h"
#ifdef QD_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#ifdef QD_HAVE_HIP
#include "backends/hip/hip_backend.h"
#endif

namespace qd::backend {

namespace {

struct Slot {
    std::once_flag once;
    Driver *driver = nullptr;
    qd_status status = QD_ERROR_BACKEND_UNAVAILABLE;
    char reason[400] = {0};
};

Slot g_slots[4];

void load(qd_backend kind, Slot &slot) {
    std::unique_ptr<Driver> driver;
    qd_status st = QD_ERROR_BACKEND_UNAVAILABLE;
    switch (kind) {
    case QD_BACKEND_CPU:
        st = make_cpu_driver(&driver);
        break;
    case QD_BACKEND_CUDA:
#ifdef QD_HAVE_CUDA
        st = make_cuda_driver(&driver);
#else
        st = fail(QD_ERROR_BACKEND_UNAVAILABLE, "the CUDA backend was not built into this libqd");
#endif
        break;
    case QD_BACKEND_HIP:
#ifdef QD_HAVE_HIP
        st = make_hip_driver(&driver);
#else
        st = fail(QD_ERROR_BACKEND_UNAVAILABLE, "the HIP backend was not built into this libqd");
#endif
        break;
    default:
        break;
    }
    slot.status = st;
    if (st == QD_SUCCESS) {
        slot.driver = driver.release();  // lives for the process: see the file comment
    } else {
        snprintf(slot.reason, sizeof slot.reason, "%s", last_error_message());
    }
}

}  // namespace

qd_status get_driver(uint32_t kind, Driver **out) {
    if (kind == QD_BACKEND_DEFAULT) kind = QD_BACKEND_CPU;
    if (kind < QD_BACKEND_CPU || kind > QD_BACKEND_HIP)
        return fail(QD_ERROR_INVALID_ARGUMENT, "backend %u is not a qd_backend value", kind);
    Slot &slot = g_slots[kind];
    std::call_once(slot.once, [&] { load(qd_backend(kind), slot); });
    if (slot.status != QD_SUCCESS) return fail(slot.status, "%s", slot.reason);
    *out = slot.driver;
    return QD_SUCCESS;
}

}  // namespace qd::backend
