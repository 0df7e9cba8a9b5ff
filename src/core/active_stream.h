// The thread-local active stream, per (thread, context).
//
// It is a value callers read explicitly; no qd call consults it. Each thread keeps a short list
// of (context handle, stream handle) pairs: a handful of contexts per thread is the norm, so a
// linear scan beats any map. Entries of destroyed contexts are inert (context handles are
// never reissued) and are pruned when the list grows.
#pragma once

#include <qd/qd.h>

namespace qd::core {

qd_status set_active_stream(uint64_t ctx, uint64_t stream, uint64_t *previous);
qd_status get_active_stream(uint64_t ctx, uint64_t *out);

}  // namespace qd::core
