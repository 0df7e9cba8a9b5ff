// qd: the command line tool of libqd.
//
//   qd info                     library version, and every backend with its devices
//   qd demo [--backend B] ...   a stream-parallel workload on the best backend, checked and timed
//   qd bench [--json FILE] ...  the benchmark suites that apply to this machine (bench_cmd.cpp)
//   qd graph dot [-o FILE] ...  the demo's parallel run captured as a graph, written as DOT
//   qd --help
//
// The tool uses only the public C API (include/qd/qd.h), like any other user of libqd.
#include <qd/qd.h>

#include "bench_cmd.h"
#include "trace_view.h"
#include "demo_body.h"
#include "demo_common.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace qd_tool;

const char *const kUsageHead =
    "usage: qd <command> [options]\n"
    "\n"
    "commands:\n"
    "  info                 print the library version and, for each backend (cpu, cuda, hip,\n"
    "                       ...), whether it is available and what its devices are\n"
    "  demo [options]       run a stream-parallel workload on the best available backend\n"
    "                       (the first GPU backend with a device, else cpu), once serially\n"
    "                       and once with qd_launch_parallel; check the results match bit for\n"
    "                       bit and print the speedup\n"
    "      --backend NAME           use this backend (a name qd info prints) instead of the\n"
    "                               best available one\n"
    "      --groups N               independent groups of tasks (default 16)\n"
    "      --tasks N                tasks per group, run in order (default 4)\n"
    "      --task-ms MS             target time of one task (default 3)\n"
    "      --trace FILE.json        write the demo's timeline (as QD_TRACE=FILE.json does)\n"
    "  graph dot [options]  capture the demo's parallel run (the output zeroed, one\n"
    "                       qd_launch_parallel of every task, the results copied back) as a\n"
    "                       graph and write it as Graphviz DOT (qd_graph_debug_dot); nothing\n"
    "                       runs. Takes demo's --backend, --groups and --tasks, and:\n"
    "      -o FILE.dot              write it there (default: - for standard output)\n"
    "      --verbose                label launches with their argument sizes, copies and sets\n"
    "                               with their addresses (QD_GRAPH_DOT_VERBOSE)\n"
    "  trace view TRACE.json -o PAGE.html\n"
    "                       draw a QD_TRACE timeline as one self-contained HTML page (lanes per\n"
    "                       stream, slices, the arrows from records to waits; zoom and hover)\n";
const char *const kUsageTail =
    "\n"
    "  -h, --help           print this help\n"
    "\n"
    "Exit status: 0 success, 1 a qd call failed, the results did not match or a benchmark\n"
    "suite could not run (a missed bar is not a failure), 2 usage error.\n";
const std::string kUsage = std::string(kUsageHead) + kBenchUsage + kUsageTail;

// Every backend the library knows, built in or not: qd_backend_name names them from
// QD_BACKEND_CPU up (qd.h).
std::vector<qd_backend> known_backends() {
    std::vector<qd_backend> all;
    for (uint32_t b = QD_BACKEND_CPU; std::strcmp(qd_backend_name(qd_backend(b)), "unknown"); ++b)
        all.push_back(qd_backend(b));
    return all;
}

std::optional<qd_backend> parse_backend(const std::string &name) {
    for (qd_backend backend : known_backends())
        if (name == qd_backend_name(backend)) return backend;
    return std::nullopt;
}

// Devices of a backend, or the reason it has none (the loader's or driver's message).
struct BackendProbe {
    uint32_t devices = 0;
    std::string unavailable_reason;  // empty when the backend is available
};

BackendProbe probe(qd_backend backend) {
    BackendProbe result;
    qd_status status = qd_device_count(backend, &result.devices);
    if (status != QD_SUCCESS) {
        result.devices = 0;
        result.unavailable_reason =
            std::string(qd_status_name(status)) + ": " + qd_last_error_message();
    }
    return result;
}

// ------------------------------------------------------------------------------------------
// qd info
// ------------------------------------------------------------------------------------------

std::string format_memory(uint64_t bytes) {
    if (bytes == 0) return "unknown";
    char text[64];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1u << 30));
    return text;
}

