#include "core/peer.h"

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/submit.h"

namespace qd::core {

qd_status can_access_peer(Context &ctx, Context &peer, uint32_t *can_access) {
    bool can = false;
    qd_status st = ctx.impl().can_access_peer(peer.impl(), &can);
    if (st == QD_SUCCESS) *can_access = can ? 1u : 0u;
    return st;
}

qd_status enable_peer_access(Context &ctx, Context &peer) {
    return ctx.impl().enable_peer_access(peer.impl());
}

qd_status memcpy_peer(Stream &stream, uint64_t stream_handle, uint64_t dst, Context &dst_ctx,
                      uint64_t src, Context &src_ctx, uint64_t bytes) {
    Stream *s = &stream;
    Context *d = &dst_ctx, *r = &src_ctx;
    Context &mine = *s->ctx;
    if (bytes == 0) return QD_SUCCESS;
    qd_status st = QD_SUCCESS;
    // The other context's memory stays until this copy ran: its destroy waits for the copy's
    // stream (core/peer_users.h), or refuses it here once the destroy has begun.
    Context *other = d != &mine ? d : r != &mine ? r : nullptr;
    PeerUsers::Entry entry;
    if (other) {
        st = other->peer_users().enter(other->shared_from_this(), other->handle(), &entry);
        if (st != QD_SUCCESS) return st;
    }
    bool dst_host = false, src_host = false;
    st = d->allocs().check_inside(dst, bytes, "dst", d->handle(), &dst_host);
    if (st == QD_SUCCESS) st = r->allocs().check_inside(src, bytes, "src", r->handle(), &src_host);
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
        st = refuse_if_capturing(*s, stream_handle, "qd_memcpy_peer_async");
        if (st == QD_SUCCESS) st = submit_memcpy(*s, dst, src, bytes);
    } else {
        st = submit_memcpy_peer(*s, dst, *d, src, *r, bytes);
    }
    if (st == QD_SUCCESS && other) entry.queued(s->impl, mine.shared_from_this());
    return st;
}

}  // namespace qd::core
