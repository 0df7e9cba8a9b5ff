// The one body of `qd demo`: the workload on a stream of a context, run serially and with
// qd_launch_parallel, checked bit for bit and timed. The kernel is passed in: the CPU demo's host
// function (qd.cpp) or the GPU demo's PTX kernel (gpu_demo.cpp).
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "demo_common.h"

namespace qd_tool {

// What a demo runs: a kernel of the context taking one TaskArgs (demo_common.h).
struct DemoKernel {
    qd_kernel kernel = 0;
    // The demo's first line: "qd demo on <title>".
    std::string title;
    // Logistic map steps per element so that one task takes about options.task_ms; called once
    // the input is on the device (input, output: the device buffers).
    std::function<uint32_t(qd_stream stream, uint64_t input, uint64_t output)> iterations;
};

// The demo's input: deterministic values in [0, 1), one slice of kSliceElements per task.
std::vector<double> demo_input(const DemoOptions &options);

// Runs the demo on a stream of its own in ctx and prints it (with options.graph_dot set: writes
// the graph of its parallel run instead, write_parallel_graph_dot); 0 when the serial and parallel
// results are bit-identical, 1 when they differ. The caller keeps and destroys the kernel.
int run_demo_body(qd_context ctx, const DemoOptions &options, const std::vector<double> &input,
                  const DemoKernel &kernel);

}  // namespace qd_tool
