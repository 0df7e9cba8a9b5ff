#include "core/observers.h"

#include "common/error.h"

namespace qd::core {

qd_status ObserverSet::add(std::unique_ptr<OpObserver> observer) {
    std::lock_guard<std::mutex> lock(add_mutex_);
    const size_t n = count_.load(std::memory_order_relaxed);
    if (n == kMaxObservers)
        return fail(QD_ERROR_OUT_OF_MEMORY, "a context takes at most %zu observers", kMaxObservers);
    slots_[n] = std::move(observer);
    count_.store(n + 1, std::memory_order_release);
    return QD_SUCCESS;
}

qd_status ObserverSet::before(const Op &op, bool *consumed) {
    const size_t n = count();
    for (size_t i = 0; i < n; ++i) {
        const qd_status st = slots_[i]->before(op, consumed);
        if (st != QD_SUCCESS || *consumed) {
            // Refused or taken by observer i: the ones before it passed, and hear how it ended.
            for (size_t j = i; j-- > 0;) slots_[j]->after(op, st);
            return st;
        }
    }
    return QD_SUCCESS;
}

bool ObserverSet::needs_replay() const {
    const size_t n = count();
    for (size_t i = 0; i < n; ++i)
        if (slots_[i]->needs_replay()) return true;
    return false;
}

qd_status ObserverSet::check_batch(const Op *ops, size_t n) {
    const size_t count_now = count();
    for (size_t i = 0; i < count_now; ++i) {
        const qd_status st = slots_[i]->check_batch(ops, n);
        if (st != QD_SUCCESS) return st;
    }
    return QD_SUCCESS;
}

void ObserverSet::after(const Op &op, qd_status status) {
    for (size_t i = count(); i-- > 0;) slots_[i]->after(op, status);
}

void ObserverSet::context_drained(Context &ctx) {
    const size_t n = count();
    for (size_t i = 0; i < n; ++i) slots_[i]->context_drained(ctx);
}

void ObserverSet::host_event(const HostEvent &event) {
    const size_t n = count();
    for (size_t i = 0; i < n; ++i) slots_[i]->host_event(event);
}

void ObserverSet::object_event(const ObjectEvent &event) {
    const size_t n = count();
    for (size_t i = 0; i < n; ++i) slots_[i]->object_event(event);
}

qd_status ObserverSet::host_freeing(uint64_t address, bool *taken) {
    const size_t n = count();
    for (size_t i = 0; i < n && !*taken; ++i) {
        const qd_status st = slots_[i]->host_freeing(address, taken);
        if (st != QD_SUCCESS) return st;
    }
    return QD_SUCCESS;
}

}  // namespace qd::core
