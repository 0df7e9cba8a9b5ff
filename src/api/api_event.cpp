// Events.
#include "api/guard.h"
#include "api/resolve.h"
#include "core/capture/capture.h"
#include "core/context.h"
#include "core/object_ops.h"
#include "core/lifecycle.h"
#include "core/submit.h"

using namespace qd;
using core::Context;
using core::Event;
using core::Stream;

extern "C" {

QD_API qd_status qd_event_create(qd_context ctx, uint32_t flags, qd_event *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        if (flags & ~uint32_t(QD_EVENT_TIMING))
            return fail(QD_ERROR_INVALID_ARGUMENT, "unknown event flags 0x%x", flags);
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::create_event(*c, (flags & QD_EVENT_TIMING) != 0, out);
    });
}

QD_API qd_status qd_event_destroy(qd_event event) {
    return api::guarded([&]() -> qd_status { return core::destroy_event(event); });
}

QD_API qd_status qd_event_record(qd_stream stream, qd_event event) {
    return api::guarded([&]() -> qd_status {
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Event> e{{"event"}, event};
        qd_status st = api::resolve_same_context(s, e);
        if (st != QD_SUCCESS) return st;
        return core::submit_record(*s.obj, *e.obj);
    });
}

QD_API qd_status qd_event_query(qd_event event) {
    return api::guarded([&]() -> qd_status {
        Event *e = nullptr;
        qd_status st = core::resolve_usable(event, &e);
        if (st == QD_SUCCESS) st = core::refuse_if_captured_event(*e, event, "qd_event_query");
        if (st != QD_SUCCESS) return st;
        return core::query(*e);
    });
}

QD_API qd_status qd_event_synchronize(qd_event event) {
    return api::guarded([&]() -> qd_status {
        Event *e = nullptr;
        qd_status st = core::resolve_usable(event, &e);
        if (st == QD_SUCCESS)
            st = core::refuse_if_captured_event(*e, event, "qd_event_synchronize");
        if (st == QD_SUCCESS) st = core::synchronize(*e);
        return st;
    });
}

QD_API qd_status qd_event_elapsed_ms(qd_event start, qd_event end, float *ms) {
    return api::guarded([&]() -> qd_status {
        if (!ms) return api::null_argument("ms");
        api::Arg<Event> a{{"start"}, start}, b{{"end"}, end};
        qd_status st = api::resolve_same_context(a, b);
        if (st != QD_SUCCESS) return st;
        return core::elapsed_ms(*a.obj, *b.obj, ms);
    });
}

}  // extern "C"
