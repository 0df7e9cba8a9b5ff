// Streams: owned, leased (pool), borrowed (imported) and the default stream.
#include <vector>

#include "common/first_sizes.h"
#include "api/guard.h"
#include "api/resolve.h"
#include "core/active_stream.h"
#include "core/capture/capture.h"
#include "core/context.h"
#include "core/object_ops.h"
#include "core/lifecycle.h"
#include "core/submit.h"
#include "core/fork_join.h"
#include "core/peer.h"

using namespace qd;
using core::Context;
using core::Event;
using core::Stream;
using core::StreamKind;

extern "C" {

QD_API qd_status qd_stream_create(qd_context ctx, const qd_stream_desc *desc, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        qd_stream_desc d = QD_STREAM_DESC_INIT;
        if (desc) {
            if (desc->struct_size < first_size<qd_stream_desc>())
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "qd_stream_desc.struct_size is %u; at least %u is required (use "
                            "QD_STREAM_DESC_INIT)",
                            desc->struct_size, first_size<qd_stream_desc>());
            if (desc->flags & ~uint32_t(QD_STREAM_NON_BLOCKING))
                return fail(QD_ERROR_INVALID_ARGUMENT, "unknown stream flags 0x%x", desc->flags);
            if (desc->reserved != 0)
                return fail(QD_ERROR_INVALID_ARGUMENT, "qd_stream_desc.reserved must be 0");
            d = *desc;
        }
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::create_stream(*c, d.flags, d.priority, out);
    });
}

QD_API qd_status qd_stream_destroy(qd_stream stream) {
    return api::guarded([&]() -> qd_status { return core::destroy_stream(stream); });
}

QD_API qd_status qd_stream_synchronize(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st == QD_SUCCESS) st = core::refuse_if_capturing(*s, stream, "qd_stream_synchronize");
        if (st == QD_SUCCESS) st = core::synchronize(*s);
        return st;
    });
}

QD_API qd_status qd_stream_query(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st == QD_SUCCESS) st = core::refuse_if_capturing(*s, stream, "qd_stream_query");
        if (st != QD_SUCCESS) return st;
        return core::query(*s);
    });
}

QD_API qd_status qd_stream_wait_event(qd_stream stream, qd_event event) {
    return api::guarded([&]() -> qd_status {
        // A stream and an event of the same context, or of two usable contexts of one backend
        // (qd.h, "Several devices").
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Event> e{{"event"}, event};
        qd_status st = api::resolve_contexts(api::Mix::SameBackend, s, e);
        // The stream's own context sees the wait (its capture refuses an outside record); a
        // record captured in the event's context is a node of that graph, not something to
        // wait on.
        if (st == QD_SUCCESS && e.obj->ctx != s.obj->ctx)
            st = core::refuse_if_captured_event(*e.obj, event, "qd_stream_wait_event");
        if (st != QD_SUCCESS) return st;
        st = core::submit_wait(*s.obj, *e.obj);
        // A stream that joined a capture by this wait is named by this handle in its messages.
        if (st == QD_SUCCESS && s.obj->capturing())
            s.obj->ctx->capture()->note_handle(*s.obj, stream);
        return st;
    });
}

QD_API qd_status qd_stream_acquire(qd_context ctx, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return c->stream_pool().acquire(out);
    });
}

QD_API qd_status qd_stream_release(qd_stream stream) {
    return api::guarded([&]() -> qd_status { return core::release_stream(stream); });
}

QD_API qd_status qd_stream_fork(qd_stream parent, uint32_t n, qd_stream *children) {
    return api::guarded([&]() -> qd_status {
        if (!children) return api::null_argument("children");
        if (n == 0) return fail(QD_ERROR_INVALID_ARGUMENT, "n is 0; fork at least one stream");
        Stream *p = nullptr;
        qd_status st = core::resolve_usable(parent, &p);
        if (st != QD_SUCCESS) return st;
        return core::fork_streams(*p, n, children);
    });
}

