/* The public header compiled as C (built twice: -std=c99 and -std=c11, each with
 * -Wall -Wextra -Werror -pedantic). It uses every INIT macro and every public type, so a header
 * change that breaks C callers breaks the build. The run checks a few things at run time. */
#include <qd/qd.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Sizes and offsets pinned at compile time (x86-64 / LP64). A C99-compatible static assert. */
#define QDT_STATIC_ASSERT(name, cond) typedef char qdt_static_assert_##name[(cond) ? 1 : -1]

#if defined(__x86_64__) || defined(__aarch64__)
QDT_STATIC_ASSERT(context_desc_size, sizeof(qd_context_desc) == 32);
QDT_STATIC_ASSERT(stream_desc_size, sizeof(qd_stream_desc) == 16);
QDT_STATIC_ASSERT(launch_config_size, sizeof(qd_launch_config) == 32);
QDT_STATIC_ASSERT(arg_size, sizeof(qd_arg) == 16);
QDT_STATIC_ASSERT(task_size, sizeof(qd_task) == 80); /* 64 in 0.1; 0.3 appended attrs */
QDT_STATIC_ASSERT(task_attrs_offset, offsetof(qd_task, attrs) == 64);
QDT_STATIC_ASSERT(launch_attr_size, sizeof(qd_launch_attr) == 48);
QDT_STATIC_ASSERT(launch_attr_event_offset, offsetof(qd_launch_attr, event) == 24);
QDT_STATIC_ASSERT(host_kernel_info_size, sizeof(qd_host_kernel_info) == 56);
/* 144 in 0.2; 0.3 appended live_timelines. */
QDT_STATIC_ASSERT(context_stats_size, sizeof(qd_context_stats) == 152);
QDT_STATIC_ASSERT(hazard_size, sizeof(qd_hazard) == 80);
QDT_STATIC_ASSERT(hazard_message_offset, offsetof(qd_hazard, message) == 72);
/* 168 in 0.1; 0.3 appended split_granularity and split_minimum. */
QDT_STATIC_ASSERT(device_info_size, sizeof(qd_device_info) == 176);
QDT_STATIC_ASSERT(device_info_split_offset, offsetof(qd_device_info, split_granularity) == 168);
QDT_STATIC_ASSERT(task_args_offset, offsetof(qd_task, args) == 48);
QDT_STATIC_ASSERT(info_shared_mem_offset, offsetof(qd_host_kernel_info, shared_mem) == 48);
QDT_STATIC_ASSERT(device_info_name_offset, offsetof(qd_device_info, name) == 40);
#endif
QDT_STATIC_ASSERT(handle_is_64_bits, sizeof(qd_stream) == 8);
QDT_STATIC_ASSERT(status_is_32_bits, sizeof(qd_status) == 4);

static int32_t kernel(const qd_host_kernel_info *info, void *const *args) {
    (void)info;
    (void)args;
    return 0;
}

static void host_fn(void *user) { (void)user; }

#define QDT_CHECK_NAME(name, value, text)                                                          \
    if (strcmp(qd_status_name(name), #name) != 0 || (int)(name) != (value) || sizeof(text) < 2) {  \
        fprintf(stderr, "status %s has name %s\n", #name, qd_status_name(name));                   \
        return 1;                                                                                  \
    }

int main(void) {
    qd_context_desc cdesc = QD_CONTEXT_DESC_INIT;
    qd_stream_desc sdesc = QD_STREAM_DESC_INIT;
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    qd_task task = QD_TASK_INIT;
    qd_context_stats stats = QD_CONTEXT_STATS_INIT;
    qd_device_info info = QD_DEVICE_INFO_INIT;
    qd_arg arg;
    qd_launch_attr lattr;
    qd_host_kernel_info kinfo;
    qd_host_kernel_fn kfn = kernel;
    qd_host_fn hfn = host_fn;
    qd_context ctx = 0;
    qd_stream stream = 0;
    qd_event event = 0;
    qd_module module = 0;
    qd_kernel k = 0;
    qd_status status = QD_SUCCESS;
    qd_backend backend = QD_BACKEND_DEFAULT;
    enum qd_status_code code = QD_ERROR_INTERNAL;
    enum qd_stream_flags sflag = QD_STREAM_NON_BLOCKING;
    enum qd_event_flags eflag = QD_EVENT_TIMING;
    uint32_t version = QD_VERSION;
    uint32_t limits = QD_MAX_ARGS + QD_MAX_ARG_BYTES;

    arg.data = &version;
    arg.size = sizeof version;
    memset(&kinfo, 0, sizeof kinfo);
    kinfo.struct_size = (uint32_t)sizeof kinfo;
    task.config = cfg;
    task.args = &arg;
    task.num_args = 1;
    memset(&lattr, 0, sizeof lattr);
    lattr.kind = QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION;
    task.attrs = &lattr;
    task.num_attrs = 1;

    if (cdesc.struct_size != sizeof cdesc || sdesc.struct_size != sizeof sdesc ||
        cfg.struct_size != sizeof cfg || task.struct_size != sizeof task ||
        stats.struct_size != sizeof stats || info.struct_size != sizeof info) {
        fprintf(stderr, "an INIT macro does not set struct_size\n");
        return 1;
    }
    if (cfg.grid[0] != 1 || cfg.grid[1] != 1 || cfg.grid[2] != 1 || cfg.block[0] != 1 ||
        cfg.block[1] != 1 || cfg.block[2] != 1 || task.config.grid[2] != 1) {
        fprintf(stderr, "QD_LAUNCH_CONFIG_INIT is not one block of one thread\n");
        return 1;
    }
    if (kfn(&kinfo, NULL) != 0) return 1;
    hfn(NULL);

    QD_STATUS_LIST(QDT_CHECK_NAME)
    if (strcmp(qd_status_name(12345), "QD_STATUS_UNKNOWN") != 0) return 1;
    if (qd_version() != QD_VERSION) {
        fprintf(stderr, "library version %u, header %u\n", (unsigned)qd_version(),
                (unsigned)QD_VERSION);
        return 1;
    }
    status = qd_stream_query(stream);
    if (status != QD_ERROR_INVALID_HANDLE) return 1;
    (void)ctx;
    (void)event;
    (void)module;
    (void)k;
    (void)backend;
    (void)code;
    (void)sflag;
    (void)eflag;
    (void)limits;
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
    {
        /* C11: the INIT macros also work as compound literals. */
        qd_context_desc d2 = (qd_context_desc)QD_CONTEXT_DESC_INIT;
        _Static_assert(sizeof(qd_context_desc) % 8 == 0, "descriptor size");
        if (d2.struct_size != sizeof d2) return 1;
    }
#endif
    return 0;
}
