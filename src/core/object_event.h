// What a context's observers hear of its objects: each stream, event, module, kernel, graph and
// timeline
// whose handle the API creates or destroys, and each block qd_mem_alloc_async or qd_host_alloc
// makes and qd_mem_free_async or qd_host_free frees (OpObserver::object_event, core/submit.h).
//
// One place reports each direction: core/lifecycle.cpp when a handle was registered or
// removed, core/object_ops.cpp when a block was registered or freed. The report comes after the call succeeded, on the calling thread,
// with no qd lock held:
//   - Created: the handle is registered (or the block made), before the call returns it, so
//     before any operation on the object can be submitted;
//   - Destroyed: the handle is gone (or the block's free was queued or done), so no call made
//     after this one reaches the object; the operations submitted before the destroy were
//     seen before it. A call on another thread that resolved the handle before the destroy may
//     still be finishing (qd.h: it completes as if it came first).
// A call racing the context's destroy may report after context_drained: an observer ignores
// what comes after its drain.
// A call that fails (a bad or stale handle, a second destroy, a refused destroy) reports
// nothing. Not reported: the pool's streams (leases and the streams of fork, join and parallel
// launch; the pool owns them for the context's life), the context itself, the children a
// context destroy takes with it (the observers hear context_drained instead), and anything of a
// context inherited by the child of a fork. An observer hears only of what is created after it
// attached; the observers attached at context creation (core/observer_table.h) hear of the
// default stream.
//
// With no observer attached a report costs one load and one branch (notify_object below).
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/submit.h"

namespace qd::core {

struct ObjectEvent {
    enum class Kind : uint8_t {
        Stream,
        Event,
        Module,
        Kernel,
        Graph,
        DeviceBlock,
        HostBlock,
        Timeline,
    };
    enum class Change : uint8_t { Created, Destroyed };
    Kind kind;
    Change change;
    // A handle-named object: its handle and core object (a Stream is the one an Op's `stream`
    // points to). Null for a block.
    uint64_t handle = 0;
    const Object *object = nullptr;
    // A block: its address and size.
    uint64_t address = 0;
    uint64_t bytes = 0;
};

// The kind of a child handle's object (Tag::Stream ... Tag::Graph).
inline ObjectEvent::Kind object_kind(Tag tag) {
    switch (tag) {
    case Tag::Event: return ObjectEvent::Kind::Event;
    case Tag::Module: return ObjectEvent::Kind::Module;
    case Tag::Kernel: return ObjectEvent::Kind::Kernel;
    case Tag::Graph: return ObjectEvent::Kind::Graph;
    case Tag::Timeline: return ObjectEvent::Kind::Timeline;
    default: return ObjectEvent::Kind::Stream;
    }
}

// Reports an ObjectEvent to ctx's observers: with none attached, one load and one branch.
inline void notify_object(const Context &ctx, const ObjectEvent &event) {
    if (OpObserver *o = ctx.observer(); __builtin_expect(o != nullptr, 0))
        if (!ctx.forked()) o->object_event(event);
}

// A child handle registered (Created) or removed (Destroyed).
inline void notify_child(const Context &ctx, ObjectEvent::Change change, Tag tag, uint64_t handle,
                         const Object &object) {
    notify_object(ctx, {object_kind(tag), change, handle, &object});
}

// A block made (Created) or freed (Destroyed); host: qd_host_alloc's, else a device block.
inline void notify_block(const Context &ctx, ObjectEvent::Change change, bool host,
                         uint64_t address, uint64_t bytes) {
    notify_object(ctx, {host ? ObjectEvent::Kind::HostBlock : ObjectEvent::Kind::DeviceBlock,
                        change, 0, nullptr, address, bytes});
}

}  // namespace qd::core
