// Shadow memory (observer.h, "Memory"): the blocks of the domain and the accesses each keeps;
// checking an access against them (a report when it conflicts) and committing it.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/validation/observer.h"
#include "core/validation/state.h"

namespace qd::core {

namespace {

// Accesses one block keeps; past it the oldest reads go first, then the oldest of any kind
// (a hazard with a forgotten access is missed, never invented).
constexpr size_t kMaxAccesses = 256;

const char *kind_label(uint32_t kind) {
    switch (kind) {
    case QD_HAZARD_RACE: return "race";
    case QD_HAZARD_FREE_IN_USE: return "free in use";
    case QD_HAZARD_USE_AFTER_FREE: return "use after free";
    }
    return "hazard";
}

}  // namespace

void ValidationObserver::check(Block &block, uint64_t lo, uint64_t hi, bool write, uint32_t actor,
                               const Clock &clock, const std::shared_ptr<const OpInfo> &op,
                               const void *partitioned_by, uint32_t kind, const char *mode,
                               std::vector<Report> *out) {
    const Access *conflict = nullptr;
    for (const Access &prev : block.accesses) {
        if (partitioned_by && prev.partitioned_by == partitioned_by) continue;  // its own parts
        if (prev.hi <= lo || hi <= prev.lo) continue;                           // no byte in common
        if (!write && !prev.write) continue;                                    // two reads
        if (prev.actor == actor && actor != 0) continue;    // one stream: in order
        if (at(clock, prev.actor) >= prev.epoch) continue;  // ordered before this one
        // Name a write over a read when both conflict: it is the likelier culprit.
        if (!conflict || (prev.write && !conflict->write)) conflict = &prev;
    }
    if (!conflict) return;
    Report r;
    r.kind = kind;
    r.stream = op->stream;
    r.other_stream = conflict->op->stream;
    r.allocation = block.start;
    r.bytes = block.bytes;
    r.offset = std::max(lo, conflict->lo);
    const bool is_free = kind == QD_HAZARD_FREE_IN_USE;
    r.operation = op->what + mode;
    r.other_operation =
        conflict->op->what +
        (conflict->write ? (conflict->read ? " (read-write)" : " (write)") : " (read)");
    char where[160];
    std::snprintf(where, sizeof where,
                  "allocation 0x%" PRIx64 " (%" PRIu64 " bytes) at offset %" PRIu64, r.allocation,
                  r.bytes, r.offset);
    if (is_free) {
        r.message = std::string("qd: hazard: free in use: ") + r.operation + " on " + op->where +
                    " of " + where + " is not ordered after " + r.other_operation + " on " +
                    conflict->op->where +
                    " (record an event after it and wait on it before the "
                    "free)";
    } else {
        r.message = std::string("qd: hazard: ") + kind_label(kind) + ": " + r.operation + " on " +
                    op->where + " and " + r.other_operation + " on " + conflict->op->where +
                    " touch " + where +
                    " with no ordering between them (record an event after "
                    "the first and wait on it before the second)";
    }
    out->push_back(std::move(r));
}

void ValidationObserver::commit(Block &block, uint64_t lo, uint64_t hi, bool write, uint32_t actor,
                                uint64_t epoch, const std::shared_ptr<const OpInfo> &op,
                                const void *partitioned_by, bool read) {
    auto &acc = block.accesses;
    // Superseded: a write supersedes every access within its bytes, a read the same stream's
    // earlier reads within its bytes; a partitioned write only its own stream's (the other
    // parts are still being written).
    acc.erase(std::remove_if(acc.begin(), acc.end(),
                             [&](const Access &p) {
                                 const bool within = lo <= p.lo && p.hi <= hi;
                                 if (!within) return false;
                                 if (partitioned_by && p.partitioned_by == partitioned_by)
                                     return p.actor == actor;
                                 return write || (!p.write && p.actor == actor);
                             }),
              acc.end());
    if (acc.size() >= kMaxAccesses) {
        auto read = std::find_if(acc.begin(), acc.end(), [](const Access &p) { return !p.write; });
        acc.erase(read != acc.end() ? read : acc.begin());
    }
    acc.push_back(Access{lo, hi, actor, epoch, write, read && write, op, partitioned_by});
}

ValidationObserver::Block *ValidationObserver::block_at(uint64_t address) {
    auto &blocks_ = domain_->blocks_;
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) return nullptr;
    --it;
    Block *b = it->second.get();
    return address - b->start < b->bytes ? b : nullptr;
}

void ValidationObserver::add_block(uint64_t address, uint64_t bytes, bool host) {
    // Blocks remembered as freed that the new one overlaps are gone for good (their release
    // happened: qd handed the addresses out again).
    auto &blocks_ = domain_->blocks_;
    auto it = blocks_.upper_bound(address);
    if (it != blocks_.begin()) --it;
    while (it != blocks_.end() && it->first < address + bytes) {
        Block &b = *it->second;
        if (b.start + b.bytes > address)
            it = blocks_.erase(it);
        else
            ++it;
    }
    auto b = std::make_unique<Block>();
    b->start = address;
    b->bytes = bytes;
    b->host = host;
    b->owner = this;
    blocks_[address] = std::move(b);
}

}  // namespace qd::core
