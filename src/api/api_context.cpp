// Contexts.
#include "common/first_sizes.h"
#include "api/guard.h"
#include "core/context.h"
#include "core/object_ops.h"
#include "core/peer.h"

using namespace qd;
using core::Context;

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
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
        if (st == QD_SUCCESS) st = core::synchronize(*c);
        return st;
    });
}

QD_API qd_status qd_context_default_stream(qd_context ctx, qd_stream *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
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

QD_API qd_status qd_context_can_access_peer(qd_context ctx, qd_context peer,
                                            uint32_t *can_access) {
    return api::guarded([&]() -> qd_status {
        if (!can_access) return api::null_argument("can_access");
        return core::can_access_peer(ctx, peer, can_access);
    });
}

QD_API qd_status qd_context_enable_peer_access(qd_context ctx, qd_context peer) {
    return api::guarded([&]() -> qd_status { return core::enable_peer_access(ctx, peer); });
}

}  // extern "C"
