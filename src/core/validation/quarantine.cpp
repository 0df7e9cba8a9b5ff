// Quarantine (observer.h, "Memory"): freed blocks whose real release is held back, so their
// addresses are not handed out again while they are remembered as freed; qd_host_free's check,
// and the release of what leaves the quarantine.
#include <deque>
#include <string>
#include <vector>

#include "common/error.h"
#include "core/context.h"
#include "core/validation/observer.h"
#include "core/validation/state.h"

namespace qd::core {

namespace {

// Freed blocks whose release is held back (see the header): at most this many, and this many
// bytes; a block larger than the byte bound is released at once (and forgotten).
constexpr size_t kQuarantineBlocks = 64;
constexpr uint64_t kQuarantineBytes = uint64_t(256) << 20;

}  // namespace

qd_status ValidationObserver::host_freeing(uint64_t address, bool *taken) {
    *taken = false;
    std::vector<Report> reports;
    std::vector<Held> release_now;
    {
        Domain &d = *domain_;
        std::lock_guard<std::mutex> lock(d.mutex);
        if (drained_) return QD_SUCCESS;
        auto it = d.blocks_.find(address);
        if (it == d.blocks_.end() || it->second->freed || !it->second->host ||
            it->second->owner != this)
            return QD_SUCCESS;
        Block &b = *it->second;
        Op op;
        op.kind = OpKind::MemFree;
        auto info = describe(op, "qd_host_free", 0);
        check(b, 0, b.bytes, true, 0, d.host_, info, nullptr, QD_HAZARD_FREE_IN_USE, "", &reports);
        if (reports.empty() || !fail_calls_) {
            b.freed = true;
            b.free_op = info;
            b.accesses.clear();
            Held h;
            h.address = address;
            h.bytes = b.bytes;
            h.host = true;
            quarantine(std::move(h), &release_now);
            *taken = true;
        }
    }
    const std::string first = reports.empty() ? "" : reports.front().message;
    deliver(reports);
    release(release_now);
    if (!first.empty() && fail_calls_) return fail(QD_ERROR_HAZARD, "%s", first.c_str());
    return QD_SUCCESS;
}

void ValidationObserver::quarantine(Held held, std::vector<Held> *release_now) {
    held_bytes_ += held.bytes;
    held_.push_back(std::move(held));
    while (held_.size() > kQuarantineBlocks || held_bytes_ > kQuarantineBytes) {
        Held h = std::move(held_.front());
        held_.pop_front();
        held_bytes_ -= h.bytes;
        domain_->blocks_.erase(h.address);  // released now: its addresses may come back from anyone
        release_now->push_back(std::move(h));
    }
}

void ValidationObserver::release(std::vector<Held> &held) {
    for (Held &h : held) {
        if (h.host) {
            ctx_.impl().host_free(reinterpret_cast<void *>(h.address));
            continue;
        }
        // A stream-ordered free queued now on the block's stream runs after everything queued
        // there before the program's free; it bypasses the observers (they saw the free).
        Op op;
        op.kind = OpKind::MemFree;
        op.stream = h.stream.get();
        op.dst = h.address;
        if (submit_unobserved(op) != QD_SUCCESS) ctx_.impl().mem_free_now(h.address);
    }
}

}  // namespace qd::core
