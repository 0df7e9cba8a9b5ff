// GpuTimeline (qd.h, "Timelines"): one 64-bit word of pinned host memory that the driver
// writes (stream_write_value64) and polls (stream_wait_value64, "at least") in stream order,
// and that the host reads and writes directly: qd_timeline_query and qd_timeline_host_wait read
// the word, qd_timeline_host_signal writes it. With unified addressing the word's host address
// is its device address.
//
// What the driver cannot do, and what qd does instead:
// - A write is a write, not a maximum: signals of two streams that complete out of value order
//   leave the smaller value (qd.h says so for CUDA and HIP).
// - A wait polled by the device cannot be released one by one: close() (the handle is gone)
//   writes the largest value any queued wait waits for when no queued signal reaches it, so
//   the streams (and a context destroy draining them) never hang; that releases the other
//   waits of the timeline at the same moment.
// - A host wait polls the word, sleeping between looks (1 us doubling to 1 ms): no driver
//   call wakes a host thread when the device writes host memory.
// - Nothing says when one queued write or wait is done: a word a stream used is freed with
//   the context (DeviceContext::retire_word), one only the host used with the timeline.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "backends/gpu/gpu_objects.h"

namespace qd::backend::gpu {

class GpuTimeline final : public Timeline {
  public:
    // The word is pinned host memory of dc's device (DriverTable::host_alloc), set to initial.
    GpuTimeline(std::shared_ptr<DeviceContext> dc, uint64_t *word, uint64_t initial);
    ~GpuTimeline() override;

    uint64_t value() const override { return __atomic_load_n(word_, __ATOMIC_ACQUIRE); }
    qd_status host_signal(uint64_t value) override;
    qd_status host_wait(uint64_t value, uint64_t timeout_ns) override;
    void close() override;

    // For GpuStream::signal and wait_value: the word's device address, and the values queued.
    DevicePtr address() const { return reinterpret_cast<uintptr_t>(word_); }
    void queued_signal(uint64_t value);
    void queued_wait(uint64_t value);

  private:
    std::shared_ptr<DeviceContext> dc_;
    uint64_t *const word_;
    std::mutex mutex_;  // guards the two below
    uint64_t signal_max_;
    uint64_t wait_max_ = 0;
    std::atomic<bool> closed_{false};
    std::atomic<bool> used_by_streams_{false};  // a signal or wait was queued on a stream
};

}  // namespace qd::backend::gpu
