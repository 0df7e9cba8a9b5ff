#include "backends/cpu/marker.h"

#include "backends/cpu/spin.h"

namespace qd::backend::cpu {

void Marker::complete_unpublished(Clock::time_point now) noexcept {
    time_ = now;
    done_.store(true, std::memory_order_release);
}

void Marker::publish(Clock::time_point now, StreamList &woken) noexcept {
    time_ = now;
    std::lock_guard<SpinLock> lock(lock_);
    done_.store(true, std::memory_order_seq_cst);
    woken.splice_back(parked_);
}

void Marker::wake_host_waiters() noexcept {
    if (host_waiters_.load(std::memory_order_seq_cst) != 0) {
        // Taking the mutex orders this completion after a waiter's check of done_, so the
        // notification cannot fall between its check and its wait. The completer holds a
        // reference to the marker (its record task), so the notify touches live memory.
        { std::lock_guard<std::mutex> lock(host_mutex_); }
        host_cv_.notify_all();
    }
}

bool Marker::park(const std::shared_ptr<CpuStream> &stream) noexcept {
    std::lock_guard<SpinLock> lock(lock_);
    if (done_.load(std::memory_order_relaxed)) return false;
    parked_.push_back(stream);
    return true;
}

void Marker::wait() {
    if (spin_until([this] { return complete(); }, kHostSpin)) return;
    std::unique_lock<std::mutex> lock(host_mutex_);
    host_waiters_.fetch_add(1, std::memory_order_seq_cst);
    host_cv_.wait(lock, [this] { return done_.load(std::memory_order_seq_cst); });
    host_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace qd::backend::cpu
