// The core's Context, and the lookup of a handle to an object of a usable context. A Context owns
// everything made in it; its children (Stream, Event, Module, Kernel) are in core/objects.h,
// which this header includes: code that works on contexts and their objects includes this one.
//
// The core knows no driver: it talks to backends only through src/backends/backend.h.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "common/fork_generation.h"
#include "core/alloc_registry.h"
#include "core/event_pool.h"
#include "core/handle_table.h"
#include "core/objects.h"
#include "core/peer_users.h"
#include "core/resolve_cache.h"
#include "core/stream_pool.h"

namespace qd::core {

// fork_generation(): bumped in the child of every fork() (common/fork_generation.h).

class OpObserver;     // core/submit.h
class ObserverSet;    // core/observers.h
class CaptureRouter;  // core/capture/capture.h

class Context : public Object, public std::enable_shared_from_this<Context> {
  public:
    static constexpr Tag kTag = Tag::Context;

    // Creates the backend context, the default stream and the pools, and registers the handle.
    static qd_status create(const qd_context_desc &desc, uint64_t *out);
    // qd_context_destroy: drain, destroy children, free allocations, invalidate handles.
    static qd_status destroy(uint64_t handle);
    // qd_context_split (core/split.cpp): n parts of `parent`, each a context of its own made
    // with the parent's description, all or none.
    static qd_status split(Context &parent, const uint32_t *counts, uint32_t n, uint64_t *out);
    // Made by split(): a part is split no further.
    bool is_part() const { return part_; }

    ~Context() override;

    // QD_SUCCESS, or QD_ERROR_FORKED / QD_ERROR_DEVICE_LOST with the message written. Every call
    // that does work on the context asks this first; it is two loads when healthy (inline), and
    // the out-of-line part writes the message.
    qd_status usable() const {
        if (fork_generation_ == fork_generation() && !impl_->lost_state().lost()) return QD_SUCCESS;
        return unusable();
    }
    // Created before a fork() of this process (calls in the child get QD_ERROR_FORKED).
    bool forked() const { return fork_generation_ != fork_generation(); }
    // For blocking calls: refuses them from inside this context's host kernels and callbacks.
    qd_status may_block() const;

    void fill_stats(qd_context_stats *out) const;

    // Registers a new child handle. A child created while the context is being destroyed is
    // removed again and the call fails, so no handle outlives its context.
    qd_status adopt(Tag tag, std::shared_ptr<Object> obj, uint64_t *out);
    // Registers an allocation the backend just made (or one a refused free gives back). If the
    // context is being destroyed, either the destroy's sweep frees the block (after its drain),
    // or the sweep is over and the registry refuses it, and this call frees it (no queued work
    // can touch it any more) and fails with QD_ERROR_INVALID_HANDLE; either way the caller must
    // not free it again. Nothing allocated during a destroy leaks.
    qd_status register_allocation(AllocRegistry::Kind kind, uint64_t address, uint64_t bytes);

    // QD_ERROR_INVALID_HANDLE with the message once this context's destroy has begun, else
    // QD_SUCCESS: for a call that resolved the context just before a racing destroy, and then
    // found its state gone (qd.h: such a call completes as if it came first, or returns
    // QD_ERROR_INVALID_HANDLE).
    qd_status check_not_destroyed() const;
    // The same question without a message: has this context's destroy begun?
    bool destroying() const { return torn_down_.load(std::memory_order_acquire); }

    uint64_t handle() const { return handle_; }
    qd_backend kind() const { return kind_; }
    backend::Context &impl() { return *impl_; }
    StreamPool &stream_pool() { return *stream_pool_; }
    EventPool &event_pool() { return *event_pool_; }
    AllocRegistry &allocs() { return allocs_; }
    // Other contexts' streams with peer copies of this context's memory (core/peer_users.h).
    PeerUsers &peer_users() { return peer_users_; }
    uint64_t default_stream() const { return default_stream_handle_; }

