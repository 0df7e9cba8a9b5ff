// The argument values of a graph's kernel nodes as qd_graph_set_kernel_args left them
// (core/capture/graph.h, README "Rebinding a kernel node").
//
// One block for every kernel node, laid out once from the sizes the capture recorded (every
// rebind must match them) and filled with the captured values; a rebind writes one node's
// values in place, so a rebind whose sizes match allocates nothing. The graph holds it through
// a shared_ptr, and so does a replay that re-issues the nodes while its batch is submitted: a
// rebind that finds it shared (a replay still reading it) writes a copy and the graph takes the
// copy, so the replay keeps the values it took.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace qd::core {

struct GraphData;

class ReboundArgs {
  public:
    // Every kernel node of `data` (GraphData::launches) with its captured values, none rebound.
    explicit ReboundArgs(const GraphData &data);
    // A copy whose argument list points into its own bytes.
    ReboundArgs(const ReboundArgs &other);
    ReboundArgs &operator=(const ReboundArgs &) = delete;

    // Kernel node k's values (as captured until it is rebound).
    const qd_arg *args(uint32_t k) const { return args_.data() + first_[k]; }
    uint32_t num_args(uint32_t k) const { return first_[k + 1] - first_[k]; }
    // Whether node k was rebound since the capture (or since the update that brought these).
    bool rebound(uint32_t k) const { return rebound_[k] != 0; }
    uint32_t count() const { return uint32_t(rebound_.size()); }

    // Node k takes `args`: the count and every size already checked against the node's. Never
    // fails, never allocates.
    void write(uint32_t k, const qd_arg *args);

  private:
    std::vector<uint8_t> bytes_;
    std::vector<qd_arg> args_;      // every node's, node after node; each points into bytes_
    std::vector<uint32_t> first_;   // per node, its first entry in args_ (count + 1 entries)
    std::vector<uint8_t> rebound_;  // per node
};

}  // namespace qd::core
