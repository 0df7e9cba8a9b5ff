// Streams: owned, leased (pool), borrowed (imported) and the default stream.
#include "common/first_sizes.h"
#include "api/guard.h"
#include "core/active_stream.h"
#include "core/context.h"
#include "core/submit.h"
#include "core/fork_join.h"

using namespace qd;
using core::Context;
using core::Event;
using core::Stream;
using core::StreamKind;

namespace {
constexpr uint32_t kStreamDescV1Size = first_size<qd_stream_desc>();

const char *kind_name(StreamKind kind) {
    switch (kind) {
    case StreamKind::Owned: return "an owned stream";
    case StreamKind::Leased: return "a pool lease";
    case StreamKind::Borrowed: return "a borrowed stream";
    case StreamKind::Default: return "the default stream";
    }
    return "a stream";
}
}  // namespace

extern "C" {

QD_API qd_status qd_stream_create(qd_context ctx, const qd_stream_desc *desc, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        qd_stream_desc d = QD_STREAM_DESC_INIT;
        if (desc) {
            if (desc->struct_size < kStreamDescV1Size)
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "qd_stream_desc.struct_size is %u; at least %u is required (use "
                            "QD_STREAM_DESC_INIT)",
                            desc->struct_size, kStreamDescV1Size);
            if (desc->flags & ~uint32_t(QD_STREAM_NON_BLOCKING))
                return fail(QD_ERROR_INVALID_ARGUMENT, "unknown stream flags 0x%x", desc->flags);
            if (desc->reserved != 0)
                return fail(QD_ERROR_INVALID_ARGUMENT, "qd_stream_desc.reserved must be 0");
            d = *desc;
        }
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
        if (st != QD_SUCCESS) return st;
        std::shared_ptr<backend::Stream> impl;
        st = c->impl().create_stream(d.flags, d.priority, &impl);
        if (st != QD_SUCCESS) return st;
        return core::register_stream(c->shared_from_this(), std::move(impl), StreamKind::Owned, out);
    });
}

QD_API qd_status qd_stream_destroy(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        qd_status st = core::resolve(stream, &s);
        if (st != QD_SUCCESS) return st;
        if (s->kind == StreamKind::Default || s->kind == StreamKind::Leased)
            return fail(QD_ERROR_INVALID_OPERATION, "stream 0x%016llx is %s; %s",
                        (unsigned long long)stream, kind_name(s->kind),
                        s->kind == StreamKind::Leased ? "give it back with qd_stream_release"
                                                      : "it lives as long as its context");
        st = core::HandleTable::instance().remove(stream, core::Tag::Stream);
        if (st != QD_SUCCESS) return st;
        s->ctx->live_streams.fetch_sub(1, std::memory_order_relaxed);
        if (s->kind == StreamKind::Borrowed) s->impl->forget();
        core::ResolveCache::local().forget(stream);
        // Dropping `s` returns at once; the backend keeps the native stream until its work ends.
        return st;
    });
}

QD_API qd_status qd_stream_synchronize(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st == QD_SUCCESS) st = s->ctx->may_block();
        if (st == QD_SUCCESS) st = s->impl->synchronize();
        if (st == QD_SUCCESS) st = s->ctx->usable();
        return st;
    });
}

QD_API qd_status qd_stream_query(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        st = s->impl->query();
        qd_status u = s->ctx->usable();
        return u != QD_SUCCESS ? u : st;
    });
}

QD_API qd_status qd_stream_wait_event(qd_stream stream, qd_event event) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        Event *e = nullptr;
        qd_status st = core::resolve_stream_and_event(stream, event, &s, &e);
        if (st != QD_SUCCESS) return st;
        return core::submit_wait(*s, *e->impl, e);
    });
}

QD_API qd_status qd_stream_acquire(qd_context ctx, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
        if (st != QD_SUCCESS) return st;
        return c->stream_pool().acquire(out);
    });
}

