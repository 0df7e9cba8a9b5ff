#include "core/lifecycle.h"

#include <mutex>
#include <vector>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/object_event.h"

namespace qd::core {

namespace {

// A child handle was registered: counts it and tells the observers (core/object_event.h).
void added_child(Context &ctx, Tag tag, uint64_t handle, const Object &object) {
    ctx.counted(tag, +1);
    notify_child(ctx, ObjectEvent::Change::Created, tag, handle, object);
}

// Registers a new child handle. The table gets a reference of its own: once the handle is in
// it, a destroy of the context on another thread may drop that reference at any moment; `obj`
// is kept until the observers were told.
qd_status adopt_object(Context &ctx, Tag tag, const std::shared_ptr<Object> &obj, uint64_t *out) {
    qd_status st = ctx.adopt(tag, obj, out);
    if (st == QD_SUCCESS) added_child(ctx, tag, *out, *obj);
    return st;
}

template <class T, class Impl>
qd_status adopt_child(Context &ctx, std::shared_ptr<Impl> impl, uint64_t *out) {
    std::shared_ptr<Context> owner = ctx.shared_from_this();
    return adopt_object(ctx, T::kTag, std::make_shared<T>(owner, std::move(impl)), out);
}

// A child handle was removed: uncounts it and tells the observers.
void removed_child(Context &ctx, Tag tag, uint64_t handle, const Object &object) {
    ctx.counted(tag, -1);
    notify_child(ctx, ObjectEvent::Change::Destroyed, tag, handle, object);
}

// Removes a child handle and everything that remembers it on this thread; the removed object
// (its last reference, unless queued work still holds it) is returned through `removed`.
qd_status remove_child(uint64_t handle, Tag tag, std::shared_ptr<Object> *removed) {
    HandleTable &table = HandleTable::instance();
    // In the child of a fork, a child of an inherited context is only forgotten: its release
    // could take locks of the context that a thread of the parent held at the fork
    // (core/fork_handlers.h). Looked up only in a fork child.
    bool inherited = false;
    if (__builtin_expect(fork_generation() != 0, 0)) {
        uint64_t owner = 0;
        std::shared_ptr<Context> ctx;
        if (table.check(handle, tag, &owner, false) == QD_SUCCESS &&
            table.get(owner, Tag::Context, &ctx) == QD_SUCCESS)
            inherited = ctx->forked();
    }
    qd_status st = table.remove(handle, tag, removed);
    ResolveCache::local().forget(handle);
    if (st == QD_SUCCESS && inherited) new std::shared_ptr<Object>(*removed);  // never released
    return st;
}

}  // namespace

const char *stream_kind_name(StreamKind kind) {
    switch (kind) {
    case StreamKind::Owned: return "an owned stream";
    case StreamKind::Leased: return "a pool lease";
    case StreamKind::Borrowed: return "a borrowed stream";
    case StreamKind::Default: return "the default stream";
    }
    return "a stream";
}

qd_status register_stream(const std::shared_ptr<Context> &ctx,
                          std::shared_ptr<backend::Stream> impl, StreamKind kind, uint64_t *out,
                          uint32_t flags) {
    auto stream = std::make_shared<Stream>(ctx, std::move(impl), kind, flags);
    // The table gets a reference of its own: once the handle is in it, a destroy of the context
    // on another thread may drop that reference at any moment. This one is kept until the
    // handle is stored and the observers were told, so the stream is released after the store
    // (by whichever reference goes last, through the count's acquire-release), never while it
    // is being written.
    qd_status st = ctx->adopt(Tag::Stream, stream, out);
    if (st != QD_SUCCESS) return st;
    stream->handle.store(*out, std::memory_order_relaxed);
    added_child(*ctx, Tag::Stream, *out, *stream);
    return st;
}

qd_status create_stream(Context &ctx, uint32_t flags, int32_t priority, uint64_t *out) {
    std::shared_ptr<backend::Stream> impl;
    qd_status st = ctx.impl().create_stream(flags, priority, &impl);
    if (st != QD_SUCCESS) return st;
    return register_stream(ctx.shared_from_this(), std::move(impl), StreamKind::Owned, out, flags);
}

qd_status import_stream(Context &ctx, uint64_t native, uint64_t *out) {
    std::shared_ptr<backend::Stream> impl;
    qd_status st = ctx.impl().import_stream(native, &impl);
    if (st != QD_SUCCESS) return st;
    return register_stream(ctx.shared_from_this(), std::move(impl), StreamKind::Borrowed, out);
}

qd_status create_event(Context &ctx, bool timing, uint64_t *out) {
    std::shared_ptr<backend::Event> impl;
    qd_status st = ctx.impl().create_event(timing, &impl);
    if (st != QD_SUCCESS) return st;
    return adopt_child<Event>(ctx, std::move(impl), out);
}

qd_status create_timeline(Context &ctx, uint64_t initial, uint64_t *out) {
    std::shared_ptr<backend::Timeline> impl;
    qd_status st = ctx.impl().create_timeline(initial, &impl);
    if (st != QD_SUCCESS) return st;
    std::shared_ptr<Context> owner = ctx.shared_from_this();
    return adopt_object(ctx, Tag::Timeline,
                        std::make_shared<Timeline>(owner, std::move(impl), initial), out);
}

qd_status load_module(Context &ctx, const void *image, uint64_t size, uint64_t *out) {
    std::shared_ptr<backend::Module> impl;
    qd_status st = ctx.impl().load_module(image, size, &impl);
    if (st != QD_SUCCESS) return st;
    return adopt_child<Module>(ctx, std::move(impl), out);
}

qd_status get_kernel(Module &module, const char *name, uint64_t *out) {
    std::shared_ptr<backend::Kernel> impl;
    qd_status st = module.impl->get_kernel(name, &impl);
    if (st != QD_SUCCESS) return st;
    st = adopt_child<Kernel>(*module.ctx, std::move(impl), out);
    if (st != QD_SUCCESS) return st;
    {
        std::lock_guard<std::mutex> lock(module.kernels_mutex);
        if (!module.unloaded) {
            module.kernels.push_back(*out);  // unloading the module destroys it too
            return QD_SUCCESS;
        }
    }
    // An unload on another thread took the module's kernel list before this kernel was in it:
    // the kernel goes with the module, as if the unload had destroyed it.
    (void)destroy_kernel(*out);
    *out = 0;
    return fail(QD_ERROR_INVALID_HANDLE,
                "the module was unloaded while the kernel was being looked up");
}

qd_status kernel_from_host_fn(Context &ctx, qd_host_kernel_fn fn, const char *name, uint64_t *out) {
    std::shared_ptr<backend::Kernel> impl;
    qd_status st = ctx.impl().kernel_from_host_fn(fn, name, &impl);
    if (st != QD_SUCCESS) return st;
    return adopt_child<Kernel>(ctx, std::move(impl), out);
}

qd_status destroy_stream(uint64_t handle) {
    Stream *s = nullptr;
    qd_status st = resolve(handle, &s);
    if (st != QD_SUCCESS) return st;
    if (s->kind == StreamKind::Default || s->kind == StreamKind::Leased)
        return fail(QD_ERROR_INVALID_OPERATION, "stream 0x%016llx is %s; %s",
                    (unsigned long long)handle, stream_kind_name(s->kind),
                    s->kind == StreamKind::Leased ? "give it back with qd_stream_release"
                                                  : "it lives as long as its context");
    // An inherited stream in a fork child is only forgotten; its capture state is the parent's
    // (and guarded by a lock a thread of the parent may have held at the fork).
    if (!s->ctx->forked()) st = refuse_if_capturing(*s, handle, "qd_stream_destroy");
    if (st != QD_SUCCESS) return st;
    std::shared_ptr<Object> removed;
    st = remove_child(handle, Tag::Stream, &removed);
    if (st != QD_SUCCESS) return st;
    auto &stream = static_cast<Stream &>(*removed);
    if (stream.kind == StreamKind::Borrowed) stream.impl->forget();
    removed_child(*stream.ctx, Tag::Stream, handle, stream);
    // Dropping `removed` returns at once; the backend keeps the native stream until its work
    // ends.
    return QD_SUCCESS;
}

qd_status destroy_event(uint64_t handle) {
    std::shared_ptr<Object> removed;
    qd_status st = remove_child(handle, Tag::Event, &removed);
    if (st == QD_SUCCESS)
        removed_child(*static_cast<Event &>(*removed).ctx, Tag::Event, handle, *removed);
    return st;
}

qd_status destroy_timeline(uint64_t handle) {
    std::shared_ptr<Object> removed;
    qd_status st = remove_child(handle, Tag::Timeline, &removed);
    if (st != QD_SUCCESS) return st;
    auto &timeline = static_cast<Timeline &>(*removed);
    // In the child of a fork an inherited timeline is only forgotten (remove_child).
    if (!timeline.ctx->forked()) timeline.impl->close();
    removed_child(*timeline.ctx, Tag::Timeline, handle, timeline);
    return QD_SUCCESS;
}

qd_status destroy_kernel(uint64_t handle) {
    std::shared_ptr<Object> removed;
    qd_status st = remove_child(handle, Tag::Kernel, &removed);
    if (st == QD_SUCCESS)
        removed_child(*static_cast<Kernel &>(*removed).ctx, Tag::Kernel, handle, *removed);
    return st;
}

qd_status unload_module(uint64_t handle) {
    std::shared_ptr<Object> removed;
    qd_status st = remove_child(handle, Tag::Module, &removed);
    if (st != QD_SUCCESS) return st;
    auto &m = static_cast<Module &>(*removed);
    std::vector<uint64_t> kernels;
    {
        // In the child of a fork, a thread of the parent may have held an inherited module's
        // mutex at the fork: its kernels are then left to the context (core/fork_handlers.h).
        std::unique_lock<std::mutex> lock(m.kernels_mutex, std::defer_lock);
        if (!m.ctx->forked())
            lock.lock();
        else if (!lock.try_lock()) {
            m.ctx->counted(Tag::Module, -1);
            return QD_SUCCESS;
        }
        m.unloaded = true;  // a racing get_kernel destroys its kernel itself
        kernels.swap(m.kernels);
    }
    // A kernel its owner already destroyed fails here, which changes nothing (the call
    // succeeds; a success leaves no message to keep).
    for (uint64_t k : kernels) (void)destroy_kernel(k);
    removed_child(*m.ctx, Tag::Module, handle, m);  // after its kernels
    return QD_SUCCESS;
}

qd_status register_graph(Context &ctx, std::shared_ptr<Graph> graph, uint64_t *out) {
    return adopt_object(ctx, Tag::Graph, graph, out);
}

qd_status destroy_graph(uint64_t handle) {
    std::shared_ptr<Object> removed;
    qd_status st = remove_child(handle, Tag::Graph, &removed);
    if (st == QD_SUCCESS)
        removed_child(*static_cast<Graph &>(*removed).ctx, Tag::Graph, handle, *removed);
    return st;
}

qd_status native_handle(const Stream &stream, uint64_t handle, uint64_t *out) {
    qd_status st = stream.impl->get_native_handle(out);
    if (st == QD_ERROR_NOT_SUPPORTED) {
        const std::string reason = last_error_message();
        return fail(st, "%s (stream 0x%016llx)", reason.c_str(), (unsigned long long)handle);
    }
    return st;
}

qd_status release_stream(uint64_t handle) {
    // Hot path (B3): the handle's owner is its context, whose pool disarms the lease; only an
    // armed slot (a lease) can be disarmed. Other outcomes are explained below.
    uint64_t owner = 0;
    Context *c = nullptr;
    Stream *s = nullptr;
    if (HandleTable::instance().check(handle, Tag::Stream, &owner, false) != QD_SUCCESS)
        return resolve(handle, &s);  // writes why the handle is not live
    qd_status st = resolve(owner, &c);
    if (st != QD_SUCCESS) return st;
    // An inherited lease in the child of a fork: forgotten without the pool, whose lock a
    // thread of the parent may have held at the fork (core/fork_handlers.h).
    if (__builtin_expect(c->forked(), 0))
        return HandleTable::instance().revoke(handle, Tag::Stream);
    if (__builtin_expect(c->capture() != nullptr, 0) && resolve(handle, &s) == QD_SUCCESS) {
        st = refuse_if_capturing(*s, handle, "qd_stream_release");
        if (st != QD_SUCCESS) return st;
    }
    st = c->stream_pool().release(handle);
    if (st == QD_SUCCESS) return st;
    if (resolve(handle, &s) != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
    if (s->kind != StreamKind::Leased)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "stream 0x%016llx is %s, not a pool lease; only leases are released",
                    (unsigned long long)handle, stream_kind_name(s->kind));
    return st;
}

}  // namespace qd::core
