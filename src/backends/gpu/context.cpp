// GpuContext: one qd context on one device's primary context.
#include <algorithm>

#include "common/limits.h"
#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

static_assert(sizeof(size_t) == sizeof(uint64_t), "the GPU backends need a 64-bit host");

GpuContext::GpuContext(std::shared_ptr<DeviceContext> dc) : dc_(std::move(dc)) {
    dc_->attach_lost_state(&lost_state());
}

GpuContext::~GpuContext() { dc_->attach_lost_state(nullptr); }

// Every qd stream is non-blocking: it never synchronises implicitly with the legacy NULL stream,
// so work another library puts there cannot stall qd's streams, and qd orders work only
// through what the caller asked for (events, fork/join). QD_STREAM_NON_BLOCKING is accepted and
// changes nothing. The priority is clamped to the device's range and the applied one is read
// back.
qd_status GpuContext::create_stream(uint32_t flags, int32_t priority,
                                    std::shared_ptr<Stream> *out) {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    dc_->run_deferred();
    const DriverTable &t = dc_->t;
    const int clamped = std::clamp<int>(priority, dc_->greatest_priority, dc_->least_priority);
    (void)flags;
    const unsigned native_flags = t.stream_non_blocking_flag;
    NativeStream stream = nullptr;
    // A part's streams run on its SMs only when made in its green context.
    Result r = dc_->green ? t.green_ctx_stream_create(&stream, dc_->green, native_flags, clamped)
                          : t.stream_create(&stream, native_flags, clamped);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY,
                              dc_->green ? Fn::green_ctx_stream_create : Fn::stream_create,
                              nullptr);
    dc_->counters.streams_created.fetch_add(1, std::memory_order_relaxed);
    int applied = clamped;
    if (t.stream_get_priority(stream, &applied) != t.success) applied = clamped;
    std::shared_ptr<GpuStream> s;
    try {
        s = std::make_shared<GpuStream>(dc_, stream, true, applied);
    } catch (...) {
        dc_->release_stream(stream, true);
        throw;
    }
    dc_->register_stream(*s);
    *out = std::move(s);
    return QD_SUCCESS;
}

qd_status GpuContext::import_stream(uint64_t native, std::shared_ptr<Stream> *out) {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    if (native == t.pseudo_streams[0] || native == t.pseudo_streams[1])
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "native stream 0x%llx is the legacy or per-thread pseudo stream, which names "
                    "a different stream on each thread; import a real stream",
                    static_cast<unsigned long long>(native));
    auto stream = reinterpret_cast<NativeStream>(static_cast<uintptr_t>(native));
    if (t.stream_get_ctx) {
        NativeContext owner = nullptr;
        Result r = t.stream_get_ctx(stream, &owner);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_ARGUMENT, Fn::stream_get_ctx, nullptr);
        if (owner != dc_->native)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "native stream 0x%llx belongs to another %s context than device %u's "
                        "primary context",
                        static_cast<unsigned long long>(native), t.api_name, dc_->ordinal);
    }
    int priority = 0;
    Result r = t.stream_get_priority(stream, &priority);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_INVALID_ARGUMENT, Fn::stream_get_priority, nullptr);
    // Its flags, for qd_stream_get_flags: a stream of the legacy kind synchronises with the
    // legacy default stream.
    int64_t flags = -1;
    if (t.stream_get_flags) {
        unsigned native_flags = 0;
        r = t.stream_get_flags(stream, &native_flags);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_ARGUMENT, Fn::stream_get_flags, nullptr);
        flags = (native_flags & t.stream_non_blocking_flag) ? QD_STREAM_NON_BLOCKING : 0;
    }
    auto s = std::make_shared<GpuStream>(dc_, stream, false, priority);
    s->set_native_flags(flags);
    dc_->counters.streams_imported.fetch_add(1, std::memory_order_relaxed);
    dc_->register_stream(*s);
    *out = std::move(s);
    return QD_SUCCESS;
}

qd_status GpuContext::create_event(bool timing, std::shared_ptr<Event> *out) {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    dc_->run_deferred();
    const DriverTable &t = dc_->t;
    NativeEvent event = nullptr;
    Result r = t.event_create(&event, timing ? t.event_default_flags : t.event_disable_timing_flag);
    if (r != t.success) return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY, Fn::event_create, nullptr);
    dc_->counters.events_created.fetch_add(1, std::memory_order_relaxed);
    try {
        *out = std::make_shared<GpuEvent>(dc_, event, timing);
    } catch (...) {
        dc_->release_event(event);
        throw;
    }
    return QD_SUCCESS;
}

// Waits for qd's streams only: each live stream of this context, then the tails of streams
// already destroyed with work in flight. cuCtxSynchronize would also wait for work other
// libraries queued on the same primary context, which is not qd's to wait for.
qd_status GpuContext::synchronize() {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    qd_status status = QD_SUCCESS;
    for (const auto &stream : dc_->live_streams()) {
        // A stream of a native capture runs nothing until the graph is launched, and
        // synchronizing it would invalidate the capture (qd.h: qd_context_synchronize is
        // allowed during a capture and waits only for work queued outside it).
        if (dc_->open_captures.load(std::memory_order_acquire) > 0) {
            int capture_status = t.capture_status_none;
            if (t.stream_is_capturing(stream->own(), &capture_status) == t.success &&
                capture_status != t.capture_status_none)
                continue;
        }
        Result r = t.stream_synchronize(stream->own());
        if (r != t.success) {
            status =
                dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::stream_synchronize, stream->last_kernel());
            if (status == QD_ERROR_DEVICE_LOST) return status;
        }
    }
    qd_status tails = dc_->drain_tails();
    return status != QD_SUCCESS ? status : tails;
}

qd_status GpuContext::elapsed_ms(Event &start, Event &end, float *ms) {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    auto &s = static_cast<GpuEvent &>(start);
    auto &e = static_cast<GpuEvent &>(end);
    float value = 0.0f;
    Result r = t.event_elapsed_time(&value, s.native(), e.native());
    if (r == t.not_ready) return QD_NOT_READY;
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::event_elapsed_time, e.last_kernel());
    *ms = value;
    return QD_SUCCESS;
}

void GpuContext::priority_range(int32_t *least, int32_t *greatest) const {
    *least = dc_->least_priority;
    *greatest = dc_->greatest_priority;
}

qd_status GpuContext::host_alloc(uint64_t bytes, void **out) {
    // No host maps more than 2^57 bytes (x86-64 five-level paging; AArch64 uses less).
    constexpr uint64_t kMaxHostAllocation = uint64_t{1} << 57;
    if (bytes > kMaxHostAllocation)
        return fail(QD_ERROR_OVERFLOW, "%llu bytes exceeds what the host can address",
                    static_cast<unsigned long long>(bytes));
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    void *ptr = nullptr;
    Result r = t.host_alloc(&ptr, static_cast<size_t>(with_end_guard(bytes)), t.host_alloc_flags);
    if (r != t.success) return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY, Fn::host_alloc, nullptr);
    *out = ptr;
    return QD_SUCCESS;
}

void GpuContext::host_free(void *ptr) { dc_->release_host(ptr); }

void GpuContext::mem_free_now(uint64_t address) { dc_->release_device_now(address); }

// The core has synchronized already. Later enqueues through surviving objects fail with
// QD_ERROR_INVALID_HANDLE; the primary context is released when the last object is gone.
void GpuContext::shutdown() { dc_->shut_down(); }

}  // namespace qd::backend::gpu
