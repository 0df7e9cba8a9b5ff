// Several devices (qd.h): peer access between two contexts of this backend, and copies between
// their memory. Two qd contexts on one device share its primary context, so between them there
// is nothing to grant and a copy is an ordinary one.
#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

namespace {

// The peer query: 0 when the table has none (a driver that cannot say is not trusted to copy
// directly between devices).
qd_status query_peer(DeviceContext &dc, DeviceContext &peer, bool *out) {
    const DriverTable &t = dc.t;
    if (!t.device_can_access_peer) {
        *out = false;
        return QD_SUCCESS;
    }
    int can = 0;
    Result r = t.device_can_access_peer(&can, dc.device, peer.device);
    if (r != t.success)
        return dc.fail_call(r, QD_ERROR_INTERNAL, Fn::device_can_access_peer, nullptr);
    *out = can != 0;
    return QD_SUCCESS;
}

}  // namespace

qd_status GpuContext::can_access_peer(Context &peer, bool *out) {
    DeviceContext &theirs = *static_cast<GpuContext &>(peer).dc_;
    qd_status st = dc_->usable();
    if (st == QD_SUCCESS) st = theirs.usable();
    if (st != QD_SUCCESS) return st;
    if (dc_->device == theirs.device) {
        *out = true;
        return QD_SUCCESS;
    }
    return query_peer(*dc_, theirs, out);
}

qd_status GpuContext::enable_peer_access(Context &peer) {
    DeviceContext &theirs = *static_cast<GpuContext &>(peer).dc_;
    const DriverTable &t = dc_->t;
    qd_status st = theirs.usable();
    if (st != QD_SUCCESS) return st;
    DriverEntry entry(*dc_);  // cuCtxEnablePeerAccess grants access to the current context
    if (!entry.ok()) return entry.status();
    if (dc_->device == theirs.device) return QD_SUCCESS;
    for (Fn fn : {Fn::device_can_access_peer, Fn::ctx_enable_peer_access, Fn::device_get_mem_pool,
                  Fn::mem_pool_set_access})
        if (!has_entry(t, fn))
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "%s peer access cannot be granted: the driver has no %s", t.api_name,
                        symbol_name(t, fn));
    bool can = false;
    st = query_peer(*dc_, theirs, &can);
    if (st != QD_SUCCESS) return st;
    if (!can)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "device %u cannot access the memory of device %u: %s reports no peer access "
                    "between them (copies between them still work: qd_memcpy_peer_async)",
                    dc_->ordinal, theirs.ordinal, symbol_name(t, Fn::device_can_access_peer));
    Result r = t.ctx_enable_peer_access(theirs.native, 0);
    if (r != t.success && r != t.peer_access_already_enabled)
        return dc_->fail_call(r, QD_ERROR_NOT_SUPPORTED, Fn::ctx_enable_peer_access, nullptr);
    // qd's device memory comes from the peer device's stream-ordered pool, whose memory other
    // devices may touch only once the pool grants them access; cuCtxEnablePeerAccess does not
    // cover pools.
    NativeMemPool pool = nullptr;
    r = t.device_get_mem_pool(&pool, theirs.device);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_NOT_SUPPORTED, Fn::device_get_mem_pool, nullptr);
    const MemAccessDesc access{t.mem_location_device, static_cast<int>(dc_->ordinal),
                               t.mem_access_read_write};
    r = t.mem_pool_set_access(pool, &access, 1);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_NOT_SUPPORTED, Fn::mem_pool_set_access, nullptr);
    return QD_SUCCESS;
}

qd_status GpuStream::memcpy_peer(uint64_t dst, Context &dst_ctx, uint64_t src, Context &src_ctx,
                                 uint64_t bytes) {
    const DeviceContext &d = static_cast<GpuContext &>(dst_ctx).device_context();
    const DeviceContext &s = static_cast<GpuContext &>(src_ctx).device_context();
    if (d.device == s.device || !t_.memcpy_peer_async) return memcpy(dst, src, bytes);
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    Result r =
        t_.memcpy_peer_async(dst, d.native, src, s.native, static_cast<size_t>(bytes), native());
    if (r == t_.invalid_value && t_.stream_calls_use_stream_context) {
        r = again_in_own_context(r, [&] {
            return t_.memcpy_peer_async(dst, d.native, src, s.native, static_cast<size_t>(bytes),
                                        native());
        });
    }
    if (r != t_.success) return fail(r, QD_ERROR_INVALID_ADDRESS, Fn::memcpy_peer_async);
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
