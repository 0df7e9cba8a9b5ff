#include "core/stream_pool.h"

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

qd_status StreamPool::acquire(std::shared_ptr<Stream> *stream, uint64_t *handle) {
    std::shared_ptr<Stream> s;
    qd_status st = take(&s);
    if (st != QD_SUCCESS) return st;
    HandleTable &table = HandleTable::instance();
    while (!table.arm(s->pool_slot, handle)) {
        // This stream's slot ran out of generations and was retired; give the stream a new one.
        st = table.reserve(Tag::Stream, ctx_.handle(), s, &s->pool_slot);
        if (st != QD_SUCCESS) {
            put(std::move(s));
            return st;
        }
    }
    ctx_.live_streams.fetch_add(1, std::memory_order_relaxed);
    *stream = std::move(s);
    return QD_SUCCESS;
}

qd_status StreamPool::acquire_internal(uint32_t want, std::vector<std::shared_ptr<Stream>> *out) {
    out->clear();
    for (uint32_t i = 0; i < want; ++i) {
        std::shared_ptr<Stream> s;
        if (take(&s) != QD_SUCCESS) break;
        out->push_back(std::move(s));
    }
    if (!out->empty()) return QD_SUCCESS;
    return fail(QD_ERROR_POOL_EXHAUSTED,
                "every stream of the pool is leased (%u); release leases or raise "
                "qd_context_desc.stream_pool_size",
                capacity_);
}

qd_status StreamPool::release(Stream &stream, uint64_t handle) {
    qd_status st = HandleTable::instance().disarm(handle, Tag::Stream);
    if (st != QD_SUCCESS) return st;
    ctx_.live_streams.fetch_sub(1, std::memory_order_relaxed);
    put(stream.shared_from_this());
    return QD_SUCCESS;
}

void StreamPool::release_internal(std::vector<std::shared_ptr<Stream>> &streams) {
    for (auto &s : streams) put(std::move(s));
    streams.clear();
}

void StreamPool::clear() {
    std::vector<std::shared_ptr<Stream>> all;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        cleared_ = true;
        free_.clear();
        all.swap(all_);
    }
    HandleTable &table = HandleTable::instance();
    for (auto &s : all) table.unreserve(s->pool_slot);
    // `all` drops the streams here; their backends finish queued work before releasing them.
}

uint32_t StreamPool::free_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return capacity_ - outstanding_;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

qd_status StreamPool::take(std::shared_ptr<Stream> *out) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (cleared_) return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
        if (outstanding_ >= capacity_)
            return fail(QD_ERROR_POOL_EXHAUSTED,
                        "all %u streams of the pool are leased; release leases or raise "
                        "qd_context_desc.stream_pool_size",
                        capacity_);
        ++outstanding_;
        if (!free_.empty()) {
            *out = std::move(free_.back());
            free_.pop_back();
            hits_.fetch_add(1, std::memory_order_relaxed);
            leased_.fetch_add(1, std::memory_order_relaxed);
            return QD_SUCCESS;
        }
    }
    // Miss: create outside the lock (native stream creation takes microseconds).
    misses_.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<backend::Stream> impl;
    qd_status st = ctx_.impl().create_stream(QD_STREAM_NON_BLOCKING, 0, &impl);
    std::shared_ptr<Stream> s;
    if (st == QD_SUCCESS) {
        // The pooled stream must not keep its context alive through the pool's own reference
        // cycle beyond clear(); clear() breaks it.
        s = std::make_shared<Stream>(ctx_.shared_from_this(), std::move(impl), StreamKind::Leased);
        st = HandleTable::instance().reserve(Tag::Stream, ctx_.handle(), s, &s->pool_slot);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (st != QD_SUCCESS || cleared_) {
        --outstanding_;
        if (st == QD_SUCCESS) {
            HandleTable::instance().unreserve(s->pool_slot);
            return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
        }
        return st;
    }
    all_.push_back(s);
    created_.fetch_add(1, std::memory_order_relaxed);
    leased_.fetch_add(1, std::memory_order_relaxed);
    *out = std::move(s);
    return QD_SUCCESS;
}

void StreamPool::put(std::shared_ptr<Stream> stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cleared_) return;
    --outstanding_;
    leased_.fetch_sub(1, std::memory_order_relaxed);
    // FIFO-ish reuse is not needed for correctness: a stream's queue is in order, so the next
    // holder's work runs after the previous holder's and can never be overtaken by it.
    free_.push_back(std::move(stream));
}

}  // namespace qd::core
