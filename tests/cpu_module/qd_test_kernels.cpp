// The CPU test module: a shared library whose exported C functions are qd host kernels, loaded
// with qd_module_load(ctx, path). It exports the kernels of QDT_KERNEL_LIST
// (tests/support/test_kernels.h) under the same names a GPU image uses.
#include <qd/qd.h>

#include "cpu_kernel_impl.h"

#define QDT_EXPORT extern "C" __attribute__((visibility("default")))

QDT_EXPORT int32_t qd_test_noop(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::noop(i, a);
}
QDT_EXPORT int32_t qd_test_add_one(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::add_one(i, a);
}
QDT_EXPORT int32_t qd_test_write_value(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::write_value(i, a);
}
QDT_EXPORT int32_t qd_test_spin(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::spin(i, a);
}
QDT_EXPORT int32_t qd_test_spin_write(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::spin_write(i, a);
}
QDT_EXPORT int32_t qd_test_add_value(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::add_value(i, a);
}
QDT_EXPORT int32_t qd_test_append_log(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::append_log(i, a);
}
QDT_EXPORT int32_t qd_test_count_mismatches(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::count_mismatches(i, a);
}
QDT_EXPORT int32_t qd_test_check_blob(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::check_blob(i, a);
}
QDT_EXPORT int32_t qd_test_wait_flag(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::wait_flag(i, a);
}
QDT_EXPORT int32_t qd_test_fault(const qd_host_kernel_info *i, void *const *a) {
    return qdt_cpu::fault(i, a);
}

// Not a kernel: exported data, which qd_kernel_get must refuse (NOT_FOUND), as it refuses the
// functions of the libraries this module depends on (libc's free, sync, ...).
QDT_EXPORT int32_t qd_test_exported_data;  // declared extern "C" and exported, then defined:
int32_t qd_test_exported_data = 7;         // (an initialised extern declaration warns)
