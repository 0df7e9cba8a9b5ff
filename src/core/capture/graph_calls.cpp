// The C API's graph calls (src/api/api_graph.cpp validates and guards; core/capture/capture.h).
#include <string>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/lifecycle.h"

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// The C API's calls
// ---------------------------------------------------------------------------------------------

qd_status begin_capture(Stream &s, uint64_t stream) {
    CaptureRouter *obs = nullptr;
    qd_status st = s.ctx->open_capture(&obs);
    if (st != QD_SUCCESS) return st;
    return obs->begin(s, stream);
}

qd_status end_capture(Stream &s, uint64_t stream, uint64_t *graph) {
    CaptureRouter *obs = s.ctx->capture();
    if (!obs)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "stream 0x%016llx is not capturing (qd_stream_begin_capture starts a "
                    "capture)",
                    (unsigned long long)stream);
    std::shared_ptr<const GraphData> data;
    std::shared_ptr<backend::Graph> native;
    qd_status st = obs->end(s, &data, &native);
    if (st != QD_SUCCESS) {
        // A racing qd_context_destroy drops every capture when it drains (context_drained).
        if (s.ctx->check_not_destroyed() != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
        const std::string reason = last_error_message();
        return fail(st, "qd_stream_end_capture of stream 0x%016llx: %s", (unsigned long long)stream,
                    reason.c_str());
    }
    Context &c = *s.ctx;
    auto g = std::make_shared<Graph>(c.shared_from_this(), std::move(data), std::move(native));
    return register_graph(c, std::move(g), graph);  // core/lifecycle.h
}

qd_status graph_launch(Graph &g, Stream &s, uint64_t stream) {
    (void)stream;
    // On a capturing stream too: the graph becomes part of the capture (child_graph.cpp).
    return g.launch(s);
}

qd_status graph_update(Graph &g, const Graph &from) {
    if (&g == &from) return QD_SUCCESS;
    return g.update_from(from);
}

qd_status graph_destroy(uint64_t graph) { return destroy_graph(graph); }  // core/lifecycle.h

}  // namespace qd::core
