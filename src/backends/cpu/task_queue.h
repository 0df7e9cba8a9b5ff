// A stream's FIFO of task records: a chain of fixed-size chunks, written at the tail by
// enqueuers and consumed at the head by the one worker running the stream.
//
// Records never move once written, so the worker runs the head task without holding the
// stream's lock while enqueuers append behind it. The queue rewinds to the start of its chunk
// whenever it empties, so a stream that keeps up with its work stays in one chunk; chunks for
// bursts come from the context's ChunkPool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "common/spin_lock.h"
#include "backends/cpu/task.h"

namespace qd::backend::cpu {

inline constexpr uint32_t kChunkBytes = 16384;
static_assert(kMaxRecordBytes <= kChunkBytes, "the largest record must fit one chunk");

struct Chunk {
    alignas(64) unsigned char data[kChunkBytes];
    Chunk *next = nullptr;
    // Where the records end once the tail has moved on to a later chunk; until then the tail
    // offset bounds them.
    uint32_t end = kChunkBytes;
};

// Chunks that streams of one context have finished with, kept for the next burst. Memory the
// process gets back from the allocator is often fresh pages, and a page fault costs more than
// the dozens of enqueues that fill the page, so a burst of enqueues onto a busy stream is fast
// only if its chunks are recycled. The cache is bounded so one huge burst does not pin its
// memory for the life of the context.
class ChunkPool {
  public:
    static constexpr size_t kMaxCachedBytes = size_t{16} << 20;

    ChunkPool() = default;
    ~ChunkPool();
    ChunkPool(const ChunkPool &) = delete;
    ChunkPool &operator=(const ChunkPool &) = delete;

    // A cached chunk or a new one; throws std::bad_alloc.
    Chunk *take();
    void give(Chunk *chunk) noexcept;

  private:
    SpinLock lock_;  // a leaf lock: taken under a stream's lock, takes none itself
    Chunk *cached_ = nullptr;
    size_t cached_count_ = 0;
};

// Every method is called with the owning stream's lock held.
class TaskQueue {
  public:
    explicit TaskQueue(ChunkPool &pool);  // takes the first chunk; throws std::bad_alloc
    ~TaskQueue();
    TaskQueue(const TaskQueue &) = delete;
    TaskQueue &operator=(const TaskQueue &) = delete;

    bool empty() const noexcept { return head_ == tail_ && head_off_ == tail_off_; }
    // Space for a record of `bytes` (a multiple of 16, at most kMaxRecordBytes) at the tail; the
    // caller constructs the Task in it before releasing the lock. May throw std::bad_alloc, in
    // which case the queue is unchanged.
    void *push_back(uint32_t bytes);
    // The head task; null when empty.
    Task *front() const noexcept;
    // Removes the head record, whose Task the caller has already destroyed.
    void pop_front(uint32_t bytes) noexcept;

  private:
    ChunkPool &pool_;
    Chunk *head_;
    Chunk *tail_;
    uint32_t head_off_ = 0;
    uint32_t tail_off_ = 0;
};

}  // namespace qd::backend::cpu
