// An intrusive FIFO of streams that owns one reference to each stream on it.
//
// Intrusive, because the lists that hold streams (the scheduler's ready queues, a marker's
// parked streams, a worker's batch of streams it just woke) change on the hot path and from
// worker threads, where an allocation could fail with nowhere to report it. A stream is on at
// most one list at a time (its `scheduled_` flag guarantees it), so one link per stream is
// enough. The lock of whichever object holds the list guards it.
#pragma once

#include <memory>

namespace qd::backend::cpu {

class CpuStream;

class StreamList {
  public:
    StreamList() = default;
    StreamList(const StreamList &) = delete;
    StreamList &operator=(const StreamList &) = delete;
    ~StreamList() { clear(); }

    bool empty() const noexcept { return head_ == nullptr; }

    void push_back(std::shared_ptr<CpuStream> stream) noexcept;
    // The first stream, with the list's reference; null when empty.
    std::shared_ptr<CpuStream> pop_front() noexcept;
    // Moves every stream of other to the end of this list.
    void splice_back(StreamList &other) noexcept;
    // Drops every reference (which may destroy streams: callers hold no lock a stream's
    // destructor takes).
    void clear() noexcept;

  private:
    CpuStream *head_ = nullptr;
    CpuStream *tail_ = nullptr;
};

}  // namespace qd::backend::cpu
