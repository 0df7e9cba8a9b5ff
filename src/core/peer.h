// Several contexts in one call: a stream waiting on an event of another context, peer access
// between two contexts, and copies between the memory of two contexts (qd.h, "Several
// devices"). Contexts of one backend may be mixed (any devices); contexts of different backends
// may not (QD_ERROR_WRONG_CONTEXT). Each function resolves its handles in the order qd.h's
// "Which error wins" gives, then asks the backend.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "core/context.h"

namespace qd::core {

// qd_stream_wait_event: a stream and an event of the same context, or of two usable contexts
// of the same backend. An event whose latest record is inside an open capture of its own
// context cannot be waited on from another context (the record is part of a graph).
qd_status resolve_wait(uint64_t stream, uint64_t event, Stream **s, Event **e);

// qd_context_can_access_peer / qd_context_enable_peer_access.
qd_status can_access_peer(uint64_t ctx, uint64_t peer, uint32_t *can_access);
qd_status enable_peer_access(uint64_t ctx, uint64_t peer);

// qd_memcpy_peer_async, after the argument checks (dst/src not 0, no wrap): resolves the three
// handles, checks the contexts, both ranges against their context's registry, and submits.
qd_status memcpy_peer(uint64_t stream, uint64_t dst, uint64_t dst_ctx, uint64_t src,
                      uint64_t src_ctx, uint64_t bytes);

}  // namespace qd::core
