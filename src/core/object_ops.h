// What the API asks of a live object besides creating, destroying (core/lifecycle.h) and
// queuing work on it (core/submit.h): completion (synchronize, query), timing, priorities, and
// allocations. The api layer resolves the object and checks that its context is usable; these
// do the rest, backend calls included, so src/api calls no backend.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "core/context.h"

namespace qd::core {

// Devices (qd_device_count, qd_device_get_info): `backend` is the raw 32-bit value the caller
// passed; `out` has been checked (struct_size at least the first released size).
qd_status device_count(uint32_t backend, uint32_t *count);
qd_status device_info(uint32_t backend, uint32_t device, qd_device_info *out);

// Blocking waits refuse a call from this context's own callbacks (Context::may_block) and
// report a fault found while draining; queries report a fault over QD_NOT_READY.
qd_status synchronize(Context &ctx);
qd_status synchronize(Stream &stream);
qd_status synchronize(Event &event);
qd_status query(Stream &stream);
qd_status query(Event &event);
// qd_event_elapsed_ms: both events of one usable context.
qd_status elapsed_ms(Event &start, Event &end, float *ms);

int32_t priority(const Stream &stream);
// qd_stream_get_flags: the flags of its creation; a borrowed stream's from its backend.
qd_status flags(const Stream &stream, uint32_t *out);
void priority_range(Context &ctx, int32_t *least, int32_t *greatest);

// Stream-ordered and pinned host allocations, registered with the context (bytes is validated:
// 1 .. 2^56). Each block gets one guard byte past its end (see object_ops.cpp).
qd_status mem_alloc(Stream &stream, uint64_t bytes, uint64_t *address);
// Frees a block in stream order; a free the stream refuses leaves the block registered.
qd_status mem_free(Stream &stream, uint64_t address);
qd_status host_alloc(Context &ctx, uint64_t bytes, void **out);
qd_status host_free(Context &ctx, void *ptr);

}  // namespace qd::core
