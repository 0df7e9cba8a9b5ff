/* See c_shims.c. */
#ifndef QDT_C_SHIMS_H
#define QDT_C_SHIMS_H

#include <qd/qd.h>

#ifdef __cplusplus
extern "C" {
#endif

qd_status qdt_device_count_raw(uint32_t backend, uint32_t *count);
qd_status qdt_device_get_info_raw(uint32_t backend, uint32_t device, qd_device_info *out);
const char *qdt_backend_name_raw(uint32_t backend);

#ifdef __cplusplus
}
#endif

#endif
