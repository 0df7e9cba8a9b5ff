// The subprocess half of the sticky-fault test (docs/reliability.md, category 10), run by gpu_test
// with a deadline: a device fault corrupts the CUDA context for the rest of the process, so it must
// not happen inside the test binary.
//
// usage: gpu_fault_child <cubin>
// Creates objects of every kind, launches a faulting kernel, observes the fault, then calls
// every API entry point that names the lost context or one of its objects: each must return
// QD_ERROR_DEVICE_LOST (destroy, release and unload calls: QD_SUCCESS). Prints one line per
// call; exits 0 when every call returned what it must, 1 otherwise, 2 when setup failed.
#include <qd/qd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

int g_failures = 0;

void expect(const char *what, qd_status expected, qd_status got) {
    const bool ok = got == expected;
    std::printf("  %-4s %-44s -> %s", ok ? "ok" : "FAIL", what, qd_status_name(got));
    if (!ok) {
        std::printf(" (expected %s): %s", qd_status_name(expected), qd_last_error_message());
        ++g_failures;
    }
    std::printf("\n");
}

#define SETUP(call)                                                                                \
    do {                                                                                           \
        qd_status st_ = (call);                                                                    \
        if (st_ != QD_SUCCESS) {                                                                   \
            std::printf("setup failed: %s -> %s: %s\n", #call, qd_status_name(st_),                \
                        qd_last_error_message());                                                  \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

void host_fn(void *) {}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <cubin>\n", argv[0]);
        return 2;
    }
    std::ifstream file(argv[1], std::ios::binary);
    std::vector<char> image((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    if (image.empty()) {
        std::printf("cannot read %s\n", argv[1]);
        return 2;
    }

    qd_context ctx = 0;
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    desc.backend = QD_BACKEND_CUDA;
    SETUP(qd_context_create(&desc, &ctx));
    qd_stream def = 0, s = 0, lease = 0;
    SETUP(qd_context_default_stream(ctx, &def));
    SETUP(qd_stream_create(ctx, nullptr, &s));
    SETUP(qd_stream_acquire(ctx, &lease));
    qd_module module = 0;
    SETUP(qd_module_load(ctx, image.data(), image.size(), &module));
    qd_kernel fault = 0, noop = 0;
    SETUP(qd_kernel_get(module, "gpu_fault", &fault));
    SETUP(qd_kernel_get(module, "gpu_empty0", &noop));
    qd_event ev = 0, ev2 = 0;
    SETUP(qd_event_create(ctx, QD_EVENT_TIMING, &ev));
    SETUP(qd_event_create(ctx, QD_EVENT_TIMING, &ev2));
    uint64_t mem = 0;
    SETUP(qd_mem_alloc_async(def, 4096, &mem));
    void *pinned = nullptr;
    SETUP(qd_host_alloc(ctx, 4096, &pinned));
    SETUP(qd_event_record(def, ev));
    SETUP(qd_context_synchronize(ctx));

    // The fault, then its observation on the faulting stream: the message names the kernel.
    std::printf("launching gpu_fault on a stream of its own\n");
    SETUP(qd_launch(s, fault, nullptr, nullptr, 0));
    qd_status st = qd_stream_synchronize(s);
    expect("qd_stream_synchronize(faulting stream)", QD_ERROR_DEVICE_LOST, st);
    const std::string message = qd_last_error_message();
    std::printf("       message: %s\n", message.c_str());
    if (message.find("gpu_fault") == std::string::npos) {
        std::printf("  FAIL the message does not name the faulting kernel 'gpu_fault'\n");
        ++g_failures;
    }

    std::printf("every call on the lost context:\n");
    const qd_status L = QD_ERROR_DEVICE_LOST;
    qd_stream s2 = 0, kids[2] = {0, 0};
    qd_event e2 = 0;
    qd_module m2 = 0;
    qd_kernel k2 = 0;
    uint64_t a2 = 0, native = 0;
    void *p2 = nullptr;
    float ms = 0;
    uint64_t arg = 0;
    qd_arg args[1] = {{&arg, 8}};
    qd_task task = QD_TASK_INIT;
    task.kernel = noop;
    expect("qd_context_synchronize", L, qd_context_synchronize(ctx));
    expect("qd_context_default_stream", L, qd_context_default_stream(ctx, &s2));
    expect("qd_stream_create", L, qd_stream_create(ctx, nullptr, &s2));
    expect("qd_stream_synchronize(default)", L, qd_stream_synchronize(def));
    expect("qd_stream_query", L, qd_stream_query(def));
    expect("qd_stream_wait_event", L, qd_stream_wait_event(def, ev));
    expect("qd_stream_acquire", L, qd_stream_acquire(ctx, &s2));
    expect("qd_stream_fork", L, qd_stream_fork(def, 2, kids));
    expect("qd_stream_import", L, qd_stream_import(ctx, 0x1234, &s2));
    expect("qd_event_create", L, qd_event_create(ctx, 0, &e2));
    expect("qd_event_record", L, qd_event_record(def, ev2));
    expect("qd_event_query", L, qd_event_query(ev));
    expect("qd_event_synchronize", L, qd_event_synchronize(ev));
    expect("qd_event_elapsed_ms", L, qd_event_elapsed_ms(ev, ev2, &ms));
    expect("qd_module_load", L, qd_module_load(ctx, image.data(), image.size(), &m2));
    expect("qd_kernel_get", L, qd_kernel_get(module, "gpu_empty0", &k2));
    expect("qd_launch", L, qd_launch(def, noop, nullptr, nullptr, 0));
    expect("qd_launch(1 arg, mismatched)", L, qd_launch(def, noop, nullptr, args, 1));
    expect("qd_launch_parallel", L, qd_launch_parallel(def, &task, 1));
    expect("qd_launch_host_fn", L, qd_launch_host_fn(def, host_fn, nullptr));
    expect("qd_mem_alloc_async", L, qd_mem_alloc_async(def, 64, &a2));
    expect("qd_memcpy_async", L,
           qd_memcpy_async(def, reinterpret_cast<uintptr_t>(pinned), mem, 64));
    expect("qd_memset_async", L, qd_memset_async(def, mem, 0, 64));
    expect("qd_mem_free_async", L, qd_mem_free_async(def, mem));
    expect("qd_host_alloc", L, qd_host_alloc(ctx, 64, &p2));
    (void)native;

    std::printf("cleanup still works:\n");
    expect("qd_event_destroy", QD_SUCCESS, qd_event_destroy(ev));
    expect("qd_event_destroy", QD_SUCCESS, qd_event_destroy(ev2));
    expect("qd_stream_release", QD_SUCCESS, qd_stream_release(lease));
    expect("qd_stream_destroy", QD_SUCCESS, qd_stream_destroy(s));
    expect("qd_kernel_destroy", QD_SUCCESS, qd_kernel_destroy(fault));
    expect("qd_module_unload", QD_SUCCESS, qd_module_unload(module));
    expect("qd_host_free", QD_SUCCESS, qd_host_free(ctx, pinned));
    expect("qd_context_destroy", QD_SUCCESS, qd_context_destroy(ctx));

    // A new context on the same device after the lost one is gone: qd held the only reference
    // to the primary context, so it was reset and works again.
    qd_context fresh = 0;
    qd_status cs = qd_context_create(&desc, &fresh);
    std::printf("  info a new context after the fault: %s%s%s\n", qd_status_name(cs),
                cs ? ": " : "", cs ? qd_last_error_message() : "");
    if (cs == QD_SUCCESS) {
        qd_stream d2 = 0;
        if (qd_context_default_stream(fresh, &d2) == QD_SUCCESS)
            std::printf("  info its default stream synchronizes: %s\n",
                        qd_status_name(qd_stream_synchronize(d2)));
        qd_context_destroy(fresh);
    }

    std::printf("%s: %d failure(s)\n", g_failures ? "FAIL" : "PASS", g_failures);
    return g_failures ? 1 : 0;
}
