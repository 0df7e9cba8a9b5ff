// The latest traced record of every event in the process (observer.h, "Arrows"): a wait finds
// the serial of the record it consumed whichever context made it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/submit.h"

namespace qd::core {

// fork() (observer.h): lock_trace_files_for_fork() takes the mutex below.
void lock_trace_files_for_fork();
void unlock_trace_files_after_fork();

// The latest traced record of every event, in the whole process: a wait finds the record it
// consumed whichever context made it. Each record gets a serial unique in the process, so a file
// joins a wait to its record whichever parts they are in. Keyed by the backend event's address;
// an entry goes when its event's context is destroyed (context_gone), and the entry of a user
// event (whose owner the record names) is not taken for a later event made at the address of a
// destroyed one. Never destroyed, like the table of files.
class Records {
  public:
    static Records &instance() {
        static Records *records = new Records();
        return *records;
    }

    // A traced record (op) of context `context` completed its submit: its serial, now the
    // event's latest.
    uint64_t recorded(const Op &op, uint32_t context) {
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t serial = ++last_serial_;
        Latest &l = latest_[op.event];
        l.serial = serial;
        l.context = context;
        l.owned = op.user_event != nullptr;
        l.user_event.reset();
        if (op.user_event) l.user_event = op.user_event->impl;
        if (latest_.size() >= sweep_at_) sweep();
        return serial;
    }

    // A record of `event` that is not traced (its context's trace is off, or its ring full): a
    // wait on it from now on consumes no traced record.
    void untraced(const backend::Event *event) {
        std::lock_guard<std::mutex> lock(mutex_);
        latest_.erase(event);
    }

    // The serial of the latest traced record of `event`, 0 for none.
    uint64_t latest(const backend::Event *event) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = latest_.find(event);
        if (it == latest_.end()) return 0;
        if (it->second.owned && it->second.user_event.expired()) {  // another event's entry
            latest_.erase(it);
            return 0;
        }
        return it->second.serial;
    }

    // The context `context` was destroyed: its events are gone with it.
    void context_gone(uint32_t context) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = latest_.begin(); it != latest_.end();)
            it = it->second.context == context ? latest_.erase(it) : std::next(it);
    }

  private:
    struct Latest {
        uint64_t serial = 0;
        uint32_t context = 0;  // the trace id of the context that recorded it
        bool owned = false;    // a user event's: user_event tells whether it still lives
        std::weak_ptr<const backend::Event> user_event;
    };

    // The entries of destroyed user events go, whenever the table has doubled since the last
    // sweep (so a process that makes and destroys many events keeps a bounded table).
    void sweep() {
        for (auto it = latest_.begin(); it != latest_.end();)
            it = it->second.owned && it->second.user_event.expired() ? latest_.erase(it)
                                                                     : std::next(it);
        sweep_at_ = std::max<size_t>(kFirstSweep, 2 * latest_.size());
    }

    static constexpr size_t kFirstSweep = 1024;
    std::mutex mutex_;
    uint64_t last_serial_ = 0;
    size_t sweep_at_ = kFirstSweep;
    std::unordered_map<const backend::Event *, Latest> latest_;

    friend void qd::core::lock_trace_files_for_fork();
    friend void qd::core::unlock_trace_files_after_fork();
};

}  // namespace qd::core
