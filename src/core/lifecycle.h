// Object lifecycle: creating and destroying every child of a context, one function per kind and
// direction. Each does all of it: the backend object, the handle (adopt or remove), the live
// counter, this thread's cached resolves, a borrowed stream's native handle, a module's
// kernels, the observers' ObjectEvents (core/object_event.h). The api layer validates
// arguments, resolves the context or module and checks that it is usable, then calls one of
// these; it never touches the handle table, the counters or a backend object itself.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>

#include "core/context.h"

namespace qd::core {

class Graph;  // core/capture.h

// Creation. The context (or module) is resolved and usable; arguments are validated.
qd_status create_stream(Context &ctx, uint32_t flags, int32_t priority, uint64_t *out);
qd_status import_stream(Context &ctx, uint64_t native, uint64_t *out);
qd_status create_event(Context &ctx, bool timing, uint64_t *out);
qd_status create_timeline(Context &ctx, uint64_t initial, uint64_t *out);
qd_status load_module(Context &ctx, const void *image, uint64_t size, uint64_t *out);
qd_status get_kernel(Module &module, const char *name, uint64_t *out);
qd_status kernel_from_host_fn(Context &ctx, qd_host_kernel_fn fn, const char *name, uint64_t *out);
// A new stream handle of the given kind (the default stream's too, for Context::create).
qd_status register_stream(const std::shared_ptr<Context> &ctx,
                          std::shared_ptr<backend::Stream> impl, StreamKind kind, uint64_t *out,
                          uint32_t flags = QD_STREAM_NON_BLOCKING);
// qd_stream_end_capture's graph (core/capture.h), made by the capture.
qd_status register_graph(Context &ctx, std::shared_ptr<Graph> graph, uint64_t *out);

// Destruction, by handle: QD_ERROR_INVALID_HANDLE (with the reason) when it is not live.
// Destroying a stream refuses the default stream and leases (QD_ERROR_INVALID_OPERATION).
qd_status destroy_stream(uint64_t handle);
qd_status destroy_event(uint64_t handle);
// Also closes the backend timeline (backend::Timeline::close).
qd_status destroy_timeline(uint64_t handle);
qd_status unload_module(uint64_t handle);
qd_status destroy_kernel(uint64_t handle);
qd_status destroy_graph(uint64_t handle);
// qd_stream_release: gives a lease back to its pool (the fast path), else says why not.
qd_status release_stream(uint64_t handle);

// qd_stream_native_handle: the backend answers (QD_ERROR_NOT_SUPPORTED with its reason when it
// has no native streams; the message names the stream).
qd_status native_handle(const Stream &stream, uint64_t handle, uint64_t *out);

// What a stream is, in words ("a pool lease"), for messages.
const char *stream_kind_name(StreamKind kind);

}  // namespace qd::core
