// C entry points that qd calls, forwarding to the Go functions of exports.go.
#include "qdgo.h"

#include "_cgo_export.h"

void gq_host_fn_trampoline(void *user_data) { qdGoHostFn((uintptr_t)user_data); }
void gq_host_status_fn_trampoline(qd_stream stream, qd_status status, void *user_data) {
    (void)stream;
    qdGoHostStatusFn((uintptr_t)user_data, status);
}

int32_t gq_host_kernel_trampoline(const qd_host_kernel_info *info, void *const *args) {
    return qdGoHostKernel((qd_host_kernel_info *)info, (void **)args);
}
