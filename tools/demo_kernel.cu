// The GPU kernel of `qd demo` (tools/gpu_demo.cpp, run_gpu_demo): the CPU demo's logistic_task, line
// for line, as a one-thread kernel. Launched like the CPU task (one block of one thread, the
// TaskArgs struct as its only argument), so the demo's timed_run serves both backends; the
// parallelism it shows is that of the groups, on concurrent streams.
// Built to PTX for compute_75 (every NVIDIA GPU from Turing on JIT-compiles it) and embedded in
// the qd tool.
#include <stdint.h>

struct TaskArgs {         // the layout of TaskArgs in tools/demo_common.h
    uint64_t input;       // double[] of every slice
    uint64_t output;      // double[], one sum per task
    uint32_t first;       // this task's first input element
    uint32_t count;       // elements in this task's slice
    uint32_t task;        // this task's output index
    uint32_t previous;    // output index of the previous task of the group, or UINT32_MAX
    uint32_t iterations;  // logistic map steps per element
};

__device__ double logistic_sum(const double *input, uint32_t count, double carry,
                               uint32_t iterations) {
    double sum = 0.0;
    for (uint32_t i = 0; i < count; ++i) {
        double x = fmod(input[i] + carry, 1.0) * 0.98 + 0.01;  // keep x inside (0, 1)
        for (uint32_t step = 0; step < iterations; ++step) x = 3.99 * x * (1.0 - x);
        sum += x;
    }
    return sum;
}

extern "C" __global__ void qd_demo_logistic_task(TaskArgs t) {
    const double *input = reinterpret_cast<const double *>(t.input);
    double *output = reinterpret_cast<double *>(t.output);
    const double carry = t.previous == 0xffffffffu ? 0.0 : output[t.previous] * 1e-3;
    output[t.task] = logistic_sum(input + t.first, t.count, carry, t.iterations);
}
