// qd_graph_debug_dot (qd.h): a graph written as Graphviz DOT from the nodes its capture recorded
// (core/capture/graph.h), the same on every backend. Lanes are clusters, nodes the recorded
// operations, edges the recorded dependencies; a conditional's bodies are clusters of their own.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"

namespace qd::core {

namespace {

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
    char text[256];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    return text;
}

// A DOT string's body: quotes and backslashes escaped, control characters dropped.
std::string escaped(const char *text) {
    std::string out;
    for (const char *p = text; *p; ++p) {
        if (*p == '"' || *p == '\\') out += '\\';
        if (static_cast<unsigned char>(*p) >= 0x20) out += *p;
    }
    return out;
}

const char *kind_name(qd_conditional_kind kind) {
    switch (kind) {
    case QD_CONDITIONAL_IF: return "IF";
    case QD_CONDITIONAL_IF_ELSE: return "IF_ELSE";
    case QD_CONDITIONAL_WHILE: return "WHILE";
    case QD_CONDITIONAL_SWITCH: return "SWITCH";
    }
    return "?";
}

std::string body_name(const Conditional &c, size_t body) {
    switch (c.kind) {
    case QD_CONDITIONAL_IF_ELSE: return body == 0 ? "then" : "else";
    case QD_CONDITIONAL_SWITCH: return "case " + std::to_string(body);
    default: return "body";
    }
}

class DotWriter {
  public:
    explicit DotWriter(bool verbose) : verbose_(verbose) {}

    std::string write(const GraphData &root) {
        out_ = "digraph qd_graph {\n";
        out_ += format("  label=\"qd graph: %zu operations, %u lane%s, %zu kernel node%s\";\n",
                       root.nodes.size(), root.lanes, root.lanes == 1 ? "" : "s",
                       root.launches.size(), root.launches.size() == 1 ? "" : "s");
        out_ += "  labelloc=t;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
        out_ += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
        data(root, "", "  ", true);
        out_ += edges_;
        out_ += "}\n";
        return std::move(out_);
    }

  private:
    static std::string id(const std::string &prefix, size_t node) {
        return prefix + "n" + std::to_string(node);
    }

    std::string label(const GraphNode &n) const {
        std::string l;
        switch (n.kind) {
        case OpKind::Launch:
            l = escaped(n.kernel->impl->name());
            l += format("\\ngrid (%u,%u,%u) block (%u,%u,%u)", n.dims.grid[0], n.dims.grid[1],
                        n.dims.grid[2], n.dims.block[0], n.dims.block[1], n.dims.block[2]);
            if (verbose_) {
                l += format("\\nshared %u B\\nargs", n.dims.shared_mem_bytes);
                if (n.args.empty()) l += " none";
                for (size_t i = 0; i < n.args.size(); ++i)
                    l += format("%s %" PRIu64, i ? "," : "", uint64_t(n.args[i].size));
                if (!n.args.empty()) l += " B";
            }
            return l;
        case OpKind::Memcpy:
            l = format("memcpy\\n%" PRIu64 " B", n.bytes);
            if (verbose_) l += format("\\n0x%" PRIx64 " <- 0x%" PRIx64, n.dst, n.src);
            return l;
        case OpKind::Memset:
            l = format("memset\\n%" PRIu64 " B = 0x%02x", n.bytes, unsigned(n.value));
            if (verbose_) l += format("\\n0x%" PRIx64, n.dst);
            return l;
        case OpKind::MemAlloc:
            l = format("alloc\\n%" PRIu64 " B", n.bytes);
            if (verbose_) l += format("\\n0x%" PRIx64, n.dst);
            return l;
        case OpKind::MemFree:
            l = "free";
            if (verbose_) l += format("\\n0x%" PRIx64, n.dst);
            return l;
        case OpKind::HostFn:
            if (n.cond) {
                l = kind_name(n.cond->kind);
                if (n.cond->kind == QD_CONDITIONAL_SWITCH)
                    l += format(" (%u cases)", n.cond->num_cases);
                if (verbose_) l += format("\\ncondition 0x%" PRIx64, n.cond->condition);
                return l;
            }
            l = "host fn";
            if (verbose_)
                l += format("\\nfn 0x%" PRIxPTR "\\nuser_data 0x%" PRIxPTR,
                            reinterpret_cast<uintptr_t>(n.fn),
                            reinterpret_cast<uintptr_t>(n.user_data));
            return l;
        case OpKind::Record: return "record";
        case OpKind::Wait: return "wait";
        case OpKind::Signal:
        case OpKind::WaitValue: return "timeline";  // never a node: a capture refuses them
        }
        return "?";
    }

