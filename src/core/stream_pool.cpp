#include "core/stream_pool.h"

#include "common/error.h"
#include "core/context.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QD_POOL_RELAX() _mm_pause()
#else
#define QD_POOL_RELAX() ((void)0)
#endif

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

qd_status StreamPool::acquire(Stream **stream, uint64_t *handle) {
    Stream *s = nullptr;
    qd_status st = take(&s);
    if (st != QD_SUCCESS) return st;
    HandleTable &table = HandleTable::instance();
    while (!table.arm(s->pool_slot, handle)) {
        bool cleared;
        {
            Guard g(lock_);
            cleared = cleared_;
        }
        if (cleared) {
            put(s);
            return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
        }
        // This stream's slot ran out of generations and was retired; give the stream a new one.
        st = table.reserve(Tag::Stream, ctx_.handle(), s->shared_from_this(), &s->pool_slot);
        if (st != QD_SUCCESS) {
            put(s);
            return st;
        }
    }
    *stream = s;
    return QD_SUCCESS;
}

qd_status StreamPool::acquire_internal(uint32_t want, std::vector<Stream *> *out) {
    out->clear();
    for (uint32_t i = 0; i < want; ++i) {
        Stream *s = nullptr;
        if (take(&s) != QD_SUCCESS) break;
        out->push_back(s);
    }
    if (!out->empty()) return QD_SUCCESS;
    return fail(QD_ERROR_POOL_EXHAUSTED,
                "every stream of the pool is leased (%u); release leases or raise "
                "qd_context_desc.stream_pool_size",
                capacity_);
}

qd_status StreamPool::release(uint64_t handle) {
    Object *obj = nullptr;
    qd_status st = HandleTable::instance().disarm(handle, Tag::Stream, &obj);
    if (st != QD_SUCCESS) return st;
    put(static_cast<Stream *>(obj));
    return QD_SUCCESS;
}

void StreamPool::release_internal(std::vector<Stream *> &streams) {
    for (Stream *s : streams) put(s);
    streams.clear();
}

void StreamPool::clear() {
    std::vector<std::shared_ptr<Stream>> drop;
    std::vector<uint32_t> slots;
    {
        Guard g(lock_);
        cleared_ = true;
        free_.clear();
        for (auto &s : all_) slots.push_back(s->pool_slot);
        retired_.swap(all_);
        if (outstanding_ == 0) drop.swap(retired_);
    }
    HandleTable &table = HandleTable::instance();
    for (uint32_t slot : slots) table.unreserve(slot);
    // `drop` releases the streams here (or the last put() does); their backends finish queued
    // work before releasing the native streams.
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

StreamPool::Guard::Guard(std::atomic_flag &f) : flag(f) {
    while (flag.test_and_set(std::memory_order_acquire)) QD_POOL_RELAX();
}

StreamPool::Guard::~Guard() { flag.clear(std::memory_order_release); }

qd_status StreamPool::take(Stream **out) {
    {
        Guard g(lock_);
        if (cleared_) return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
        if (outstanding_ >= capacity_)
            return fail(QD_ERROR_POOL_EXHAUSTED,
                        "all %u streams of the pool are leased; release leases or raise "
                        "qd_context_desc.stream_pool_size",
                        capacity_);
        ++outstanding_;
        bump(leased_, 1);
        if (!free_.empty()) {
            *out = free_.back();
            free_.pop_back();
            bump(hits_, 1);
            return QD_SUCCESS;
        }
        bump(misses_, 1);
    }
    // Miss: create outside the lock (native stream creation takes microseconds).
    std::shared_ptr<backend::Stream> impl;
    qd_status st = ctx_.impl().create_stream(QD_STREAM_NON_BLOCKING, 0, &impl);
    std::shared_ptr<Stream> s;
    if (st == QD_SUCCESS) {
        // The stream holds its context; clear() breaks that cycle at context destroy.
        s = std::make_shared<Stream>(ctx_.shared_from_this(), std::move(impl), StreamKind::Leased);
        st = HandleTable::instance().reserve(Tag::Stream, ctx_.handle(), s, &s->pool_slot);
    }
    std::vector<std::shared_ptr<Stream>> drop;  // destroyed after the guard below
    Guard g(lock_);
    if (st != QD_SUCCESS || cleared_) {
        --outstanding_;
        bump(leased_, -1);
        if (cleared_ && outstanding_ == 0) drop.swap(retired_);
        if (st == QD_SUCCESS) {
            HandleTable::instance().unreserve(s->pool_slot);
            return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
        }
        return st;
    }
    *out = s.get();
    all_.push_back(std::move(s));
    bump(created_, 1);
    return QD_SUCCESS;
}

void StreamPool::put(Stream *stream) {
    std::vector<std::shared_ptr<Stream>> drop;
    Guard g(lock_);
    --outstanding_;
    bump(leased_, -1);
    if (cleared_) {
        if (outstanding_ == 0) drop.swap(retired_);
        return;  // `drop` is destroyed after the guard releases the lock
    }
    // LIFO reuse is safe: a stream's queue is in order, so the next holder's work runs after
    // the previous holder's and can never be overtaken by it.
    free_.push_back(stream);
}

}  // namespace qd::core
