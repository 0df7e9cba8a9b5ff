// Stream-ordered memory and pinned host memory.
#include "api/guard.h"
#include "api/resolve.h"
#include "core/context.h"
#include "core/object_ops.h"
#include "core/peer.h"
#include "core/submit.h"

using namespace qd;
using core::AllocRegistry;
using core::Context;
using core::Stream;

namespace {

// No backend can address more than this; refusing it up front keeps alignment rounding in the
// backends free of overflow.
constexpr uint64_t kMaxAllocBytes = uint64_t(1) << 56;

qd_status check_alloc_size(uint64_t bytes) {
    if (bytes == 0) return fail(QD_ERROR_INVALID_ARGUMENT, "bytes is 0");
    if (bytes > kMaxAllocBytes)
        return fail(QD_ERROR_OVERFLOW, "%llu bytes exceeds the largest allocation (2^56 bytes)",
                    (unsigned long long)bytes);
    return QD_SUCCESS;
}

// The checks of a copy's or set's own values, which need no handle: they come first (qd.h,
// "Which error wins"). src is 1 for a memset, which has no source.
qd_status check_sides(uint64_t dst, uint64_t src, uint64_t bytes) {
    if (bytes == 0) return QD_SUCCESS;
    if (!dst || !src) return fail(QD_ERROR_INVALID_ARGUMENT, "%s is 0", !dst ? "dst" : "src");
    uint64_t end;
    for (uint64_t a : {dst, src})
        if (add_overflows(a, bytes, &end))
            return fail(QD_ERROR_OVERFLOW, "%s 0x%llx + %llu bytes wraps around the address space",
                        a == dst ? "dst" : "src", (unsigned long long)a, (unsigned long long)bytes);
    return QD_SUCCESS;
}

}  // namespace

extern "C" {

QD_API qd_status qd_mem_alloc_async(qd_stream stream, uint64_t bytes, uint64_t *address) {
    return api::guarded([&]() -> qd_status {
        if (!address) return api::null_argument("address");
        qd_status st = check_alloc_size(bytes);
        if (st != QD_SUCCESS) return st;
        Stream *s = nullptr;
        st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::mem_alloc(*s, bytes, address);
    });
}

QD_API qd_status qd_mem_free_async(qd_stream stream, uint64_t address) {
    return api::guarded([&]() -> qd_status {
        Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::mem_free(*s, address);
    });
}

QD_API qd_status qd_memcpy_async(qd_stream stream, uint64_t dst, uint64_t src, uint64_t bytes) {
    return api::guarded([&]() -> qd_status {
        qd_status st = check_sides(dst, src, bytes);
        if (st != QD_SUCCESS) return st;
        Stream *s = nullptr;
        st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        if (bytes == 0) return QD_SUCCESS;
        st = AllocRegistry::check_range(dst, bytes, "dst");
        if (st == QD_SUCCESS) st = AllocRegistry::check_range(src, bytes, "src");
        if (st != QD_SUCCESS) return st;
        return core::submit_memcpy(*s, dst, src, bytes);
    });
}

QD_API qd_status qd_memcpy_peer_async(qd_stream stream, uint64_t dst, qd_context dst_ctx,
                                      uint64_t src, qd_context src_ctx, uint64_t bytes) {
    return api::guarded([&]() -> qd_status {
        qd_status st = check_sides(dst, src, bytes);
        if (st != QD_SUCCESS) return st;
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Context> d{{"dst_ctx"}, dst_ctx}, r{{"src_ctx"}, src_ctx};
        st = api::resolve_all(s, d, r);
        if (st != QD_SUCCESS) return st;
        // The copy runs on a stream of one of the two contexts, which are of one backend.
        Context &mine = *s.obj->ctx;
        if (&mine != d.obj && &mine != r.obj)
            return fail(QD_ERROR_WRONG_CONTEXT,
                        "stream 0x%016llx belongs to context 0x%016llx, neither dst_ctx "
                        "0x%016llx nor src_ctx 0x%016llx",
                        (unsigned long long)stream, (unsigned long long)mine.handle(),
                        (unsigned long long)dst_ctx, (unsigned long long)src_ctx);
        st = api::check_contexts(api::Mix::SameBackend, d, r);
        if (st == QD_SUCCESS) st = api::check_usable(d, r);
        if (st != QD_SUCCESS) return st;
        return core::memcpy_peer(*s.obj, stream, dst, *d.obj, src, *r.obj, bytes);
    });
}

QD_API qd_status qd_memset_async(qd_stream stream, uint64_t dst, uint8_t value, uint64_t bytes) {
    return api::guarded([&]() -> qd_status {
        qd_status st = check_sides(dst, 1, bytes);
        if (st != QD_SUCCESS) return st;
        Stream *s = nullptr;
        st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        if (bytes == 0) return QD_SUCCESS;
        st = AllocRegistry::check_range(dst, bytes, "dst");
        if (st != QD_SUCCESS) return st;
        return core::submit_memset(*s, dst, value, bytes);
    });
}

QD_API qd_status qd_host_alloc(qd_context ctx, uint64_t bytes, void **out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        qd_status st = check_alloc_size(bytes);
        if (st != QD_SUCCESS) return st;
        Context *c = nullptr;
        st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::host_alloc(*c, bytes, out);
    });
}

QD_API qd_status qd_host_free(qd_context ctx, void *ptr) {
    return api::guarded([&]() -> qd_status {
        if (!ptr) return api::null_argument("ptr");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = core::host_free(*c, ptr);
        return st;
    });
}

}  // extern "C"
