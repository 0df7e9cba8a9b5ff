// The one body of `qd demo` (demo_body.h).
#include "demo_body.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qd_tool {

std::vector<double> demo_input(const DemoOptions &options) {
    const uint32_t elements = options.groups * options.tasks_per_group * kSliceElements;
    std::vector<double> input(elements);
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (double &value : input) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        value = static_cast<double>(state >> 11) * 0x1.0p-53;
    }
    return input;
}

namespace {

// qd graph dot: the demo's parallel run (the output zeroed, one qd_launch_parallel of every task,
// the results copied back) captured on `stream` as a graph, which is written as DOT and
// destroyed: nothing of it runs. "-" writes it to standard output (through a temporary file:
// qd_graph_debug_dot writes a path).
void write_parallel_graph_dot(qd_context ctx, qd_stream stream, qd_kernel kernel,
                              const std::vector<TaskArgs> &tasks,
                              const std::vector<uint32_t> &groups, uint64_t device_output,
                              uint64_t output_bytes, const DemoOptions &options) {
    std::vector<qd_arg> args(tasks.size());
    std::vector<qd_task> launches(tasks.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
        args[i] = qd_arg{&tasks[i], sizeof(TaskArgs)};
        qd_task launch = QD_TASK_INIT;
        launch.group = groups[i];
        launch.kernel = kernel;
        launch.args = &args[i];
        launch.num_args = 1;
        launches[i] = launch;
    }
    // Pinned: a driver capture takes a copy to pageable memory badly (the graph is never run).
    void *results = nullptr;
    check(qd_host_alloc(ctx, output_bytes, &results), "qd_host_alloc");
    qd_graph graph = 0;
    check(qd_stream_begin_capture(stream), "qd_stream_begin_capture");
    check(qd_memset_async(stream, device_output, 0, output_bytes), "qd_memset_async");
    check(qd_launch_parallel(stream, launches.data(), static_cast<uint32_t>(launches.size())),
          "qd_launch_parallel");
    check(
        qd_memcpy_async(stream, reinterpret_cast<uintptr_t>(results), device_output, output_bytes),
        "qd_memcpy_async");
    check(qd_stream_end_capture(stream, &graph), "qd_stream_end_capture");
    std::string path = options.graph_dot;
    const bool to_stdout = path == "-";
    if (to_stdout) {
        char name[] = "/tmp/qd-graph-dot-XXXXXX";
        const int fd = ::mkstemp(name);
        if (fd < 0) throw std::runtime_error("cannot create a temporary file in /tmp");
        ::close(fd);
        path = name;
    }
    const qd_status status = qd_graph_debug_dot(graph, path.c_str(), options.graph_dot_flags);
    const std::string message = status == QD_SUCCESS ? "" : qd_last_error_message();
    check(qd_graph_destroy(graph), "qd_graph_destroy");
    check(qd_host_free(ctx, results), "qd_host_free");  // the graph never ran
    if (status == QD_SUCCESS && to_stdout) {
        std::ifstream in(path);
        std::cout << in.rdbuf();
        std::cout.flush();
    }
    if (to_stdout) std::remove(path.c_str());
    if (status != QD_SUCCESS)
        throw QdError(std::string("qd_graph_debug_dot: ") + qd_status_name(status) + ": " +
                      message);
    if (!to_stdout)
        std::printf("wrote %s: the graph of %u groups x %u tasks (qd_launch_parallel)\n",
                    path.c_str(), options.groups, options.tasks_per_group);
}

}  // namespace

