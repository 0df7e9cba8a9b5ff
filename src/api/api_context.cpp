// Contexts.
#include "common/first_sizes.h"
#include "api/guard.h"
#include "api/resolve.h"
#include "core/context.h"
#include "core/object_ops.h"
#include "core/peer.h"

using namespace qd;
using core::Context;

namespace {

// Both contexts of a peer query or grant: two distinct, usable contexts of one backend.
qd_status resolve_pair(qd_context ctx, qd_context peer, Context **c, Context **p) {
    api::Arg<Context> a{{"ctx"}, ctx}, b{{"peer"}, peer};
    qd_status st = api::resolve_all(a, b);
    if (st != QD_SUCCESS) return st;
    if (a.obj == b.obj)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "ctx and peer are the same context (0x%016llx); a context always accesses "
                    "its own memory",
                    (unsigned long long)ctx);
    st = api::check_contexts(api::Mix::SameBackend, a, b);
    if (st == QD_SUCCESS) st = api::check_usable(a, b);
    *c = a.obj;
    *p = b.obj;
    return st;
}

}  // namespace

extern "C" {

QD_API qd_status qd_context_create(const qd_context_desc *desc, qd_context *out) {
    return api::guarded([&]() -> qd_status {
        if (!desc) return api::null_argument("desc");
        if (!out) return api::null_argument("out");
        return Context::create(*desc, out);
    });
}

QD_API qd_status qd_context_destroy(qd_context ctx) {
    return api::guarded([&]() -> qd_status { return Context::destroy(ctx); });
}

QD_API qd_status qd_context_synchronize(qd_context ctx) {
    return api::guarded([&]() -> qd_status {
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st == QD_SUCCESS) st = core::synchronize(*c);
        return st;
    });
}

QD_API qd_status qd_context_default_stream(qd_context ctx, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st == QD_SUCCESS) *out = c->default_stream();
        return st;
    });
}

QD_API qd_status qd_context_get_stats(qd_context ctx, qd_context_stats *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        if (out->struct_size < first_size<qd_context_stats>())
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "qd_context_stats.struct_size is %u; at least %u is required (use "
                        "QD_CONTEXT_STATS_INIT)",
                        out->struct_size, first_size<qd_context_stats>());
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) c->fill_stats(out);
        return st;
    });
}

QD_API qd_status qd_context_split(qd_context ctx, const uint32_t *counts, uint32_t n,
                                  qd_context *out) {
    return api::guarded([&]() -> qd_status {
        if (!counts) return api::null_argument("counts");
        if (!out) return api::null_argument("out");
        if (n == 0 || n > QD_MAX_SPLIT_PARTS)
            return fail(QD_ERROR_INVALID_ARGUMENT, "n is %u; a split makes 1 to %u parts", n,
                        QD_MAX_SPLIT_PARTS);
        for (uint32_t i = 0; i < n; ++i)
            if (counts[i] == 0)
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "counts[%u] is 0; every part needs at least one unit", i);
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return Context::split(*c, counts, n, out);
    });
}

QD_API qd_status qd_context_can_access_peer(qd_context ctx, qd_context peer, uint32_t *can_access) {
    return api::guarded([&]() -> qd_status {
        if (!can_access) return api::null_argument("can_access");
        Context *c = nullptr, *p = nullptr;
        qd_status st = resolve_pair(ctx, peer, &c, &p);
        if (st != QD_SUCCESS) return st;
        return core::can_access_peer(*c, *p, can_access);
    });
}

QD_API qd_status qd_context_enable_peer_access(qd_context ctx, qd_context peer) {
    return api::guarded([&]() -> qd_status {
        Context *c = nullptr, *p = nullptr;
        qd_status st = resolve_pair(ctx, peer, &c, &p);
        if (st != QD_SUCCESS) return st;
        return core::enable_peer_access(*c, *p);
    });
}

}  // extern "C"
