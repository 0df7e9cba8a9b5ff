// Conditionals in a capture (core/capture/conditional.h): opening one on a capturing stream,
// moving to its next body, closing it, its native handle; the C API's calls.
#include <algorithm>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"
#include "core/capture/open_capture.h"

namespace qd::core {

bool joined_back(const CaptureFrame &f, uint32_t owner, uint32_t lane) {
    const int32_t t = f.tail(lane);
    if (t < 0) return true;
    const auto &nodes = f.data->nodes;
    std::vector<char> seen(nodes.size(), 0);
    std::vector<int32_t> todo;
    if (f.tail(owner) >= 0) todo.push_back(f.tail(owner));
    while (!todo.empty()) {
        const int32_t n = todo.back();
        todo.pop_back();
        if (n < 0 || seen[n]) continue;
        if (n == t) return true;
        seen[n] = 1;
        todo.push_back(f.prev[n]);
        if (nodes[n].kind == OpKind::Wait) todo.push_back(nodes[n].dep);
    }
    return false;
}

namespace {

const char *kind_name(qd_conditional_kind kind) {
    switch (kind) {
    case QD_CONDITIONAL_IF: return "IF";
    case QD_CONDITIONAL_IF_ELSE: return "IF_ELSE";
    case QD_CONDITIONAL_WHILE: return "WHILE";
    case QD_CONDITIONAL_SWITCH: return "SWITCH";
    }
    return "?";
}

}  // namespace

qd_status CaptureRouter::owned_body(Capture &c, uint32_t lane, uint64_t handle, const char *what,
                                    CaptureFrame **out) {
    CaptureFrame *f = c.lane_frame[lane];
    if (!f->cond)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s: no conditional is open on stream 0x%016llx "
                    "(qd_stream_begin_conditional opens one)",
                    what, (unsigned long long)handle);
    if (f->owner != lane)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s: stream 0x%016llx is in the body of a conditional opened on stream "
                    "0x%016llx; call it on that stream",
                    what, (unsigned long long)handle, (unsigned long long)c.lane_handles[f->owner]);
    *out = f;
    return QD_SUCCESS;
}

qd_status CaptureRouter::check_body_joined(Capture &c, CaptureFrame &body, uint64_t handle) {
    // A conditional opened inside this body (on a stream that joined it) closes first.
    for (const auto &f : c.frames)
        if (f->parent == &body)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "a conditional opened inside this body on stream 0x%016llx is still open "
                        "(qd_stream_end_conditional on that stream first)",
                        (unsigned long long)c.lane_handles[f->owner]);
    for (size_t l = 0; l < c.lanes.size(); ++l) {
        if (l == body.owner || c.lane_frame[l] != &body || joined_back(body, body.owner, l))
            continue;
        if (c.lane_handles[l])
            return fail(QD_ERROR_INVALID_OPERATION,
                        "stream 0x%016llx joined the conditional's body and has not joined back "
                        "to stream 0x%016llx (qd_stream_join it first)",
                        (unsigned long long)c.lane_handles[l], (unsigned long long)handle);
        return fail(QD_ERROR_INVALID_OPERATION,
                    "a stream joined the conditional's body (lane %zu of the capture) and has "
                    "not joined back to stream 0x%016llx",
                    l, (unsigned long long)handle);
    }
    return QD_SUCCESS;
}

void CaptureRouter::close_body(Capture &c, CaptureFrame &body) {
    // The streams that joined the body leave the capture with it (they joined back).
    for (size_t l = 0; l < c.lanes.size(); ++l) {
        if (l == body.owner || c.lane_frame[l] != &body) continue;
        c.lane_frame[l] = nullptr;
        lanes_.erase(c.lanes[l].get());
        c.lanes[l]->capture_lane.store(false, std::memory_order_release);
    }
    for (auto it = records_.begin(); it != records_.end();) {
        auto next = std::next(it);
        if (it->second.frame == &body) drop_record(it);
        it = next;
    }
}

