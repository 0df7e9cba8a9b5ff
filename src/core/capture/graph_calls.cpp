// The C API's graph calls (src/api/api_graph.cpp validates and guards; core/capture/capture.h).
#include <string>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/lifecycle.h"

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// The C API's calls
// ---------------------------------------------------------------------------------------------

qd_status begin_capture(uint64_t stream) {
    Stream *s = nullptr;
    qd_status st = resolve_usable(stream, &s);
    if (st != QD_SUCCESS) return st;
    CaptureRouter *obs = nullptr;
    st = s->ctx->open_capture(&obs);
    if (st != QD_SUCCESS) return st;
    return obs->begin(*s, stream);
}

qd_status end_capture(uint64_t stream, uint64_t *graph) {
    Stream *s = nullptr;
    qd_status st = resolve_usable(stream, &s);
    if (st != QD_SUCCESS) return st;
    CaptureRouter *obs = s->ctx->capture();
    if (!obs)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "stream 0x%016llx is not capturing (qd_stream_begin_capture starts a "
                    "capture)",
                    (unsigned long long)stream);
    std::shared_ptr<const GraphData> data;
    std::shared_ptr<backend::Graph> native;
    st = obs->end(*s, &data, &native);
    if (st != QD_SUCCESS) {
        // A racing qd_context_destroy drops every capture when it drains (context_drained).
        if (s->ctx->check_not_destroyed() != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
        const std::string reason = last_error_message();
        return fail(st, "qd_stream_end_capture of stream 0x%016llx: %s",
                    (unsigned long long)stream, reason.c_str());
    }
    Context &c = *s->ctx;
    auto g = std::make_shared<Graph>(c.shared_from_this(), std::move(data), std::move(native));
    return register_graph(c, std::move(g), graph);  // core/lifecycle.h
}

qd_status graph_launch(uint64_t graph, uint64_t stream) {
    Graph *g = nullptr;
    Stream *s = nullptr;
    qd_status st = resolve(graph, &g);
    if (st == QD_SUCCESS) st = resolve(stream, &s);
    if (st != QD_SUCCESS) return st;
    if (g->ctx != s->ctx)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "graph 0x%016llx belongs to another context than stream 0x%016llx",
                    (unsigned long long)graph, (unsigned long long)stream);
    st = s->ctx->usable();
    if (st == QD_SUCCESS) st = refuse_if_capturing(*s, stream, "qd_graph_launch");
    if (st != QD_SUCCESS) return st;
    return g->launch(*s);
}

qd_status graph_update(uint64_t graph, uint64_t from) {
    Graph *g = nullptr;
    Graph *f = nullptr;
    qd_status st = resolve(graph, &g);
    if (st == QD_SUCCESS) st = resolve(from, &f);
    if (st != QD_SUCCESS) return st;
    if (g->ctx != f->ctx)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "graphs 0x%016llx and 0x%016llx belong to different contexts",
                    (unsigned long long)graph, (unsigned long long)from);
    st = g->ctx->usable();
    if (st != QD_SUCCESS) return st;
    if (g == f) return QD_SUCCESS;
    return g->update_from(*f);
}

qd_status graph_destroy(uint64_t graph) { return destroy_graph(graph); }  // core/lifecycle.h

}  // namespace qd::core
