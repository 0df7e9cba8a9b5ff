// A graph's replay and update (core/capture/graph.h).
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"
#include "core/capture/graph_blocks.h"
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
        if (x.kind == OpKind::MemAlloc && x.bytes != y.bytes) {
            *where = "operation " + std::to_string(i) + ": an allocation of " +
                     std::to_string(x.bytes) + " bytes here, of " + std::to_string(y.bytes) +
                     " bytes in the other graph";
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
    Context &c = *stream.ctx;
    // What this replay launches, taken under one lock (a rebind or update after it changes
    // later replays only): the driver graph, or the nodes and their rebound values.
    std::shared_ptr<backend::Graph> native;
    std::shared_ptr<const GraphData> data;
    std::shared_ptr<const ReboundArgs> rebound;
    // A launch on a capturing stream makes this graph a child of the capture: its nodes are
    // re-issued there, and the capture records them (child_graph.cpp).
    const bool child = stream.capturing();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const GraphData &d = *data_;
        if (d.nodes.empty()) return QD_SUCCESS;
        // Blocks a driver capture made exist only inside the driver graph's launches: such a
        // graph is always launched whole. So is a graph with conditionals, even with an
        // observer that needs replays attached (qd.h, "Conditionals"): its device work cannot
        // run on the host.
        if (!child && native_ &&
            (native_graphs(c) || d.has_conditionals || (d.blocks && d.blocks->native())))
            native = native_;
        else {
            data = data_;
            rebound = rebound_;
        }
    }
    if (native) return submit_graph_launch(stream, *native);
    CaptureRouter *router = c.capture();
    if (child && router) {
        qd_status st = router->check_child(stream, *data);
        if (st != QD_SUCCESS) return st;
    }
    // The re-issue path. The values are let go of under the lock, after the last use of the
    // operations pointing into them: a rebind that then finds the block unshared writes it in
    // place, ordered after this replay's reads (graph_rebind.cpp).
    struct LetGo {
        std::mutex &mutex;
        std::shared_ptr<const ReboundArgs> &values;
        ~LetGo() {
            if (!values) return;
            std::lock_guard<std::mutex> lock(mutex);
            values.reset();
        }
    } let_go{mutex_, rebound};
    const auto &nodes = data->nodes;
    GraphBlocks *blocks = data->blocks.get();
    if (data->has_conditionals && (!router || !c.impl().runs_inline()))
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "this graph has conditionals and this backend cannot run them on the host");
    // Recorded blocks: every replay uses the same memory, so replays run one after the other
    // (core/capture/graph_blocks.h); the lock orders their submissions.
    std::unique_lock<std::mutex> serial;
    struct Noted {  // clears GraphBlocks::replaying before the lock is let go
        GraphBlocks *blocks = nullptr;
        ~Noted() {
            if (blocks) blocks->replaying.store(std::thread::id(), std::memory_order_relaxed);
        }
    } noted;
    if (blocks) {
        if (blocks->replaying.load(std::memory_order_relaxed) == std::this_thread::get_id())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "qd_graph_launch of a graph that allocates, nested in a replay of the "
                        "same graph (a hazard handler): its replays run one after the other");
        serial = std::unique_lock<std::mutex>(blocks->replay_mutex());
        blocks->replaying.store(std::this_thread::get_id(), std::memory_order_relaxed);
        noted.blocks = blocks;
    }
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
    std::shared_ptr<backend::Event> done;  // recorded after the whole replay (blocks)
    if (blocks && st == QD_SUCCESS) st = pool.get(&done);
    OpBatch ops(nodes.size() + (blocks ? blocks->waits().size() + 1 : 0));
    if (blocks && st == QD_SUCCESS)
        for (const auto &e : blocks->waits()) ops.wait(stream, *e, OpOrigin::GraphLaunch);
    size_t launch = 0;  // the kernel node index of the next Launch
    // Each conditional's host task and the batch position of its part (conditional.h).
    std::vector<std::pair<size_t, ConditionalRun *>> runs;
    for (size_t i = 0; st == QD_SUCCESS && i < nodes.size(); ++i) {
        const GraphNode &n = nodes[i];
        backend::Event *event = nullptr;
        if (n.kind == OpKind::Launch) {
            Op &op = ops.add(n.kind, *on[n.lane], OpOrigin::GraphLaunch);
            op_of(n, &op, nullptr);
            if (rebound && launch < rebound->count() && rebound->rebound(uint32_t(launch))) {
                op.args = rebound->args(uint32_t(launch));  // kept alive by `rebound`
                op.num_args = rebound->num_args(uint32_t(launch));
            }
            ++launch;
            continue;
        }
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
    if (blocks && st == QD_SUCCESS) ops.record(stream, *done, OpOrigin::GraphLaunch);
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
        // What touches the blocks is ordered before the next replay and the release.
        if (blocks && queued < ops.size() &&
            submit_record(stream, *done, nullptr, OpOrigin::GraphLaunch) == QD_SUCCESS)
            queued = ops.size();
        fail(st, "%s", reason.c_str());
    }
    if (blocks && queued == ops.size())
        blocks->replayed(stream.shared_from_this(), std::move(done));
    if (done) pool.put(std::move(done));
    for (auto &e : events)
        if (e) pool.put(std::move(e));
    if (!leases.empty()) {
        // Leases that joined a capture (a child graph's lanes) stay with it until it ends.
        if (child && router) {
            std::vector<std::shared_ptr<Stream>> back;
            for (auto &l : leases)
                if (!router->keep_lease(l)) back.push_back(std::move(l));
            leases.swap(back);
        }
        c.stream_pool().release_internal(leases);
    }
    return st;
}

qd_status Graph::update_from(const Graph &from) {
    // from's values as they are now, its rebound arguments included, taken before this graph's
    // lock (two graphs updated from each other at once take one lock each at a time).
    std::shared_ptr<const GraphData> theirs;
    std::shared_ptr<ReboundArgs> rebound;  // the graph's own copy (later rebinds are its own)
    std::shared_ptr<backend::Graph> from_native;
    from.values(&theirs, &rebound, &from_native);
    std::lock_guard<std::mutex> lock(mutex_);
    const GraphData *mine = data_.get();
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
    // A driver graph's blocks live only in its own launches: its operations cannot move to
    // another graph, nor another graph's into it.
    for (const GraphData *d : {mine, theirs.get()})
        if (d->blocks && d->blocks->native())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "%s allocates inside a native driver graph (graph memory nodes), whose "
                        "blocks cannot be given to another graph: capture it again instead",
                        d == mine ? "the graph" : "the other graph");
    if (native_ && from_native) {
        qd_status st = native_->update(*from_native);
        if (st != QD_SUCCESS) return st;
        // The driver took from's captured values; its rebound ones go on top.
        for (uint32_t k = 0; rebound && k < rebound->count(); ++k) {
            if (!rebound->rebound(k)) continue;
            const GraphNode &n = theirs->nodes[theirs->launches[k]];
            st = native_->set_kernel_args(k, *n.kernel->impl, n.dims, rebound->args(k),
                                          rebound->num_args(k));
            if (st != QD_SUCCESS) return st;
        }
    }
    data_ = std::move(theirs);
    rebound_ = std::move(rebound);
    // Values from a recording-only graph: later replays re-issue them.
    if (!from_native) native_.reset();
    return QD_SUCCESS;
}

}  // namespace qd::core
