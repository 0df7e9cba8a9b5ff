// Which backend a qd_backend value loads: the rows of src/common/backend_table.h, each with the
// factory of its folder when the build option built it (backends/built_backends.h, generated).
// Each driver is created on first use and lives for the rest of the process (drivers hold
// dlopen handles that must outlive every context).
#include <cstdio>
#include <cstring>
#include <mutex>

#include "backends/backend.h"
#include "backends/built_backends.h"
#include "common/backend_table.h"
#include "common/error.h"

namespace qd::backend {

// Every built backend's factory, make_<slug>_driver(), defined in its folder.
#define QD_DECLARE_FACTORY_(slug) qd_status make_##slug##_driver(std::unique_ptr<Driver> *out);
QD_BUILT_BACKENDS(QD_DECLARE_FACTORY_)
#undef QD_DECLARE_FACTORY_

namespace {

using Factory = qd_status (*)(std::unique_ptr<Driver> *out);

struct Built {
    const char *slug;
    Factory make;
};

#define QD_BUILT_ROW_(slug) {#slug, &make_##slug##_driver},
constexpr Built kBuilt[] = {QD_BUILT_BACKENDS(QD_BUILT_ROW_)};
#undef QD_BUILT_ROW_

Factory factory_of(const BackendRow &row) {
    for (const Built &built : kBuilt)
        if (std::strcmp(built.slug, row.slug) == 0) return built.make;
    return nullptr;
}

struct Slot {
    std::once_flag once;
    Driver *driver = nullptr;
    qd_status status = QD_ERROR_BACKEND_UNAVAILABLE;
    char reason[400] = {0};
};

Slot g_slots[kBackendCount];  // one per row of kBackendRows, in its order

void load(const BackendRow &row, Slot &slot) {
    std::unique_ptr<Driver> driver;
    qd_status st;
    if (Factory make = factory_of(row))
        st = make(&driver);
    else
        st = fail(QD_ERROR_BACKEND_UNAVAILABLE, "the %s backend was not built into this libqd",
                  row.name);
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
    const BackendRow *row = backend_row(kind);
    if (!row) return fail(QD_ERROR_INVALID_ARGUMENT, "backend %u is not a qd_backend value", kind);
    Slot &slot = g_slots[row - kBackendRows];
    std::call_once(slot.once, [&] { load(*row, slot); });
    if (slot.status != QD_SUCCESS) return fail(slot.status, "%s", slot.reason);
    *out = slot.driver;
    return QD_SUCCESS;
}

}  // namespace qd::backend
