// The validation mode's records (core/validation.h): how a report names an operation, the
// accesses a block keeps, the blocks, the reports. Shared by the files of the validation
// observer (validation.cpp, validation_batch.cpp) and nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/validation.h"

namespace qd::core {

// An operation as a report names it.
struct ValidationObserver::OpInfo {
    std::string what;      // "kernel 'consume'", "memcpy", "memset", "alloc", "free", ...
    uint64_t stream = 0;   // its stream's handle then (0: none, or the host)
    std::string where;     // "stream 0x...", "a pooled stream (...)", "the host"
};

struct ValidationObserver::Access {
    uint64_t lo = 0, hi = 0;  // offsets in the block, [lo, hi)
    uint32_t actor = 0;
    uint64_t epoch = 0;
    bool write = false;
    std::shared_ptr<const OpInfo> op;
    // QD_PARAM_PARTITIONED: the kernel's launches touch disjoint parts, so two such accesses
    // of one kernel are not checked against each other.
    const void *partitioned_by = nullptr;
};

struct ValidationObserver::Block {
    uint64_t start = 0, bytes = 0;
    bool host = false;
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

}  // namespace qd::core