int run_demo_body(qd_context ctx, const DemoOptions &options, const std::vector<double> &input,
                  const DemoKernel &demo) {
    const uint32_t task_count = options.groups * options.tasks_per_group;
    const uint32_t elements = task_count * kSliceElements;
    const qd_kernel kernel = demo.kernel;
    qd_stream stream = 0;
    check(qd_stream_create(ctx, nullptr, &stream), "qd_stream_create");

    // Device buffers, allocated and filled in stream order.
    const uint64_t input_bytes = uint64_t{elements} * sizeof(double);
    const uint64_t output_bytes = uint64_t{task_count} * sizeof(double);
    uint64_t device_input = 0, device_output = 0;
    check(qd_mem_alloc_async(stream, input_bytes, &device_input), "qd_mem_alloc_async");
    check(qd_mem_alloc_async(stream, output_bytes, &device_output), "qd_mem_alloc_async");
    check(qd_memcpy_async(stream, device_input, reinterpret_cast<uintptr_t>(input.data()),
                          input_bytes),
          "qd_memcpy_async");
    const uint32_t iterations = demo.iterations(stream, device_input, device_output);

    // Task t of group g works on slice g * tasks_per_group + t and follows task t - 1.
    std::vector<TaskArgs> tasks;
    std::vector<uint32_t> groups;
    for (uint32_t g = 0; g < options.groups; ++g) {
        for (uint32_t t = 0; t < options.tasks_per_group; ++t) {
            uint32_t index = g * options.tasks_per_group + t;
            tasks.push_back(TaskArgs{device_input, device_output, index * kSliceElements,
                                     kSliceElements, index, t == 0 ? kNoPrevious : index - 1,
                                     iterations});
            groups.push_back(g);
        }
    }

    if (!options.graph_dot.empty()) {
        write_parallel_graph_dot(ctx, stream, kernel, tasks, groups, device_output, output_bytes,
                                 options);
        check(qd_mem_free_async(stream, device_input), "qd_mem_free_async");
        check(qd_mem_free_async(stream, device_output), "qd_mem_free_async");
        check(qd_stream_synchronize(stream), "qd_stream_synchronize");
        check(qd_stream_destroy(stream), "qd_stream_destroy");
        return 0;
    }

    auto run = [&](bool parallel, std::vector<double> &results) {
        check(qd_memset_async(stream, device_output, 0, output_bytes), "qd_memset_async");
        RunResult timing = timed_run(ctx, stream, kernel, tasks, groups, parallel);
        results.assign(task_count, 0.0);
        check(qd_memcpy_async(stream, reinterpret_cast<uintptr_t>(results.data()), device_output,
                              output_bytes),
              "qd_memcpy_async");
        check(qd_stream_synchronize(stream), "qd_stream_synchronize");
        return timing;
    };

    std::printf("qd demo on %s\n", demo.title.c_str());
    std::printf("  %u groups x %u tasks, %u elements x %u logistic steps per task (~%.1f ms)\n",
                options.groups, options.tasks_per_group, kSliceElements, iterations,
                options.task_ms);

    std::vector<double> serial_results, parallel_results;
    RunResult serial = run(false, serial_results);
    RunResult parallel = run(true, parallel_results);

    check(qd_mem_free_async(stream, device_input), "qd_mem_free_async");
    check(qd_mem_free_async(stream, device_output), "qd_mem_free_async");
    check(qd_stream_synchronize(stream), "qd_stream_synchronize");
    check(qd_stream_destroy(stream), "qd_stream_destroy");

    std::printf("  serial   (qd_launch, one stream):          %8.2f ms (host %8.2f ms)\n",
                serial.gpu_ms, serial.host_ms);
    std::printf("  parallel (qd_launch_parallel, %2u groups):  %8.2f ms (host %8.2f ms)\n",
                options.groups, parallel.gpu_ms, parallel.host_ms);
    std::printf("  speedup: %.2fx\n", serial.gpu_ms / std::max(parallel.gpu_ms, 1e-3));

    size_t mismatches = 0;
    for (uint32_t i = 0; i < task_count; ++i) {
        if (std::memcmp(&serial_results[i], &parallel_results[i], sizeof(double)) == 0) continue;
        if (mismatches++ < 5)
            std::printf("  MISMATCH task %u: serial %.17g, parallel %.17g\n", i, serial_results[i],
                        parallel_results[i]);
    }
    if (mismatches != 0) {
        std::printf("FAIL: %zu of %u results differ between the serial and parallel runs\n",
                    mismatches, task_count);
        return 1;
    }
    std::printf("OK: all %u results are bit-identical between the serial and parallel runs\n",
                task_count);
    return 0;
}

}  // namespace qd_tool
