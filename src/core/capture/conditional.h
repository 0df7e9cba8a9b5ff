// Conditionals (qd.h, "Graphs", "Conditionals"): a node of a graph whose bodies are graphs of
// their own, filled by capture (conditionals.cpp) and, where no driver graph runs them, decided
// and run on the host by a replay's host task (inline_replay.cpp).
//
// The capture keeps one frame per open body (open_capture.h): a lane (stream) of the capture
// records into the frame it is in; qd_stream_begin_conditional puts the conditional's node in
// the stream's frame and opens a frame for its first body; a stream that joins a body (a wait
// on a record made in it) is in that body's frame, and leaves the capture when the body
// closes (it must have joined back). A wait across frames is refused: a body depends only on
// what is inside it, and the node itself orders it after the work before.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/capture/graph.h"

namespace qd::core {

struct Conditional {
    qd_conditional_kind kind = QD_CONDITIONAL_IF;
    uint32_t num_cases = 0;
    uint64_t condition = 0;  // the condition word's address; 0: the kernels set the value
    // One per body (IF, WHILE: 1; IF_ELSE: 2; SWITCH: num_cases). Filled while the capture is
    // open, immutable once it ended.
    std::vector<std::shared_ptr<GraphData>> bodies;
};

// How many bodies a conditional of `kind` has.
uint32_t body_count(qd_conditional_kind kind, uint32_t num_cases);

// The host task that decides and runs one conditional node of a replay (inline_replay.cpp):
// queued as a HostFn with fn run_conditional and user_data a ConditionalRun, which the router
// keeps until the task ran or the context drained (so a task that never runs leaks nothing).
struct ConditionalRun {
    std::shared_ptr<const Conditional> cond;
    Context *ctx = nullptr;  // outlives the task: its destroy drains the streams first
};
void run_conditional(void *run);

// Runs `cond` now on the calling thread (a worker running a replay's host task): reads the
// condition word, runs the chosen body's operations in their captured order, nested
// conditionals the same way. Stops at the context's loss (a body's kernel faulted).
void run_conditional_inline(const Conditional &cond, Context &ctx);

}  // namespace qd::core
