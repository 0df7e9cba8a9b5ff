// The one builder between operations and graph nodes (core/capture/graph.h): a capture records
// an Op as a node, a replay turns the node back into the same Op.
#include <cstring>

#include "core/capture/graph.h"

namespace qd::core {

void copy_args(const qd_arg *args, uint32_t num_args, std::vector<uint8_t> *bytes,
               std::vector<qd_arg> *out) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < num_args; ++i) total += args[i].size;
    bytes->resize(total);
    out->resize(num_args);
    uint64_t at = 0;
    for (uint32_t i = 0; i < num_args; ++i) {
        std::memcpy(bytes->data() + at, args[i].data, args[i].size);
        (*out)[i].size = args[i].size;
        (*out)[i].data = bytes->data() + at;
        at += args[i].size;
    }
}

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
    if (op.attrs) n.attrs = *op.attrs;
    copy_args(op.args, op.num_args, &n.arg_bytes, &n.args);
    return n;
}

void op_of(const GraphNode &n, Op *op, backend::Event *event) {
    op->kind = n.kind;
    op->origin = OpOrigin::GraphLaunch;
    op->kernel = n.kernel.get();
    op->dims = n.kernel ? &n.dims : nullptr;
    op->attrs = n.attrs.empty() ? nullptr : &n.attrs;
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
