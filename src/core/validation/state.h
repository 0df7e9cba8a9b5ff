// The validation mode's records (observer.h): how a report names an operation, the accesses a
// block keeps, the blocks, the reports, the domain every validating context of a backend
// shares, and the two clock operations. Shared by the files of the validation observer (this
// folder's README.md) and nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/validation/observer.h"

namespace qd::core {

// An operation as a report names it.
struct ValidationObserver::OpInfo {
    std::string what;     // "kernel 'consume'", "memcpy", "memset", "alloc", "free", ...
    uint64_t stream = 0;  // its stream's handle then (0: none, or the host)
    std::string where;    // "stream 0x...", "a pooled stream (...)", "the host"
};

struct ValidationObserver::Access {
    uint64_t lo = 0, hi = 0;  // offsets in the block, [lo, hi)
    uint32_t actor = 0;
    uint64_t epoch = 0;
    bool write = false;
    bool read = false;  // with write: read-write
    std::shared_ptr<const OpInfo> op;
    // QD_PARAM_PARTITIONED: the kernel's launches touch disjoint parts, so two such accesses
    // of one kernel are not checked against each other.
    const void *partitioned_by = nullptr;
};

struct ValidationObserver::Block {
    uint64_t start = 0, bytes = 0;
    bool host = false;
    const ValidationObserver *owner = nullptr;  // the context it belongs to (compared only)
    bool freed = false;
    std::shared_ptr<const OpInfo> free_op;
    std::vector<Access> accesses;
};

struct ValidationObserver::Report {
    uint32_t kind = 0;
    uint64_t stream = 0, other_stream = 0;
    uint64_t allocation = 0, bytes = 0, offset = 0;
    std::string operation, other_operation, message;
};

// What every validating context of one backend shares (see the header), under `mutex`.
struct ValidationObserver::Domain {
    std::mutex mutex;
    std::vector<Actor> actors_;  // [0] is the host
    std::unordered_map<const Stream *, uint32_t> actor_index_;
    struct Recorded {
        Clock clock;
        bool user = false;                       // a user event (else a pooled fork/join event)
        std::weak_ptr<backend::Event> owner;     // the user event, to forget it once destroyed
        const ValidationObserver *by = nullptr;  // the context whose stream recorded it
    };
    std::unordered_map<const backend::Event *, Recorded> events_;
    size_t events_pruned_at_ = 64;
    // Timelines (timelines.cpp): the clock of each signal, by the value it signals.
    struct Signals {
        std::map<uint64_t, Clock> by_value;
        std::weak_ptr<backend::Timeline> owner;  // to forget it once destroyed
        const ValidationObserver *by = nullptr;  // the context the timeline belongs to
    };
    std::unordered_map<const backend::Timeline *, Signals> timelines_;
    Clock host_;
    uint64_t host_version_ = 1;
    std::map<uint64_t, std::unique_ptr<Block>> blocks_;  // by start address

    Domain() { actors_.emplace_back(); }  // the host

    // The domain of `kind` in this fork generation: the live one, or a new one.
    static std::shared_ptr<Domain> of(qd_backend kind);
};

inline uint64_t ValidationObserver::at(const std::vector<uint64_t> &clock, uint32_t actor) {
    return actor < clock.size() ? clock[actor] : 0;
}

inline void ValidationObserver::merge(std::vector<uint64_t> *into,
                                      const std::vector<uint64_t> &from) {
    if (into->size() < from.size()) into->resize(from.size(), 0);
    for (size_t i = 0; i < from.size(); ++i) (*into)[i] = std::max((*into)[i], from[i]);
}

}  // namespace qd::core