int run_info() {
    uint32_t version = qd_version();
    std::printf("qd %u.%u.%u (header %d.%d.%d)\n", version >> 16, (version >> 8) & 0xff,
                version & 0xff, QD_VERSION_MAJOR, QD_VERSION_MINOR, QD_VERSION_PATCH);
    if (version != static_cast<uint32_t>(QD_VERSION))
        std::printf("warning: the library and the header this tool was built with differ\n");

    int exit_status = 0;
    for (qd_backend backend : known_backends()) {
        BackendProbe found = probe(backend);
        if (!found.unavailable_reason.empty()) {
            std::printf("%s: unavailable (%s)\n", qd_backend_name(backend),
                        found.unavailable_reason.c_str());
            // The CPU backend is always available; anything else is a broken library.
            if (backend == QD_BACKEND_CPU) exit_status = 1;
            continue;
        }
        std::printf("%s: available, %u device%s\n", qd_backend_name(backend), found.devices,
                    found.devices == 1 ? "" : "s");
        for (uint32_t device = 0; device < found.devices; ++device) {
            qd_device_info info = QD_DEVICE_INFO_INIT;
            qd_status status = qd_device_get_info(backend, device, &info);
            if (status != QD_SUCCESS) {
                std::printf("  [%u] qd_device_get_info failed: %s: %s\n", device,
                            qd_status_name(status), qd_last_error_message());
                exit_status = 1;
                continue;
            }
            std::printf("  [%u] %s\n", device, info.name);
            if (backend == QD_BACKEND_CPU) {
                std::printf("      hardware threads:   %u\n", info.multiprocessors);
            } else {
                std::printf("      driver version:     %u\n", info.driver_version);
                std::printf("      compute capability: %u.%u\n", info.compute_major,
                            info.compute_minor);
                std::printf("      multiprocessors:    %u\n", info.multiprocessors);
            }
            std::printf("      memory:             %s\n", format_memory(info.total_memory).c_str());
        }
    }
    return exit_status;
}

// ------------------------------------------------------------------------------------------
// qd demo (the CPU part; the GPU part is gpu_demo.cpp, the body both run is demo_body.h)
// ------------------------------------------------------------------------------------------

// The CPU workload: the kernel of one task (TaskArgs, demo_common.h) as a host function.
double logistic_sum(const double *input, uint32_t count, double carry, uint32_t iterations) {
    double sum = 0.0;
    for (uint32_t i = 0; i < count; ++i) {
        double x = std::fmod(input[i] + carry, 1.0) * 0.98 + 0.01;  // keep x inside (0, 1)
        for (uint32_t step = 0; step < iterations; ++step) x = 3.99 * x * (1.0 - x);
        sum += x;
    }
    return sum;
}

extern "C" int32_t logistic_task(const qd_host_kernel_info *, void *const *args) {
    TaskArgs task;
    std::memcpy(&task, args[0], sizeof task);
    const double *input = reinterpret_cast<const double *>(static_cast<uintptr_t>(task.input));
    double *output = reinterpret_cast<double *>(static_cast<uintptr_t>(task.output));
    double carry = task.previous == kNoPrevious ? 0.0 : output[task.previous] * 1e-3;
    output[task.task] = logistic_sum(input + task.first, task.count, carry, task.iterations);
    return 0;
}

// Logistic map steps per element so that one task takes about options.task_ms here, measured
// by running one slice on this thread. Both runs use the same value, so results stay
// comparable bit for bit whatever the machine's speed.
uint32_t calibrate_iterations(const std::vector<double> &input, double task_ms) {
    const uint32_t probe_iterations = 2000;
    auto start = std::chrono::steady_clock::now();
    volatile double sink = logistic_sum(input.data(), kSliceElements, 0.0, probe_iterations);
    (void)sink;
    double probe_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    double iterations = probe_iterations * task_ms / std::max(probe_ms, 1e-3);
    return static_cast<uint32_t>(std::clamp(iterations, 10.0, 1e7));
}

int run_cpu_demo(const DemoOptions &options) {
    const std::vector<double> input = demo_input(options);
    const uint32_t iterations = calibrate_iterations(input, options.task_ms);

    Context ctx(QD_BACKEND_CPU);
    DemoKernel demo;
    check(qd_kernel_from_host_fn(ctx.get(), logistic_task, "logistic_task", &demo.kernel),
          "qd_kernel_from_host_fn");
    // Each task reads its own slice of the input and writes its own output slot (the
    // validation mode cannot see the slices: qd.h, QD_PARAM_PARTITIONED).
    check(qd_kernel_set_param_access(demo.kernel, 0, QD_PARAM_PARTITIONED),
          "qd_kernel_set_param_access");
    qd_device_info info = QD_DEVICE_INFO_INIT;
    check(qd_device_get_info(QD_BACKEND_CPU, 0, &info), "qd_device_get_info");
    char title[256];
    std::snprintf(title, sizeof title, "CPU (%s, %u hardware threads)", info.name,
                  info.multiprocessors);
    demo.title = title;
    demo.iterations = [iterations](qd_stream, uint64_t, uint64_t) { return iterations; };

    const int status = run_demo_body(ctx.get(), options, input, demo);
    check(qd_kernel_destroy(demo.kernel), "qd_kernel_destroy");
    return status;
}

