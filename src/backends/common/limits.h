// Limits and refusals that the core and the backends share, so each is written once.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "common/error.h"

namespace qd {

// The most CPU worker threads a context may ask for (qd_context_desc.cpu_worker_threads); the
// core refuses more, and the CPU backend clamps its own default to it.
inline constexpr uint32_t kMaxCpuWorkerThreads = 256;

// The refusal of work on a context whose destroy has begun (after its handle is gone, a call
// that got past its lookup meets a stopped backend or a cleared pool).
inline qd_status fail_context_destroyed() {
    return fail(QD_ERROR_INVALID_HANDLE, "the context was destroyed");
}

}  // namespace qd
