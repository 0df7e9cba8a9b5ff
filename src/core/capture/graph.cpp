// A graph's replay and update (core/capture/graph.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"
#include "core/fork_join.h"

namespace qd::core {

namespace {

// Do a and b have the same nodes (kind, stream, dependency) and the same conditionals, with
// bodies of the same shape? *where names the first difference.
bool same_shape(const GraphData &a, const GraphData &b, std::string *where) {
    if (a.nodes.size() != b.nodes.size()) {
        *where = std::to_string(a.nodes.size()) + " operations against " +
                 std::to_string(b.nodes.size()) + " in the other graph";
        return false;
    }
    for (size_t i = 0; i < a.nodes.size(); ++i) {
        const GraphNode &x = a.nodes[i], &y = b.nodes[i];
        if (x.kind != y.kind || x.lane != y.lane || x.dep != y.dep || !x.cond != !y.cond) {
            *where = "operation " + std::to_string(i) + " (its kind, stream or dependency)";
            return false;
        }
        if (!x.cond) continue;
        if (x.cond->kind != y.cond->kind || x.cond->bodies.size() != y.cond->bodies.size()) {
            *where = "operation " + std::to_string(i) + " (a conditional of another kind)";
            return false;
        }
        for (size_t k = 0; k < x.cond->bodies.size(); ++k)
            if (!same_shape(*x.cond->bodies[k], *y.cond->bodies[k], where)) {
                *where = "body " + std::to_string(k) + " of the conditional at operation " +
                         std::to_string(i) + ": " + *where;
                return false;
            }
    }
    return true;
}

}  // namespace

qd_status Graph::launch(Stream &stream) {
    const std::shared_ptr<const GraphData> data = this->data();
    const auto &nodes = data->nodes;
    if (nodes.empty()) return QD_SUCCESS;
    Context &c = *stream.ctx;
    // A graph with conditionals stays one driver launch even with an observer that needs
    // replays attached (qd.h, "Conditionals"): its device work cannot run on the host.
    if (std::shared_ptr<backend::Graph> native = this->native())
        if (native_graphs(c) || data->has_conditionals) return submit_graph_launch(stream, *native);
    CaptureRouter *router = c.capture();
    if (data->has_conditionals && (!router || !c.impl().runs_inline()))
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "this graph has conditionals and this backend cannot run them on the host");
    std::vector<std::shared_ptr<Stream>> leases;
    if (data->lanes > 1) {
        qd_status st = c.stream_pool().acquire_internal(data->lanes - 1, &leases);
        // No free stream: every lane runs on `stream`, in the captured (topological) order.
        if (st != QD_SUCCESS && st != QD_ERROR_POOL_EXHAUSTED) return st;
    }
    std::vector<Stream *> on(data->lanes);
    on[0] = &stream;
    for (uint32_t l = 1; l < data->lanes; ++l)
        on[l] = leases.empty() ? &stream : leases[(l - 1) % leases.size()].get();
    // A record needs an event only when a wait on another stream depends on it.
    std::vector<char> needed(nodes.size(), 0);
    for (const GraphNode &n : nodes)
        if (n.kind == OpKind::Wait && on[n.lane] != on[nodes[n.dep].lane]) needed[n.dep] = 1;
    // Every event first, then one batch of every node, all or nothing (core/submit.h).
    std::vector<std::shared_ptr<backend::Event>> events(nodes.size());
    EventPool &pool = c.event_pool();
    qd_status st = QD_SUCCESS;
    for (size_t i = 0; st == QD_SUCCESS && i < nodes.size(); ++i)
        if (needed[i]) st = pool.get(&events[i]);
    OpBatch ops(nodes.size());
    // Each conditional's host task and the batch position of its part (conditional.h).
    std::vector<std::pair<size_t, ConditionalRun *>> runs;
    for (size_t i = 0; st == QD_SUCCESS && i < nodes.size(); ++i) {
        const GraphNode &n = nodes[i];
        backend::Event *event = nullptr;
        if (n.kind == OpKind::Record) {
            if (!needed[i]) continue;
            event = events[i].get();
        } else if (n.kind == OpKind::Wait) {
            if (on[n.lane] == on[nodes[n.dep].lane]) continue;  // in order on one stream
            event = events[n.dep].get();
        }
        Op &op = ops.add(n.kind, *on[n.lane], OpOrigin::GraphLaunch);
        op_of(n, &op, event);
        if (n.cond) {
            auto run = std::make_unique<ConditionalRun>();
            run->cond = n.cond;
            run->ctx = &c;
            op.fn = &run_conditional;
            op.user_data = run.get();
            runs.emplace_back(ops.size() - 1, run.get());
            router->keep_run(std::move(run));
        }
    }
    size_t queued = 0;
    if (st == QD_SUCCESS) st = ops.submit(c, SIZE_MAX, &queued);
    if (st != QD_SUCCESS)
        for (auto &r : runs)
            if (r.first >= queued) router->forget_run(r.second);  // never queued
    if (st != QD_SUCCESS && queued > 0) {
        // A part failed in the backend after others were queued: the launch stream must not
        // run ahead of what was queued, so every branch joins it.
        const std::string reason = last_error_message();
        for (auto &l : leases) {
            Stream *target = &stream;
            link_streams(c, *l, &target, 1, OpOrigin::GraphLaunch);
        }
        fail(st, "%s", reason.c_str());
    }
    for (auto &e : events)
        if (e) pool.put(std::move(e));
    if (!leases.empty()) c.stream_pool().release_internal(leases);
    return st;
}

qd_status Graph::update_from(const Graph &from) {
    const std::shared_ptr<const GraphData> mine = data(), theirs = from.data();
    if (mine->lanes != theirs->lanes)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the graphs differ in shape: %u streams here, %u in the other graph",
                    mine->lanes, theirs->lanes);
    if (mine->nodes.size() != theirs->nodes.size())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the graphs differ in shape: %zu operations here, %zu in the other graph",
                    mine->nodes.size(), theirs->nodes.size());
    std::string where;
    if (!same_shape(*mine, *theirs, &where))
        return fail(QD_ERROR_INVALID_OPERATION, "the graphs differ in shape at %s", where.c_str());
    const std::shared_ptr<backend::Graph> native = this->native(), from_native = from.native();
    if (native && from_native) {
        qd_status st = native->update(*from_native);
        if (st != QD_SUCCESS) return st;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    data_ = theirs;
    // Values from a recording-only graph: later replays re-issue them.
    if (!from_native) native_.reset();
    return QD_SUCCESS;
}

}  // namespace qd::core
