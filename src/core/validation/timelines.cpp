// Timelines in the validation mode (observer.h; qd.h, "Timelines" and "Validation"): a signal
// carries the clock of its stream (or the host's) for its value, and a wait for value v merges
// the clock of the first signal queued with a value of at least v. Values grow in call order
// (core/timeline.h checks it before any observer sees the signal), so that signal is the one
// that reaches v first unless a larger one completes before it; then the stream is ordered
// after more than it waited for, and a hazard may be missed, never invented.
#include "core/validation/observer.h"
#include "core/validation/state.h"

namespace qd::core {

namespace {
// Signals kept per timeline; past it the smallest values are forgotten (a wait for one of them
// then merges the next signal's clock, or everything queued so far: more order, never less).
constexpr size_t kSignalsKept = 1024;
}  // namespace

void ValidationObserver::signalled(const Timeline &timeline, uint64_t value, const Clock &clock) {
    Domain &d = *domain_;
    Domain::Signals &s = d.timelines_[timeline.impl.get()];
    s.owner = timeline.impl;
    s.by = this;
    s.by_value[value] = clock;
    if (s.by_value.size() > kSignalsKept) s.by_value.erase(s.by_value.begin());
    // Forget the destroyed timelines of this context now and then (as events are).
    if (d.timelines_.size() > 64 && (value & 63) == 0) {
        for (auto it = d.timelines_.begin(); it != d.timelines_.end();) {
            if (it->second.owner.expired() && it->first != timeline.impl.get())
                it = d.timelines_.erase(it);
            else
                ++it;
        }
    }
}

const ValidationObserver::Clock *ValidationObserver::signal_reaching(const Timeline &timeline,
                                                                     uint64_t value) {
    Domain &d = *domain_;
    auto t = d.timelines_.find(timeline.impl.get());
    if (t == d.timelines_.end()) return nullptr;
    auto it = t->second.by_value.lower_bound(value);
    return it == t->second.by_value.end() ? nullptr : &it->second;
}

void ValidationObserver::wait_value(uint32_t actor, const Timeline &timeline, uint64_t value) {
    if (value <= timeline.initial) return;  // reached from the start: orders nothing
    if (const Clock *clock = signal_reaching(timeline, value)) {
        merge(&domain_->actors_[actor].clock, *clock);
        return;
    }
    // Queued before the signal that will satisfy it: that signal's work is unknown yet, so the
    // stream is ordered after everything queued so far (qd.h, "Timelines").
    order_after_everything(actor);
}

void ValidationObserver::host_signalled(const Timeline &timeline, uint64_t value) {
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    if (drained_) return;
    signalled(timeline, value, d.host_);
}

void ValidationObserver::host_reached(const Timeline &timeline, uint64_t value) {
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    if (drained_ || value <= timeline.initial) return;
    if (const Clock *clock = signal_reaching(timeline, value)) {
        merge(&d.host_, *clock);
        host_learned();
    }
}

}  // namespace qd::core