    // The observer of every operation submitted on this context's streams (core/submit.h), or
    // nullptr: the context's ObserverSet once something is attached or while a capture is open.
    OpObserver *observer() const { return observer_.load(std::memory_order_acquire); }
    // Attaches an observer (the trace, the validation mode) for the rest of the context's
    // life (core/observers.h); the operations submitted after this returns pass through it.
    qd_status attach_observer(std::unique_ptr<OpObserver> observer);
    // The context's observers (empty until attach_observer), for calls that drive one.
    ObserverSet *observers() const { return observers_.get(); }
    // The graph capture router (core/capture/capture.h), or null before the context's first
    // qd_stream_begin_capture; it lives as long as the context.
    CaptureRouter *capture() const { return capture_.load(std::memory_order_acquire); }
    // The router, made at the first call; QD_ERROR_INVALID_HANDLE once the destroy has drained
    // the streams.
    qd_status open_capture(CaptureRouter **out);
    // Called by the router, under its lock, when its first capture opens (true) and its last
    // one ends (false): while a capture is open observer() is never null (an empty ObserverSet
    // when nothing is attached), so every submit takes the observed path that routes the
    // operations of capturing streams (core/submit.h); with none open and nothing attached it
    // is null again, and a submit costs one branch.
    void route_captures(bool open);
    // A test seam: the chokepoint's observer pointer set directly (the test keeps `observer`
    // alive and clears it before the context is destroyed).
    void set_observer_for_test(OpObserver *observer) {
        observer_.store(observer, std::memory_order_release);
    }

    // Counts a child handle that was registered (+1) or removed (-1), for qd_context_get_stats;
    // only core/lifecycle.cpp calls it.
    void counted(Tag tag, int64_t delta);

  private:
    Context() = default;
    // Everything create() does once the backend context exists: the pools, the handle, the
    // observers the description asks for, the default stream. On failure nothing is left.
    static qd_status adopt_impl(const qd_context_desc &desc, qd_backend kind,
                                std::unique_ptr<backend::Context> impl, bool part, uint64_t *out);
    qd_status unusable() const;  // the error half of usable()
    void tear_down();            // everything destroy() does after the handle is gone
    void sweep();  // frees what the registry still holds: the last step of tear_down()

    // What every submit reads (usable(), observer()), first and together.
    uint64_t handle_ = 0;
    qd_backend kind_ = QD_BACKEND_CPU;
    uint64_t fork_generation_ = 0;
    std::shared_ptr<backend::Context> impl_;
    std::atomic<OpObserver *> observer_{nullptr};
    qd_context_desc desc_{};  // as created: a split makes its parts with it
    bool part_ = false;

    // Live-object counters for qd_context_get_stats.
    std::atomic<int64_t> live_streams_{0}, live_events_{0}, live_modules_{0}, live_kernels_{0},
        live_graphs_{0}, live_timelines_{0};
    std::unique_ptr<StreamPool> stream_pool_;
    std::unique_ptr<EventPool> event_pool_;
    AllocRegistry allocs_;
    PeerUsers peer_users_;
    std::shared_ptr<Stream> default_stream_;
    uint64_t default_stream_handle_ = 0;
    std::atomic<bool> torn_down_{false};
    // Set by tear_down() once its streams are drained and shut down, just before its sweep:
    // from then on the registry refuses blocks (register_allocation).
    std::atomic<bool> allocs_closed_{false};
    std::mutex observers_mutex_;
    std::unique_ptr<ObserverSet> observers_;        // created by the first attach_observer
    std::unique_ptr<CaptureRouter> capture_owner_;  // under observers_mutex_
    std::atomic<CaptureRouter *> capture_{nullptr};
    bool observers_closed_ = false;  // under observers_mutex_: set by tear_down, attach refused
};

// The miss path of resolve() below, out of line: the handle table, then the thread's cache.
template <class T>
__attribute__((noinline)) qd_status resolve_miss(uint64_t handle, T **out) {
    std::shared_ptr<Object> obj;
    qd_status st = HandleTable::instance().get(handle, T::kTag, &obj);
    if (st != QD_SUCCESS) return st;
    *out = static_cast<T *>(ResolveCache::local().insert(handle, std::move(obj)));
    return QD_SUCCESS;
}

// Resolve a handle of type T (T::kTag) to a borrowed pointer, valid until the current API call
// returns (see resolve_cache.h). Writes the message on failure. The hit in the thread's cache
// is inlined into every caller (api::resolve_same_context's fold included: a launch resolves
// its stream and kernel with no call), the miss is one call.
template <class T>
__attribute__((always_inline)) inline qd_status resolve(uint64_t handle, T **out) {
    if (Object *hit = ResolveCache::local().find(handle, T::kTag)) {
        *out = static_cast<T *>(hit);
        return QD_SUCCESS;
    }
    return resolve_miss(handle, out);
}

// Resolve a handle and check that its context is usable (not lost, not forked).
template <class T>
inline qd_status resolve_usable(uint64_t handle, T **out) {
    qd_status st = resolve(handle, out);
    if (st != QD_SUCCESS) return st;
    return (*out)->ctx->usable();
}

}  // namespace qd::core
