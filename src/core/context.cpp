#include "core/context.h"
#include "core/capture/capture.h"
#include "core/lifecycle.h"
#include "core/observer_table.h"
#include "core/observers.h"
#include "core/validation/observer.h"
#include "common/first_sizes.h"

#include <cstring>

#include "common/error.h"

namespace qd::core {

// Deletes the thread's resolve cache when the thread exits. It is touched only on the thread's
// first qd call, so the hot path never pays for its guard.
struct ResolveCacheReaper {
    ~ResolveCacheReaper() {
        ResolveCache *c = ResolveCache::t_cache_;
        ResolveCache::t_cache_ = nullptr;
        delete c;
    }
};

ResolveCache &ResolveCache::create() {
    thread_local ResolveCacheReaper reaper;
    (void)reaper;
    auto *c = new ResolveCache();
    t_cache_ = c;
    return *c;
}

namespace {
constexpr uint32_t kDefaultStreamPool = 32;
constexpr uint32_t kMaxStreamPool = 4096;
constexpr uint32_t kDefaultEventPool = 256;
constexpr uint32_t kMaxEventPool = 65536;
}  // namespace

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

qd_status Context::create(const qd_context_desc &desc, uint64_t *out) {
    if (desc.struct_size < first_size<qd_context_desc>())
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "qd_context_desc.struct_size is %u; at least %u is required (use "
                    "QD_CONTEXT_DESC_INIT)",
                    desc.struct_size, first_size<qd_context_desc>());
    constexpr uint32_t kKnownFlags = QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL;
    if (desc.flags & ~kKnownFlags)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "qd_context_desc.flags 0x%x has bits that are not qd_context_flags",
                    desc.flags);
    if ((desc.flags & QD_CONTEXT_VALIDATE_FAIL) && !(desc.flags & QD_CONTEXT_VALIDATE))
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "qd_context_desc.flags has QD_CONTEXT_VALIDATE_FAIL without "
                    "QD_CONTEXT_VALIDATE");
    if (desc.reserved != 0)
        return fail(QD_ERROR_INVALID_ARGUMENT, "qd_context_desc.reserved must be 0");
    if (desc.stream_pool_size > kMaxStreamPool)
        return fail(QD_ERROR_INVALID_ARGUMENT, "stream_pool_size %u is above the limit %u",
                    desc.stream_pool_size, kMaxStreamPool);
    if (desc.event_pool_size > kMaxEventPool)
        return fail(QD_ERROR_INVALID_ARGUMENT, "event_pool_size %u is above the limit %u",
                    desc.event_pool_size, kMaxEventPool);

    backend::Driver *driver = nullptr;
    qd_status st = backend::get_driver(desc.backend, &driver);
    if (st != QD_SUCCESS) return st;
    uint32_t devices = 0;
    st = driver->device_count(&devices);
    if (st != QD_SUCCESS) return st;
    if (desc.device >= devices)
        return fail(QD_ERROR_INVALID_ARGUMENT, "device %u does not exist (the backend has %u)",
                    desc.device, devices);

    backend::ContextParams params;
    params.device = desc.device;
    params.worker_threads = desc.cpu_worker_threads;
    std::unique_ptr<backend::Context> impl;
    st = driver->create_context(params, &impl);
    if (st != QD_SUCCESS) return st;
    return adopt_impl(desc, driver->kind(), std::move(impl), false, out);
}

