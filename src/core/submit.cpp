#include "core/submit.h"

namespace qd::core {

namespace {
// The backend call of an Op.
qd_status dispatch(const Op &op) {
    backend::Stream &s = *op.stream->impl;
    switch (op.kind) {
        case OpKind::Launch: return s.launch(*op.kernel->impl, *op.dims, op.args, op.num_args);
        case OpKind::HostFn: return s.host_fn(op.fn, op.user_data);
        case OpKind::Record: return s.record(*op.event);
        case OpKind::Wait: return s.wait(*op.event);
        case OpKind::MemAlloc: return s.mem_alloc(op.bytes, op.address);
        case OpKind::MemFree: return s.mem_free(op.dst);
        case OpKind::Memcpy:
            if (op.dst_ctx)
                return s.memcpy_peer(op.dst, op.dst_ctx->impl(), op.src, op.src_ctx->impl(),
                                     op.bytes);
            return s.memcpy(op.dst, op.src, op.bytes);
        case OpKind::Memset: return s.memset(op.dst, op.value, op.bytes);
    }
    return QD_ERROR_INTERNAL;
}
}  // namespace

qd_status submit_unobserved(const Op &op) { return dispatch(op); }

qd_status submit_observed(OpObserver &observer, const Op &op) {
    bool consumed = false;
    qd_status st = observer.before(op, &consumed);
    if (st != QD_SUCCESS || consumed) return st;
    st = dispatch(op);
    observer.after(op, st);
    return st;
}

}  // namespace qd::core
