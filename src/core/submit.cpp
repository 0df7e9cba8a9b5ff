#include "core/submit.h"

#include <string>

#include "common/error.h"
#include "core/capture/capture.h"

namespace qd::core {

namespace {
// A graph's block outside its capture (Op::graph_block): a replay's ordering point reaches no
// backend; any other such operation is refused.
qd_status graph_block_point(const Op &op) {
    if (op.origin == OpOrigin::GraphLaunch) return QD_SUCCESS;
    if (op.kind == OpKind::MemAlloc)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_mem_alloc_async: the capture of the stream ended during the call; "
                    "nothing was allocated");
    return fail(QD_ERROR_INVALID_ADDRESS,
                "0x%llx is a block a graph owns (allocated inside a capture): only a "
                "qd_mem_free_async inside that capture frees it, and the graph releases it when "
                "it is destroyed and its replays are done",
                (unsigned long long)op.dst);
}

// The backend call of an Op.
qd_status dispatch(const Op &op) {
    backend::Stream &s = *op.stream->impl;
    if (__builtin_expect(op.graph_block, 0)) return graph_block_point(op);
    switch (op.kind) {
    case OpKind::Launch:
        if (op.attrs)
            return s.launch_ex(*op.kernel->impl, *op.dims, *op.attrs, op.args, op.num_args);
        return s.launch(*op.kernel->impl, *op.dims, op.args, op.num_args);
    case OpKind::HostFn:
        if (op.status_fn) return s.host_status_fn(op.status_fn, op.handle, op.user_data);
        return s.host_fn(op.fn, op.user_data);
    case OpKind::Record: return s.record(*op.event);
    case OpKind::Wait: return s.wait(*op.event);
    case OpKind::MemAlloc: return s.mem_alloc(op.bytes, op.address);
    case OpKind::MemFree: return s.mem_free(op.dst);
    case OpKind::Memcpy:
        if (op.dst_ctx)
            return s.memcpy_peer(op.dst, op.dst_ctx->impl(), op.src, op.src_ctx->impl(), op.bytes);
        return s.memcpy(op.dst, op.src, op.bytes);
    case OpKind::Memset: return s.memset(op.dst, op.value, op.bytes);
    case OpKind::Signal: return s.signal(*op.timeline->impl, op.timeline_value);
    case OpKind::WaitValue: return s.wait_value(*op.timeline->impl, op.timeline_value);
    }
    return QD_ERROR_INTERNAL;
}
}  // namespace

qd_status submit_unobserved(const Op &op) {
    op.stream->unobserved.fetch_add(1, std::memory_order_relaxed);
    return dispatch(op);
}

qd_status submit_batch(Context &ctx, Op *ops, size_t n, size_t finally_from, size_t *queued) {
    OpObserver *observer = ctx.observer();
    if (observer) {
        if (CaptureRouter *router = ctx.capture()) router->mark_batch(ops, n);
        const qd_status st = observer->check_batch(ops, n);
        if (st != QD_SUCCESS) {
            if (queued) *queued = 0;
            return st;
        }
    }
    qd_status first = QD_SUCCESS;
    std::string reason;  // the first failure's message, which the later parts must not replace
    bool later = false;
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) {
        if (first != QD_SUCCESS && i < finally_from) {
            i = finally_from;
            if (i >= n) break;
        }
        ops[i].batch = true;
        const qd_status st = observer ? submit_observed(*observer, ops[i]) : dispatch(ops[i]);
        if (st == QD_SUCCESS) {
            ++done;
        } else if (first == QD_SUCCESS) {
            first = st;
            reason = last_error_message();
        } else {
            later = true;
        }
    }
    if (queued) *queued = done;
    if (later) return fail(first, "%s", reason.c_str());
    return first;
}

qd_status submit_observed(OpObserver &observer, Op &op) {
    // 1. captured? (a batch's parts were marked together, before check_batch)
    CaptureRouter *router = op.stream->ctx->capture();
    if (router && !op.batch) op.captured = router->captures(op);
    // 2. the observers; a refusal or a take ends the route here (an observer set gives after()
    // to the observers before the one that ended it).
    bool taken = false;
    qd_status st = observer.before(op, &taken);
    if (st != QD_SUCCESS || taken) return st;
    // 3. the capture or the backend
    if (op.captured) {
        st = router->record(op);
    } else {
        if (router) router->passing(op);
        st = dispatch(op);
    }
    // 4. after(), on every observer that passed
    observer.after(op, st);
    return st;
}

}  // namespace qd::core