qd_status Context::adopt_impl(const qd_context_desc &desc, qd_backend kind,
                              std::unique_ptr<backend::Context> impl, bool part, uint64_t *out) {
    std::shared_ptr<Context> ctx(new Context());
    const size_t known =
        desc.struct_size < sizeof ctx->desc_ ? desc.struct_size : sizeof ctx->desc_;
    std::memcpy(&ctx->desc_, &desc, known);
    ctx->desc_.struct_size = static_cast<uint32_t>(sizeof ctx->desc_);
    ctx->part_ = part;
    ctx->kind_ = kind;
    ctx->fork_generation_ = fork_generation();
    ctx->impl_ = std::move(impl);
    ctx->stream_pool_ = std::make_unique<StreamPool>(
        *ctx, desc.stream_pool_size ? desc.stream_pool_size : kDefaultStreamPool);
    ctx->event_pool_ = std::make_unique<EventPool>(
        *ctx->impl_, desc.event_pool_size ? desc.event_pool_size : kDefaultEventPool);

    HandleTable &table = HandleTable::instance();
    qd_status st = table.insert(Tag::Context, 0, ctx, &ctx->handle_);
    if (st != QD_SUCCESS) {
        ctx->tear_down();
        return st;
    }

    // The observers the description or the environment ask for (core/observer_table.h), before
    // the first object, so that they hear of the default stream.
    st = attach_observers_at_create(*ctx, desc);
    std::shared_ptr<backend::Stream> default_impl;
    if (st == QD_SUCCESS) st = ctx->impl_->create_stream(QD_STREAM_NON_BLOCKING, 0, &default_impl);
    if (st == QD_SUCCESS)
        st = register_stream(ctx, std::move(default_impl), StreamKind::Default,
                             &ctx->default_stream_handle_);
    if (st != QD_SUCCESS) {
        const std::string reason = last_error_message();
        destroy(ctx->handle_);
        return fail(st, "%s", reason.c_str());
    }
    table.get(ctx->default_stream_handle_, Tag::Stream, &ctx->default_stream_);
    *out = ctx->handle_;
    return QD_SUCCESS;
}

qd_status Context::destroy(uint64_t handle) {
    HandleTable &table = HandleTable::instance();
    std::shared_ptr<Context> ctx;
    qd_status st = table.get(handle, Tag::Context, &ctx);
    if (st != QD_SUCCESS) return st;
    if (ctx->fork_generation_ == fork_generation()) {
        st = ctx->may_block();
        if (st == QD_SUCCESS) st = ctx->peer_users_.may_wait(handle);
        if (st != QD_SUCCESS) return st;
    }
    // Removing the handle is the one step that can only succeed once: a second destroy, from
    // this thread or a racing one, fails here.
    st = table.remove(handle, Tag::Context);
    if (st != QD_SUCCESS) return st;
    ResolveCache::local().forget(handle);
    ctx->tear_down();
    ResolveCache::local().release_dead_now();  // this thread's cached children go now
    return QD_SUCCESS;
}

Context::~Context() = default;

qd_status Context::attach_observer(std::unique_ptr<OpObserver> observer) {
    std::lock_guard<std::mutex> lock(observers_mutex_);
    // Once the destroy told the observers the context drained, none may join: it would never
    // hear of the drain (a capture begun by a call racing the destroy).
    if (observers_closed_)
        return fail(QD_ERROR_INVALID_HANDLE, "context 0x%016llx was destroyed",
                    (unsigned long long)handle_);
    if (!observers_) observers_ = std::make_unique<ObserverSet>();
    qd_status st = observers_->add(std::move(observer));
    if (st == QD_SUCCESS) observer_.store(observers_.get(), std::memory_order_release);
    return st;
}

qd_status Context::open_capture(CaptureRouter **out) {
    std::lock_guard<std::mutex> lock(observers_mutex_);
    if (observers_closed_)
        return fail(QD_ERROR_INVALID_HANDLE, "context 0x%016llx was destroyed",
                    (unsigned long long)handle_);
    if (!capture_owner_) {
        capture_owner_ = std::make_unique<CaptureRouter>(*this);
        capture_.store(capture_owner_.get(), std::memory_order_release);
    }
    *out = capture_owner_.get();
    return QD_SUCCESS;
}

void Context::route_captures(bool open) {
    std::lock_guard<std::mutex> lock(observers_mutex_);
    if (!observers_) observers_ = std::make_unique<ObserverSet>();
    OpObserver *set = observers_.get();
    if (open) {
        // A test's own observer (set_observer_for_test) stays.
        OpObserver *none = nullptr;
        observer_.compare_exchange_strong(none, set, std::memory_order_acq_rel);
    } else if (observers_->size() == 0) {
        observer_.compare_exchange_strong(set, nullptr, std::memory_order_acq_rel);
    }
}

