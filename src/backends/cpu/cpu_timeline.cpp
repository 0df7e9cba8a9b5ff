#include "backends/cpu/cpu_timeline.h"

#include <algorithm>
#include <chrono>

#include "backends/cpu/spin.h"
#include "common/error.h"

namespace qd::backend::cpu {

std::shared_ptr<CpuTimeline> CpuTimeline::create(std::shared_ptr<Scheduler> scheduler,
                                                 const LostState *lost, uint64_t initial) {
    auto timeline = std::make_shared<CpuTimeline>(scheduler, lost, initial);
    if (!scheduler->register_timeline(timeline.get(), &timeline->registry_entry_)) return nullptr;
    timeline->registered_ = true;
    return timeline;
}

CpuTimeline::CpuTimeline(std::shared_ptr<Scheduler> scheduler, const LostState *lost,
                         uint64_t initial)
    : scheduler_(std::move(scheduler)), lost_(lost), value_(initial), queued_max_(initial) {}

CpuTimeline::~CpuTimeline() {
    if (registered_) scheduler_->unregister_timeline(registry_entry_);
    // Every queued wait holds its marker, not the timeline: markers nobody signalled any more
    // complete here, so no stream stays parked on a timeline that is gone.
    StreamList woken;
    release_all(woken);
    scheduler_->make_ready(woken);
}

void CpuTimeline::queued(uint64_t value) noexcept {
    std::lock_guard<SpinLock> lock(lock_);
    if (value > queued_max_) queued_max_ = value;
}

std::shared_ptr<Marker> CpuTimeline::marker_for(uint64_t value) {
    std::lock_guard<SpinLock> lock(lock_);
    if (value_.load(std::memory_order_relaxed) >= value || released_) return nullptr;
    if (closed_.load(std::memory_order_relaxed) && value > queued_max_) return nullptr;
    auto at = pending_.end();
    if (!pending_.empty() && pending_.back().first >= value) {
        // Out of value order: its place, or the marker already made for it.
        at = std::lower_bound(pending_.begin(), pending_.end(), value,
                              [](const auto &entry, uint64_t v) { return entry.first < v; });
        if (at != pending_.end() && at->first == value) return at->second;
    }
    return pending_.emplace(at, value, std::make_shared<Marker>())->second;
}

void CpuTimeline::complete_upto_locked(uint64_t limit, StreamList &woken) noexcept {
    if (pending_.empty() || pending_.front().first > limit) return;
    const auto now = Marker::Clock::now();
    while (!pending_.empty() && pending_.front().first <= limit) {
        pending_.front().second->publish(now, woken);
        pending_.pop_front();
    }
}

bool CpuTimeline::raise(uint64_t value, StreamList &woken) noexcept {
    {
        std::lock_guard<SpinLock> lock(lock_);
        if (value <= value_.load(std::memory_order_relaxed)) return false;
        value_.store(value, std::memory_order_seq_cst);
        if (value > queued_max_) queued_max_ = value;
        complete_upto_locked(value, woken);
    }
    return host_waiters_.load(std::memory_order_seq_cst) != 0;
}

void CpuTimeline::release_all(StreamList &woken) noexcept {
    {
        std::lock_guard<SpinLock> lock(lock_);
        released_ = true;
        complete_upto_locked(UINT64_MAX, woken);
    }
    wake_host_waiters();
}

void CpuTimeline::close() {
    StreamList woken;
    {
        std::lock_guard<SpinLock> lock(lock_);
        closed_.store(true, std::memory_order_seq_cst);
        // Waits for values no signal queued or made so far reaches can never be satisfied:
        // released, so the streams behind them (and a context destroy draining them) go on.
        const auto now = Marker::Clock::now();
        while (!pending_.empty() && pending_.back().first > queued_max_) {
            pending_.back().second->publish(now, woken);
            pending_.pop_back();
        }
    }
    wake_host_waiters();
    scheduler_->make_ready(woken);
}

qd_status CpuTimeline::host_signal(uint64_t value) {
    StreamList woken;
    reach(value, woken);
    scheduler_->make_ready(woken);
    return QD_SUCCESS;
}

void CpuTimeline::wake_host_waiters() noexcept {
    if (host_waiters_.load(std::memory_order_seq_cst) == 0) return;
    // Taking the mutex orders this wake-up after a waiter's check, so the notification cannot
    // fall between its check and its wait.
    { std::lock_guard<std::mutex> lock(host_mutex_); }
    host_cv_.notify_all();
}

qd_status CpuTimeline::host_wait(uint64_t value, uint64_t timeout_ns) {
    const auto reached = [&] { return value_.load(std::memory_order_seq_cst) >= value; };
    const auto ended = [&]() -> qd_status {
        if (closed_.load(std::memory_order_seq_cst))
            return fail(QD_ERROR_INVALID_HANDLE,
                        "the timeline was destroyed (or its context was) during the wait");
        if (lost_->lost())
            return fail(QD_ERROR_DEVICE_LOST, "the context was lost during the wait: %s",
                        lost_->message().c_str());
        return QD_SUCCESS;
    };
    // A status, not an error: no message is written (qd.h, Conventions: "Status").
    const auto not_ready = [] { return QD_NOT_READY; };
    if (reached()) return QD_SUCCESS;
    if (qd_status st = ended(); st != QD_SUCCESS) return st;
    if (timeout_ns == 0) return not_ready();
    const auto spin = std::chrono::nanoseconds(
        timeout_ns < uint64_t(kHostSpin.count()) ? int64_t(timeout_ns) : kHostSpin.count());
    if (spin_until(reached, spin)) return QD_SUCCESS;
    const bool forever = timeout_ns == UINT64_MAX;
    // Saturates: a timeout of centuries is a wait without a limit.
    const auto start = std::chrono::steady_clock::now();
    const auto limit = std::chrono::nanoseconds(
        timeout_ns > uint64_t(INT64_MAX / 2) ? INT64_MAX / 2 : int64_t(timeout_ns));
    const auto deadline = start + limit;
    std::unique_lock<std::mutex> lock(host_mutex_);
    host_waiters_.fetch_add(1, std::memory_order_seq_cst);
    qd_status st = QD_SUCCESS;
    for (;;) {
        if (reached()) break;
        if ((st = ended()) != QD_SUCCESS) break;
        if (forever) {
            host_cv_.wait(lock);
        } else if (host_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
            if (!reached()) st = not_ready();
            break;
        }
    }
    host_waiters_.fetch_sub(1, std::memory_order_relaxed);
    return st;
}

}  // namespace qd::backend::cpu