qd_status CaptureRouter::begin_conditional(Stream &stream, uint64_t handle,
                                           const qd_conditional_desc &desc) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it == lanes_.end())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_begin_conditional: stream 0x%016llx is not capturing "
                    "(qd_stream_begin_capture starts a capture)",
                    (unsigned long long)handle);
    Capture &c = *it->second.capture;
    const uint32_t lane = it->second.lane;
    if (!c.native && !ctx_.impl().runs_inline())
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "qd_stream_begin_conditional: this capture records without a driver graph "
                    "(the trace or validation is attached, or the driver has no graphs), and "
                    "this backend cannot run a conditional's device work on the host");
    if (!c.native && desc.condition == 0)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "qd_stream_begin_conditional: condition 0 (the kernels set the value with "
                    "cudaGraphSetConditional) needs a CUDA driver graph; give a condition word");
    auto cond = std::make_shared<Conditional>();
    cond->kind = desc.kind;
    cond->num_cases = desc.num_cases;
    cond->condition = desc.condition;
    const uint32_t n = body_count(desc.kind, desc.num_cases);
    cond->bodies.reserve(n);
    for (uint32_t i = 0; i < n; ++i) cond->bodies.push_back(std::make_shared<GraphData>());
    auto body = std::make_unique<CaptureFrame>();
    body->data = cond->bodies[0];
    body->cond = cond;
    body->owner = lane;
    body->parent = c.lane_frame[lane];
    // The node, in the stream's frame: a host task where the replay re-queues operations.
    CaptureFrame &f = *body->parent;
    GraphNode node;
    node.kind = OpKind::HostFn;
    node.lane = lane;
    node.cond = cond;
    // Everything that may throw first, then the changes: a refused call changes nothing.
    c.frames.reserve(c.frames.size() + 1);
    f.prev.reserve(f.prev.size() + 1);
    f.set_tail(lane, f.tail(lane));
    f.data->nodes.reserve(f.data->nodes.size() + 1);
    // A native capture: the driver's conditional node, its bodies recorded by the driver
    // (backend::Capture::begin_conditional); refused, nothing changed.
    if (c.native) {
        qd_status st = c.native->begin_conditional(*stream.impl, desc.kind, n, desc.condition,
                                                   &body->native_handle);
        if (st != QD_SUCCESS) return st;
    }
    for (auto &frame : c.frames) frame->data->has_conditionals = true;
    f.data->nodes.push_back(std::move(node));
    f.prev.push_back(f.tail(lane));
    f.set_tail(lane, int32_t(f.data->nodes.size() - 1));
    c.lane_frame[lane] = body.get();
    c.frames.push_back(std::move(body));
    return QD_SUCCESS;
}

qd_status CaptureRouter::next_branch(Stream &stream, uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it == lanes_.end())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_next_branch: stream 0x%016llx is not capturing, so no "
                    "conditional is open on it",
                    (unsigned long long)handle);
    Capture &c = *it->second.capture;
    CaptureFrame *body = nullptr;
    qd_status st = owned_body(c, it->second.lane, handle, "qd_stream_next_branch", &body);
    if (st != QD_SUCCESS) return st;
    const Conditional &cond = *body->cond;
    if (body->branch + 1 >= cond.bodies.size()) {
        if (cond.bodies.size() == 1)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "qd_stream_next_branch: a %s conditional has one body; "
                        "qd_stream_end_conditional closes it",
                        kind_name(cond.kind));
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_next_branch: the %s conditional's last body (%u of %zu) is open "
                    "already; qd_stream_end_conditional closes it",
                    kind_name(cond.kind), body->branch + 1, cond.bodies.size());
    }
    st = check_body_joined(c, *body, handle);
    if (st != QD_SUCCESS) return st;
    // A native capture: the driver records the next body; a failure once the body's capture
    // ended moves on all the same (the capture then fails at its end).
    if (c.native) {
        bool done = false;
        st = c.native->next_branch(*stream.impl, &done);
        if (!done) return st;
    }
    close_body(c, *body);
    body->branch += 1;
    body->data = body->cond->bodies[body->branch];
    body->tails.clear();
    body->prev.clear();
    return st;
}