qd_status Context::unusable() const {
    if (fork_generation_ != fork_generation())
        return fail(QD_ERROR_FORKED,
                    "context 0x%016llx was created before fork(); create a new context in this "
                    "process",
                    (unsigned long long)handle_);
    if (impl_->lost_state().lost())
        return fail(QD_ERROR_DEVICE_LOST, "context 0x%016llx is lost: %s",
                    (unsigned long long)handle_, impl_->lost_state().message().c_str());
    return QD_SUCCESS;
}

qd_status Context::may_block() const {
    if (impl_->in_callback())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "a blocking call was made from a host kernel or callback of the same "
                    "context; it would wait for itself");
    return QD_SUCCESS;
}

void Context::fill_stats(qd_context_stats *out) const {
    qd_context_stats s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = out->struct_size;
    auto count = [](const std::atomic<int64_t> &c) {
        const int64_t v = c.load(std::memory_order_relaxed);
        return uint64_t(v < 0 ? 0 : v);
    };
    s.live_streams = count(live_streams_) + stream_pool_->leased();
    s.live_events = count(live_events_);
    s.live_modules = count(live_modules_);
    s.live_kernels = count(live_kernels_);
    s.stream_pool_capacity = stream_pool_->capacity();
    s.stream_pool_created = stream_pool_->created();
    s.stream_pool_leased = stream_pool_->leased();
    s.stream_pool_hits = stream_pool_->hits();
    s.stream_pool_misses = stream_pool_->misses();
    s.event_pool_created = event_pool_->created();
    s.event_pool_hits = event_pool_->hits();
    s.event_pool_misses = event_pool_->misses();
    s.live_allocations = allocs_.live_allocations();
    s.bytes_allocated = allocs_.device_bytes();
    s.host_bytes_allocated = allocs_.host_bytes();
    s.live_graphs = count(live_graphs_);
    s.live_timelines = count(live_timelines_);
    if (const ValidationObserver *v = validation_observer(*this))
        s.hazards_reported = v->reported();
    const size_t n = out->struct_size < sizeof s ? out->struct_size : sizeof s;
    std::memcpy(out, &s, n);
}

qd_status Context::adopt(Tag tag, std::shared_ptr<Object> obj, uint64_t *out) {
    HandleTable &table = HandleTable::instance();
    qd_status st = table.insert(tag, handle_, std::move(obj), out);
    if (st != QD_SUCCESS) return st;
    // Pairs with the fence in tear_down(): either its scan sees this handle, or this load sees
    // that the destroy began.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (torn_down_.load(std::memory_order_relaxed)) {
        table.remove(*out, tag);
        return fail(QD_ERROR_INVALID_HANDLE,
                    "context 0x%016llx was destroyed while the %s was being created",
                    (unsigned long long)handle_, tag_name(tag));
    }
    return QD_SUCCESS;
}

qd_status Context::register_allocation(AllocRegistry::Kind kind, uint64_t address, uint64_t bytes) {
    // The registry reads allocs_closed_ under its lock, which tear_down() takes (take_all) after
    // setting it: either the sweep sees this block, or the insert sees the sweep and refuses,
    // and then the drain is over, so freeing the block here races no queued work.
    if (allocs_.insert(kind, address, bytes, allocs_closed_)) return QD_SUCCESS;
    if (kind == AllocRegistry::Kind::Device || kind == AllocRegistry::Kind::Graph)
        impl_->mem_free_now(address);
    else if (kind == AllocRegistry::Kind::Host)
        impl_->host_free(reinterpret_cast<void *>(address));
    // GraphDriver: a native graph's address, which its driver graph releases.
    return fail(QD_ERROR_INVALID_HANDLE,
                "context 0x%016llx was destroyed while the allocation was being made",
                (unsigned long long)handle_);
}

