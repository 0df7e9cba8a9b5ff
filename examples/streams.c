/* streams.c: qd in one page. A CPU context, two streams ordered by an event, a host kernel,
 * a stream-parallel launch, stream-ordered memory and timing. Build against an installed qd:
 *     cc -std=c99 streams.c $(pkg-config --cflags --libs qd) -o streams
 */
#include <qd/qd.h>

#include <stdio.h>
#include <stdlib.h>

/* Every qd call returns a status; on an error, print its name and the thread-local detail. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        qd_status status_ = (call);                                                                \
        if (status_ != QD_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    qd_status_name(status_), qd_last_error_message());                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { N = 1024, BLOCK = 256, GROUPS = 4 };

/* A host kernel runs once per block; args[i] points to a copy of argument i. */
static int32_t scale(const qd_host_kernel_info *info, void *const *args) {
    float *data = (float *)(uintptr_t) * (const uint64_t *)args[0];
    float factor = *(const float *)args[1];
    uint32_t first = info->block_idx[0] * info->block_dim[0], t;
    for (t = 0; t < info->block_dim[0]; ++t) data[first + t] *= factor;
    return 0; /* non-zero would be a device fault: the context becomes lost */
}

/* Adds value to count elements starting at first. */
static int32_t add(const qd_host_kernel_info *info, void *const *args) {
    float *data = (float *)(uintptr_t) * (const uint64_t *)args[0];
    uint32_t first = *(const uint32_t *)args[1], count = *(const uint32_t *)args[2], i;
    float value = *(const float *)args[3];
    (void)info;
    for (i = first; i < first + count; ++i) data[i] += value;
    return 0;
}

int main(void) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    qd_context ctx;
    qd_stream a, b;
    qd_event start, stop, ready;
    qd_kernel scale_k, add_k;
    uint64_t buf;
    float host[N], factor = 2.0f, ms = 0.0f;
    float values[GROUPS];
    uint32_t firsts[GROUPS], count = N / GROUPS;
    qd_arg add_args[GROUPS][4];
    qd_task tasks[GROUPS];
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    uint32_t i, g;

    desc.backend = QD_BACKEND_CPU;
    CHECK(qd_context_create(&desc, &ctx));
    CHECK(qd_stream_create(ctx, NULL, &a));
    CHECK(qd_stream_create(ctx, NULL, &b));
    CHECK(qd_event_create(ctx, QD_EVENT_TIMING, &start));
    CHECK(qd_event_create(ctx, QD_EVENT_TIMING, &stop));
    CHECK(qd_event_create(ctx, 0, &ready));
    CHECK(qd_kernel_from_host_fn(ctx, scale, "scale", &scale_k));
    CHECK(qd_kernel_from_host_fn(ctx, add, "add", &add_k));
    /* Each task of the parallel launch below adds to its own quarter of one buffer. With
     * QD_VALIDATE=1, qd checks cross-stream ordering; it cannot see the quarters, so say so. */
    CHECK(qd_kernel_set_param_access(add_k, 0, QD_PARAM_PARTITIONED));

    /* Stream a: allocate, upload, scale every element (N / BLOCK blocks of BLOCK threads). */
    for (i = 0; i < N; ++i) host[i] = (float)i;
    CHECK(qd_event_record(a, start));
    CHECK(qd_mem_alloc_async(a, sizeof host, &buf));
    CHECK(qd_memcpy_async(a, buf, (uint64_t)(uintptr_t)host, sizeof host));
    cfg.grid[0] = N / BLOCK;
    cfg.block[0] = BLOCK;
    {
        qd_arg args[2];
        args[0].data = &buf;
        args[0].size = sizeof buf;
        args[1].data = &factor;
        args[1].size = sizeof factor;
        CHECK(qd_launch(a, scale_k, &cfg, args, 2)); /* args are copied: reusable at once */
    }
    CHECK(qd_event_record(a, ready));

    /* Stream b waits for a (no host sync), then runs GROUPS groups concurrently, each adding
     * its group number + 1 to its quarter of the buffer. b waits for all of them. */
    CHECK(qd_stream_wait_event(b, ready));
    for (g = 0; g < GROUPS; ++g) {
        qd_task task = QD_TASK_INIT;
        firsts[g] = g * count;
        values[g] = (float)(g + 1);
        add_args[g][0].data = &buf;
        add_args[g][0].size = sizeof buf;
        add_args[g][1].data = &firsts[g];
        add_args[g][1].size = sizeof firsts[g];
        add_args[g][2].data = &count;
        add_args[g][2].size = sizeof count;
        add_args[g][3].data = &values[g];
        add_args[g][3].size = sizeof values[g];
        task.group = g;
        task.kernel = add_k;
        task.args = add_args[g];
        task.num_args = 4;
        tasks[g] = task;
    }
    CHECK(qd_launch_parallel(b, tasks, GROUPS));

    /* Download and free in b's order, then wait for b only. */
    CHECK(qd_memcpy_async(b, (uint64_t)(uintptr_t)host, buf, sizeof host));
    CHECK(qd_mem_free_async(b, buf));
    CHECK(qd_event_record(b, stop));
    CHECK(qd_stream_synchronize(b));
    CHECK(qd_event_elapsed_ms(start, stop, &ms));

    for (i = 0; i < N; ++i) {
        float expected = 2.0f * (float)i + (float)(i / count + 1);
        if (host[i] != expected) {
            fprintf(stderr, "host[%u] = %g, expected %g\n", i, host[i], expected);
            return 1;
        }
    }
    printf("ok: %d elements scaled on stream a, then %d groups in parallel on stream b, %.3f ms\n",
           N, GROUPS, ms);

    CHECK(qd_event_destroy(start));
    CHECK(qd_event_destroy(stop));
    CHECK(qd_event_destroy(ready));
    CHECK(qd_kernel_destroy(scale_k));
    CHECK(qd_kernel_destroy(add_k));
    CHECK(qd_stream_destroy(a));
    CHECK(qd_stream_destroy(b));
    CHECK(qd_context_destroy(ctx));
    return 0;
}
