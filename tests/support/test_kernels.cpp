// Test-kernel providers: in-process CPU host functions, and kernels looked up by name in a loaded
// module (the CPU test module, or a GPU image through the hook in gpu_kernels.cpp).
#include "test_kernels.h"

#include <cstdlib>
#include <cstring>

#include "cpu_kernel_impl.h"

#ifndef QD_TEST_CPU_MODULE_PATH
#define QD_TEST_CPU_MODULE_PATH ""
#endif

namespace qdt {

uint64_t blob_checksum(const uint8_t *blob, uint32_t index) {
    return qdt_cpu::fnv1a(blob, QDT_BLOB_BYTES) ^ (uint64_t)index;
}

std::string cpu_module_path() {
    const char *env = getenv("QD_TEST_CPU_MODULE");
    if (env && *env) return env;
    return QD_TEST_CPU_MODULE_PATH;
}

namespace {

// Holds one kernel handle per QDT_KERNEL_LIST entry and destroys them (and the module, if any)
// with the provider. Destroy errors are ignored: the context may already be gone.
class HandleKernels : public TestKernels {
  public:
#define QDT_KERNEL_FIELD_(id, sym) qd_kernel id##_ = 0;
    QDT_KERNEL_LIST(QDT_KERNEL_FIELD_)
#undef QDT_KERNEL_FIELD_
    qd_module module_ = 0;
    std::string fault_name_;

