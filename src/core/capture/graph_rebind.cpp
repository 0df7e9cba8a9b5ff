// Rebinding one kernel node of a graph (qd.h, qd_graph_set_kernel_args): new argument values
// for every later replay, without a new capture (core/capture/graph.h).
#include <memory>
#include <mutex>

#include "common/error.h"
#include "core/capture/capture.h"

namespace qd::core {

uint32_t Graph::kernel_node_count() const { return uint32_t(data()->launches.size()); }

qd_status Graph::set_kernel_args(uint32_t node, const qd_arg *args, uint32_t num_args) {
    // The whole call under the graph's one lock (graph.h): no replay takes the values half
    // written, no update comes between the driver graph's change and the values'.
    std::lock_guard<std::mutex> lock(mutex_);
    const GraphData &data = *data_;
    const uint32_t count = uint32_t(data.launches.size());
    if (node >= count)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "node %u is out of range: the graph has %u kernel node%s (numbered from 0)",
                    node, count, count == 1 ? "" : "s");
    const GraphNode &n = data.nodes[data.launches[node]];
    if (num_args != n.args.size())
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "num_args is %u, but the launch of kernel node %u (%s) was captured with %zu "
                    "arguments; nothing changed",
                    num_args, node, n.kernel->impl->name(), n.args.size());
    for (uint32_t i = 0; i < num_args; ++i)
        if (args[i].size != n.args[i].size)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "argument %u has size %llu, but the launch of kernel node %u (%s) was "
                        "captured with size %llu there; nothing changed",
                        i, (unsigned long long)args[i].size, node, n.kernel->impl->name(),
                        (unsigned long long)n.args[i].size);
    // Everything that may fail first (the block of values, made by the first rebind, copied
    // while a replay still reads it; then the driver graph, from the caller's values: the driver
    // copies them), then what cannot fail: a refusal changes nothing.
    ReboundArgs *target = rebound_.get();
    std::shared_ptr<ReboundArgs> fresh;
    if (!target)
        fresh = std::make_shared<ReboundArgs>(data);
    else if (rebound_.use_count() > 1)  // a replay holds it: it keeps the values it took
        fresh = std::make_shared<ReboundArgs>(*target);
    // Replays take their reference and let go of it under the lock (graph.h): none comes now,
    // and one that let go has read the block before this write.
    if (fresh) target = fresh.get();
    if (native_) {
        qd_status st = native_->set_kernel_args(node, *n.kernel->impl, n.dims, args, num_args);
        if (st != QD_SUCCESS) return st;
    }
    target->write(node, args);
    if (fresh) rebound_.swap(fresh);  // a replay holding the old block keeps it
    return QD_SUCCESS;
}

qd_status graph_kernel_node_count(const Graph &g, uint32_t *count) {
    *count = g.kernel_node_count();
    return QD_SUCCESS;
}

qd_status graph_set_kernel_args(Graph &g, uint32_t node, const qd_arg *args, uint32_t num_args) {
    return g.set_kernel_args(node, args, num_args);
}

}  // namespace qd::core
