#include "core/peer.h"

#include "common/backend_table.h"
#include "common/error.h"
#include "core/capture/capture.h"
#include "core/submit.h"

namespace qd::core {

namespace {

// Two contexts of different backends cannot be ordered or copied between by one driver.
qd_status same_backend(const Context &a, const char *a_name, const Context &b,
                       const char *b_name) {
    if (a.kind() == b.kind()) return QD_SUCCESS;
    return fail(QD_ERROR_WRONG_CONTEXT,
                "%s belongs to a %s context (0x%016llx) and %s to a %s context (0x%016llx); "
                "only contexts of the same backend can be mixed",
                a_name, backend_display_name(a.kind()), (unsigned long long)a.handle(), b_name,
                backend_display_name(b.kind()), (unsigned long long)b.handle());
}

// Both contexts of a peer query or grant: two distinct contexts of one backend.
qd_status resolve_pair(uint64_t ctx, uint64_t peer, Context **c, Context **p) {
    qd_status st = resolve(ctx, c);
    if (st == QD_SUCCESS) st = resolve(peer, p);
    if (st != QD_SUCCESS) return st;
    if (*c == *p)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "ctx and peer are the same context (0x%016llx); a context always accesses "
                    "its own memory",
                    (unsigned long long)ctx);
    st = same_backend(**c, "ctx", **p, "peer");
    if (st == QD_SUCCESS) st = (*c)->usable();
    if (st == QD_SUCCESS) st = (*p)->usable();
    return st;
}

}  // namespace

qd_status resolve_wait(uint64_t stream, uint64_t event, Stream **s, Event **e) {
    qd_status st = resolve(stream, s);
    if (st == QD_SUCCESS) st = resolve(event, e);
    if (st != QD_SUCCESS) return st;
    Context &mine = *(*s)->ctx;
    Context &theirs = *(*e)->ctx;
    if (&mine == &theirs) return mine.usable();
    st = same_backend(mine, "stream", theirs, "event");
    if (st == QD_SUCCESS) st = mine.usable();
    if (st == QD_SUCCESS) st = theirs.usable();
    // The stream's own context sees the wait (its capture refuses an outside record); a record
    // captured in the event's context is a node of that graph, not something to wait on.
    if (st == QD_SUCCESS) st = refuse_if_captured_event(**e, event, "qd_stream_wait_event");
    return st;
}

qd_status can_access_peer(uint64_t ctx, uint64_t peer, uint32_t *can_access) {
    Context *c = nullptr, *p = nullptr;
    qd_status st = resolve_pair(ctx, peer, &c, &p);
    if (st != QD_SUCCESS) return st;
    bool can = false;
    st = c->impl().can_access_peer(p->impl(), &can);
    if (st == QD_SUCCESS) *can_access = can ? 1u : 0u;
    return st;
}

qd_status enable_peer_access(uint64_t ctx, uint64_t peer) {
    Context *c = nullptr, *p = nullptr;
    qd_status st = resolve_pair(ctx, peer, &c, &p);
    if (st != QD_SUCCESS) return st;
    return c->impl().enable_peer_access(p->impl());
}

qd_status memcpy_peer(uint64_t stream, uint64_t dst, uint64_t dst_ctx, uint64_t src,
                      uint64_t src_ctx, uint64_t bytes) {
    Stream *s = nullptr;
    Context *d = nullptr, *r = nullptr;
    qd_status st = resolve(stream, &s);
    if (st == QD_SUCCESS) st = resolve(dst_ctx, &d);
    if (st == QD_SUCCESS) st = resolve(src_ctx, &r);
    if (st != QD_SUCCESS) return st;
    Context &mine = *s->ctx;
    if (&mine != d && &mine != r)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "stream 0x%016llx belongs to context 0x%016llx, neither dst_ctx 0x%016llx nor "
                    "src_ctx 0x%016llx",
                    (unsigned long long)stream, (unsigned long long)mine.handle(),
                    (unsigned long long)dst_ctx, (unsigned long long)src_ctx);
    st = same_backend(*d, "dst_ctx", *r, "src_ctx");
    if (st == QD_SUCCESS) st = d->usable();
    if (st == QD_SUCCESS) st = r->usable();
    if (st != QD_SUCCESS || bytes == 0) return st;
    // The other context's memory stays until this copy ran: its destroy waits for the copy's
    // stream (core/peer_users.h), or refuses it here once the destroy has begun.
    Context *other = d != &mine ? d : r != &mine ? r : nullptr;
    PeerUsers::Entry entry;
    if (other) {
        st = other->peer_users().enter(other->shared_from_this(), other->handle(), &entry);
        if (st != QD_SUCCESS) return st;
    }
    bool dst_host = false, src_host = false;
    st = d->allocs().check_inside(dst, bytes, "dst", dst_ctx, &dst_host);
    if (st == QD_SUCCESS) st = r->allocs().check_inside(src, bytes, "src", src_ctx, &src_host);
    if (st != QD_SUCCESS) {
        // A racing qd_context_destroy of either context sweeps its blocks: the handle is what
        // went stale, not the address.
        if (d->check_not_destroyed() != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
        if (r->check_not_destroyed() != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
        return st;
    }
    // Pinned host memory is reachable from every context by its address: a plain copy. The
    // backends' peer copies (cuMemcpyPeerAsync) take device memory on both sides.
    if (dst_host || src_host) {
        st = refuse_if_capturing(*s, stream, "qd_memcpy_peer_async");
        if (st == QD_SUCCESS) st = submit_memcpy(*s, dst, src, bytes);
    } else {
        st = submit_memcpy_peer(*s, dst, *d, src, *r, bytes);
    }
    if (st == QD_SUCCESS && other) entry.queued(s->impl, mine.shared_from_this());
    return st;
}

}  // namespace qd::core
