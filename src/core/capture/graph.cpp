// A graph's replay and update (core/capture/graph.h).
#include <string>
#include <thread>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/graph_blocks.h"
#include "core/fork_join.h"

namespace qd::core {

qd_status Graph::launch(Stream &stream) {
    // The values current now: a rebind or update after this point changes later replays only.
    std::shared_ptr<const GraphData> data;
    Rebound rebound;
    values(&data, &rebound);
    const auto &nodes = data->nodes;
    if (nodes.empty()) return QD_SUCCESS;
    Context &c = *stream.ctx;
    // Blocks a driver capture made exist only inside the driver graph's launches: such a graph
    // is always launched whole.
    GraphBlocks *blocks = data->blocks.get();
    if (std::shared_ptr<backend::Graph> native = this->native())
        if (native_graphs(c) || (blocks && blocks->native()))
            return submit_graph_launch(stream, *native);
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
    for (size_t i = 0; st == QD_SUCCESS && i < nodes.size(); ++i) {
        const GraphNode &n = nodes[i];
        backend::Event *event = nullptr;
        if (n.kind == OpKind::Launch) {
            Op &op = ops.add(n.kind, *on[n.lane], OpOrigin::GraphLaunch);
            op_of(n, &op, nullptr);
            if (launch < rebound.size() && rebound[launch]) {
                op.args = rebound[launch]->args.data();  // kept alive by `rebound`
                op.num_args = uint32_t(rebound[launch]->args.size());
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
        op_of(n, &ops.add(n.kind, *on[n.lane], OpOrigin::GraphLaunch), event);
    }
    if (blocks && st == QD_SUCCESS) ops.record(stream, *done, OpOrigin::GraphLaunch);
    size_t queued = 0;
    if (st == QD_SUCCESS) st = ops.submit(c, SIZE_MAX, &queued);
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
    for (size_t i = 0; i < mine->nodes.size(); ++i) {
        const GraphNode &a = mine->nodes[i], &b = theirs->nodes[i];
        if (a.kind != b.kind || a.lane != b.lane || a.dep != b.dep)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the graphs differ in shape at operation %zu (its kind, stream or "
                        "dependency)",
                        i);
        if (a.kind == OpKind::MemAlloc && a.bytes != b.bytes)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the graphs differ in shape at operation %zu: an allocation of %llu "
                        "bytes here, of %llu bytes in the other graph",
                        i, (unsigned long long)a.bytes, (unsigned long long)b.bytes);
    }
    // A driver graph's blocks live only in its own launches: its operations cannot move to
    // another graph, nor another graph's into it.
    for (const GraphData *d : {mine.get(), theirs.get()})
        if (d->blocks && d->blocks->native())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "%s allocates inside a native driver graph (graph memory nodes), whose "
                        "blocks cannot be given to another graph: capture it again instead",
                        d == mine.get() ? "the graph" : "the other graph");
    // from's values as they are now, its rebound arguments included.
    std::shared_ptr<const GraphData> from_data;
    Rebound from_rebound;
    from.values(&from_data, &from_rebound);
    std::lock_guard<std::mutex> write(write_mutex_);
    const std::shared_ptr<backend::Graph> native = this->native(), from_native = from.native();
    if (native && from_native) {
        qd_status st = native->update(*from_native);
        if (st != QD_SUCCESS) return st;
        // The driver took from's captured values; its rebound ones go on top.
        for (size_t k = 0; k < from_rebound.size(); ++k) {
            if (!from_rebound[k]) continue;
            const GraphNode &n = from_data->nodes[from_data->launches[k]];
            st = native->set_kernel_args(uint32_t(k), *n.kernel->impl, n.dims,
                                         from_rebound[k]->args.data(),
                                         uint32_t(from_rebound[k]->args.size()));
            if (st != QD_SUCCESS) return st;
        }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    data_ = std::move(from_data);
    rebound_ = std::move(from_rebound);
    // Values from a recording-only graph: later replays re-issue them.
    if (!from_native) native_.reset();
    return QD_SUCCESS;
}

}  // namespace qd::core
