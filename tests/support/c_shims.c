/* Calls made from C, where they are well-defined: an enum parameter given a value outside the
 * enumerators (a C caller or a binding passing a raw uint32_t). From C++ the same conversion
 * would itself be undefined, so the tests go through these shims. */
#include <qd/qd.h>

#include "c_shims.h"

qd_status qdt_device_count_raw(uint32_t backend, uint32_t *count) {
    return qd_device_count((qd_backend)backend, count);
}

qd_status qdt_device_get_info_raw(uint32_t backend, uint32_t device, qd_device_info *out) {
    return qd_device_get_info((qd_backend)backend, device, out);
}

const char *qdt_backend_name_raw(uint32_t backend) { return qd_backend_name((qd_backend)backend); }
