// GpuStream: one native stream. Every enqueue is one driver call (plus the current-context
// check); nothing here blocks except synchronize().
#include <memory>

#include "common/limits.h"
#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

namespace {

// Device allocations larger than this cannot exist on any GPU: refuse them as an overflow
// instead of letting the driver turn a wrapped size computation into "out of memory".
constexpr uint64_t kMaxDeviceAllocation = uint64_t{1} << 48;

// What a host callback needs: the user's function, and the context it belongs to so that
// in_callback() is true while it runs.
struct HostCall {
    qd_host_fn fn;
    void *user_data;
    const DeviceContext *owner;
};

void host_trampoline(void *raw) {
    std::unique_ptr<HostCall> call(static_cast<HostCall *>(raw));
    CallbackScope scope(call->owner, true);
    call->fn(call->user_data);
}

// qd_launch_host_status_fn's: called by the driver in stream order, unless shut_down() already
// called it (it then never reaches here: the driver calls nothing after the destroy's drain).
void host_status_trampoline(void *raw) {
    auto *call = static_cast<DeviceContext::StatusCall *>(raw);
    DeviceContext &dc = *call->owner;
    if (!dc.take_status_call(call)) return;
    std::unique_ptr<DeviceContext::StatusCall> owned(call);
    CallbackScope scope(&dc, true);
    call->fn(call->handle, dc.lost() ? QD_ERROR_DEVICE_LOST : QD_SUCCESS, call->user_data);
}

}  // namespace

GpuStream::GpuStream(std::shared_ptr<DeviceContext> dc, NativeStream stream, bool owned,
                     int32_t priority)
    : dc_(std::move(dc)),
      t_(dc_->t),
      stream_(stream),
      active_(stream),
      owned_(owned),
      priority_(priority) {}

// Returns at once: the driver releases an owned native stream only after its work completes.
// A borrowed (imported) stream is never destroyed, only forgotten.
GpuStream::~GpuStream() {
    if (registered_) dc_->unregister_stream(registry_entry_);
    dc_->release_stream(stream_, owned_);
}

qd_status GpuStream::launch(Kernel &kernel, const LaunchDims &dims, const qd_arg *args,
                            uint32_t num_args) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    auto &k = static_cast<GpuKernel &>(kernel);
    if (qd_status st = k.check_args(args, num_args); st != QD_SUCCESS) return st;

    // kernelParams point straight at the caller's argument data: the driver copies the values
    // before cuLaunchKernel returns, so no copy of ours is needed and nothing is allocated.
    void *params[QD_MAX_ARGS];
    for (uint32_t i = 0; i < num_args; ++i) params[i] = const_cast<void *>(args[i].data);

    Result r = t_.launch_kernel(k.function(), dims.grid[0], dims.grid[1], dims.grid[2],
                                dims.block[0], dims.block[1], dims.block[2], dims.shared_mem_bytes,
                                native(), num_args ? params : nullptr, nullptr);
    // A sticky error reported here belongs to earlier work: name the previous kernel.
    if (r != t_.success) return fail(r, QD_ERROR_LAUNCH_FAILED, Fn::launch_kernel);
    last_kernel_.store(k.name(), std::memory_order_relaxed);
    return QD_SUCCESS;
}

qd_status GpuStream::record(Event &event) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    auto &e = static_cast<GpuEvent &>(event);
    Result r = t_.event_record(e.native(), native());
    if (r != t_.success) return fail(r, QD_ERROR_INTERNAL, Fn::event_record);
    e.note_recorded(last_kernel());
    return QD_SUCCESS;
}

// The driver captures the event's latest record at call time, which is exactly the contract.
qd_status GpuStream::wait(Event &event) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    auto &e = static_cast<GpuEvent &>(event);
    Result r = t_.stream_wait_event(native(), e.native(), 0);
    if (r != t_.success) return fail(r, QD_ERROR_INTERNAL, Fn::stream_wait_event);
    return QD_SUCCESS;
}

qd_status GpuStream::synchronize() {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    dc_->run_deferred();
    Result r = t_.stream_synchronize(stream_);
    if (r != t_.success) return fail(r, QD_ERROR_INTERNAL, Fn::stream_synchronize);
    return QD_SUCCESS;
}

