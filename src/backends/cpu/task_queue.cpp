#include "backends/cpu/task_queue.h"

#include <new>

namespace qd::backend::cpu {

TaskQueue::TaskQueue(ChunkPool &pool) : pool_(pool), head_(pool.take()), tail_(head_) {}

TaskQueue::~TaskQueue() {
    // The owner disposes of leftover tasks first (CpuStream::abandon_all); destroying any
    // that remain is a backstop so their references are not leaked.
    while (Task *task = front()) {
        const uint32_t bytes = task->record_bytes;
        task->~Task();
        pop_front(bytes);
    }
    pool_.give(head_);
}

void *TaskQueue::push_back(uint32_t bytes) {
    if (tail_off_ + bytes > kChunkBytes) {
        Chunk *next = pool_.take();
        tail_->end = tail_off_;
        tail_->next = next;
        tail_ = next;
        tail_off_ = 0;
    }
    void *slot = tail_->data + tail_off_;
    tail_off_ += bytes;
    return slot;
}

Task *TaskQueue::front() const noexcept {
    if (empty()) return nullptr;
    return std::launder(reinterpret_cast<Task *>(head_->data + head_off_));
}

void TaskQueue::pop_front(uint32_t bytes) noexcept {
    head_off_ += bytes;
    if (head_ == tail_) {
        // Rewind once drained so the chunk is reused from its start, and no push ever has to
        // leave an empty chunk behind (so the head never sits at the end of a finished chunk).
        if (head_off_ == tail_off_) head_off_ = tail_off_ = 0;
        return;
    }
    if (head_off_ < head_->end) return;
    Chunk *done = head_;
    head_ = head_->next;
    head_off_ = 0;
    pool_.give(done);
}

// --- ChunkPool -------------------------------------------------------------------------------

ChunkPool::~ChunkPool() {
    while (Chunk *chunk = cached_) {
        cached_ = chunk->next;
        delete chunk;
    }
}

Chunk *ChunkPool::take() {
    {
        std::lock_guard<SpinLock> lock(lock_);
        if (Chunk *chunk = cached_) {
            cached_ = chunk->next;
            --cached_count_;
            chunk->next = nullptr;
            chunk->end = kChunkBytes;
            return chunk;
        }
    }
    return new Chunk;
}

void ChunkPool::give(Chunk *chunk) noexcept {
    {
        std::lock_guard<SpinLock> lock(lock_);
        if ((cached_count_ + 1) * sizeof(Chunk) <= kMaxCachedBytes) {
            chunk->next = cached_;
            cached_ = chunk;
            ++cached_count_;
            return;
        }
    }
    delete chunk;
}

}  // namespace qd::backend::cpu
