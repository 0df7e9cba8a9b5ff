#include "core/object_ops.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "core/object_event.h"
#include "core/submit.h"

namespace qd::core {

namespace {

// A wait's status, then a fault the wait found.
qd_status after_wait(Context &ctx, qd_status st) { return st == QD_SUCCESS ? ctx.usable() : st; }

// A query's status, unless the context turned out lost meanwhile.
qd_status after_query(Context &ctx, qd_status st) {
    const qd_status u = ctx.usable();
    return u != QD_SUCCESS ? u : st;
}

}  // namespace

qd_status device_count(uint32_t backend, uint32_t *count) {
    backend::Driver *driver;
    qd_status st = backend::get_driver(backend, &driver);
    if (st != QD_SUCCESS) return st;
    return driver->device_count(count);
}

qd_status device_info(uint32_t backend, uint32_t device, qd_device_info *out) {
    backend::Driver *driver;
    qd_status st = backend::get_driver(backend, &driver);
    if (st != QD_SUCCESS) return st;
    uint32_t n = 0;
    st = driver->device_count(&n);
    if (st != QD_SUCCESS) return st;
    if (device >= n)
        return fail(QD_ERROR_INVALID_ARGUMENT, "device %u does not exist (the backend has %u)",
                    device, n);
    qd_device_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    st = driver->device_info(device, &info);
    if (st != QD_SUCCESS) return st;
    info.backend = uint32_t(driver->kind());
    info.device = device;
    info.name[sizeof info.name - 1] = '\0';
    // Only the bytes both sides know: an older caller's struct ends before ours, and a newer
    // caller's fields past ours stay as it had them.
    info.struct_size = out->struct_size;
    std::memcpy(out, &info, out->struct_size < sizeof info ? out->struct_size : sizeof info);
    return QD_SUCCESS;
}

qd_status synchronize(Context &ctx) {
    qd_status st = ctx.may_block();
    if (st == QD_SUCCESS) st = ctx.impl().synchronize();
    st = after_wait(ctx, st);
    if (st == QD_SUCCESS) notify_host(ctx, {HostEvent::Kind::SynchronizedContext});
    return st;
}

qd_status synchronize(Stream &stream) {
    qd_status st = stream.ctx->may_block();
    if (st == QD_SUCCESS) st = stream.impl->synchronize();
    st = after_wait(*stream.ctx, st);
    if (st == QD_SUCCESS) notify_host(*stream.ctx, {HostEvent::Kind::SynchronizedStream, &stream});
    return st;
}

qd_status synchronize(Event &event) {
    qd_status st = event.ctx->may_block();
    if (st == QD_SUCCESS) st = event.impl->synchronize();
    st = after_wait(*event.ctx, st);
    if (st == QD_SUCCESS)
        notify_host(*event.ctx, {HostEvent::Kind::SynchronizedEvent, nullptr, event.impl.get()});
    return st;
}

qd_status query(Stream &stream) {
    const qd_status st = after_query(*stream.ctx, stream.impl->query());
    if (st == QD_SUCCESS) notify_host(*stream.ctx, {HostEvent::Kind::SynchronizedStream, &stream});
    return st;
}

qd_status query(Event &event) {
    const qd_status st = after_query(*event.ctx, event.impl->query());
    if (st == QD_SUCCESS)
        notify_host(*event.ctx, {HostEvent::Kind::SynchronizedEvent, nullptr, event.impl.get()});
    return st;
}

qd_status elapsed_ms(Event &start, Event &end, float *ms) {
    if (!start.impl->timing() || !end.impl->timing())
        return fail(QD_ERROR_TIMING_DISABLED, "%s event was created without QD_EVENT_TIMING",
                    !start.impl->timing() ? "the start" : "the end");
    if (!start.impl->recorded() || !end.impl->recorded())
        return fail(QD_ERROR_NOT_RECORDED, "%s event was never recorded",
                    !start.impl->recorded() ? "the start" : "the end");
    return start.ctx->impl().elapsed_ms(*start.impl, *end.impl, ms);
}

int32_t priority(const Stream &stream) { return stream.impl->priority(); }

qd_status flags(const Stream &stream, uint32_t *out) {
    if (stream.kind == StreamKind::Borrowed) return stream.impl->native_flags(out);
    *out = stream.flags;
    return QD_SUCCESS;
}

void priority_range(Context &ctx, int32_t *least, int32_t *greatest) {
    ctx.impl().priority_range(least, greatest);
}

qd_status mem_alloc(Stream &stream, uint64_t bytes, uint64_t *address) {
    uint64_t a = 0;
    // Inside a capture the block is the graph's (core/capture/graph_blocks.h): the capture
    // makes and registers it, and the caller's registry and notifications are not for it.
    if (stream.capturing()) {
        qd_status st = submit_graph_block(stream, OpKind::MemAlloc, bytes, 0, &a);
        if (st == QD_SUCCESS) *address = a;
        return st;
    }
    qd_status st = submit_mem_alloc(stream, bytes, &a);
    if (st != QD_SUCCESS) return st;
    Context &ctx = *stream.ctx;
    try {
        st = ctx.register_allocation(AllocRegistry::Kind::Device, a, bytes);
    } catch (...) {
        ctx.impl().mem_free_now(a);
        throw;
    }
    if (st == QD_SUCCESS) {
        notify_host(ctx, {HostEvent::Kind::Allocated, &stream, nullptr, a, bytes});
        notify_block(ctx, ObjectEvent::Change::Created, false, a, bytes);
        *address = a;
    }
    return st;
}

// The block leaves the registry first, so a second free of it (on any thread) is refused at
// once; if the stream then refuses the free (an observer such as graph capture, or the backend),
// the block goes back into the registry: it stays the caller's, freeable later, and a context
// destroy still frees it. If that destroy has already swept, register_allocation frees the
// block itself (the drain is over, so no work queued earlier still touches it): it is freed
// once, there, and never again here.
// A block a graph owns is not the caller's: only a free inside the capture that made it is
// taken (the capture frees it in the graph), any other is refused (core/submit.cpp).
qd_status mem_free(Stream &stream, uint64_t address) {
    Context &ctx = *stream.ctx;
    uint64_t bytes = 0;
    qd_status st = ctx.allocs().remove(AllocRegistry::Kind::Device, address, &bytes);
    if (st != QD_SUCCESS) {
        if (!ctx.allocs().graph_block(address)) return st;
        return submit_graph_block(stream, OpKind::MemFree, 0, address, nullptr);
    }
    st = submit_mem_free(stream, address);
    if (st != QD_SUCCESS) {
        const std::string reason = last_error_message();
        (void)ctx.register_allocation(AllocRegistry::Kind::Device, address, bytes);
        return fail(st, "%s", reason.c_str());
    }
    notify_block(ctx, ObjectEvent::Change::Destroyed, false, address, bytes);
    return QD_SUCCESS;
}

qd_status host_alloc(Context &ctx, uint64_t bytes, void **out) {
    void *p = nullptr;
    qd_status st = ctx.impl().host_alloc(bytes, &p);
    if (st != QD_SUCCESS) return st;
    try {
        st = ctx.register_allocation(AllocRegistry::Kind::Host, reinterpret_cast<uint64_t>(p),
                                     bytes);
    } catch (...) {
        ctx.impl().host_free(p);
        throw;
    }
    if (st == QD_SUCCESS) {
        notify_host(ctx, {HostEvent::Kind::Allocated, nullptr, nullptr,
                          reinterpret_cast<uint64_t>(p), bytes});
        notify_block(ctx, ObjectEvent::Change::Created, true, reinterpret_cast<uint64_t>(p), bytes);
        *out = p;
    }
    return st;
}

// An observer may refuse the free (the validation mode with QD_CONTEXT_VALIDATE_FAIL: the block
// goes back into the registry) or hold its release back (OpObserver::host_freeing).
qd_status host_free(Context &ctx, void *ptr) {
    const uint64_t address = reinterpret_cast<uint64_t>(ptr);
    uint64_t bytes = 0;
    qd_status st = ctx.allocs().remove(AllocRegistry::Kind::Host, address, &bytes);
    if (st != QD_SUCCESS) return st;
    bool taken = false;
    if (OpObserver *o = ctx.observer()) st = o->host_freeing(address, &taken);
    if (st != QD_SUCCESS) {
        const std::string reason = last_error_message();
        (void)ctx.register_allocation(AllocRegistry::Kind::Host, address, bytes);  // see mem_free
        return fail(st, "%s", reason.c_str());
    }
    if (!taken) ctx.impl().host_free(ptr);
    notify_block(ctx, ObjectEvent::Change::Destroyed, true, address, bytes);
    return QD_SUCCESS;
}

}  // namespace qd::core