QD_API qd_status qd_stream_release(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        // Hot path (B3): the handle's owner is its context, whose pool disarms the lease; only
        // an armed slot (a lease) can be disarmed. Other outcomes are explained below.
        uint64_t owner = 0;
        Context *c = nullptr;
        Stream *s = nullptr;
        if (core::HandleTable::instance().check(stream, core::Tag::Stream, &owner, false) !=
            QD_SUCCESS)
            return core::resolve(stream, &s);  // writes why the handle is not live
        qd_status st = core::resolve(owner, &c);
        if (st != QD_SUCCESS) return st;
        st = c->stream_pool().release(stream);
        if (st == QD_SUCCESS) return st;
        if (core::resolve(stream, &s) != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
        if (s->kind != StreamKind::Leased)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "stream 0x%016llx is %s, not a pool lease; only leases are released",
                        (unsigned long long)stream, kind_name(s->kind));
        return st;
    });
}

QD_API qd_status qd_stream_fork(qd_stream parent, uint32_t n, qd_stream *children) {
    return api::guarded([&]() -> qd_status { return core::fork_streams(parent, n, children); });
}

QD_API qd_status qd_stream_join(qd_stream parent, const qd_stream *children, uint32_t n) {
    return api::guarded([&]() -> qd_status { return core::join_streams(parent, children, n); });
}

// Both run their common case inline (no allocation, nothing that throws), and fall back to the
// full path, kept out of line so the fast path needs no stack frame (core/active_stream.h).
namespace {
__attribute__((noinline)) qd_status set_active_full(qd_context ctx, qd_stream stream,
                                                    qd_stream *previous) {
    return api::guarded([&]() -> qd_status { return core::set_active_stream(ctx, stream, previous); });
}
__attribute__((noinline)) qd_status get_active_full(qd_context ctx, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        return core::get_active_stream(ctx, out);
    });
}
}  // namespace

QD_API qd_status qd_stream_set_active(qd_context ctx, qd_stream stream, qd_stream *previous) {
    if (core::try_set_active_stream(ctx, stream, previous)) return QD_SUCCESS;
    return set_active_full(ctx, stream, previous);
}

QD_API qd_status qd_stream_get_active(qd_context ctx, qd_stream *out) {
    if (out && core::try_get_active_stream(ctx, out)) return QD_SUCCESS;
    return get_active_full(ctx, out);
}

QD_API qd_status qd_stream_get_context(qd_stream stream, qd_context *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        uint64_t owner = 0;
        qd_status st = core::HandleTable::instance().check(stream, core::Tag::Stream, &owner);
        if (st == QD_SUCCESS) *out = owner;
        return st;
    });
}

QD_API qd_status qd_stream_get_priority(qd_stream stream, int32_t *priority) {
    return api::guarded([&]() -> qd_status {
        if (!priority) return api::null_argument("priority");
        Stream *s = nullptr;
        qd_status st = core::resolve(stream, &s);
        if (st == QD_SUCCESS) *priority = s->impl->priority();
        return st;
    });
}

QD_API qd_status qd_stream_priority_range(qd_context ctx, int32_t *least, int32_t *greatest) {
    return api::guarded([&]() -> qd_status {
        if (!least) return api::null_argument("least");
        if (!greatest) return api::null_argument("greatest");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) c->impl().priority_range(least, greatest);
        return st;
    });
}

QD_API qd_status qd_stream_native_handle(qd_stream stream, uint64_t *native) {
    return api::guarded([&]() -> qd_status {
        if (!native) return api::null_argument("native");
        Stream *s = nullptr;
        qd_status st = core::resolve(stream, &s);
        if (st != QD_SUCCESS) return st;
        const uint64_t h = s->impl->native_handle();
        if (h == 0)
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "the CPU backend has no native streams (stream 0x%016llx)",
                        (unsigned long long)stream);
        *native = h;
        return QD_SUCCESS;
    });
}

QD_API qd_status qd_stream_import(qd_context ctx, uint64_t native, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        if (native == 0)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "native stream 0 (the legacy default stream) cannot be imported");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
        if (st != QD_SUCCESS) return st;
        std::shared_ptr<backend::Stream> impl;
        st = c->impl().import_stream(native, &impl);
        if (st != QD_SUCCESS) return st;
        return core::register_stream(c->shared_from_this(), std::move(impl), StreamKind::Borrowed, out);
    });
}

}  // extern "C"
