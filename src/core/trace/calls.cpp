// The C API's trace calls (qd.h, "Timeline trace"; src/api/api_trace.cpp resolves and guards
// them): start, stop and flush of a context's trace.
#include <cstdlib>
#include <mutex>

#include "common/error.h"
#include "core/trace/files.h"
#include "core/trace/observer.h"

namespace qd::core {

namespace {

constexpr size_t kDefaultCapacity = 65536;
constexpr size_t kMaxCapacity = size_t{1} << 24;

// The window's capacity: QD_TRACE_CAPACITY, or the default.
qd_status capacity_from_environment(size_t *capacity) {
    *capacity = kDefaultCapacity;
    if (const char *c = ::secure_getenv("QD_TRACE_CAPACITY"); c && *c) {
        char *end = nullptr;
        const unsigned long long v = std::strtoull(c, &end, 10);
        if (*end != '\0' || v == 0 || v > kMaxCapacity)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "QD_TRACE_CAPACITY='%s' is not a number of operations in 1..%zu", c,
                        kMaxCapacity);
        *capacity = static_cast<size_t>(v);
    }
    return QD_SUCCESS;
}

}  // namespace

qd_status TraceObserver::start(Context &ctx, const char *path) {
    TraceObserver *trace = attached_trace(ctx);
    if (trace) {
        std::lock_guard<std::mutex> control(trace->control_);
        if (trace->on_.load(std::memory_order_acquire)) return already_on(trace->window_->path);
    }
    size_t capacity = 0;
    qd_status st = capacity_from_environment(&capacity);
    if (st == QD_SUCCESS) st = TraceFiles::instance().check_writable(path);
    if (st == QD_SUCCESS) st = find_or_attach(ctx, &trace);
    if (st != QD_SUCCESS) return st;
    return trace->begin_window(path, capacity);
}

qd_status TraceObserver::stop(Context &ctx) {
    TraceObserver *trace = attached_trace(ctx);
    if (!trace || !trace->on_.load(std::memory_order_acquire))
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the context is not being traced (qd_trace_start starts a trace)");
    return trace->end_window(true, false);
}

qd_status TraceObserver::flush(Context &ctx) {
    TraceObserver *trace = attached_trace(ctx);
    if (!trace)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the context was never traced (qd_trace_start starts a trace)");
    std::lock_guard<std::mutex> control(trace->control_);
    {
        std::lock_guard<std::mutex> lock(trace->mutex_);
        if (!trace->window_)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the context was never traced (qd_trace_start starts a trace)");
    }
    return trace->write_snapshot(false);
}

}  // namespace qd::core
