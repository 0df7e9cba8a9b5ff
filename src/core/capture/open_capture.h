// An open capture of a CaptureRouter (core/capture/capture.h): its lanes, the graph it is
// recording, the bodies of its open conditionals, and its native driver capture. Shared by the
// router's files only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/capture/capture.h"
#include "core/capture/conditional.h"

namespace qd::core {

// What one lane records into: the capture's graph (the root frame) or the body of an open
// conditional (core/capture/conditional.h).
struct CaptureFrame {
    std::shared_ptr<GraphData> data;
    std::vector<int32_t> tails;  // per lane of the capture: its last node here, -1 when none
    std::vector<int32_t> prev;   // per node: the previous node of its lane
    // A body: the conditional, which of its bodies this is, the lane (stream) that opened it,
    // and the frame that holds the conditional's node. The root frame has none of these.
    std::shared_ptr<Conditional> cond;
    uint32_t branch = 0;
    uint32_t owner = 0;
    uint64_t native_handle = 0;  // a native capture's conditional handle (qd_conditional_handle)
    CaptureFrame *parent = nullptr;

    int32_t tail(uint32_t lane) const { return lane < tails.size() ? tails[lane] : -1; }
    void set_tail(uint32_t lane, int32_t node) {
        if (lane >= tails.size()) tails.resize(lane + 1, -1);
        tails[lane] = node;
    }
};

// Has `lane` joined back to `owner` in frame f: its last node there (if any) is an ancestor of
// owner's last node there (conditionals.cpp)?
bool joined_back(const CaptureFrame &f, uint32_t owner, uint32_t lane);

struct CaptureRouter::Capture {
    uint64_t origin_handle = 0;
    std::vector<std::shared_ptr<Stream>> lanes;  // [0] is the origin
    std::vector<uint64_t> lane_handles;          // 0 when unknown (qd_launch_parallel's)
    // The frames: [0] the root (the capture's graph), then each open body, innermost last.
    std::vector<std::unique_ptr<CaptureFrame>> frames;
    std::vector<CaptureFrame *> lane_frame;     // per lane: null once it left (its body closed)
    std::vector<std::shared_ptr<Stream>> held;  // leases given back during the capture
    std::unordered_map<const backend::Kernel *, std::shared_ptr<Kernel>> kernels;
    // Native capture: the pooled events recorded in it (back to the pool at the end), and the
    // driver capture. Declared last, destroyed first: an abandoned driver capture ends while
    // its streams are still alive.
    std::vector<std::shared_ptr<backend::Event>> proxies;
    std::unique_ptr<backend::Capture> native;

    Capture() {
        frames.push_back(std::make_unique<CaptureFrame>());
        frames[0]->data = std::make_shared<GraphData>();
    }
    CaptureFrame &root() { return *frames[0]; }
};

}  // namespace qd::core