qd_status Context::check_not_destroyed() const {
    if (!torn_down_.load(std::memory_order_acquire)) return QD_SUCCESS;
    return fail(QD_ERROR_INVALID_HANDLE, "context 0x%016llx was destroyed during the call",
                (unsigned long long)handle_);
}

void Context::counted(Tag tag, int64_t delta) {
    std::atomic<int64_t> *c = nullptr;
    switch (tag) {
    case Tag::Stream: c = &live_streams_; break;
    case Tag::Event: c = &live_events_; break;
    case Tag::Module: c = &live_modules_; break;
    case Tag::Kernel: c = &live_kernels_; break;
    case Tag::Graph: c = &live_graphs_; break;
    case Tag::Timeline: c = &live_timelines_; break;
    default: return;
    }
    c->fetch_add(delta, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

void Context::tear_down() {
    if (torn_down_.exchange(true)) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // see adopt()
    if (fork_generation_ != fork_generation()) {
        // The child of a fork (core/fork_handlers.h): the parent's threads, which may have held
        // this context's locks (its pool's, its backend's) at the fork, do not exist here, and
        // neither do its workers. Only forget: every child handle dies, and the context with
        // everything it holds is left behind, never released (a release could take those locks).
        std::vector<std::shared_ptr<Object>> children;
        if (handle_) children = HandleTable::instance().remove_all_owned_by(handle_);
        new std::vector<std::shared_ptr<Object>>(std::move(children));
        new std::shared_ptr<Context>(shared_from_this());
        return;
    }
    // The pool arms and disarms its slots under its own lock only; close it before anything
    // else writes them (remove_all_owned_by below, clear later).
    stream_pool_->close();
    // Children first: from here on every child handle is stale, so no new work can be queued
    // through the API; calls already past their lookup finish against live objects.
    if (handle_) {
        for (auto &obj : HandleTable::instance().remove_all_owned_by(handle_)) {
            auto *s = dynamic_cast<Stream *>(obj.get());
            if (s && s->kind == StreamKind::Borrowed) s->impl->forget();
            // No signal but those queued so far will come: the drain below must not wait for
            // one (qd.h, "Timelines": "Lifetime").
            if (auto *t = dynamic_cast<Timeline *>(obj.get())) t->impl->close();
        }
    }
    default_stream_.reset();
    stream_pool_->clear();
    event_pool_->clear();
    impl_->synchronize();  // drain; a lost context still drains (its work is skipped)
    ObserverSet *observers = nullptr;
    {
        std::lock_guard<std::mutex> lock(observers_mutex_);
        observers_closed_ = true;
        observers = observers_.get();
    }
    if (observers) observers->context_drained(*this);
    if (CaptureRouter *router = capture()) router->context_drained();
    impl_->shutdown();
    // Other contexts' queued peer copies of this context's memory run before it is freed; a
    // destroy nested in such a copy's call frees it once that call has queued the copy.
    peer_users_.close_then([self = shared_from_this()] { self->sweep(); });
}

void Context::sweep() {
    // Blocks given back by frees refused during the drain were registered again and are swept
    // here; from now on the registry refuses them (register_allocation frees them at once).
    allocs_closed_.store(true, std::memory_order_release);
    for (uint64_t a : allocs_.take_all(AllocRegistry::Kind::Device)) impl_->mem_free_now(a);
    // Graphs' blocks still registered: those of graphs released during the destroy, and of
    // graphs still alive (their release then finds them gone, core/capture/graph_blocks.h).
    for (uint64_t a : allocs_.take_all(AllocRegistry::Kind::Graph)) impl_->mem_free_now(a);
    (void)allocs_.take_all(AllocRegistry::Kind::GraphDriver);  // the driver graph's to release
    for (uint64_t p : allocs_.take_all(AllocRegistry::Kind::Host))
        impl_->host_free(reinterpret_cast<void *>(p));
}

}  // namespace qd::core
