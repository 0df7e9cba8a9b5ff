// The per-context stream pool: exclusive, bounded leases of reusable native streams.
//
// Leases are exclusive: a stream sits either in the free list or with exactly one holder, never
// both, unlike a round-robin pool that hands one stream to many holders. Every lease gets a
// fresh handle (the stream's reserved handle slot is re-armed with a new generation), so a
// handle kept after release is stale, never an alias of the next holder's stream.
// The pool is bounded by `capacity` leases; beyond that acquire fails at once with
// QD_ERROR_POOL_EXHAUSTED rather than blocking or aliasing.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace qd::core {

class Context;
class Stream;

class StreamPool {
  public:
    StreamPool(Context &ctx, uint32_t capacity) : ctx_(ctx), capacity_(capacity) {}

    // One lease with a live handle (qd_stream_acquire, qd_stream_fork).
    qd_status acquire(std::shared_ptr<Stream> *stream, uint64_t *handle);
    // Leases without handles, for qd_launch_parallel: up to `want`, at least 1, fewer when the
    // pool has fewer free. QD_ERROR_POOL_EXHAUSTED when none is free.
    qd_status acquire_internal(uint32_t want, std::vector<std::shared_ptr<Stream>> *out);
    // Give back a lease that has a handle (disarms the handle).
    qd_status release(Stream &stream, uint64_t handle);
    // Give back handle-less leases.
    void release_internal(std::vector<std::shared_ptr<Stream>> &streams);

    // Drop every pooled stream (context destroy). Leases still held become stale handles.
    void clear();

    uint32_t capacity() const { return capacity_; }
    uint32_t free_count();
    uint64_t created() const { return created_.load(std::memory_order_relaxed); }
    uint64_t leased() const { return leased_.load(std::memory_order_relaxed); }
    uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
    uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

  private:
    qd_status take(std::shared_ptr<Stream> *out);  // one free stream, or a new one
    void put(std::shared_ptr<Stream> stream);

    Context &ctx_;
    const uint32_t capacity_;
    std::mutex mutex_;                              // guards free_, all_, outstanding_
    std::vector<std::shared_ptr<Stream>> free_;
    std::vector<std::shared_ptr<Stream>> all_;      // every stream the pool created
    uint32_t outstanding_ = 0;                      // leases held now
    bool cleared_ = false;
    std::atomic<uint64_t> created_{0}, leased_{0}, hits_{0}, misses_{0};
};

}  // namespace qd::core
