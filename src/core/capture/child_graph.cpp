// A graph launched on a capturing stream (qd.h, "Graphs", "Child graphs"): the child's nodes as
// they are at the launch, inlined into the capture. Graph::launch re-issues them through the
// chokepoint on the capturing stream and on pooled streams that join the capture by their first
// wait (as a replay outside a capture would run them), so the router records them like any
// other operation: lane 0 of the child at the stream's place, each other lane a new lane of the
// capture, every cross-lane edge a record and a wait of the capture. This file says beforehand,
// under the router's lock, what such a launch cannot record, so a refused launch records
// nothing.
#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/graph_blocks.h"
#include "core/capture/open_capture.h"

namespace qd::core {

qd_status CaptureRouter::check_child(const Stream &stream, const GraphData &child) const {
    if (child.blocks)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "qd_graph_launch on a capturing stream of a graph that allocates "
                    "(qd_mem_alloc_async inside its capture): its blocks are its own and cannot "
                    "be made by another graph's replays; nothing was recorded, the capture goes "
                    "on (capture the allocation in the parent's capture instead)");
    if (child.has_conditionals)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "qd_graph_launch on a capturing stream of a graph with conditionals: a "
                    "conditional node cannot be copied into another capture; nothing was "
                    "recorded, the capture goes on");
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it == lanes_.end()) return QD_SUCCESS;  // the capture ended meanwhile: a plain replay
    const Capture &c = *it->second.capture;
    if (!c.native || c.lane_frame[it->second.lane] == c.frames[0].get()) return QD_SUCCESS;
    // A native capture's body allows no host functions (router.cpp, submit_native).
    for (const GraphNode &n : child.nodes)
        if (n.kind == OpKind::HostFn)
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "qd_graph_launch of a graph with host functions on a stream that records "
                        "into a conditional's body of a driver graph: the driver allows no host "
                        "functions inside conditional bodies; nothing was recorded, the capture "
                        "goes on");
    return QD_SUCCESS;
}

}  // namespace qd::core
