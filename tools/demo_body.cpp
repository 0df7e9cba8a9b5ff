// The one body of `qd demo` (demo_body.h).
#include "demo_body.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
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
