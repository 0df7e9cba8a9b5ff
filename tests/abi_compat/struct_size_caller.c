/* A caller built with the 0.1 header, run against a libqd whose qd_context_stats and
 * qd_device_info have a field appended (its entry points built against the qd.h that
 * tests/abi_compat/append_field.py writes; see tests/meson.build, suite abi). What the header promises (Conventions, "Descriptors"):
 *   - struct_size at the first released size is accepted, even though the library's structs
 *     are now larger;
 *   - the library writes only the bytes the caller's struct has (a canary after it survives);
 *   - a struct_size below the first released size is QD_ERROR_INVALID_ARGUMENT;
 *   - a caller newer than the library (a larger struct_size) gets the library's fields and its
 *     own extra bytes back untouched.
 * It also runs against the normal libqd (test abi_struct_size_current). Exit 0 on success. */
#include <qd/qd.h>

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__,      \
                    #cond, qd_last_error_message());                                               \
            ++failures;                                                                            \
        }                                                                                          \
    } while (0)

#define CANARY 0xA5

/* The struct as this caller knows it, followed by canary bytes. */
struct stats_with_canary {
    qd_context_stats s;
    unsigned char after[32];
};
struct info_with_canary {
    qd_device_info i;
    unsigned char after[32];
};

static int all_canary(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (p[i] != CANARY) return 0;
    return 1;
}

static int task_calls;
static int32_t count_task(const qd_host_kernel_info *info, void *const *args) {
    (void)info;
    (void)args;
    ++task_calls; /* the tasks are of one group: they run one after another */
    return 0;
}

/* A 0.1 or 0.2 caller's qd_task array: 64-byte tasks (no attrs, num_attrs, reserved2), the
 * array's stride tasks[0].struct_size. The bytes where 0.3's fields would be are the next
 * task's (and, after the last, garbage): qd must not read them as attributes. */
static void old_task_array(qd_context ctx) {
    qd_kernel k = 0;
    qd_stream s = 0;
    CHECK(qd_kernel_from_host_fn(ctx, count_task, "count_task", &k) == QD_SUCCESS);
    CHECK(qd_stream_create(ctx, NULL, &s) == QD_SUCCESS);
    CHECK(sizeof(qd_task) >= 80u);     /* 0.3 appended attrs, num_attrs and reserved2 */
    uint64_t words[(3 * 64 + 32) / 8]; /* aligned as qd_task is */
    unsigned char *bytes = (unsigned char *)words;
    memset(words, 0xEE, sizeof words);
    for (int i = 0; i < 3; ++i) {
        qd_task t = QD_TASK_INIT;
        t.struct_size = 64u; /* the first released size of qd_task */
        t.kernel = k;
        memcpy(bytes + 64 * i, &t, 64);
    }
    task_calls = 0;
    CHECK(qd_launch_parallel(s, (const qd_task *)(void *)words, 3) == QD_SUCCESS);
    CHECK(qd_stream_synchronize(s) == QD_SUCCESS);
    CHECK(task_calls == 3);
    CHECK(qd_stream_destroy(s) == QD_SUCCESS);
    CHECK(qd_kernel_destroy(k) == QD_SUCCESS);
}

int main(void) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    desc.backend = QD_BACKEND_CPU;
    qd_context ctx = 0;
    CHECK(qd_context_create(&desc, &ctx) == QD_SUCCESS);

    /* 1. The 0.1 size (what QD_CONTEXT_STATS_INIT gives this caller). */
    struct stats_with_canary st;
    memset(&st, CANARY, sizeof st);
    st.s.struct_size = 128u; /* the first released size of qd_context_stats */
    /* The header has grown since 0.1 (0.2 appended live_graphs): a 0.1 caller's struct ends
     * at byte 128, so everything from there on must stay as the caller left it. */
    CHECK(sizeof(qd_context_stats) >= 128u);
    CHECK(qd_context_get_stats(ctx, &st.s) == QD_SUCCESS);
    CHECK(st.s.live_streams == 1); /* the default stream */
    CHECK(st.s.stream_pool_capacity == 32);
    CHECK(all_canary((const unsigned char *)&st.s + 128u, sizeof st.s - 128u));
    CHECK(all_canary(st.after, sizeof st.after));

    struct info_with_canary info;
    memset(&info, CANARY, sizeof info);
    info.i.struct_size = 168u; /* the first released size of qd_device_info */
    CHECK(qd_device_get_info(QD_BACKEND_CPU, 0, &info.i) == QD_SUCCESS);
    CHECK(info.i.backend == QD_BACKEND_CPU && info.i.device == 0);
    CHECK(info.i.name[0] != '\0' && memchr(info.i.name, '\0', sizeof info.i.name) != NULL);
    CHECK(info.i.struct_size == 168u);
    CHECK(all_canary(info.after, sizeof info.after));

    /* 2. Below the first released size. */
    memset(&st, CANARY, sizeof st);
    st.s.struct_size = 120u;
    CHECK(qd_context_get_stats(ctx, &st.s) == QD_ERROR_INVALID_ARGUMENT);
    memset(&info, CANARY, sizeof info);
    info.i.struct_size = 160u;
    CHECK(qd_device_get_info(QD_BACKEND_CPU, 0, &info.i) == QD_ERROR_INVALID_ARGUMENT);

    /* 3. A newer caller: 16 bytes more than this header's struct. The library writes what it
     * knows (at most its own size) and leaves the caller's last bytes alone; here, with the
     * normal library, the whole extension stays; with the appended-field library, its 8 bytes
     * are written and the last 8 stay. */
    memset(&st, CANARY, sizeof st);
    st.s.struct_size = (uint32_t)sizeof(qd_context_stats) + 16u;
    CHECK(qd_context_get_stats(ctx, &st.s) == QD_SUCCESS);
    CHECK(st.s.live_streams == 1);
    CHECK(all_canary(st.after + 8, sizeof st.after - 8));
    memset(&info, CANARY, sizeof info);
    info.i.struct_size = 168u + 16u;
    CHECK(qd_device_get_info(QD_BACKEND_CPU, 0, &info.i) == QD_SUCCESS);
    CHECK(all_canary(info.after + 8, sizeof info.after - 8));

    old_task_array(ctx);
    CHECK(qd_context_destroy(ctx) == QD_SUCCESS);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("struct_size_caller: every check passed\n");
    return failures ? 1 : 0;
}