    ~HandleKernels() override {
#define QDT_KERNEL_DESTROY_(id, sym)                                                               \
    if (id##_) (void)qd_kernel_destroy(id##_);
        QDT_KERNEL_LIST(QDT_KERNEL_DESTROY_)
#undef QDT_KERNEL_DESTROY_
        if (module_) (void)qd_module_unload(module_);
    }
#define QDT_KERNEL_GETTER_(id, sym)                                                                \
    qd_kernel id() const override { return id##_; }
    QDT_KERNEL_LIST(QDT_KERNEL_GETTER_)
#undef QDT_KERNEL_GETTER_
    std::string fault_name() const override { return fault_name_; }
};

}  // namespace

std::unique_ptr<TestKernels> make_cpu_host_fn_kernels(qd_context ctx) {
    auto k = std::make_unique<HandleKernels>();
#define QDT_KERNEL_FROM_FN_(id, sym)                                                               \
    if (qd_kernel_from_host_fn(ctx, &qdt_cpu::id, sym, &k->id##_) != QD_SUCCESS) return nullptr;
    QDT_KERNEL_LIST(QDT_KERNEL_FROM_FN_)
#undef QDT_KERNEL_FROM_FN_
    k->fault_name_ = "qd_test_fault";
    return k;
}

std::unique_ptr<TestKernels> make_module_kernels(qd_context ctx, const void *image, uint64_t size,
                                                 std::string *why) {
    auto k = std::make_unique<HandleKernels>();
    qd_status st = qd_module_load(ctx, image, size, &k->module_);
    if (st != QD_SUCCESS) {
        if (why)
            *why = std::string("qd_module_load: ") + qd_status_name(st) + ": " +
                   qd_last_error_message();
        return nullptr;
    }
#define QDT_KERNEL_GET_(id, sym)                                                                   \
    st = qd_kernel_get(k->module_, sym, &k->id##_);                                                \
    if (st != QD_SUCCESS) {                                                                        \
        if (why)                                                                                   \
            *why = std::string("qd_kernel_get(" sym "): ") + qd_status_name(st) + ": " +           \
                   qd_last_error_message();                                                        \
        return nullptr;                                                                            \
    }
    QDT_KERNEL_LIST(QDT_KERNEL_GET_)
#undef QDT_KERNEL_GET_
    k->fault_name_ = "qd_test_fault";
    return k;
}

qd_status load_test_module(qd_backend backend, qd_context ctx, qd_module *out, std::string *why) {
    std::vector<char> image;
    if (backend == QD_BACKEND_CPU || backend == QD_BACKEND_DEFAULT) {
        const std::string path = cpu_module_path();
        image.assign(path.begin(), path.end());
    } else if (!read_gpu_test_image(backend, &image, why)) {
        return QD_ERROR_NOT_FOUND;
    }
    qd_status st = qd_module_load(ctx, image.data(), image.size(), out);
    if (st != QD_SUCCESS && why)
        *why =
            std::string("qd_module_load: ") + qd_status_name(st) + ": " + qd_last_error_message();
    return st;
}

std::unique_ptr<TestKernels> make_test_kernels(qd_backend backend, qd_context ctx,
                                               std::string *why) {
    if (backend == QD_BACKEND_CPU || backend == QD_BACKEND_DEFAULT) {
        auto k = make_cpu_host_fn_kernels(ctx);
        if (!k && why)
            *why = std::string("qd_kernel_from_host_fn failed: ") + qd_last_error_message();
        return k;
    }
    return make_gpu_test_kernels(backend, ctx, why);
}

// ---------------------------------------------------------------------------------------------
// Launch helpers
// ---------------------------------------------------------------------------------------------

qd_status launch0(qd_stream s, qd_kernel k) { return qd_launch(s, k, nullptr, nullptr, 0); }

qd_status launch_add_one(qd_stream s, qd_kernel k, uint64_t data, uint32_t n, uint32_t blocks,
                         uint32_t threads) {
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = blocks;
    cfg.block[0] = threads;
    qd_arg args[2] = {{&data, sizeof data}, {&n, sizeof n}};
    return qd_launch(s, k, &cfg, args, 2);
}

qd_status launch_write_value(qd_stream s, qd_kernel k, uint64_t dst, uint32_t value) {
    qd_arg args[2] = {{&dst, sizeof dst}, {&value, sizeof value}};
    return qd_launch(s, k, nullptr, args, 2);
}

qd_status launch_spin(qd_stream s, qd_kernel k, uint64_t microseconds) {
    qd_arg args[1] = {{&microseconds, sizeof microseconds}};
    return qd_launch(s, k, nullptr, args, 1);
}

qd_status launch_spin_write(qd_stream s, qd_kernel k, uint64_t dst, uint32_t value,
                            uint64_t microseconds) {
    qd_arg args[3] = {
        {&dst, sizeof dst}, {&value, sizeof value}, {&microseconds, sizeof microseconds}};
    return qd_launch(s, k, nullptr, args, 3);
}

qd_status launch_add_value(qd_stream s, qd_kernel k, uint64_t dst, uint64_t src, uint32_t add) {
    qd_arg args[3] = {{&dst, sizeof dst}, {&src, sizeof src}, {&add, sizeof add}};
    return qd_launch(s, k, nullptr, args, 3);
}

qd_status launch_wait_flag(qd_stream s, qd_kernel k, uint64_t words, uint64_t timeout_us) {
    qd_arg args[2] = {{&words, sizeof words}, {&timeout_us, sizeof timeout_us}};
    return qd_launch(s, k, nullptr, args, 2);
}

qd_status launch_append_log(qd_stream s, qd_kernel k, uint64_t log, uint32_t value) {
    qd_arg args[2] = {{&log, sizeof log}, {&value, sizeof value}};
    return qd_launch(s, k, nullptr, args, 2);
}

qd_status launch_count_mismatches(qd_stream s, qd_kernel k, uint64_t vals, uint32_t n,
                                  uint32_t base, uint64_t out) {
    qd_arg args[4] = {
        {&vals, sizeof vals}, {&n, sizeof n}, {&base, sizeof base}, {&out, sizeof out}};
    return qd_launch(s, k, nullptr, args, 4);
}

void task_add_value(qd_task *t, TaskArgs *a, uint32_t group, qd_kernel k, uint64_t dst,
                    uint64_t src, uint32_t add) {
    *t = qd_task QD_TASK_INIT;
    t->group = group;
    t->kernel = k;
    a->u64[0] = dst;
    a->u64[1] = src;
    a->u32[0] = add;
    a->args[0] = {&a->u64[0], 8};
    a->args[1] = {&a->u64[1], 8};
    a->args[2] = {&a->u32[0], 4};
    a->count = 3;
    t->args = a->args;
    t->num_args = 3;
}

void task_spin(qd_task *t, TaskArgs *a, uint32_t group, qd_kernel k, uint64_t us) {
    *t = qd_task QD_TASK_INIT;
    t->group = group;
    t->kernel = k;
    a->u64[0] = us;
    a->args[0] = {&a->u64[0], 8};
    a->count = 1;
    t->args = a->args;
    t->num_args = 1;
}

void task_append_log(qd_task *t, TaskArgs *a, uint32_t group, qd_kernel k, uint64_t log,
                     uint32_t value) {
    *t = qd_task QD_TASK_INIT;
    t->group = group;
    t->kernel = k;
    a->u64[0] = log;
    a->u32[0] = value;
    a->args[0] = {&a->u64[0], 8};
    a->args[1] = {&a->u32[0], 4};
    a->count = 2;
    t->args = a->args;
    t->num_args = 2;
}

void task_write_value(qd_task *t, TaskArgs *a, uint32_t group, qd_kernel k, uint64_t dst,
                      uint32_t value) {
    task_append_log(t, a, group, k, dst, value);  // the same layout: (u64, u32)
}

void task_wait_flag(qd_task *t, TaskArgs *a, uint32_t group, qd_kernel k, uint64_t words,
                    uint64_t timeout_us) {
    *t = qd_task QD_TASK_INIT;
    t->group = group;
    t->kernel = k;
    a->u64[0] = words;
    a->u64[1] = timeout_us;
    a->args[0] = {&a->u64[0], 8};
    a->args[1] = {&a->u64[1], 8};
    a->count = 2;
    t->args = a->args;
    t->num_args = 2;
}

}  // namespace qdt
