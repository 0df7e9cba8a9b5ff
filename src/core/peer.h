// Several contexts in one call: a stream waiting on an event of another context, peer access
// between two contexts, and copies between the memory of two contexts (qd.h, "Several
// devices"). Contexts of one backend may be mixed (any devices); contexts of different backends
// may not (QD_ERROR_WRONG_CONTEXT): api/ resolves the handles and checks the mix in the order
// qd.h's "Which error wins" gives (api/resolve.h); these functions take the objects. A stream
// waiting on another context's event is src/api/api_stream.cpp's resolve and a core/submit.h
// wait.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "core/context.h"

namespace qd::core {

// qd_context_can_access_peer / qd_context_enable_peer_access: two distinct, usable contexts of
// one backend (api/ resolved and checked them); the backend answers.
qd_status can_access_peer(Context &ctx, Context &peer, uint32_t *can_access);
qd_status enable_peer_access(Context &ctx, Context &peer);

// qd_memcpy_peer_async, once api/ checked the arguments (dst/src not 0, no wrap) and resolved
// the stream and both contexts (the stream's is one of them; both of one backend, usable):
// checks both ranges against their context's registry, and submits. stream_handle names the
// stream in messages.
qd_status memcpy_peer(Stream &stream, uint64_t stream_handle, uint64_t dst, Context &dst_ctx,
                      uint64_t src, Context &src_ctx, uint64_t bytes);

}  // namespace qd::core
