#include "core/fork_join.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/context.h"

namespace qd::core {

qd_status link_streams(Context &ctx, Stream &from, Stream *const *to, uint32_t n, OpOrigin origin) {
    EventPool &pool = ctx.event_pool();
    std::shared_ptr<backend::Event> ev;
    qd_status st = pool.get(&ev);
    if (st != QD_SUCCESS) return st;
    OpBatch ops(size_t(n) + 1);
    ops.record(from, *ev, origin);
    for (uint32_t i = 0; i < n; ++i) ops.wait(*to[i], *ev, origin);
    st = ops.submit(ctx);
    pool.put(std::move(ev));
    return st;
}

qd_status fork_streams(Stream &parent, uint32_t n, uint64_t *children) {
    Context &ctx = *parent.ctx;
    StreamPool &pool = ctx.stream_pool();
    // More than the pool can ever lease is refused before anything is allocated for them.
    qd_status st = pool.check_fits(n);
    if (st != QD_SUCCESS) return st;

    std::vector<std::shared_ptr<Stream>> leases;  // held: a racing destroy may clear the pool
    std::vector<uint64_t> handles;
    std::vector<Stream *> kids;
    leases.reserve(n);
    handles.reserve(n);
    kids.reserve(n);
    auto undo = [&] {
        for (uint64_t h : handles) pool.release(h);
    };
    for (uint32_t i = 0; i < n; ++i) {
        std::shared_ptr<Stream> s;
        uint64_t h;
        st = pool.acquire(&h, &s);
        if (st != QD_SUCCESS) {
            const std::string reason = last_error_message();
            undo();
            return fail(st, "fork of %u streams: %s", n, reason.c_str());
        }
        kids.push_back(s.get());
        leases.push_back(std::move(s));
        handles.push_back(h);
    }
    st = link_streams(ctx, parent, kids.data(), n, OpOrigin::Fork);
    if (st != QD_SUCCESS) {
        const std::string reason = last_error_message();
        undo();
        return fail(st, "%s", reason.c_str());
    }
    // Children of a capturing parent joined its capture: name them in its messages.
    if (parent.capturing())
        for (uint32_t i = 0; i < n; ++i) ctx.capture()->note_handle(*kids[i], handles[i]);
    std::copy(handles.begin(), handles.end(), children);
    return QD_SUCCESS;
}

qd_status join_streams(Stream &parent, uint64_t parent_handle, Stream *const *kids,
                       const uint64_t *children, uint32_t n) {
    Context &ctx = *parent.ctx;
    qd_status st = QD_SUCCESS;
    for (uint32_t i = 0; i < n; ++i)
        if (kids[i]->kind != StreamKind::Leased)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "children[%u] is not a pool lease (from qd_stream_fork or "
                        "qd_stream_acquire)",
                        i);
    // Whether the parts fit the capture a stream of them is in (none capturing: nothing to ask).
    bool capturing = parent.capturing();
    for (uint32_t i = 0; i < n && !capturing; ++i) capturing = kids[i]->capturing();
    if (capturing) {
        st = ctx.capture()->check_join(parent, parent_handle, kids, children, n);
        if (st != QD_SUCCESS) return st;
    }
    // One batch, all or nothing: each child's record and the parent's wait for it, through one
    // pooled event (each wait captures the record before the next record is queued).
    EventPool &events = ctx.event_pool();
    std::shared_ptr<backend::Event> ev;
    st = events.get(&ev);
    if (st != QD_SUCCESS) return st;
    OpBatch ops(size_t(n) * 2);
    for (uint32_t i = 0; i < n; ++i) {
        ops.record(*kids[i], *ev, OpOrigin::Join);
        ops.wait(parent, *ev, OpOrigin::Join);
    }
    st = ops.submit(ctx);
    events.put(std::move(ev));
    if (st != QD_SUCCESS) return st;
    for (uint32_t i = 0; i < n; ++i) {
        // A child that is a lane of a capture stays with the capture until it ends
        // (core/capture/capture.h): its handle goes stale now, its stream goes back to the pool
        // then.
        if (kids[i]->capturing()) {
            std::shared_ptr<Stream> kept;
            if (ctx.stream_pool().detach(children[i], &kept) != QD_SUCCESS) {
                st = QD_ERROR_INVALID_HANDLE;
            } else if (!ctx.capture()->keep_lease(kept)) {
                std::vector<std::shared_ptr<Stream>> back{std::move(kept)};
                ctx.stream_pool().release_internal(back);
            }
            continue;
        }
        // A racing release of the same child makes this fail; the join itself is complete.
        if (ctx.stream_pool().release(children[i]) != QD_SUCCESS) st = QD_ERROR_INVALID_HANDLE;
    }
    return st == QD_SUCCESS ? QD_SUCCESS
                            : fail(st,
                                   "a child was released by another thread during "
                                   "the join");
}

}  // namespace qd::core
