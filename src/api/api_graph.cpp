// Graphs: capture, replay, update and destroy (qd.h, "Graphs"; core/capture/capture.h does the
// work).
#include "api/guard.h"
#include "core/capture/capture.h"

using namespace qd;

extern "C" {

QD_API qd_status qd_stream_begin_capture(qd_stream stream) {
    return api::guarded([&]() -> qd_status { return core::begin_capture(stream); });
}

QD_API qd_status qd_stream_end_capture(qd_stream stream, qd_graph *graph) {
    return api::guarded([&]() -> qd_status {
        if (!graph) return api::null_argument("graph");
        return core::end_capture(stream, graph);
    });
}

QD_API qd_status qd_graph_launch(qd_graph graph, qd_stream stream) {
    return api::guarded([&]() -> qd_status { return core::graph_launch(graph, stream); });
}

QD_API qd_status qd_graph_update(qd_graph graph, qd_graph from) {
    return api::guarded([&]() -> qd_status { return core::graph_update(graph, from); });
}

QD_API qd_status qd_graph_destroy(qd_graph graph) {
    return api::guarded([&]() -> qd_status { return core::graph_destroy(graph); });
}

}  // extern "C"
