// The per-context stream pool: exclusive, bounded leases of reusable native streams.
//
// Leases are exclusive: a stream sits either in the free list or with exactly one holder, never
// both, unlike a round-robin pool that hands one stream to many holders. Every lease gets a
// fresh handle (the stream's reserved handle slot is re-armed with a new generation), so a
// handle kept after release is stale, never an alias of the next holder's stream.
// The pool is bounded by `capacity` leases; beyond that acquire fails at once with
// QD_ERROR_POOL_EXHAUSTED rather than blocking or aliasing.
//
// Acquire and release are hot (B3 sets 50 ns for the pair), so the pool's lock is a spin lock
// held for a few instructions, the counters are written under it without read-modify-writes,
// and the free list holds plain pointers (all_ owns the streams).
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/spin_lock.h"

namespace qd::core {

class Context;
class Stream;

class StreamPool {
  public:
    StreamPool(Context &ctx, uint32_t capacity) : ctx_(ctx), capacity_(capacity) {}

    // One lease with a live handle (qd_stream_acquire, qd_stream_fork). `keep` (optional)
    // receives a reference for a caller that goes on using the stream, since a context destroy
    // on another thread may clear the pool at any moment.
    qd_status acquire(uint64_t *handle, std::shared_ptr<Stream> *keep = nullptr);
    // Leases without handles, for qd_launch_parallel: up to `want`, at least 1, fewer when the
    // pool has fewer free. QD_ERROR_POOL_EXHAUSTED when none is free.
    qd_status acquire_internal(uint32_t want, std::vector<std::shared_ptr<Stream>> *out);
    // QD_ERROR_POOL_EXHAUSTED (reported as an exhaustion, like a failed acquire) when `want`
    // leases are more than the pool's capacity, so that no request could ever get them.
    qd_status check_fits(uint32_t want);
    // Give back a lease by handle (disarms it). QD_ERROR_INVALID_HANDLE when the handle is not
    // a live lease of this pool's context.
    qd_status release(uint64_t handle);
    // Disarm a lease's handle but keep the stream leased, handle-less (for release_internal
    // later): a capture keeps a joined child's stream until it ends (core/capture/capture.h).
    qd_status detach(uint64_t handle, std::shared_ptr<Stream> *out);
    // Give back handle-less leases.
    void release_internal(std::vector<std::shared_ptr<Stream>> &streams);

    // Stop every later acquire and release (context destroy, before it disarms the pool's
    // slots: from then on nothing but the destroy writes them). Streams are kept.
    void close();
    // Close, and drop every pooled stream. Leases still held become stale handles.
    void clear();

    uint32_t capacity() const { return capacity_; }
    uint64_t created() const { return created_.load(std::memory_order_relaxed); }
    uint64_t leased() const { return leased_.load(std::memory_order_relaxed); }
    uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
    uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

  private:
    qd_status acquire_locked(uint64_t *handle, std::shared_ptr<Stream> *keep);
    void report_exhausted(uint32_t wanted);
    using Guard = SpinGuard;
    // One free stream, or a new one; called with lock_ held, which it may drop and retake
    // around creating a native stream.
    qd_status take_locked(Stream **out);
    void put(Stream *stream);
    void put_locked(Stream *stream);  // with lock_ held
    // Written only under lock_; read by stats without it.
    static void bump(std::atomic<uint64_t> &c, int64_t d) { bump_counter(c, d); }

    Context &ctx_;
    const uint32_t capacity_;
    SpinLock lock_;  // guards free_, all_, outstanding_, cleared_
    std::vector<Stream *> free_;
    std::vector<std::shared_ptr<Stream>> all_;  // every stream the pool created (owners)
    uint32_t outstanding_ = 0;                  // leases held now
    bool cleared_ = false;
    std::atomic<uint64_t> created_{0}, leased_{0}, hits_{0}, misses_{0};
};

}  // namespace qd::core
