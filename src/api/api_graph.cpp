// Graphs: capture, replay, upload, update, rebind, DOT and destroy (qd.h, "Graphs"; core/capture/capture.h does the
// work).
#include <cstring>

#include "api/guard.h"
#include "api/resolve.h"
#include "common/first_sizes.h"
#include "core/alloc_registry.h"
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

QD_API qd_status qd_graph_upload(qd_graph graph, qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        api::Arg<core::Graph> g{{"graph"}, graph};
        api::Arg<core::Stream> s{{"stream"}, stream};
        qd_status st = api::resolve_same_context(g, s);
        if (st != QD_SUCCESS) return st;
        return core::graph_upload(*g.obj, *s.obj, stream);
    });
}

QD_API qd_status qd_graph_debug_dot(qd_graph graph, const char *path, uint32_t flags) {
    return api::guarded([&]() -> qd_status {
        // Order of checks: qd.h, Conventions, "Which error wins".
        if (!path) return api::null_argument("path");
        if (*path == '\0') return fail(QD_ERROR_INVALID_ARGUMENT, "path is empty");
        if (flags & ~uint32_t(QD_GRAPH_DOT_VERBOSE))
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "flags 0x%x has unknown bits (0 or QD_GRAPH_DOT_VERBOSE)", flags);
        core::Graph *g = nullptr;
        qd_status st = core::resolve_usable(graph, &g);
        if (st != QD_SUCCESS) return st;
        return core::graph_debug_dot(*g, path, flags);
    });
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

QD_API qd_status qd_stream_begin_conditional(qd_stream stream, const qd_conditional_desc *desc) {
    return api::guarded([&]() -> qd_status {
        if (!desc) return api::null_argument("desc");
        if (desc->struct_size < first_size<qd_conditional_desc>())
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "qd_conditional_desc.struct_size is %u; at least %u is required (use "
                        "QD_CONDITIONAL_DESC_INIT)",
                        desc->struct_size, first_size<qd_conditional_desc>());
        qd_conditional_desc d = *desc;  // the caller may change it on another thread
        // The kind's bits as an integer: a value outside the enumerators (a C caller's 9) may
        // not be loaded as a qd_conditional_kind.
        uint32_t kind = 0;
        static_assert(sizeof kind == sizeof d.kind, "qd_conditional_kind is 32 bits");
        std::memcpy(&kind, &d.kind, sizeof kind);
        switch (kind) {
        case QD_CONDITIONAL_IF:
        case QD_CONDITIONAL_IF_ELSE:
        case QD_CONDITIONAL_WHILE:
            if (d.num_cases != 0)
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "qd_conditional_desc.num_cases is %u; it must be 0 except for "
                            "QD_CONDITIONAL_SWITCH",
                            d.num_cases);
            break;
        case QD_CONDITIONAL_SWITCH:
            if (d.num_cases == 0 || d.num_cases > QD_MAX_CONDITIONAL_CASES)
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "qd_conditional_desc.num_cases is %u; a SWITCH has 1 to %u cases",
                            d.num_cases, QD_MAX_CONDITIONAL_CASES);
            break;
        default:
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "qd_conditional_desc.kind is %u, not a qd_conditional_kind", kind);
        }
        if (d.condition % 4 != 0)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "qd_conditional_desc.condition 0x%016llx is not aligned to 4 bytes (the "
                        "address of a uint32_t)",
                        (unsigned long long)d.condition);
        if (d.condition > UINT64_MAX - 4)
            return fail(QD_ERROR_OVERFLOW, "qd_conditional_desc.condition 0x%016llx wraps",
                        (unsigned long long)d.condition);
        core::Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        if (d.condition != 0) {
            st = core::AllocRegistry::check_range(d.condition, 4, "condition");
            if (st != QD_SUCCESS) return st;
        }
        return core::begin_conditional(*s, stream, d);
    });
}

QD_API qd_status qd_stream_next_branch(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        core::Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::next_branch(*s, stream);
    });
}

QD_API qd_status qd_stream_end_conditional(qd_stream stream) {
    return api::guarded([&]() -> qd_status {
        core::Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::end_conditional(*s, stream);
    });
}

QD_API qd_status qd_conditional_handle(qd_stream stream, uint64_t *handle) {
    return api::guarded([&]() -> qd_status {
        if (!handle) return api::null_argument("handle");
        core::Stream *s = nullptr;
        qd_status st = core::resolve_usable(stream, &s);
        if (st != QD_SUCCESS) return st;
        return core::conditional_handle(*s, stream, handle);
    });
}

}  // extern "C"
