// qd_graph_upload (qd.h): a graph's replays prepared ahead of the first qd_graph_launch
// (core/capture/graph.h), so that the first launch costs what later ones do.
#include <memory>
#include <vector>

#include "core/capture/capture.h"
#include "core/capture/graph_blocks.h"

namespace qd::core {

qd_status Graph::upload(Stream &stream) {
    Context &c = *stream.ctx;
    // The graph's launches are the driver graph's (the same rule as Graph::launch): the driver
    // instantiates it and uploads it on the stream. Taken under the graph's lock, as a replay
    // takes what it launches.
    std::shared_ptr<backend::Graph> native;
    std::shared_ptr<const GraphData> data;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        data = data_;
        const GraphData &d = *data_;
        if (native_ && (native_graphs(c) || d.has_conditionals || (d.blocks && d.blocks->native())))
            native = native_;
    }
    if (native) return submit_graph_upload(stream, *native);
    // A replay that re-issues the nodes takes a pooled event per wait across lanes, and one
    // after the whole replay of a graph with blocks (Graph::launch): made now, into the pool,
    // so the first replay finds them there. As many as the replay takes with every lane on a
    // stream of its own (more than it takes when lanes share a stream).
    size_t want = data->blocks ? 1 : 0;
    for (const GraphNode &n : data->nodes)
        if (n.kind == OpKind::Wait && n.dep >= 0 && data->nodes[size_t(n.dep)].lane != n.lane)
            ++want;
    EventPool &pool = c.event_pool();
    std::vector<std::shared_ptr<backend::Event>> made;
    made.reserve(want);
    qd_status st = QD_SUCCESS;
    for (size_t i = 0; st == QD_SUCCESS && i < want; ++i) {
        std::shared_ptr<backend::Event> e;
        st = pool.get(&e);
        if (st == QD_SUCCESS) made.push_back(std::move(e));
    }
    for (auto &e : made) pool.put(std::move(e));
    return st;
}

qd_status graph_upload(Graph &g, Stream &s, uint64_t stream) {
    qd_status st = refuse_if_capturing(s, stream, "qd_graph_upload");
    if (st != QD_SUCCESS) return st;
    return g.upload(s);
}

}  // namespace qd::core
