#include "core/timeline.h"

#include "common/error.h"
#include "core/submit.h"

namespace qd::core {

qd_status Timeline::reserve(uint64_t value, uint64_t *previous) {
    uint64_t seen = signalled_.load(std::memory_order_acquire);
    do {
        if (value <= seen)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "timeline value %llu is not above %llu, the largest value signalled or "
                        "queued for signalling on it so far; a timeline's values only grow",
                        (unsigned long long)value, (unsigned long long)seen);
    } while (!signalled_.compare_exchange_weak(seen, value, std::memory_order_acq_rel));
    *previous = seen;
    return QD_SUCCESS;
}

namespace {
// A context lost while the call ran: the loss wins over what the backend said (a wait that the
// loss released), as for the other host waits.
qd_status after_wait(const Context &ctx, qd_status st) {
    if (st == QD_SUCCESS || st == QD_NOT_READY) {
        const qd_status usable = ctx.usable();
        if (usable != QD_SUCCESS) return usable;
    }
    return st;
}
}  // namespace

qd_status signal(Stream &stream, Timeline &timeline, uint64_t value) {
    uint64_t previous = 0;
    qd_status st = timeline.reserve(value, &previous);
    if (st != QD_SUCCESS) return st;
    st = submit_signal(stream, timeline, value);
    if (st != QD_SUCCESS) timeline.unreserve(value, previous);  // a refused call changes nothing
    return st;
}

qd_status wait_value(Stream &stream, Timeline &timeline, uint64_t value) {
    return submit_wait_value(stream, timeline, value);
}

qd_status host_signal(Timeline &timeline, uint64_t value) {
    uint64_t previous = 0;
    qd_status st = timeline.reserve(value, &previous);
    if (st != QD_SUCCESS) return st;
    // Told first: the host's clock goes with the value before any waiter it releases runs.
    HostEvent event{HostEvent::Kind::TimelineSignalled};
    event.timeline = &timeline;
    event.value = value;
    notify_host(*timeline.ctx, event);
    return timeline.impl->host_signal(value);
}

qd_status host_wait(Timeline &timeline, uint64_t value, uint64_t timeout_ns) {
    qd_status st = QD_SUCCESS;
    if (timeout_ns != 0) st = timeline.ctx->may_block();
    if (st == QD_SUCCESS) st = timeline.impl->host_wait(value, timeout_ns);
    st = after_wait(*timeline.ctx, st);
    if (st == QD_SUCCESS) {
        HostEvent event{HostEvent::Kind::TimelineReached};
        event.timeline = &timeline;
        event.value = value;
        notify_host(*timeline.ctx, event);
    }
    return st;
}

qd_status query(Timeline &timeline, uint64_t *value) {
    const uint64_t now = timeline.impl->value();
    const qd_status st = timeline.ctx->usable();
    if (st != QD_SUCCESS) return st;
    HostEvent event{HostEvent::Kind::TimelineReached};
    event.timeline = &timeline;
    event.value = now;
    notify_host(*timeline.ctx, event);
    *value = now;
    return QD_SUCCESS;
}

}  // namespace qd::core
