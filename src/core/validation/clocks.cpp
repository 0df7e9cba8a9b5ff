// The happens-before domain (observer.h, "The model" and "One domain per backend"): the live
// domains by backend, the actors and their vector clocks, what the host learns by its
// synchronizations, and a context leaving the domain.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "common/fork_generation.h"
#include "core/validation/observer.h"
#include "core/validation/state.h"

namespace qd::core {

namespace {

// The live domains, by backend. One registry per fork generation: a fork child never takes a
// lock or a domain another thread of the parent held (the older registries stay reachable).
struct DomainRegistry {
    uint64_t generation = 0;
    std::mutex mutex;
    std::map<int, std::weak_ptr<void>> domains;
    DomainRegistry *previous = nullptr;
};

DomainRegistry &domain_registry() {
    static std::atomic<DomainRegistry *> current{nullptr};
    const uint64_t generation = fork_generation();
    DomainRegistry *r = current.load(std::memory_order_acquire);
    while (!r || r->generation != generation) {
        auto *fresh = new DomainRegistry;
        fresh->generation = generation;
        fresh->previous = r;
        if (current.compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) return *fresh;
        delete fresh;
    }
    return *r;
}

}  // namespace

std::shared_ptr<ValidationObserver::Domain> ValidationObserver::Domain::of(qd_backend kind) {
    DomainRegistry &r = domain_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::weak_ptr<void> &slot = r.domains[int(kind)];
    if (auto live = std::static_pointer_cast<Domain>(slot.lock())) return live;
    auto fresh = std::make_shared<Domain>();
    slot = fresh;
    return fresh;
}

void ValidationObserver::host_synchronized(const Stream &stream) {
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    if (drained_) return;
    const uint32_t a = actor_of(stream);
    merge(&d.host_, d.actors_[a].clock);
    host_learned();
}

void ValidationObserver::host_synchronized(const backend::Event &event) {
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.events_.find(&event);
    if (it == d.events_.end()) return;
    merge(&d.host_, it->second.clock);
    host_learned();
}

void ValidationObserver::host_synchronized_all() {
    // Every stream of this context (the host is ordered after their work; what they waited
    // for on other contexts comes along through their clocks).
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    for (size_t i = 1; i < d.actors_.size(); ++i)
        if (d.actors_[i].owner == this) merge(&d.host_, d.actors_[i].clock);
    host_learned();
}

uint32_t ValidationObserver::actor_of(const Stream &stream) {
    Domain &d = *domain_;
    auto it = d.actor_index_.find(&stream);
    if (it != d.actor_index_.end()) {
        Actor &a = d.actors_[it->second];
        if (!a.stream.expired()) return it->second;
        // A new stream at a freed stream's address: the old one's index is reused. Its own
        // entry keeps counting up, so the new stream's operations are never taken for the old
        // one's; the new stream starts from what the host knows.
        const uint64_t own = at(a.clock, it->second);
        a.stream = stream.weak_from_this();
        a.owner = this;
        a.clock = d.host_;
        if (a.clock.size() <= it->second) a.clock.resize(it->second + 1, 0);
        a.clock[it->second] = std::max(a.clock[it->second], own);
        a.host_seen = d.host_version_;
        return it->second;
    }
    const uint32_t index = uint32_t(d.actors_.size());
    Actor a;
    a.stream = stream.weak_from_this();
    a.owner = this;
    a.clock = d.host_;
    a.clock.resize(std::max<size_t>(a.clock.size(), index + 1), 0);
    a.host_seen = d.host_version_;
    d.actors_.push_back(std::move(a));
    d.actor_index_[&stream] = index;
    return index;
}

void ValidationObserver::refresh(uint32_t actor) {
    Domain &d = *domain_;
    Actor &a = d.actors_[actor];
    if (a.host_seen == d.host_version_) return;
    merge(&a.clock, d.host_);
    a.host_seen = d.host_version_;
}

uint64_t ValidationObserver::tick(uint32_t actor) {
    refresh(actor);
    Actor &a = domain_->actors_[actor];
    if (a.clock.size() <= actor) a.clock.resize(actor + 1, 0);
    return ++a.clock[actor];
}

void ValidationObserver::host_learned() { ++domain_->host_version_; }

void ValidationObserver::order_after_everything(uint32_t actor) {
    Domain &d = *domain_;
    Clock &clock = d.actors_[actor].clock;
    merge(&clock, d.host_);
    if (clock.size() < d.actors_.size()) clock.resize(d.actors_.size(), 0);
    for (size_t i = 1; i < d.actors_.size(); ++i)
        clock[i] = std::max(clock[i], at(d.actors_[i].clock, uint32_t(i)));
}

void ValidationObserver::leave(std::deque<Held> *held) {
    if (left_) return;
    left_ = true;
    Domain &d = *domain_;
    if (held) held->swap(held_);
    held_.clear();
    held_bytes_ = 0;
    // Its streams' work is done (the destroy drained them): the host is ordered after it, and
    // the streams are no longer actors anyone finds.
    for (auto it = d.actor_index_.begin(); it != d.actor_index_.end();) {
        if (d.actors_[it->second].owner == this)
            it = d.actor_index_.erase(it);
        else
            ++it;
    }
    for (size_t i = 1; i < d.actors_.size(); ++i) {
        Actor &a = d.actors_[i];
        if (a.owner != this) continue;
        if (d.host_.size() <= i) d.host_.resize(i + 1, 0);
        d.host_[i] = std::max(d.host_[i], at(a.clock, uint32_t(i)));
        a.owner = nullptr;
        a.stream.reset();
    }
    host_learned();
    for (auto it = d.events_.begin(); it != d.events_.end();) {
        if (it->second.by == this)
            it = d.events_.erase(it);
        else
            ++it;
    }
    for (auto it = d.timelines_.begin(); it != d.timelines_.end();) {
        if (it->second.by == this)
            it = d.timelines_.erase(it);
        else
            ++it;
    }
    for (auto it = d.blocks_.begin(); it != d.blocks_.end();) {
        if (it->second->owner == this)
            it = d.blocks_.erase(it);
        else
            ++it;
    }
}

}  // namespace qd::core
