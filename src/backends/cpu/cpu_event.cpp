#include "backends/cpu/cpu_event.h"

#include <mutex>

namespace qd::backend::cpu {

qd_status CpuEvent::query() {
    const std::shared_ptr<Marker> marker = latest();
    return !marker || marker->complete() ? QD_SUCCESS : QD_NOT_READY;
}

qd_status CpuEvent::synchronize() {
    // Waits on the record current at the call; a later re-record does not extend the wait.
    if (const std::shared_ptr<Marker> marker = latest()) marker->wait();
    return QD_SUCCESS;
}

void CpuEvent::publish(std::shared_ptr<Marker> marker) noexcept {
    {
        std::lock_guard<SpinLock> lock(lock_);
        latest_.swap(marker);
    }
    recorded_.store(true, std::memory_order_release);
    // The previous marker (now in `marker`) is released outside the lock.
}

void CpuEvent::restore(std::shared_ptr<Marker> previous, bool was_recorded) noexcept {
    {
        std::lock_guard<SpinLock> lock(lock_);
        latest_.swap(previous);
    }
    recorded_.store(was_recorded, std::memory_order_release);
}

std::shared_ptr<Marker> CpuEvent::latest() const noexcept {
    std::lock_guard<SpinLock> lock(lock_);
    return latest_;
}

}  // namespace qd::backend::cpu
