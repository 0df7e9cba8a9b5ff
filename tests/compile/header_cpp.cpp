// The public header compiled as C++17 (-Wall -Wextra -Werror -pedantic): every INIT macro and
// every public type, as a C++ caller uses them.
#include <qd/qd.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(std::is_standard_layout<qd_context_desc>::value, "C layout");
static_assert(std::is_trivially_copyable<qd_task>::value, "C layout");
static_assert(std::is_same<qd_stream, uint64_t>::value, "handles are uint64_t");
static_assert(sizeof(qd_backend) == 4 && sizeof(qd_status_code) == 4, "32-bit enums");

static int32_t kernel(const qd_host_kernel_info *, void *const *) { return 0; }
static void host_fn(void *) {}

int main() {
    qd_context_desc cdesc = QD_CONTEXT_DESC_INIT;
    qd_stream_desc sdesc = QD_STREAM_DESC_INIT;
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    qd_task task = QD_TASK_INIT;
    qd_context_stats stats = QD_CONTEXT_STATS_INIT;
    qd_device_info info = QD_DEVICE_INFO_INIT;
    qd_task tasks[2] = {QD_TASK_INIT, QD_TASK_INIT};
    qd_task from_temp = qd_task QD_TASK_INIT;
    qd_arg arg = {&cdesc, sizeof cdesc};
    qd_host_kernel_info kinfo{};
    qd_host_kernel_fn kfn = kernel;
    qd_host_fn hfn = host_fn;
    qd_context ctx = 0;
    qd_stream stream = 0;
    qd_event event = 0;
    qd_module module = 0;
    qd_kernel k = 0;
    qd_backend backend = QD_BACKEND_CUDA;
    qd_status_code code = QD_NOT_READY;
    qd_stream_flags sflag = QD_STREAM_NON_BLOCKING;
    qd_event_flags eflag = QD_EVENT_TIMING;
    constexpr uint32_t version = QD_VERSION;
    static_assert(version == ((0u << 16) | (3u << 8) | 0u), "version 0.3.0");

    task.args = &arg;
    task.num_args = 1;
    tasks[1].group = 1;
    if (cdesc.struct_size != sizeof cdesc || sdesc.struct_size != sizeof sdesc ||
        cfg.struct_size != sizeof cfg || task.struct_size != sizeof task ||
        stats.struct_size != sizeof stats || info.struct_size != sizeof info ||
        from_temp.struct_size != sizeof from_temp || tasks[0].config.block[2] != 1) {
        std::fprintf(stderr, "an INIT macro is wrong\n");
        return 1;
    }
    if (kfn(&kinfo, nullptr) != 0) return 1;
    hfn(nullptr);
#define QDT_CHECK_NAME(name, value, text)                                                          \
    if (std::strcmp(qd_status_name(name), #name) != 0 || (int)(name) != (value)) return 1;
    QD_STATUS_LIST(QDT_CHECK_NAME)
#undef QDT_CHECK_NAME
    if (qd_version() != QD_VERSION) return 1;
    (void)ctx;
    (void)stream;
    (void)event;
    (void)module;
    (void)k;
    (void)backend;
    (void)code;
    (void)sflag;
    (void)eflag;
    return 0;
}
