// Fork, join and stream-parallel launch: work fans out from a parent stream to pooled streams
// and back, ordered by pooled events, with no host synchronisation. Children never start before
// the work already queued on the parent, and the parent never runs past them.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "core/submit.h"

namespace qd::core {

// Records a pooled event on `from` and makes each of `to` wait for it, as operations of
// `origin` through submit_record/submit_wait; the event goes back to the pool at once (each wait captured the
// record when it was queued).
qd_status link_streams(Context &ctx, Stream &from, Stream *const *to, uint32_t n, OpOrigin origin);

qd_status fork_streams(uint64_t parent, uint32_t n, uint64_t *children);
qd_status join_streams(uint64_t parent, const uint64_t *children, uint32_t n);
qd_status launch_parallel(uint64_t stream, const qd_task *tasks, uint32_t num_tasks);

}  // namespace qd::core