    static const char *shape(const GraphNode &n) {
        switch (n.kind) {
        case OpKind::Launch: return "shape=box, style=\"bold\"";
        case OpKind::Memcpy:
        case OpKind::Memset: return "shape=box, style=\"rounded\"";
        case OpKind::MemAlloc: return "shape=house";
        case OpKind::MemFree: return "shape=invhouse";
        case OpKind::HostFn: return n.cond ? "shape=diamond" : "shape=component";
        case OpKind::Record:
        case OpKind::Wait:
        case OpKind::Signal:
        case OpKind::WaitValue: return "shape=ellipse, fontsize=8, height=0.25";
        }
        return "shape=box";
    }

    // The nodes of d (in clusters: its lanes when `lanes`, else the caller's body cluster) and
    // its edges (into edges_); each conditional's bodies as nested clusters.
    void data(const GraphData &d, const std::string &prefix, const std::string &indent,
              bool lanes) {
        const size_t n = d.nodes.size();
        uint32_t lane_count = 0;
        for (const GraphNode &g : d.nodes) lane_count = std::max(lane_count, g.lane + 1);
        // The nodes, grouped by lane (root) or in the body's cluster.
        for (uint32_t lane = 0; lane < (lanes ? lane_count : 1); ++lane) {
            std::string in = indent;
            if (lanes) {
                out_ +=
                    format("%ssubgraph cluster_%slane%u {\n", indent.c_str(), prefix.c_str(), lane);
                out_ += format("%s  label=\"lane %u%s\"; style=rounded; color=gray60;\n",
                               indent.c_str(), lane, lane == 0 ? " (launch stream)" : "");
                in += "  ";
            }
            for (size_t i = 0; i < n; ++i) {
                const GraphNode &g = d.nodes[i];
                if (lanes && g.lane != lane) continue;
                out_ += in + id(prefix, i) + " [label=\"" + label(g) + "\", " + shape(g) + "];\n";
            }
            if (lanes) out_ += indent + "}\n";
        }
        // The edges: each lane's order, each wait on its record, each free to its alloc.
        std::vector<int32_t> last(lane_count, -1);
        std::vector<int64_t> parent(lane_count, -1);  // the lane that started each lane
        for (size_t i = 0; i < n; ++i) {
            const GraphNode &g = d.nodes[i];
            const std::string to = id(prefix, i);
            if (last[g.lane] < 0 && g.kind == OpKind::Wait && g.dep >= 0)
                parent[g.lane] = d.nodes[size_t(g.dep)].lane;
            if (last[g.lane] >= 0)
                edges_ += "  " + id(prefix, size_t(last[g.lane])) + " -> " + to + ";\n";
            last[g.lane] = int32_t(i);
            if (g.dep < 0) continue;
            const std::string from = id(prefix, size_t(g.dep));
            if (g.kind == OpKind::MemFree) {
                edges_ += "  " + from + " -> " + to +
                          " [style=dotted, label=\"block\", constraint=false];\n";
                continue;
            }
            const uint32_t a = d.nodes[size_t(g.dep)].lane;
            const char *what = a == g.lane           ? "event"
                               : parent[g.lane] == a ? "fork"
                               : parent[a] == g.lane ? "join"
                                                     : "event";
            edges_ += "  " + from + " -> " + to + " [style=dashed, label=\"" + what + "\"];\n";
        }
        // Each conditional's bodies: a cluster each, entered from the conditional's node at the
        // operations that depend on nothing inside the body.
        for (size_t i = 0; i < n; ++i) {
            const GraphNode &g = d.nodes[i];
            if (!g.cond) continue;
            for (size_t b = 0; b < g.cond->bodies.size(); ++b) {
                const GraphData &body = *g.cond->bodies[b];
                const std::string p = id(prefix, i) + "_b" + std::to_string(b) + "_";
                const std::string name = body_name(*g.cond, b);
                out_ += format("%ssubgraph cluster_%s {\n", indent.c_str(), p.c_str());
                out_ += format("%s  label=\"%s %s\"; style=dashed; color=gray40;\n", indent.c_str(),
                               kind_name(g.cond->kind), name.c_str());
                const std::string edge = " [style=bold, label=\"" + name + "\"];\n";
                if (body.nodes.empty()) {
                    out_ += indent + "  " + p + "empty [label=\"(empty)\", shape=plaintext];\n";
                    edges_ += "  " + id(prefix, i) + " -> " + p + "empty" + edge;
                }
                std::vector<char> seen_lane;
                for (size_t k = 0; k < body.nodes.size(); ++k) {
                    const GraphNode &m = body.nodes[k];
                    if (m.lane >= seen_lane.size()) seen_lane.resize(m.lane + 1, 0);
                    const bool first = !seen_lane[m.lane];
                    seen_lane[m.lane] = 1;
                    if (first && !(m.kind == OpKind::Wait && m.dep >= 0))
                        edges_ += "  " + id(prefix, i) + " -> " + id(p, k) + edge;
                }
                data(body, p, indent + "  ", false);
                out_ += indent + "}\n";
            }
        }
    }

