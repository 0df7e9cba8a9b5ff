#include "core/stream_pool.h"
#include "common/limits.h"

#include "common/error.h"
#include "core/context.h"
#include "core/submit.h"

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

qd_status StreamPool::acquire(uint64_t *handle, std::shared_ptr<Stream> *keep) {
    const qd_status st = acquire_locked(handle, keep);
    if (st == QD_ERROR_POOL_EXHAUSTED) report_exhausted(1);
    return st;
}

qd_status StreamPool::acquire_locked(uint64_t *handle, std::shared_ptr<Stream> *keep) {
    HandleTable &table = HandleTable::instance();
    Guard g(lock_);
    // The lock is held until the handle is armed, so clear() cannot free the stream between
    // taking it and arming its slot (lock order: pool, then slot).
    Stream *s = nullptr;
    qd_status st = take_locked(&s);
    if (st != QD_SUCCESS) return st;
    // The pool lock serialises every arm and disarm of its slots (HandleTable::arm).
    while (!table.arm(s->pool_slot, handle)) {
        // This stream's slot ran out of generations and was retired; give the stream a new one.
        st = table.reserve(Tag::Stream, ctx_.handle(), s->shared_from_this(), &s->pool_slot);
        if (st != QD_SUCCESS) {
            --outstanding_;
            bump(leased_, -1);
            free_.push_back(s);
            return st;
        }
    }
    s->handle.store(*handle, std::memory_order_relaxed);
    if (keep) *keep = s->shared_from_this();
    return QD_SUCCESS;
}

qd_status StreamPool::acquire_internal(uint32_t want, std::vector<std::shared_ptr<Stream>> *out) {
    out->clear();
    {
        Guard g(lock_);
        for (uint32_t i = 0; i < want; ++i) {
            Stream *s = nullptr;
            if (take_locked(&s) != QD_SUCCESS) break;
            s->handle.store(0, std::memory_order_relaxed);
            out->push_back(s->shared_from_this());
        }
    }
    if (!out->empty()) return QD_SUCCESS;
    report_exhausted(want);
    return fail(QD_ERROR_POOL_EXHAUSTED,
                "every stream of the pool is leased (%u); release leases or raise "
                "qd_context_desc.stream_pool_size",
                capacity_);
}

qd_status StreamPool::check_fits(uint32_t want) {
    if (want <= capacity_) return QD_SUCCESS;
    fail(QD_ERROR_POOL_EXHAUSTED,
         "%u streams asked for, but the pool leases at most %u at once; raise "
         "qd_context_desc.stream_pool_size (at most 4096)",
         want, capacity_);
    report_exhausted(want);
    return QD_ERROR_POOL_EXHAUSTED;
}

// The observers' PoolExhausted event (the trace marks it), with the pool's lock released and
// this thread's error message kept as the failed call wrote it.
void StreamPool::report_exhausted(uint32_t wanted) {
    if (__builtin_expect(ctx_.observer() == nullptr, 1)) return;
    const std::string message = last_error_message();
    notify_host(ctx_, {HostEvent::Kind::PoolExhausted, nullptr, nullptr, 0, wanted});
    if (!message.empty()) fail(QD_ERROR_POOL_EXHAUSTED, "%s", message.c_str());
}

qd_status StreamPool::release(uint64_t handle) {
    Guard g(lock_);
    if (cleared_)
        return fail(QD_ERROR_INVALID_HANDLE,
                    "stream 0x%016llx is stale: its context is being destroyed",
                    (unsigned long long)handle);
    // Disarm and return to the free list under the one lock (see acquire).
    Object *obj = nullptr;
    qd_status st = HandleTable::instance().disarm(handle, Tag::Stream, &obj);
    if (st != QD_SUCCESS) return st;
    put_locked(static_cast<Stream *>(obj));
    return QD_SUCCESS;
}

qd_status StreamPool::detach(uint64_t handle, std::shared_ptr<Stream> *out) {
    Guard g(lock_);
    if (cleared_)
        return fail(QD_ERROR_INVALID_HANDLE,
                    "stream 0x%016llx is stale: its context is being destroyed",
                    (unsigned long long)handle);
    Object *obj = nullptr;
    qd_status st = HandleTable::instance().disarm(handle, Tag::Stream, &obj);
    if (st != QD_SUCCESS) return st;
    *out = static_cast<Stream *>(obj)->shared_from_this();
    return QD_SUCCESS;
}

void StreamPool::close() {
    Guard g(lock_);
    cleared_ = true;
}

void StreamPool::release_internal(std::vector<std::shared_ptr<Stream>> &streams) {
    for (auto &s : streams) put(s.get());
    streams.clear();  // the caller's references go after put(): put never outlives them
}

void StreamPool::clear() {
    std::vector<std::shared_ptr<Stream>> all;
    {
        Guard g(lock_);
        cleared_ = true;
        free_.clear();
        all.swap(all_);
    }
    HandleTable &table = HandleTable::instance();
    for (auto &s : all) table.unreserve(s->pool_slot);
    // `all` drops the pool's references here. Callers still using a lease (fork, parallel
    // launch) hold their own; the backends finish queued work before releasing native streams.
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

qd_status StreamPool::take_locked(Stream **out) {
    if (cleared_) return fail_context_destroyed();
    if (outstanding_ >= capacity_)
        return fail(QD_ERROR_POOL_EXHAUSTED,
                    "all %u streams of the pool are leased; release leases or raise "
                    "qd_context_desc.stream_pool_size",
                    capacity_);
    if (!free_.empty()) {
        *out = free_.back();
        free_.pop_back();
        ++outstanding_;
        bump(leased_, 1);
        bump(hits_, 1);
        return QD_SUCCESS;
    }
    // Miss: a native stream. Created under the pool lock: misses happen only until the pool
    // has grown to its working size, and creating outside the lock would let clear() race it.
    std::shared_ptr<backend::Stream> impl;
    qd_status st = ctx_.impl().create_stream(QD_STREAM_NON_BLOCKING, 0, &impl);
    if (st != QD_SUCCESS) return st;
    // The stream holds its context; clear() breaks that cycle at context destroy.
    auto s = std::make_shared<Stream>(ctx_.shared_from_this(), std::move(impl), StreamKind::Leased);
    // Room first (may throw, while nothing has changed): one more owner in all_, and a free-list
    // place for every stream, so that release's push_back never allocates under the lock.
    all_.reserve(all_.size() + 1);
    free_.reserve(all_.size() + 1);
    st = HandleTable::instance().reserve(Tag::Stream, ctx_.handle(), s, &s->pool_slot);
    if (st != QD_SUCCESS) return st;
    ++outstanding_;
    bump(leased_, 1);
    bump(misses_, 1);
    bump(created_, 1);
    *out = s.get();
    all_.push_back(std::move(s));
    return QD_SUCCESS;
}

void StreamPool::put(Stream *stream) {
    Guard g(lock_);
    put_locked(stream);
}

void StreamPool::put_locked(Stream *stream) {
    --outstanding_;
    bump(leased_, -1);
    if (cleared_) return;  // the stream is gone from the pool; never touch it
    // LIFO reuse is safe: a stream's queue is in order, so the next holder's work runs after
    // the previous holder's and can never be overtaken by it. free_ has room for every stream
    // (take_locked reserves it), so this never allocates under the lock.
    free_.push_back(stream);
}

}  // namespace qd::core
