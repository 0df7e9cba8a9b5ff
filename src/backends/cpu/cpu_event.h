// A CPU event: a pointer to the marker of its most recent record.
#pragma once

#include <atomic>
#include <memory>

#include "backends/backend.h"
#include "backends/cpu/marker.h"
#include "common/spin_lock.h"

namespace qd::backend::cpu {

class CpuEvent final : public Event {
  public:
    explicit CpuEvent(bool timing) noexcept : timing_(timing) {}

    // Markers always carry a timestamp (one clock read), so timing only matters to the core's
    // checks.
    bool timing() const override { return timing_; }
    bool recorded() const override { return recorded_.load(std::memory_order_acquire); }
    qd_status query() override;
    qd_status synchronize() override;

    // Makes `marker` the latest record.
    void publish(std::shared_ptr<Marker> marker) noexcept;
    // Undoes a publish whose record was refused (a launch's completion event): `previous` and
    // `was_recorded` are what latest() and recorded() said before it.
    void restore(std::shared_ptr<Marker> previous, bool was_recorded) noexcept;
    // The latest record's marker, or null if never recorded.
    std::shared_ptr<Marker> latest() const noexcept;

  private:
    const bool timing_;
    std::atomic<bool> recorded_{false};
    mutable SpinLock lock_;  // guards latest_ (a shared_ptr is not atomic in C++17)
    std::shared_ptr<Marker> latest_;
};

}  // namespace qd::backend::cpu
