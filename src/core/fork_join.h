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

// qd_stream_fork, once api/ checked the arguments and resolved the parent (usable): leases n
// streams of its pool that wait for the work queued on it, and writes their handles.
qd_status fork_streams(Stream &parent, uint32_t n, uint64_t *children);
// qd_stream_join, once api/ checked the arguments and resolved the parent and every child
// (kids[i] is the stream of the handle children[i]), all of one usable context: refuses a child
// that is not a lease, then the parent waits for every child and the leases go back to the
// pool. The handles name the streams in messages and in the pool.
qd_status join_streams(Stream &parent, uint64_t parent_handle, Stream *const *kids,
                       const uint64_t *children, uint32_t n);

}  // namespace qd::core
