// The timeline trace: start, stop and flush per context (qd.h, "Timeline trace"; core/trace/observer.h
// does the work).
#include "api/guard.h"
#include "core/context.h"
#include "core/trace/observer.h"

using namespace qd;
using core::Context;

namespace {

// The context of a trace call: resolved, and usable (start) or only not forked (stop and flush
// keep working on a lost context, so its trace, fault marker included, can still be written).
qd_status trace_context(qd_context ctx, bool need_usable, Context **out) {
    qd_status st = core::resolve(ctx, out);
    if (st != QD_SUCCESS) return st;
    if (need_usable) {
        st = (*out)->usable();
    } else if ((*out)->forked()) {
        st = (*out)->usable();  // QD_ERROR_FORKED, with its message
    }
    if (st == QD_SUCCESS) st = (*out)->may_block();
    return st;
}

}  // namespace

extern "C" {

QD_API qd_status qd_trace_start(qd_context ctx, const char *path) {
    return api::guarded([&]() -> qd_status {
        if (!path) return api::null_argument("path");
        if (!*path) return fail(QD_ERROR_INVALID_ARGUMENT, "path is empty");
        Context *c = nullptr;
        qd_status st = trace_context(ctx, true, &c);
        if (st == QD_SUCCESS) st = core::TraceObserver::start(*c, path);
        return st;
    });
}

QD_API qd_status qd_trace_stop(qd_context ctx) {
    return api::guarded([&]() -> qd_status {
        Context *c = nullptr;
        qd_status st = trace_context(ctx, false, &c);
        if (st == QD_SUCCESS) st = core::TraceObserver::stop(*c);
        return st;
    });
}

QD_API qd_status qd_trace_flush(qd_context ctx) {
    return api::guarded([&]() -> qd_status {
        Context *c = nullptr;
        qd_status st = trace_context(ctx, false, &c);
        if (st == QD_SUCCESS) st = core::TraceObserver::flush(*c);
        return st;
    });
}

}  // extern "C"
