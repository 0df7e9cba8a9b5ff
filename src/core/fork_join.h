// Fork, join and stream-parallel launch: work fans out from a parent stream to pooled streams
// and back, ordered by pooled events, with no host synchronisation. Children never start before
// the work already queued on the parent, and the parent never runs past them.
#pragma once

#include <qd/qd.h>

namespace qd::core {

qd_status fork_streams(uint64_t parent, uint32_t n, uint64_t *children);
qd_status join_streams(uint64_t parent, const uint64_t *children, uint32_t n);
qd_status launch_parallel(uint64_t stream, const qd_task *tasks, uint32_t num_tasks);

}  // namespace qd::core