int run_demo(const DemoOptions &options) {
    qd_backend backend = QD_BACKEND_CPU;
    if (options.backend) {
        backend = *options.backend;
        BackendProbe found = probe(backend);
        if (!found.unavailable_reason.empty() || found.devices == 0) {
            std::fprintf(
                stderr, "qd demo: backend %s is not available: %s\n", qd_backend_name(backend),
                found.unavailable_reason.empty() ? "no devices" : found.unavailable_reason.c_str());
            return 1;
        }
    } else {
        for (qd_backend candidate : known_backends()) {  // the first GPU backend with a device
            if (candidate != QD_BACKEND_CPU && probe(candidate).devices > 0) {
                backend = candidate;
                break;
            }
        }
    }
    if (backend != QD_BACKEND_CPU) {
        if (std::optional<int> status = run_gpu_demo(backend, options)) return *status;
    }
    return run_cpu_demo(options);
}

bool parse_count(const char *text, uint32_t low, uint32_t high, uint32_t *out) {
    char *end = nullptr;
    unsigned long value = std::strtoul(text, &end, 10);
    if (end == text || *end != '\0' || value < low || value > high) return false;
    *out = static_cast<uint32_t>(value);
    return true;
}

int usage_error(const std::string &message) {
    std::fprintf(stderr, "qd: %s\n\n%s", message.c_str(), kUsage.c_str());
    return 2;
}

// One option of qd demo (also qd graph dot's): an empty string when it was taken, else the
// usage error.
std::string parse_demo_option(const std::string &arg, const char *value, DemoOptions &options) {
    if (arg == "--backend") {
        options.backend = parse_backend(value);
        if (!options.backend) return std::string("unknown backend ") + value;
    } else if (arg == "--groups") {
        // The default stream pool has 32 streams; more groups share them round-robin.
        if (!parse_count(value, 1, 4096, &options.groups)) return "--groups takes 1..4096";
    } else if (arg == "--tasks") {
        if (!parse_count(value, 1, 1024, &options.tasks_per_group)) return "--tasks takes 1..1024";
    } else if (arg == "--trace") {
        // The library reads QD_TRACE when a context is created (core/trace/observer.h).
        if (*value == '\0' || ::setenv("QD_TRACE", value, 1) != 0)
            return "--trace takes a file name";
    } else if (arg == "--task-ms") {
        char *end = nullptr;
        options.task_ms = std::strtod(value, &end);
        if (end == value || *end != '\0' || !(options.task_ms > 0.0) || options.task_ms > 1000)
            return "--task-ms takes a number of milliseconds in (0, 1000]";
    } else {
        return "unknown option " + arg;
    }
    return "";
}

// qd graph dot [-o FILE] [--verbose] [demo options].
int graph_main(int argc, char **argv) {
    if (argc < 1 || std::strcmp(argv[0], "dot") != 0)
        return usage_error("graph: the subcommand is dot (qd graph dot [-o FILE.dot])");
    DemoOptions options;
    options.graph_dot = "-";
    options.task_ms = 0.01;  // nothing runs: the calibration stays short
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage.c_str(), stdout);
            return 0;
        }
        if (arg == "--verbose") {
            options.graph_dot_flags |= QD_GRAPH_DOT_VERBOSE;
            continue;
        }
        if (i + 1 >= argc) return usage_error("graph dot: unknown option or missing value: " + arg);
        const char *value = argv[++i];
        if (arg == "-o") {
            if (*value == '\0') return usage_error("graph dot: -o takes a file name (or -)");
            options.graph_dot = value;
            continue;
        }
        if (arg == "--trace") return usage_error("graph dot: unknown option --trace");
        const std::string error = parse_demo_option(arg, value, options);
        if (!error.empty()) return usage_error("graph dot: " + error);
    }
    return run_demo(options);
}

int demo_main(int argc, char **argv) {
    DemoOptions options;
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage.c_str(), stdout);
            return 0;
        }
        if (i + 1 >= argc) return usage_error("demo: unknown option or missing value: " + arg);
        const char *value = argv[++i];
        const std::string error = parse_demo_option(arg, value, options);
        if (!error.empty()) return usage_error("demo: " + error);
    }
    return run_demo(options);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) return usage_error("missing command");
    std::string command = argv[1];
    try {
        if (command == "-h" || command == "--help" || command == "help") {
            std::fputs(kUsage.c_str(), stdout);
            return 0;
        }
        if (command == "info") return argc == 2 ? run_info() : usage_error("info takes no options");
        if (command == "demo") return demo_main(argc - 2, argv + 2);
        if (command == "bench") return bench_main(argc - 2, argv + 2);
        if (command == "trace") return run_trace(argc - 2, argv + 2);
        if (command == "graph") return graph_main(argc - 2, argv + 2);
    } catch (const QdError &error) {
        std::fprintf(stderr, "qd %s: %s\n", command.c_str(), error.what());
        return 1;
    } catch (const std::exception &error) {
        std::fprintf(stderr, "qd %s: %s\n", command.c_str(), error.what());
        return 1;
    }
    return usage_error("unknown command " + command);
}
