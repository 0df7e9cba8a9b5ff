// Limits and refusals that the core and the backends share, so each is written once. (A limit
// of one backend lives in that backend: the CPU worker cap is cpu/cpu_context.h's.)
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "common/error.h"

namespace qd {

// Every block a backend allocates for qd_mem_alloc_async or qd_host_alloc reserves this many
// bytes past the size asked for, which no other block can own: the address one past a block's
// end is then qd's memory, not memory of the caller's that happens to start there (allocators
// without headers, such as TSan's, place blocks back to back), so the allocation registry can
// refuse a range that starts at a block's end without refusing the caller's own memory. The
// guard is the backend's business alone: sizes in messages, the registry, the statistics and
// the operation records are the bytes asked for.
inline constexpr uint64_t kEndGuard = 1;

// bytes plus the end guard, saturating (a size that large fails to allocate anyway).
inline constexpr uint64_t with_end_guard(uint64_t bytes) {
    return bytes > UINT64_MAX - kEndGuard ? UINT64_MAX : bytes + kEndGuard;
}

// The refusal of work on a context whose destroy has begun (after its handle is gone, a call
// that got past its lookup meets a stopped backend or a cleared pool).
inline qd_status fail_context_destroyed() {
    return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
}

}  // namespace qd
