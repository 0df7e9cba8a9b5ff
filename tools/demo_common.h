// What the parts of `qd demo` share: the options, the task layout, the context owner, the error
// check and the timed run. qd.cpp holds the CPU demo's kernel, gpu_demo.cpp the GPU demo's,
// demo_body.* the one body both run, and demo_common.cpp defines what is declared here. Like
// the rest of the tool, only the public C API is used.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace qd_tool {

// A failed qd call. The message already carries the status name and qd_last_error_message().
struct QdError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws QdError unless status is QD_SUCCESS. The last error message is read at once: it is
// thread-local and the next failing call on this thread overwrites it.
void check(qd_status status, const char *call);

struct DemoOptions {
    std::optional<qd_backend> backend;  // forced with --backend; otherwise the best available
    uint32_t groups = 16;
    uint32_t tasks_per_group = 4;
    double task_ms = 3.0;
    // qd graph dot: capture the parallel run as a graph and write it as DOT to this path ("-":
    // standard output) instead of running the demo; graph_dot_flags: qd_graph_debug_dot's.
    std::string graph_dot;
    uint32_t graph_dot_flags = 0;
};

// Owns a context; destroying it releases every stream, event, kernel and allocation in it, so
// an error anywhere in the demo cleans up by unwinding.
class Context {
  public:
    explicit Context(qd_backend backend) {
        qd_context_desc desc = QD_CONTEXT_DESC_INIT;
        desc.backend = static_cast<uint32_t>(backend);
        check(qd_context_create(&desc, &handle_), "qd_context_create");
    }
    ~Context() { qd_context_destroy(handle_); }
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;
    qd_context get() const { return handle_; }

  private:
    qd_context handle_ = 0;
};

// One task of the workload. Each task owns a slice of the input: it runs a logistic map from
// every element (seeded also by the previous task of its group, so tasks of one group depend on
// their order) and writes one sum. Groups are independent, which is what qd_launch_parallel
// runs concurrently. The GPU kernel (demo_kernel.cu) takes the same layout.
struct TaskArgs {
    uint64_t input;       // address of the whole input (double[])
    uint64_t output;      // address of the whole output (double[], one per task)
    uint32_t first;       // index of this task's first input element
    uint32_t count;       // elements in this task's slice
    uint32_t task;        // this task's output index
    uint32_t previous;    // output index of the previous task of the group, or kNoPrevious
    uint32_t iterations;  // logistic map steps per element
};
constexpr uint32_t kNoPrevious = UINT32_MAX;
constexpr uint32_t kSliceElements = 256;

struct RunResult {
    double gpu_ms;   // between the timing events, on the device's clock
    double host_ms;  // around the launch and synchronize, on the host's steady clock
};

// Queues every task between two timing events on `stream` and waits for them: serially with
// qd_launch (one stream, task after task) or with one qd_launch_parallel (a pooled stream per
// group, forked from and joined back into `stream`).
RunResult timed_run(qd_context ctx, qd_stream stream, qd_kernel kernel,
                    const std::vector<TaskArgs> &tasks, const std::vector<uint32_t> &groups,
                    bool parallel);

// The demo on a GPU backend (gpu_demo.cpp), or nullopt, with a line saying why, when this qd
// carries no kernel for it; the caller then runs the CPU demo.
std::optional<int> run_gpu_demo(qd_backend backend, const DemoOptions &options);

}  // namespace qd_tool
