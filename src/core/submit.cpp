#include "core/submit.h"

namespace qd::core {

const char *op_kind_name(OpKind kind) {
    switch (kind) {
        case OpKind::Launch: return "launch";
        case OpKind::HostFn: return "host_fn";
        case OpKind::Record: return "record";
        case OpKind::Wait: return "wait";
        case OpKind::MemAlloc: return "mem_alloc";
        case OpKind::MemFree: return "mem_free";
        case OpKind::Memcpy: return "memcpy";
        case OpKind::Memset: return "memset";
    }
    return "unknown";
}

qd_status submit_observed(OpObserver &observer, const Op &op) {
    bool consumed = false;
    qd_status st = observer.before(op, &consumed);
    if (st != QD_SUCCESS || consumed) return st;
    st = dispatch(op);
    observer.after(op, st);
    return st;
}

}  // namespace qd::core
