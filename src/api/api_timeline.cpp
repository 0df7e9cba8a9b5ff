// Timelines (since 0.3).
#include "api/guard.h"
#include "api/resolve.h"
#include "core/context.h"
#include "core/lifecycle.h"
#include "core/timeline.h"

using namespace qd;
using core::Context;
using core::Stream;
using core::Timeline;

extern "C" {

QD_API qd_status qd_timeline_create(qd_context ctx, uint64_t initial_value, qd_timeline *out) {
    return api::guarded([&]() -> qd_status {
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::create_timeline(*c, initial_value, out);
    });
}

QD_API qd_status qd_timeline_destroy(qd_timeline timeline) {
    return api::guarded([&]() -> qd_status { return core::destroy_timeline(timeline); });
}

QD_API qd_status qd_timeline_signal(qd_stream stream, qd_timeline timeline, uint64_t value) {
    return api::guarded([&]() -> qd_status {
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Timeline> t{{"timeline"}, timeline};
        qd_status st = api::resolve_same_context(s, t);
        if (st != QD_SUCCESS) return st;
        return core::signal(*s.obj, *t.obj, value);
    });
}

QD_API qd_status qd_timeline_wait(qd_stream stream, qd_timeline timeline, uint64_t value) {
    return api::guarded([&]() -> qd_status {
        api::Arg<Stream> s{{"stream"}, stream};
        api::Arg<Timeline> t{{"timeline"}, timeline};
        qd_status st = api::resolve_same_context(s, t);
        if (st != QD_SUCCESS) return st;
        return core::wait_value(*s.obj, *t.obj, value);
    });
}

QD_API qd_status qd_timeline_host_signal(qd_timeline timeline, uint64_t value) {
    return api::guarded([&]() -> qd_status {
        Timeline *t = nullptr;
        qd_status st = core::resolve_usable(timeline, &t);
        if (st != QD_SUCCESS) return st;
        return core::host_signal(*t, value);
    });
}

QD_API qd_status qd_timeline_host_wait(qd_timeline timeline, uint64_t value, uint64_t timeout_ns) {
    return api::guarded([&]() -> qd_status {
        Timeline *t = nullptr;
        qd_status st = core::resolve_usable(timeline, &t);
        if (st != QD_SUCCESS) return st;
        return core::host_wait(*t, value, timeout_ns);
    });
}

QD_API qd_status qd_timeline_query(qd_timeline timeline, uint64_t *value) {
    return api::guarded([&]() -> qd_status {
        if (!value) return api::null_argument("value");
        Timeline *t = nullptr;
        qd_status st = core::resolve_usable(timeline, &t);
        if (st != QD_SUCCESS) return st;
        return core::query(*t, value);
    });
}

}  // extern "C"