qd_status GpuStream::query() {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    Result r = t_.stream_query(stream_);
    if (r == t_.success) return QD_SUCCESS;
    if (r == t_.not_ready) return QD_NOT_READY;
    return fail(r, QD_ERROR_INTERNAL, Fn::stream_query);
}

qd_status GpuStream::mem_alloc(uint64_t bytes, uint64_t *address) {
    if (bytes > kMaxDeviceAllocation)
        return qd::fail(QD_ERROR_OVERFLOW,
                        "%llu bytes exceeds the largest device allocation (%llu bytes)",
                        static_cast<unsigned long long>(bytes),
                        static_cast<unsigned long long>(kMaxDeviceAllocation));
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    DevicePtr ptr = 0;
    Result r = t_.mem_alloc_async(&ptr, static_cast<size_t>(with_end_guard(bytes)), native());
    if (r != t_.success) return fail(r, QD_ERROR_OUT_OF_MEMORY, Fn::mem_alloc_async);
    *address = ptr;
    return QD_SUCCESS;
}

qd_status GpuStream::mem_free(uint64_t address) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    Result r = t_.mem_free_async(address, native());
    if (r != t_.success) return fail(r, QD_ERROR_INVALID_ADDRESS, Fn::mem_free_async);
    return QD_SUCCESS;
}

// Unified addressing: the driver infers the direction from the two addresses. Pageable host
// memory is staged by the driver (see README.md: a device-to-pageable copy returns only once
// it is done); pinned memory from qd_host_alloc gives fully asynchronous copies.
qd_status GpuStream::memcpy(uint64_t dst, uint64_t src, uint64_t bytes) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    Result r = t_.memcpy_async(dst, src, static_cast<size_t>(bytes), native());
    if (r == t_.invalid_value && t_.stream_calls_use_stream_context) {
        r = again_in_own_context(
            r, [&] { return t_.memcpy_async(dst, src, static_cast<size_t>(bytes), native()); });
    }
    if (r != t_.success) return fail(r, QD_ERROR_INVALID_ADDRESS, Fn::memcpy_async);
    return QD_SUCCESS;
}

qd_status GpuStream::memset(uint64_t dst, uint8_t value, uint64_t bytes) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    Result r = t_.memset_d8_async(dst, value, static_cast<size_t>(bytes), native());
    if (r != t_.success) return fail(r, QD_ERROR_INVALID_ADDRESS, Fn::memset_d8_async);
    return QD_SUCCESS;
}

qd_status GpuStream::host_fn(qd_host_fn fn, void *user_data) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    auto call = std::make_unique<HostCall>(HostCall{fn, user_data, dc_.get()});
    Result r = t_.launch_host_func(native(), host_trampoline, call.get());
    // On failure the driver never calls the trampoline, so fn is never called and the payload
    // is ours to free.
    if (r != t_.success) return fail(r, QD_ERROR_INTERNAL, Fn::launch_host_func);
    call.release();  // the trampoline owns it now
    return QD_SUCCESS;
}

qd_status GpuStream::native_flags(uint32_t *flags) const {
    if (native_flags_ < 0)
        return qd::fail(
            QD_ERROR_NOT_SUPPORTED,
            "the flags of imported stream %p are unknown: the driver has no %s (CUDA 5.5 "
            "and HIP 5.2 have it)",
            static_cast<void *>(stream_), symbol_name(t_, Fn::stream_get_flags));
    *flags = static_cast<uint32_t>(native_flags_);
    return QD_SUCCESS;
}

qd_status GpuStream::host_status_fn(qd_host_status_fn fn, uint64_t handle, void *user_data) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    auto call = std::make_unique<DeviceContext::StatusCall>(
        DeviceContext::StatusCall{fn, user_data, handle, dc_.get()});
    dc_->add_status_call(call.get());
    Result r = t_.launch_host_func(stream_, host_status_trampoline, call.get());
    if (r != t_.success) {
        // Never called by the driver, and never to be called: fn is not called for a call that
        // failed.
        dc_->take_status_call(call.get());
        return fail(r, QD_ERROR_INTERNAL, Fn::launch_host_func);
    }
    call.release();  // the trampoline, or shut_down(), owns it now
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