qd_status CaptureRouter::end_conditional(Stream &stream, uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it == lanes_.end())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_end_conditional: stream 0x%016llx is not capturing, so no "
                    "conditional is open on it",
                    (unsigned long long)handle);
    Capture &c = *it->second.capture;
    const uint32_t lane = it->second.lane;
    CaptureFrame *body = nullptr;
    qd_status st = owned_body(c, lane, handle, "qd_stream_end_conditional", &body);
    if (st != QD_SUCCESS) return st;
    st = check_body_joined(c, *body, handle);
    if (st != QD_SUCCESS) return st;
    // A native capture: the driver closes its node; a failure once the body's capture ended
    // closes it all the same (the capture then fails at its end).
    if (c.native) {
        bool done = false;
        st = c.native->end_conditional(*stream.impl, &done);
        if (!done) return st;
    }
    close_body(c, *body);
    c.lane_frame[lane] = body->parent;
    auto pos =
        std::find_if(c.frames.begin(), c.frames.end(),
                     [&](const std::unique_ptr<CaptureFrame> &p) { return p.get() == body; });
    c.frames.erase(pos);
    return st;
}

qd_status CaptureRouter::conditional_handle(Stream &stream, uint64_t handle, uint64_t *out) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it == lanes_.end())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_conditional_handle: stream 0x%016llx is not capturing, so no "
                    "conditional is open on it",
                    (unsigned long long)handle);
    Capture &c = *it->second.capture;
    CaptureFrame *body = nullptr;
    qd_status st = owned_body(c, it->second.lane, handle, "qd_conditional_handle", &body);
    if (st != QD_SUCCESS) return st;
    if (!c.native)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "qd_conditional_handle: the capture is not a CUDA driver graph, so its "
                    "conditionals have no native handle (give a condition word instead)");
    *out = body->native_handle;
    return QD_SUCCESS;
}

void CaptureRouter::keep_run(std::unique_ptr<ConditionalRun> run) {
    std::lock_guard<std::mutex> lock(runs_mutex_);
    ConditionalRun *key = run.get();
    runs_.emplace(key, std::move(run));
}

void CaptureRouter::forget_run(ConditionalRun *run) {
    std::unique_ptr<ConditionalRun> gone;
    std::lock_guard<std::mutex> lock(runs_mutex_);
    auto it = runs_.find(run);
    if (it == runs_.end()) return;
    gone = std::move(it->second);
    runs_.erase(it);
}

// ---------------------------------------------------------------------------------------------
// The C API's calls
// ---------------------------------------------------------------------------------------------

qd_status begin_conditional(Stream &s, uint64_t stream, const qd_conditional_desc &desc) {
    CaptureRouter *router = s.ctx->capture();
    if (!router || !s.capturing())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_begin_conditional: stream 0x%016llx is not capturing "
                    "(qd_stream_begin_capture starts a capture)",
                    (unsigned long long)stream);
    return router->begin_conditional(s, stream, desc);
}

qd_status next_branch(Stream &s, uint64_t stream) {
    CaptureRouter *router = s.ctx->capture();
    if (!router)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_next_branch: stream 0x%016llx is not capturing, so no "
                    "conditional is open on it",
                    (unsigned long long)stream);
    return router->next_branch(s, stream);
}

qd_status end_conditional(Stream &s, uint64_t stream) {
    CaptureRouter *router = s.ctx->capture();
    if (!router)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_stream_end_conditional: stream 0x%016llx is not capturing, so no "
                    "conditional is open on it",
                    (unsigned long long)stream);
    return router->end_conditional(s, stream);
}

qd_status conditional_handle(Stream &s, uint64_t stream, uint64_t *handle) {
    CaptureRouter *router = s.ctx->capture();
    if (!router)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_conditional_handle: stream 0x%016llx is not capturing, so no "
                    "conditional is open on it",
                    (unsigned long long)stream);
    return router->conditional_handle(s, stream, handle);
}

}  // namespace qd::core
