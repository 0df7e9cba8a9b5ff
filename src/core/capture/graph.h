// A captured graph (qd.h, "Graphs"): the nodes a capture recorded, and the Graph object a
// qd_graph names, which replays them (graph.cpp) or launches the driver graph made from them.
//
// One builder turns operations into nodes and nodes back into operations (nodes.cpp): a node
// keeps the fields of the Op it was recorded from (with its own copy of the kernel and of the
// argument bytes), and a replay submits the same Op again, as OpOrigin::GraphLaunch.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/capture/rebound_args.h"
#include "core/context.h"
#include "core/submit.h"

namespace qd::core {

struct Conditional;

// A copy of `args` (qd_launch's copy at capture).
void copy_args(const qd_arg *args, uint32_t num_args, std::vector<uint8_t> *bytes,
               std::vector<qd_arg> *out);

// One recorded operation.
struct GraphNode {
    OpKind kind = OpKind::Launch;
    uint32_t lane = 0;
    // Wait: the index of the Record node it depends on; MemFree: of the MemAlloc node of its
    // block.
    int32_t dep = -1;
    // Launch.
    std::shared_ptr<Kernel> kernel;
    backend::LaunchDims dims{};
    std::vector<uint8_t> arg_bytes;
    std::vector<qd_arg> args;  // points into arg_bytes (fixed once the node is complete)
    // Its launch attributes (qd_launch_ex), given again by every replay; empty for none. Never
    // a completion event (refused on a capturing stream).
    backend::LaunchAttrs attrs{};
    // Memcpy, Memset; MemAlloc and MemFree: dst is the graph's block, bytes its size (alloc).
    uint64_t dst = 0, src = 0, bytes = 0;
    uint8_t value = 0;
    // HostFn.
    qd_host_fn fn = nullptr;
    void *user_data = nullptr;
    // A conditional (kind HostFn, fn null): its bodies (core/capture/conditional.h). A replay
    // that re-queues operations queues it as one host task that decides and runs a body inline.
    std::shared_ptr<const Conditional> cond;
};

class GraphBlocks;  // core/capture/graph_blocks.h

// What a capture recorded; immutable once the capture ended (shared by graphs and replays).
struct GraphData {
    uint32_t lanes = 1;
    std::vector<GraphNode> nodes;
    bool has_conditionals = false;  // a node (here or in a body) is a conditional
    // The blocks its MemAlloc nodes make (null when none), held while the data is. Only a
    // graph's root data has them (a conditional's body allocates nothing).
    std::shared_ptr<GraphBlocks> blocks;
    // The kernel nodes (qd_graph_kernel_node_count): the index in `nodes` of each Launch, in the
    // order the launches were queued during the capture. Only the root data's own launches: a
    // launch inside a conditional's body is no kernel node (its body's list stays empty).
    std::vector<uint32_t> launches;
};

// The node of `op` (its kind and fields; a launch's argument bytes copied), on `lane`, with
// `kernel` (a Launch's, owned by the graph) and `dep` (a Wait's Record node) given by the
// capture. The Op's record and wait events are the capture's business, not the node's.
GraphNode node_of(const Op &op, uint32_t lane, std::shared_ptr<Kernel> kernel, int32_t dep);
// The replay of `node` on `stream`: the Op it was recorded from, as OpOrigin::GraphLaunch,
// pointing into the node (which must outlive the submit); a Record or Wait gets `event`.
void op_of(const GraphNode &node, Op *op, backend::Event *event);

class Graph : public Object {
  public:
    static constexpr Tag kTag = Tag::Graph;

    Graph(std::shared_ptr<Context> ctx, std::shared_ptr<const GraphData> data,
          std::shared_ptr<backend::Graph> native)
        : ctx(std::move(ctx)), data_(std::move(data)), native_(std::move(native)) {}

    // qd_graph_launch: `stream` is of this graph's context and usable. On a capturing stream
    // the nodes as they are now (rebound values included) are re-issued there and so recorded
    // into its capture (child_graph.cpp), never the driver graph.
    qd_status launch(Stream &stream);
    // qd_graph_upload (graph_upload.cpp): `stream` is of this graph's context, usable and not
    // capturing.
    qd_status upload(Stream &stream);
    // qd_graph_update: the shapes must match (QD_ERROR_INVALID_OPERATION names the difference).
    // The graph takes from's values as they are now, its rebound arguments included.
    qd_status update_from(const Graph &from);
    // qd_graph_kernel_node_count.
    uint32_t kernel_node_count() const;
    // qd_graph_set_kernel_args (graph_rebind.cpp): `args` already checked as qd_launch checks
    // them; the count and every size must equal the node's (QD_ERROR_INVALID_ARGUMENT names
    // the first difference, nothing changes).
    qd_status set_kernel_args(uint32_t node, const qd_arg *args, uint32_t num_args);

    std::shared_ptr<const GraphData> data() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return data_;
    }
    // What a qd_graph_update from this graph takes, under one lock: the nodes, a copy of the
    // rebound argument values (null: none rebound since the capture or the last update) and the
    // instantiated driver graph (null: recorded only).
    void values(std::shared_ptr<const GraphData> *data, std::shared_ptr<ReboundArgs> *rebound,
                std::shared_ptr<backend::Graph> *native) const {
        std::lock_guard<std::mutex> lock(mutex_);
        *data = data_;
        *rebound = rebound_ ? std::make_shared<ReboundArgs>(*rebound_) : nullptr;
        *native = native_;
    }

    std::shared_ptr<Context> ctx;

  private:
    // One lock for all of it. A rebind or an update holds it for the whole call, the driver
    // graph's change included, so rebinds and updates are serialised and the driver graph and
    // the recorded values change together; a replay holds it only to take what it launches
    // (the driver graph's own lock orders its launches after such a change).
    mutable std::mutex mutex_;
    std::shared_ptr<const GraphData> data_;
    // The kernel nodes' argument values (rebound_args.h), made by the first rebind after the
    // capture or an update that brought none. Held besides only by the replays that re-issue
    // the nodes, which take and let go of it under mutex_; written in place while the graph
    // alone holds it.
    std::shared_ptr<ReboundArgs> rebound_;
    std::shared_ptr<backend::Graph> native_;
};

}  // namespace qd::core
