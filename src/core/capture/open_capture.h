// An open capture of a CaptureRouter (core/capture/capture.h): its lanes, the graph it is
// recording, and its native driver capture. Shared by the router's files only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/capture/capture.h"

namespace qd::core {

struct CaptureRouter::Capture {
    uint64_t origin_handle = 0;
    std::vector<std::shared_ptr<Stream>> lanes;  // [0] is the origin
    std::vector<uint64_t> lane_handles;          // 0 when unknown (qd_launch_parallel's)
    std::vector<int32_t> tails;                  // last node of each lane, -1 when none
    std::vector<int32_t> prev;                   // per node: the previous node of its lane
    std::vector<std::shared_ptr<Stream>> held;   // leases given back during the capture
    std::shared_ptr<GraphData> data = std::make_shared<GraphData>();
    std::unordered_map<const backend::Kernel *, std::shared_ptr<Kernel>> kernels;
    // Native capture: the pooled events recorded in it (back to the pool at the end), and the
    // driver capture. Declared last, destroyed first: an abandoned driver capture ends while
    // its streams are still alive.
    std::vector<std::shared_ptr<backend::Event>> proxies;
    std::unique_ptr<backend::Capture> native;
};

}  // namespace qd::core
