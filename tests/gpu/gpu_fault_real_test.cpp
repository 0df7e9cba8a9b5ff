// Fault injection on the real CUDA driver (docs/reliability.md, category 13 on a GPU): the driver
// table that libcuda.so.1 filled is wrapped (gpu::g_table_hook) so that its Nth call returns an
// error instead of reaching the driver. A realistic scenario runs through the public API (create,
// module, alloc, fork, launches, join, parallel launch, record, copy back, destroy) once for
// every N and each injected error, and must show:
//   - no crash, and the error reaches the caller: the first call that fails names the driver
//     function that failed (e.g. "cuLaunchKernel"), or reports the context lost after a sticky
//     error;
//   - the native objects are back to baseline after qd_context_destroy: every stream, event and
//     module qd created was released;
//   - the device still works afterwards: the whole scenario passes again with no injection.
// This binary links libqd statically (the seam is hidden in libqd.so). Without a driver or a
// device it skips visibly.
#include <gtest/gtest.h>
#include <qd/qd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "gpu_test_config.h"

namespace gpu = qd::backend::gpu;
using gpu::DriverTable;
using gpu::Fn;
using gpu::Result;

namespace {

// ---------------------------------------------------------------------------------------------
// The wrapped table
// ---------------------------------------------------------------------------------------------

DriverTable g_real;              // what libcuda.so.1 filled
std::atomic<long> g_calls{0};    // counted calls since the last reset
std::atomic<long> g_fail_at{0};  // 0: no injection
std::atomic<Result> g_fail_code{0};
std::atomic<int> g_failed_fn{-1};  // the entry that was made to fail
const char *g_failed_step = "";    // the scenario step it failed in
// Only the scenario's own thread counts, so the numbering does not depend on what the driver's
// threads do meanwhile.
thread_local bool t_scenario = false;
thread_local const char *t_step = "";

template <typename T, T DriverTable::*Member, Fn Which>
struct Wrap;
template <typename... Args, Result (*DriverTable::*Member)(Args...), Fn Which>
struct Wrap<Result (*)(Args...), Member, Which> {
    static Result call(Args... args) {
        // The error-text lookups only format messages; failing them would test nothing.
        if (t_scenario && Which != Fn::get_error_name && Which != Fn::get_error_string) {
            const long n = g_calls.fetch_add(1) + 1;
            if (n == g_fail_at.load()) {
                g_failed_fn.store(int(Which));
                g_failed_step = t_step;
                return g_fail_code.load();
            }
        }
        return (g_real.*Member)(args...);
    }
};

void wrap_table(DriverTable &t) {
    g_real = t;
#define QD_WRAP_ENTRY_(name, required, params)                                                     \
    if (t.name) t.name = &Wrap<decltype(t.name), &DriverTable::name, Fn::name>::call;
    QD_GPU_DRIVER_TABLE(QD_WRAP_ENTRY_)
#undef QD_WRAP_ENTRY_
}

// ---------------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------------

// Runs one API call of the scenario with t_step naming it, for the report.
#define STEP(name, call) (t_step = name, check(name, call))

struct Outcome {
    bool all_ok = true;
    long chain_end = 0;  // counted calls when the checked chain ended
    qd_status first = QD_SUCCESS;
    std::string first_call, first_message;
    bool results_right = false;
};

std::vector<char> read_file(const char *path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

Outcome run_scenario(const std::vector<char> &image) {
    Outcome o;
    t_scenario = true;
    auto check = [&](const char *what, qd_status st) {
        if (st != QD_SUCCESS && o.all_ok) {
            o.all_ok = false;
            o.first = st;
            o.first_call = what;
            o.first_message = qd_last_error_message();
        }
        return st == QD_SUCCESS;
    };
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    desc.backend = QD_BACKEND_CUDA;
    desc.stream_pool_size = 4;
    qd_context ctx = 0;
    if (!STEP("qd_context_create", qd_context_create(&desc, &ctx))) {
        o.chain_end = g_calls.load();
        t_scenario = false;
        return o;
    }
    qd_module m = 0;
    qd_kernel write = 0;
    qd_stream s = 0;
    qd_event e = 0;
    uint64_t dev = 0;
    uint32_t host[4] = {0, 0, 0, 0};
    qd_stream kids[2] = {0, 0};
    bool forked = false;
    // The checked chain: each step runs only if every earlier one succeeded.
    auto write_args = [](uint64_t *dst, uint32_t *v, qd_arg *args) {
        args[0] = {dst, sizeof *dst};
        args[1] = {v, sizeof *v};
    };
    uint64_t dst[4];
    uint32_t val[4] = {11, 22, 33, 44};
    qd_arg args[4][2];
    if (STEP("qd_module_load", qd_module_load(ctx, image.data(), image.size(), &m)) &&
        STEP("qd_kernel_get", qd_kernel_get(m, "qd_test_write_value", &write)) &&
        STEP("qd_stream_create", qd_stream_create(ctx, nullptr, &s)) &&
        STEP("qd_mem_alloc_async", qd_mem_alloc_async(s, 16, &dev)) &&
        STEP("qd_memset_async", qd_memset_async(s, dev, 0, 16)) &&
        (forked = STEP("qd_stream_fork", qd_stream_fork(s, 2, kids)))) {
        for (int i = 0; i < 4; ++i) {
            dst[i] = dev + 4 * i;
            write_args(&dst[i], &val[i], args[i]);
        }
        qd_task tasks[2] = {QD_TASK_INIT, QD_TASK_INIT};
        for (int i = 0; i < 2; ++i) {
            tasks[i].kernel = write;
            tasks[i].group = uint32_t(i);
            tasks[i].args = args[2 + i];
            tasks[i].num_args = 2;
        }
        const bool launched = STEP("qd_launch", qd_launch(kids[0], write, nullptr, args[0], 2)) &&
                              STEP("qd_launch", qd_launch(kids[1], write, nullptr, args[1], 2));
        const bool joined = STEP("qd_stream_join", qd_stream_join(s, kids, 2));
        if (joined) forked = false;
        if (launched && joined && STEP("qd_launch_parallel", qd_launch_parallel(s, tasks, 2)) &&
            STEP("qd_event_create", qd_event_create(ctx, QD_EVENT_TIMING, &e)) &&
            STEP("qd_event_record", qd_event_record(s, e)) &&
            STEP("qd_memcpy_async", qd_memcpy_async(s, uint64_t(uintptr_t(host)), dev, 16)) &&
            STEP("qd_event_synchronize", qd_event_synchronize(e)) &&
            STEP("qd_stream_synchronize", qd_stream_synchronize(s))) {
            o.results_right = host[0] == 11 && host[1] == 22 && host[2] == 33 && host[3] == 44;
        }
    }
    o.chain_end = g_calls.load();
    t_step = "cleanup";
    // Cleanup: whatever failed, release what was made; context destroy does the rest.
    if (forked) {
        qd_stream_release(kids[0]);
        qd_stream_release(kids[1]);
    }
    if (dev) qd_mem_free_async(s, dev);
    if (e) qd_event_destroy(e);
    if (s) qd_stream_destroy(s);
    if (m) qd_module_unload(m);
    t_step = "qd_context_destroy";
    const qd_status destroyed = qd_context_destroy(ctx);
    t_scenario = false;
    if (destroyed != QD_SUCCESS) {
        ADD_FAILURE() << "qd_context_destroy: " << qd_status_name(destroyed) << ": "
                      << qd_last_error_message();
    }
    return o;
}

// Driver calls whose failure qd absorbs by design, so the scenario goes on as if nothing failed:
// - cuCtxGetCurrent: ScopedCurrent then pushes and pops its context instead (gpu_objects.h);
// - cuStreamGetPriority right after a stream is made: the requested (clamped) priority is kept;
// - cuFuncGetParamInfo in qd_kernel_get: optional; the launch arguments are then not checked;
// - the release calls (stream, event, module destroy/unload, and the query and tail event a
//   stream destroy makes): qd's destroys never fail, and release what they can.
bool absorbed_by_design(Fn fn, const char *step) {
    switch (fn) {
    case Fn::ctx_get_current:
    case Fn::func_get_param_info:
    case Fn::stream_destroy:
    case Fn::event_destroy:
    case Fn::module_unload:
    case Fn::mem_free:
    case Fn::host_free: return true;
    case Fn::stream_get_priority:  // every step that makes a stream: the default, owned, pooled
        return std::strcmp(step, "qd_context_create") == 0 ||
               std::strcmp(step, "qd_stream_create") == 0 ||
               std::strcmp(step, "qd_stream_fork") == 0 ||
               std::strcmp(step, "qd_launch_parallel") == 0;
    case Fn::stream_query:
    case Fn::event_create:
    case Fn::event_record:
    case Fn::event_query:
        // As part of a release (the tail event of a busy stream being destroyed).
        return std::strcmp(step, "cleanup") == 0 || std::strcmp(step, "qd_context_destroy") == 0;
    default: return false;
    }
}

const gpu::NativeCounters *cuda_counters() {
    qd::backend::Driver *driver = nullptr;
    if (qd::backend::get_driver(QD_BACKEND_CUDA, &driver) != QD_SUCCESS) return nullptr;
    return gpu::native_counters(driver);
}

TEST(GpuFaultInjectionReal, EveryDriverCallOfAScenario_FailsCleanlyAndNamesTheCall) {
    gpu::g_table_hook = &wrap_table;
    uint32_t devices = 0;
    if (qd_device_count(QD_BACKEND_CUDA, &devices) != QD_SUCCESS || devices == 0)
        GTEST_SKIP() << "no CUDA device: " << qd_last_error_message();
    ASSERT_NE(g_real.launch_kernel, nullptr) << "the table hook did not run";
    const std::vector<char> image = read_file(QD_GPU_TEST_FATBIN);
    if (image.empty()) GTEST_SKIP() << "no test kernels at '" << QD_GPU_TEST_FATBIN << "'";
    const gpu::NativeCounters *counters = cuda_counters();
    ASSERT_NE(counters, nullptr);

    g_calls = 0;
    g_fail_at = 0;
    Outcome clean = run_scenario(image);
    ASSERT_TRUE(clean.all_ok) << clean.first_call << ": " << clean.first_message;
    ASSERT_TRUE(clean.results_right);
    const long total = g_calls.load();
    ASSERT_GT(clean.chain_end, 20);
    std::printf("scenario: %ld driver calls (%ld in the checked chain)\n", total, clean.chain_end);

    // CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN, and a sticky CUDA_ERROR_ILLEGAL_ADDRESS.
    const Result codes[] = {2, 999, 700};
    long injected = 0, surfaced = 0, absorbed = 0;
    for (long n = 1; n <= total; ++n) {
        for (Result code : codes) {
            const uint64_t streams = counters->streams_created - counters->streams_destroyed;
            const uint64_t events = counters->events_created - counters->events_destroyed;
            const uint64_t modules = counters->modules_loaded - counters->modules_unloaded;
            g_calls = 0;
            g_failed_fn = -1;
            g_fail_code = code;
            g_fail_at = n;
            Outcome o = run_scenario(image);
            g_fail_at = 0;
            const int failed = g_failed_fn.load();
            if (failed < 0) continue;  // this run made fewer calls (a pool hit, say)
            ++injected;
            const char *symbol = g_real.symbol[failed] ? g_real.symbol[failed] : "?";
            SCOPED_TRACE(testing::Message()
                         << "call " << n << " (" << symbol << ") fails with " << code);
            if (n <= o.chain_end) {
                if (o.all_ok) {
                    EXPECT_TRUE(absorbed_by_design(Fn(failed), g_failed_step))
                        << "the failure was swallowed, in " << g_failed_step;
                    ++absorbed;
                } else {
                    ++surfaced;
                    const bool names_call = o.first_message.find(symbol) != std::string::npos;
                    const bool lost = o.first == QD_ERROR_DEVICE_LOST;
                    EXPECT_TRUE(names_call || (code == 700 && lost))
                        << o.first_call << " -> " << qd_status_name(o.first) << ": "
                        << o.first_message;
                }
            }
            EXPECT_EQ(counters->streams_created - counters->streams_destroyed, streams);
            EXPECT_EQ(counters->events_created - counters->events_destroyed, events);
            EXPECT_EQ(counters->modules_loaded - counters->modules_unloaded, modules);
        }
    }
    std::printf(
        "injected %ld failures over %ld calls x %zu codes: %ld surfaced to the caller "
        "naming the call, %ld absorbed by design, the rest in cleanup\n",
        injected, total, sizeof codes / sizeof codes[0], surfaced, absorbed);
    g_calls = 0;
    Outcome after = run_scenario(image);
    EXPECT_TRUE(after.all_ok) << after.first_call << ": " << after.first_message;
    EXPECT_TRUE(after.results_right) << "the device works after the injections";
}

}  // namespace
