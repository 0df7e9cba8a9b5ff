// The submission chokepoint: every operation a stream runs reaches its backend through
// core::submit(), and nowhere else. The api layer (qd_launch, qd_launch_host_fn,
// qd_event_record, qd_stream_wait_event, qd_mem_*_async, qd_memcpy/memset_async) and core's own
// composite operations (fork, join and parallel launch, which are records, waits and launches on
// pooled streams) each build one operation record, an Op, and hand it here.
//
// An Op says what runs (kind), where (the core stream, and through it the context), why (origin:
// a direct API call or a part of fork, join or a parallel launch), and with what: the kernel and
// its name, the launch dimensions and argument values, the event a record or wait names (the
// dependency), the memory range, the host function.
//
// Observers (graph capture, the timeline trace, the validation mode) attach to a context
// (Context::set_observer) and see every Op of it: before() may refuse or take over an
// operation, after() sees its status. With no observer attached, submit() costs one
// predictable branch on a pointer load before the backend call (bench B1 and B7).
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "backends/backend.h"
#include "core/context.h"

namespace qd::core {

enum class OpKind : uint8_t { Launch, HostFn, Record, Wait, MemAlloc, MemFree, Memcpy, Memset };

// Why an operation was submitted.
enum class OpOrigin : uint8_t {
    Api,             // the API call of the same name
    Fork,            // qd_stream_fork: the parent's record, each child's wait
    Join,            // qd_stream_join: each child's record, the parent's wait
    ParallelLaunch,  // qd_launch_parallel: its fork, its launches, its join
};

const char *op_kind_name(OpKind kind);

struct Op {
    OpKind kind;
    OpOrigin origin = OpOrigin::Api;
    Stream *stream = nullptr;  // the stream it runs on; stream->ctx is its context

    // Launch: kernel->impl->name() names it; the argument values are the caller's, copied by
    // the backend before submit() returns.
    Kernel *kernel = nullptr;
    const backend::LaunchDims *dims = nullptr;
    const qd_arg *args = nullptr;
    uint32_t num_args = 0;

    // Record and Wait: the event (for a user event also its core object; pooled fork/join
    // events have none).
    backend::Event *event = nullptr;
    Event *user_event = nullptr;

    // Memory: Memcpy dst/src/bytes, Memset dst/value/bytes, MemFree dst, MemAlloc bytes and
    // the address it returns through `address`.
    uint64_t dst = 0;
    uint64_t src = 0;
    uint64_t bytes = 0;
    uint8_t value = 0;
    uint64_t *address = nullptr;

    // HostFn.
    qd_host_fn fn = nullptr;
    void *user_data = nullptr;
};

// Sees every Op submitted on the streams of one context.
class OpObserver {
  public:
    virtual ~OpObserver() = default;
    // Before the backend sees the operation. QD_SUCCESS lets it through; any other status is
    // returned to the caller instead, with the backend never called (an observer that records
    // operations without running them returns QD_SUCCESS from its own submit path and sets
    // *consumed).
    virtual qd_status before(const Op &op, bool *consumed) = 0;
    // After the backend returned `status` (not called for a refused or consumed operation).
    virtual void after(const Op &op, qd_status status) = 0;
};

// The backend call of an Op.
inline qd_status dispatch(const Op &op) {
    backend::Stream &s = *op.stream->impl;
    switch (op.kind) {
        case OpKind::Launch: return s.launch(*op.kernel->impl, *op.dims, op.args, op.num_args);
        case OpKind::HostFn: return s.host_fn(op.fn, op.user_data);
        case OpKind::Record: return s.record(*op.event);
        case OpKind::Wait: return s.wait(*op.event);
        case OpKind::MemAlloc: return s.mem_alloc(op.bytes, op.address);
        case OpKind::MemFree: return s.mem_free(op.dst);
        case OpKind::Memcpy: return s.memcpy(op.dst, op.src, op.bytes);
        case OpKind::Memset: return s.memset(op.dst, op.value, op.bytes);
    }
    return QD_ERROR_INTERNAL;
}

qd_status submit_observed(OpObserver &observer, const Op &op);

// The one way an operation reaches a backend stream.
inline qd_status submit(const Op &op) {
    OpObserver *observer = op.stream->ctx->observer();
    if (__builtin_expect(observer != nullptr, 0)) return submit_observed(*observer, op);
    return dispatch(op);
}

}  // namespace qd::core
