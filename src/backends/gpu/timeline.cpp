#include "backends/gpu/timeline.h"

#include <chrono>
#include <thread>

#include "common/error.h"

namespace qd::backend::gpu {

GpuTimeline::GpuTimeline(std::shared_ptr<DeviceContext> dc, uint64_t *word, uint64_t initial)
    : dc_(std::move(dc)), word_(word), signal_max_(initial) {
    __atomic_store_n(word_, initial, __ATOMIC_RELEASE);
}

// The core drops its reference once the handle is gone and the calls that resolved it
// returned. Driver operations queued on a stream may still read or write the word, and nothing
// tracks when each completes: a word a stream used lives until the context does
// (DeviceContext::retire_word); one only the host used goes back at once.
GpuTimeline::~GpuTimeline() {
    if (used_by_streams_.load(std::memory_order_acquire))
        dc_->retire_word(word_);
    else
        dc_->release_host(word_);
}

void GpuTimeline::queued_signal(uint64_t value) {
    used_by_streams_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mutex_);
    if (value > signal_max_) signal_max_ = value;
}

void GpuTimeline::queued_wait(uint64_t value) {
    used_by_streams_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mutex_);
    if (value > wait_max_) wait_max_ = value;
}

qd_status GpuTimeline::host_signal(uint64_t value) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (value > signal_max_) signal_max_ = value;
    }
    __atomic_store_n(word_, value, __ATOMIC_SEQ_CST);
    return QD_SUCCESS;
}

void GpuTimeline::close() {
    closed_.store(true, std::memory_order_seq_cst);
    uint64_t release = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (wait_max_ > signal_max_) release = wait_max_;
    }
    // A wait no queued signal reaches would hold its stream (and the context's drain) forever.
    if (release != 0 && value() < release) __atomic_store_n(word_, release, __ATOMIC_SEQ_CST);
}

qd_status GpuTimeline::host_wait(uint64_t value, uint64_t timeout_ns) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const bool forever = timeout_ns == UINT64_MAX;
    const auto limit = std::chrono::nanoseconds(
        timeout_ns > uint64_t(INT64_MAX / 2) ? INT64_MAX / 2 : int64_t(timeout_ns));
    auto nap = std::chrono::microseconds(1);
    for (;;) {
        if (this->value() >= value) return QD_SUCCESS;
        if (closed_.load(std::memory_order_seq_cst))
            return fail(QD_ERROR_INVALID_HANDLE,
                        "the timeline was destroyed (or its context was) during the wait");
        if (dc_->lost()) return fail(QD_ERROR_DEVICE_LOST, "the context was lost during the wait");
        if (timeout_ns == 0) return QD_NOT_READY;
        if (!forever && Clock::now() - start >= limit) return QD_NOT_READY;
        std::this_thread::sleep_for(nap);
        if (nap < std::chrono::milliseconds(1)) nap *= 2;
    }
}

}  // namespace qd::backend::gpu

namespace qd::backend::gpu {

qd_status GpuContext::create_timeline(uint64_t initial, std::shared_ptr<Timeline> *out) {
    const DriverTable &t = dc_->t;
    for (Fn fn : {Fn::stream_write_value64, Fn::stream_wait_value64})
        if (!has_entry(t, fn))
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "%s timelines need %s: this driver has no %s (qd_timeline_create)",
                        t.api_name, t.timeline_requires, symbol_name(t, fn));
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    void *word = nullptr;
    Result r = t.host_alloc(&word, sizeof(uint64_t), t.host_alloc_flags);
    if (r != t.success) return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY, Fn::host_alloc, nullptr);
    *out = std::make_shared<GpuTimeline>(dc_, static_cast<uint64_t *>(word), initial);
    return QD_SUCCESS;
}

qd_status GpuStream::signal(Timeline &timeline, uint64_t value) {
    auto &tl = static_cast<GpuTimeline &>(timeline);
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    tl.queued_signal(value);  // before the driver may touch the word (its lifetime: timeline.h)
    Result r = t_.stream_write_value64(native(), tl.address(), value, t_.write_value_default);
    if (r != t_.success) return fail(r, QD_ERROR_LAUNCH_FAILED, Fn::stream_write_value64);
    return QD_SUCCESS;
}

qd_status GpuStream::wait_value(Timeline &timeline, uint64_t value) {
    auto &tl = static_cast<GpuTimeline &>(timeline);
    if (tl.value() >= value) return QD_SUCCESS;  // reached: nothing to wait for
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    tl.queued_wait(value);
    Result r = t_.stream_wait_value64(native(), tl.address(), value, t_.wait_value_geq);
    if (r != t_.success) return fail(r, QD_ERROR_LAUNCH_FAILED, Fn::stream_wait_value64);
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
