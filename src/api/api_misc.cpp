// Status and backend names, the last error message, the version, and device queries.
#include <cstring>

#include "common/backend_table.h"
#include "common/first_sizes.h"
#include "api/guard.h"
#include "core/object_ops.h"

using namespace qd;

extern "C" {

QD_API const char *qd_status_name(qd_status status) { return status_name(status); }

QD_API const char *qd_last_error_message(void) { return last_error_message(); }

QD_API uint32_t qd_version(void) { return QD_VERSION; }

// The backend arrives as the enum type, but callers may pass any 32-bit value; read its bytes
// rather than loading an out-of-range enum value.
static uint32_t raw_backend(const qd_backend &backend) {
    uint32_t raw;
    std::memcpy(&raw, &backend, sizeof raw);
    return raw;
}

QD_API const char *qd_backend_name(qd_backend backend) {
    return backend_slug(raw_backend(backend));
}

QD_API qd_status qd_device_count(qd_backend backend, uint32_t *count) {
    return api::guarded([&]() -> qd_status {
        if (!count) return api::null_argument("count");
        return core::device_count(raw_backend(backend), count);
    });
}

QD_API qd_status qd_device_get_info(qd_backend backend, uint32_t device, qd_device_info *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        if (out->struct_size < first_size<qd_device_info>())
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "qd_device_info.struct_size is %u; at least %u is required (use "
                        "QD_DEVICE_INFO_INIT)",
                        out->struct_size, first_size<qd_device_info>());
        return core::device_info(raw_backend(backend), device, out);
    });
}

}  // extern "C"
