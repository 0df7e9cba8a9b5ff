// The one builder between operations and graph nodes (core/capture/graph.h): a capture records
// an Op as a node, a replay turns the node back into the same Op.
#include <cstring>

#include "core/capture/graph.h"

namespace qd::core {

GraphNode node_of(const Op &op, uint32_t lane, std::shared_ptr<Kernel> kernel, int32_t dep) {
    GraphNode n;
    n.kind = op.kind;
    n.lane = lane;
    n.dep = dep;
    n.dst = op.dst;
    n.src = op.src;
    n.bytes = op.bytes;
    n.value = op.value;
    n.fn = op.fn;
    n.user_data = op.user_data;
    n.kernel = std::move(kernel);
    if (op.dims) n.dims = *op.dims;
    uint64_t total = 0;
    for (uint32_t i = 0; i < op.num_args; ++i) total += op.args[i].size;
    n.arg_bytes.resize(total);
    n.args.resize(op.num_args);
    uint64_t at = 0;
    for (uint32_t i = 0; i < op.num_args; ++i) {
        std::memcpy(n.arg_bytes.data() + at, op.args[i].data, op.args[i].size);
        n.args[i].size = op.args[i].size;
        at += op.args[i].size;
    }
    at = 0;
    for (uint32_t i = 0; i < op.num_args; ++i) {
        n.args[i].data = n.arg_bytes.data() + at;
        at += op.args[i].size;
    }
    return n;
}

void op_of(const GraphNode &n, Op *op, backend::Event *event) {
    op->kind = n.kind;
    op->origin = OpOrigin::GraphLaunch;
    op->kernel = n.kernel.get();
    op->dims = n.kernel ? &n.dims : nullptr;
    op->args = n.args.data();
    op->num_args = uint32_t(n.args.size());
    op->event = event;
    op->dst = n.dst;
    op->src = n.src;
    op->bytes = n.bytes;
    op->value = n.value;
    op->fn = n.fn;
    op->user_data = n.user_data;
    // A graph's alloc and free: ordering points on its block (core/capture/graph_blocks.h).
    op->graph_block = n.kind == OpKind::MemAlloc || n.kind == OpKind::MemFree;
}

}  // namespace qd::core
