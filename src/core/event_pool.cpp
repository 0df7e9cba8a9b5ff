#include "core/event_pool.h"

#include "common/error.h"

namespace qd::core {

qd_status EventPool::get(std::shared_ptr<backend::Event> *out) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!free_.empty()) {
            *out = std::move(free_.back());
            free_.pop_back();
            hits_.fetch_add(1, std::memory_order_relaxed);
            return QD_SUCCESS;
        }
    }
    misses_.fetch_add(1, std::memory_order_relaxed);
    qd_status st = impl_.create_event(false, out);
    if (st == QD_SUCCESS) created_.fetch_add(1, std::memory_order_relaxed);
    return st;
}

void EventPool::put(std::shared_ptr<backend::Event> event) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < capacity_) free_.push_back(std::move(event));
}

void EventPool::clear() {
    std::vector<std::shared_ptr<backend::Event>> drop;
    std::lock_guard<std::mutex> lock(mutex_);
    drop.swap(free_);
}

}  // namespace qd::core
