/* A known program for the trace tests (check_trace.py runs it with QD_TRACE set): what it
 * queues is exactly what the trace must show.
 *
 *   trace_program normal   two contexts; on the first: 5 launches of "alpha" on stream A, a
 *                          user event recorded on A and waited on by B, 3 launches of "beta"
 *                          on B, a fork of 3 children from A each launching "gamma" once and
 *                          a join, a memset and a memcpy of 4096 bytes on A; on the second
 *                          context: 2 launches of "delta". Both contexts are destroyed with
 *                          work still queued (a slow task at the head of A).
 *   trace_program contexts two contexts, both traced into one file: on the first, "produce"
 *                          on stream A, an alloc of 3072 bytes on A, event E1 recorded on A; on
 *                          the second, stream D waits for E1 and launches "consume", records
 *                          E2, which stream B of the first waits for before launching "back";
 *                          the second replays a graph of a fork into 2 branches ("branch" on
 *                          each) and a join, twice; the first runs a parallel launch of 2
 *                          groups of one "task" each. The first context is destroyed, then
 *                          the second launches "after" and is destroyed: the file keeps the
 *                          first one's part and both arrows across the contexts.
 *   trace_program fault    one context whose kernel "broken" fails (the context is lost).
 *   trace_program exit     one context, 3 launches of "omega", then exit(); a handler that
 *                          exit() runs after qd's own exit-time cleanup (it was registered
 *                          before qd's first call) launches "omega" twice more and flushes the
 *                          trace: the file must hold all 5 (the trace's file table outlives
 *                          exit, so a thread or handler still tracing never uses freed memory).
 * Exit status 0 when every qd call that must succeed did. */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include <qd/qd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        qd_status st_ = (call);                                                                    \
        if (st_ != QD_SUCCESS) {                                                                   \
            fprintf(stderr, "%s failed: %s: %s\n", #call, qd_status_name(st_),                     \
                    qd_last_error_message());                                                      \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int32_t quick(const qd_host_kernel_info *info, void *const *args) {
    (void)info;
    (void)args;
    return 0;
}

/* Keeps its stream busy for a while, so the context is destroyed with work queued behind it
 * (the destroy drains; the trace must still hold everything). Not a test of timing. */
static int32_t slow(const qd_host_kernel_info *info, void *const *args) {
    (void)info;
    (void)args;
    struct timespec t = {0, 20 * 1000 * 1000};
    nanosleep(&t, NULL);
    return 0;
}

static int32_t broken(const qd_host_kernel_info *info, void *const *args) {
    (void)info;
    (void)args;
    return 7;
}

static qd_context new_context(void) {
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    qd_context ctx = 0;
    if (qd_context_create(&d, &ctx) != QD_SUCCESS) {
        fprintf(stderr, "qd_context_create: %s\n", qd_last_error_message());
        return 0;
    }
    return ctx;
}

static int normal(void) {
    qd_context c1 = new_context(), c2 = new_context();
    if (!c1 || !c2) return 1;
    qd_kernel alpha, beta, gamma, delta, slow_k;
    CHECK(qd_kernel_from_host_fn(c1, quick, "alpha", &alpha));
    CHECK(qd_kernel_from_host_fn(c1, quick, "beta", &beta));
    CHECK(qd_kernel_from_host_fn(c1, quick, "gamma", &gamma));
    CHECK(qd_kernel_from_host_fn(c1, slow, "slow", &slow_k));
    CHECK(qd_kernel_from_host_fn(c2, quick, "delta", &delta));
    qd_stream a, b, d;
    CHECK(qd_stream_create(c1, NULL, &a));
    CHECK(qd_stream_create(c1, NULL, &b));
    CHECK(qd_stream_create(c2, NULL, &d));
    CHECK(qd_launch(a, slow_k, NULL, NULL, 0));
    for (int i = 0; i < 5; ++i) CHECK(qd_launch(a, alpha, NULL, NULL, 0));
    qd_event e;
    CHECK(qd_event_create(c1, 0, &e));
    CHECK(qd_event_record(a, e));
    CHECK(qd_stream_wait_event(b, e));
    for (int i = 0; i < 3; ++i) CHECK(qd_launch(b, beta, NULL, NULL, 0));
    qd_stream children[3];
    CHECK(qd_stream_fork(a, 3, children));
    for (int i = 0; i < 3; ++i) CHECK(qd_launch(children[i], gamma, NULL, NULL, 0));
    CHECK(qd_stream_join(a, children, 3));
    static unsigned char src[4096], dst[4096];
    CHECK(qd_memset_async(a, (uint64_t)(uintptr_t)src, 0x5a, sizeof src));
    CHECK(qd_memcpy_async(a, (uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, sizeof src));
    for (int i = 0; i < 2; ++i) CHECK(qd_launch(d, delta, NULL, NULL, 0));
    /* Destroyed with the slow task's followers still queued: the destroy drains them. */
    CHECK(qd_context_destroy(c1));
    CHECK(qd_context_destroy(c2));
    return dst[4095] == 0x5a ? 0 : 1;
}

static int contexts(void) {
    qd_context c1 = new_context(), c2 = new_context();
    if (!c1 || !c2) return 1;
    qd_kernel produce, back, task, consume, branch, after;
    CHECK(qd_kernel_from_host_fn(c1, quick, "produce", &produce));
    CHECK(qd_kernel_from_host_fn(c1, quick, "back", &back));
    CHECK(qd_kernel_from_host_fn(c1, quick, "task", &task));
    CHECK(qd_kernel_from_host_fn(c2, quick, "consume", &consume));
    CHECK(qd_kernel_from_host_fn(c2, quick, "branch", &branch));
    CHECK(qd_kernel_from_host_fn(c2, quick, "after", &after));
    qd_stream a, b, d;
    CHECK(qd_stream_create(c1, NULL, &a));
    CHECK(qd_stream_create(c1, NULL, &b));
    CHECK(qd_stream_create(c2, NULL, &d));
    CHECK(qd_launch(a, produce, NULL, NULL, 0));
    uint64_t block = 0;
    CHECK(qd_mem_alloc_async(a, 3072, &block));
    qd_event e1, e2;
    CHECK(qd_event_create(c1, 0, &e1));
    CHECK(qd_event_create(c2, 0, &e2));
    CHECK(qd_event_record(a, e1));
    CHECK(qd_stream_wait_event(d, e1));
    CHECK(qd_launch(d, consume, NULL, NULL, 0));
    CHECK(qd_event_record(d, e2));
    CHECK(qd_stream_wait_event(b, e2));
    CHECK(qd_launch(b, back, NULL, NULL, 0));
    /* A graph of two branches on the second context, replayed twice. */
    qd_graph graph;
    qd_stream kids[2];
    CHECK(qd_stream_begin_capture(d));
    CHECK(qd_stream_fork(d, 2, kids));
    for (int i = 0; i < 2; ++i) CHECK(qd_launch(kids[i], branch, NULL, NULL, 0));
    CHECK(qd_stream_join(d, kids, 2));
    CHECK(qd_stream_end_capture(d, &graph));
    for (int i = 0; i < 2; ++i) CHECK(qd_graph_launch(graph, d));
    /* A parallel launch of two groups on the first. */
    qd_task tasks[2] = {QD_TASK_INIT, QD_TASK_INIT};
    for (uint32_t i = 0; i < 2; ++i) {
        tasks[i].group = i;
        tasks[i].kernel = task;
    }
    CHECK(qd_launch_parallel(a, tasks, 2));
    CHECK(qd_mem_free_async(a, block));
    /* The first context goes while the second still traces into the same file. */
    CHECK(qd_context_destroy(c1));
    CHECK(qd_launch(d, after, NULL, NULL, 0));
    CHECK(qd_graph_destroy(graph));
    CHECK(qd_context_destroy(c2));
    return 0;
}

static int fault(void) {
    qd_context c = new_context();
    if (!c) return 1;
    qd_kernel k;
    CHECK(qd_kernel_from_host_fn(c, broken, "broken", &k));
    qd_stream s;
    CHECK(qd_stream_create(c, NULL, &s));
    CHECK(qd_launch(s, k, NULL, NULL, 0));
    qd_status st = qd_stream_synchronize(s);
    if (st != QD_ERROR_DEVICE_LOST) {
        fprintf(stderr, "expected QD_ERROR_DEVICE_LOST, got %s\n", qd_status_name(st));
        return 1;
    }
    CHECK(qd_context_destroy(c));
    return 0;
}

static qd_context g_exit_context;
static qd_kernel g_omega;
static qd_stream g_exit_stream;

/* Registered before the first qd call, so exit() runs it after every destructor and handler
 * that qd's first calls registered. */
static void flush_at_exit(void) {
    if (!g_exit_context) return;
    for (int i = 0; i < 2; ++i)
        if (qd_launch(g_exit_stream, g_omega, NULL, NULL, 0) != QD_SUCCESS) _Exit(3);
    if (qd_stream_synchronize(g_exit_stream) != QD_SUCCESS) _Exit(4);
    qd_status st = qd_trace_flush(g_exit_context);
    if (st != QD_SUCCESS) {
        fprintf(stderr, "qd_trace_flush at exit: %s: %s\n", qd_status_name(st),
                qd_last_error_message());
        _Exit(5);
    }
}

static int exit_flush(void) {
    if (atexit(flush_at_exit) != 0) return 1;
    qd_context c = new_context();
    if (!c) return 1;
    CHECK(qd_kernel_from_host_fn(c, quick, "omega", &g_omega));
    CHECK(qd_stream_create(c, NULL, &g_exit_stream));
    for (int i = 0; i < 3; ++i) CHECK(qd_launch(g_exit_stream, g_omega, NULL, NULL, 0));
    CHECK(qd_stream_synchronize(g_exit_stream));
    CHECK(qd_trace_flush(c));
    g_exit_context = c;
    exit(0); /* the context stays: flush_at_exit still traces it */
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "normal") == 0) return normal();
    if (argc == 2 && strcmp(argv[1], "contexts") == 0) return contexts();
    if (argc == 2 && strcmp(argv[1], "fault") == 0) return fault();
    if (argc == 2 && strcmp(argv[1], "exit") == 0) return exit_flush();
    fprintf(stderr, "usage: trace_program normal|contexts|fault|exit\n");
    return 2;
}
