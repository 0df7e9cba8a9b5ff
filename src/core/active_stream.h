// The thread-local active stream, per (thread, context).
//
// It is a value callers read explicitly; no qd call consults it. Each thread keeps a short list
// of (context handle, stream handle) pairs: a handful of contexts per thread is the norm, so a
// linear scan beats any map. Entries of destroyed contexts are inert (context handles are
// never reissued) and are pruned when the list grows.
//
// Get and set are meant to cost a few nanoseconds (B4 sets 10 ns for the pair), so their common
// case is inline here and runs straight from qd_stream_get_active / qd_stream_set_active: the
// thread's entries are plain-old-data in initial-exec TLS (no guard variable, no thread-exit
// destructor, no __tls_get_addr call), and the handle checks are the handle table's lock-free
// inline check. Anything else (first use of a context on this thread, a bad handle, an error
// message to write) takes the out-of-line path: api/ resolves the handles, then calls the full
// path with the objects. The fast path takes raw handles on purpose: it only checks that they
// are live (resolving them would cost the atomic reference counting it exists to avoid).
#pragma once

#include <qd/qd.h>

#include "core/handle_table.h"

namespace qd::core {

class Context;  // core/context.h

// The full paths, once api/ resolved the context (and, for set, the stream, and checked that it
// belongs to ctx): the thread's entry for ctx, made on first use. The active stream is a handle
// value, kept and returned as set (qd.h: even after that stream is destroyed).
qd_status set_active_stream(const Context &ctx, uint64_t stream, uint64_t *previous);
qd_status get_active_stream(const Context &ctx, uint64_t *out);

namespace active_detail {

struct Entry {
    uint64_t ctx;
    uint64_t stream;
    // The live word of ctx's handle slot (HandleTable::live_word): the context is alive while
    // it holds ctx. One load instead of the table lookup: B4 is two such checks per pair.
    const std::atomic<uint64_t> *ctx_live;
};

// The footprint (16 x 24 bytes) is far below the static TLS surplus glibc reserves for
// libraries loaded later with dlopen (as Python does). More than 16 live contexts on one thread
// spill into a vector on the slow path.
constexpr uint32_t kInline = 16;
extern __thread Entry t_inline[kInline] __attribute__((tls_model("initial-exec")));
extern __thread uint32_t t_count __attribute__((tls_model("initial-exec")));

inline Entry *find_inline(uint64_t ctx) {
    for (uint32_t i = 0; i < t_count; ++i)
        if (t_inline[i].ctx == ctx) return &t_inline[i];
    return nullptr;
}

}  // namespace active_detail

// The common case of get: the context is live and already has an entry on this thread.
// False means "take the full path", never an error by itself.
inline bool try_get_active_stream(uint64_t ctx, uint64_t *out) {
    active_detail::Entry *e = active_detail::find_inline(ctx);
    if (!e || e->ctx_live->load(std::memory_order_acquire) != ctx) return false;
    *out = e->stream;
    return true;
}

// The common case of set: as for get, and the stream is a live stream of that context.
inline bool try_set_active_stream(uint64_t ctx, uint64_t stream, uint64_t *previous) {
    active_detail::Entry *e = active_detail::find_inline(ctx);
    if (!e || e->ctx_live->load(std::memory_order_acquire) != ctx) return false;
    uint64_t owner;
    if (HandleTable::instance().check(stream, Tag::Stream, &owner, false) != QD_SUCCESS ||
        owner != ctx)
        return false;
    if (previous) *previous = e->stream;
    e->stream = stream;
    return true;
}

}  // namespace qd::core
