// Graphs: capture, replay, update, rebind and destroy (qd.h, "Graphs"; core/capture/capture.h does the
// work).
#include "api/guard.h"
#include "api/resolve.h"
#include "core/capture/capture.h"
#include "core/launch_validation.h"

using namespace qd;

extern "C" {

QD_API qd_status qd_stream_begin_capture(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        core::Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::begin_capture(*s, stream);
    });
}

QD_API qd_status qd_stream_end_capture(qd_stream stream, qd_graph *graph) {
    return api::guarded([&]() -> qd_status {
        if (!graph) return api::null_argument("graph");
        core::Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::end_capture(*s, stream, graph);
    });
}

QD_API qd_status qd_graph_launch(qd_graph graph, qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        api::Arg<core::Graph> g{{"graph"}, graph};
        api::Arg<core::Stream> s{{"stream"}, stream};
        qd_status st = api::resolve_same_context(g, s);
        if (st != QD_SUCCESS) return st;
        return core::graph_launch(*g.obj, *s.obj, stream);
    });
}

QD_API qd_status qd_graph_update(qd_graph graph, qd_graph from) {
    return api::guarded([&]() -> qd_status {
        api::Arg<core::Graph> g{{"graph"}, graph};
        api::Arg<core::Graph> f{{"from"}, from};
        qd_status st = api::resolve_same_context(g, f);
        if (st != QD_SUCCESS) return st;
        return core::graph_update(*g.obj, *f.obj);
    });
}

QD_API qd_status qd_graph_destroy(qd_graph graph) {
    return api::guarded([&]() -> qd_status { return core::graph_destroy(graph); });
}

QD_API qd_status qd_graph_kernel_node_count(qd_graph graph, uint32_t *count) {
    return api::guarded([&]() -> qd_status {
        if (!count) return api::null_argument("count");
        core::Graph *g = nullptr;
        qd_status st = core::resolve_usable(graph, &g);
        if (st != QD_SUCCESS) return st;
        return core::graph_kernel_node_count(*g, count);
    });
}

QD_API qd_status qd_graph_set_kernel_args(qd_graph graph, uint32_t node, const qd_arg *args,
                                          uint32_t num_args) {
    return api::guarded([&]() -> qd_status {
        // Order of checks: qd.h, Conventions, "Which error wins".
        qd_status st = core::validate_args(args, num_args);
        if (st != QD_SUCCESS) return st;
        core::Graph *g = nullptr;
        st = core::resolve_usable(graph, &g);
        if (st != QD_SUCCESS) return st;
        return core::graph_set_kernel_args(*g, node, args, num_args);
    });
}

}  // extern "C"
