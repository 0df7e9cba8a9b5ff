// Pooled events for fork and join. A fork/join event is only recorded and then waited on; both
// backends capture the record at wait time, so an event can go back to the pool as soon as the
// wait is queued: the next record cannot disturb that wait.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"

namespace qd::core {

class EventPool {
  public:
    EventPool(backend::Context &impl, uint32_t capacity) : impl_(impl), capacity_(capacity) {}

    qd_status get(std::shared_ptr<backend::Event> *out);
    void put(std::shared_ptr<backend::Event> event);
    void clear();

    uint64_t created() const { return created_.load(std::memory_order_relaxed); }
    uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
    uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

  private:
    backend::Context &impl_;
    const uint32_t capacity_;
    std::mutex mutex_;
    std::vector<std::shared_ptr<backend::Event>> free_;
    std::atomic<uint64_t> created_{0}, hits_{0}, misses_{0};
};

}  // namespace qd::core