    const bool verbose_;
    std::string out_;
    std::string edges_;
};

// path must be a regular file or absent: anything else is never replaced.
qd_status refuse_special(const char *path) {
    struct stat st;
    if (::stat(path, &st) != 0 || S_ISREG(st.st_mode)) return QD_SUCCESS;
    return fail(QD_ERROR_INVALID_ARGUMENT,
                "qd_graph_debug_dot: path '%s' is %s, not a regular file; it is never replaced",
                path, S_ISDIR(st.st_mode) ? "a directory" : "a special file");
}

// Writes text to path whole: a temporary file of a unique name next to it, renamed over it.
qd_status write_whole(const char *path, const std::string &text) {
    qd_status st = refuse_special(path);
    if (st != QD_SUCCESS) return st;
    std::string tmp = std::string(path) + ".tmp-XXXXXX";
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "qd_graph_debug_dot: path '%s' cannot be written: %s", path,
                    std::strerror(errno));
    (void)::fchmod(fd, 0644);
    bool ok = true;
    for (size_t at = 0; ok && at < text.size();) {
        const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) at += size_t(n);
    }
    int err = errno;
    if (::close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok) st = refuse_special(path);  // a special file made at path meanwhile stays
    if (ok && st == QD_SUCCESS && std::rename(tmp.c_str(), path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok || st != QD_SUCCESS) {
        ::unlink(tmp.c_str());
        if (st != QD_SUCCESS) return st;
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "qd_graph_debug_dot: path '%s' cannot be written: %s", path,
                    std::strerror(err));
    }
    return QD_SUCCESS;
}

}  // namespace

qd_status graph_debug_dot(const Graph &g, const char *path, uint32_t flags) {
    const std::shared_ptr<const GraphData> data = g.data();
    const std::string text = DotWriter((flags & QD_GRAPH_DOT_VERBOSE) != 0).write(*data);
    return write_whole(path, text);
}

}  // namespace qd::core
