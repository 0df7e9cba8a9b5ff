// The definitions of demo_common.h: what qd.cpp (qd info, the CPU demo) and gpu_demo.cpp (the
// GPU demo) share.
#include "demo_common.h"

#include <chrono>
#include <string>
#include <vector>

namespace qd_tool {

// The last error message is read at once: it is thread-local and the next failing call on this
// thread overwrites it.
void check(qd_status status, const char *call) {
    if (status == QD_SUCCESS) return;
    throw QdError(std::string(call) + " failed: " + qd_status_name(status) + ": " +
                  qd_last_error_message());
}

RunResult timed_run(qd_context ctx, qd_stream stream, qd_kernel kernel,
                    const std::vector<TaskArgs> &tasks, const std::vector<uint32_t> &groups,
                    bool parallel) {
    qd_event start = 0, end = 0;
    check(qd_event_create(ctx, QD_EVENT_TIMING, &start), "qd_event_create");
    check(qd_event_create(ctx, QD_EVENT_TIMING, &end), "qd_event_create");

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

    auto host_start = std::chrono::steady_clock::now();
    check(qd_event_record(stream, start), "qd_event_record");
    if (parallel) {
        check(qd_launch_parallel(stream, launches.data(), static_cast<uint32_t>(launches.size())),
              "qd_launch_parallel");
    } else {
        for (const qd_task &launch : launches)
            check(qd_launch(stream, kernel, nullptr, launch.args, launch.num_args), "qd_launch");
    }
    check(qd_event_record(stream, end), "qd_event_record");
    check(qd_stream_synchronize(stream), "qd_stream_synchronize");
    auto host_end = std::chrono::steady_clock::now();

    float gpu_ms = 0.0f;
    check(qd_event_elapsed_ms(start, end, &gpu_ms), "qd_event_elapsed_ms");
    check(qd_event_destroy(start), "qd_event_destroy");
    check(qd_event_destroy(end), "qd_event_destroy");
    return {gpu_ms, std::chrono::duration<double, std::milli>(host_end - host_start).count()};
}

}  // namespace qd_tool