QD_API qd_status qd_stream_join(qd_stream parent, const qd_stream *children, uint32_t n) {
    return api::guarded([&]() -> qd_status {
        if (!children) return api::null_argument("children");
        if (n == 0) return fail(QD_ERROR_INVALID_ARGUMENT, "n is 0; join at least one stream");
        // Validate everything before queuing anything, so an error changes nothing; each class
        // of check runs over every argument before the next (qd.h, "Which error wins").
        for (uint32_t i = 0; i < n; ++i) {
            if (children[i] == parent)
                return fail(QD_ERROR_INVALID_ARGUMENT, "children[%u] is the parent stream", i);
            for (uint32_t j = 0; j < i; ++j)
                if (children[j] == children[i])
                    return fail(QD_ERROR_INVALID_ARGUMENT,
                                "children[%u] and children[%u] are the same", j, i);
        }
        Stream *p = nullptr;
        qd_status st = core::resolve(parent, &p);
        if (st != QD_SUCCESS) return st;
        std::vector<Stream *> kids(n);
        for (uint32_t i = 0; i < n; ++i) {
            st = api::resolve_element({"children", i}, children[i], &kids[i]);
            if (st != QD_SUCCESS) return st;
        }
        for (uint32_t i = 0; i < n; ++i) {
            st = api::check_mix(api::Mix::SameContext, {"parent"}, parent, *p->ctx, {"children", i},
                                children[i], *kids[i]->ctx);
            if (st != QD_SUCCESS) return st;
        }
        st = p->ctx->usable();
        if (st != QD_SUCCESS) return st;
        return core::join_streams(*p, parent, kids.data(), children, n);
    });
}

// Both run their common case inline (no allocation, nothing that throws), and fall back to the
// full path, kept out of line so the fast path needs no stack frame (core/active_stream.h).
namespace {
__attribute__((noinline)) qd_status set_active_full(qd_context ctx, qd_stream stream,
                                                    qd_stream *previous) {
    return api::guarded([&]() -> qd_status {
        // No state check: the active stream is a value, set and read on any context.
        api::Arg<Context> c{{"ctx"}, ctx};
        api::Arg<Stream> s{{"stream"}, stream};
        qd_status st = api::resolve_all(c, s);
        if (st == QD_SUCCESS) st = api::check_contexts(api::Mix::SameContext, c, s);
        if (st != QD_SUCCESS) return st;
        return core::set_active_stream(*c.obj, stream, previous);
    });
}
__attribute__((noinline)) qd_status get_active_full(qd_context ctx, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::get_active_stream(*c, out);
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
        if (st == QD_SUCCESS) *priority = core::priority(*s);
        return st;
    });
}

// The state queries read what the stream keeps (no lock, nothing queued), so they answer on a
// capturing stream without touching its capture, and on a lost context.
QD_API qd_status qd_stream_is_capturing(qd_stream stream, int32_t *capturing) {
    return api::guarded([&]() -> qd_status {
        if (!capturing) return api::null_argument("capturing");
        Stream *s = nullptr;
        qd_status st = core::resolve(stream, &s);
        if (st == QD_SUCCESS) *capturing = s->capturing() ? 1 : 0;
        return st;
    });
}

QD_API qd_status qd_stream_get_flags(qd_stream stream, uint32_t *flags) {
    return api::guarded([&]() -> qd_status {
        if (!flags) return api::null_argument("flags");
        Stream *s = nullptr;
        qd_status st = core::resolve(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::flags(*s, flags);
    });
}

QD_API qd_status qd_stream_priority_range(qd_context ctx, int32_t *least, int32_t *greatest) {
    return api::guarded([&]() -> qd_status {
        if (!least) return api::null_argument("least");
        if (!greatest) return api::null_argument("greatest");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) core::priority_range(*c, least, greatest);
        return st;
    });
}

QD_API qd_status qd_stream_native_handle(qd_stream stream, uint64_t *native) {
    return api::guarded([&]() -> qd_status {
        if (!native) return api::null_argument("native");
        Stream *s = nullptr;
        qd_status st = core::resolve(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::native_handle(*s, stream, native);
    });
}

QD_API qd_status qd_stream_import(qd_context ctx, uint64_t native, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        if (native == 0)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "native stream 0 (the legacy default stream) cannot be imported");
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::import_stream(*c, native, out);
    });
}

}  // extern "C"
