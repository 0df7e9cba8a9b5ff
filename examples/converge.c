/* converge.c: an iterative solver that runs on the device until it converges, with no host
 * synchronization inside the loop. Jacobi sweeps on the 1-D Poisson problem -x'' = 1 run
 * inside a WHILE conditional of a captured graph: a check kernel writes the condition word
 * (1 while the residual is above the threshold), and the graph's loop decides from it after
 * each iteration. The same kernels driven by a host loop (launch, copy the flag back,
 * synchronize, decide) give the same iterate bit for bit.
 *
 *     converge                    on the CPU backend, with the host kernels below
 *     converge --backend cuda     on a GPU, with the kernels of converge_kernels.cu (PTX)
 *
 * Where the backend has no conditional nodes (qd_stream_begin_conditional answers
 * QD_ERROR_NOT_SUPPORTED), it runs the host loop alone, prints "skipped: " and the reason, and
 * exits 0; any other error exits 1. Build against an installed qd (CPU only; the tree's build
 * also embeds the GPU kernels when nvcc is found, examples/meson.build):
 *     cc -std=c99 converge.c $(pkg-config --cflags --libs qd) -lm -o converge
 */
#include <qd/qd.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converge.h"

#ifdef QD_CONVERGE_HAVE_PTX
#include "converge_ptx.h" /* kConvergePtx: converge_kernels.cu as PTX */
#endif

#define CHECK(call)                                                                                \
    do {                                                                                           \
        qd_status status_ = (call);                                                                \
        if (status_ != QD_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,                      \
                    qd_status_name(status_), qd_last_error_message());                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { N = CONVERGE_N };
typedef ConvergeState State;

static State *state_of(void *const *args) {
    return (State *)(uintptr_t) * (const uint64_t *)args[0];
}

/* The host kernels (CPU backend). converge_kernels.cu has the same three for a GPU. */

/* x = 0, flag = 1, iterations = 0. */
static int32_t init(const qd_host_kernel_info *info, void *const *args) {
    State *s = state_of(args);
    (void)info;
    memset(s->x, 0, sizeof s->x);
    memset(s->y, 0, sizeof s->y);
    s->flag = 1;
    s->iterations = 0;
    return 0;
}

/* One Jacobi sweep of -u'' = 1 (h = 1, u = 0 outside): to[i] = (1 + from[i-1] + from[i+1]) / 2.
 * args[1]: 0 sweeps x into y, 1 sweeps y into x. */
static int32_t sweep(const qd_host_kernel_info *info, void *const *args) {
    State *s = state_of(args);
    const uint32_t dir = *(const uint32_t *)args[1];
    const double *from = dir ? s->y : s->x;
    double *to = dir ? s->x : s->y;
    int i;
    (void)info;
    for (i = 0; i < N; ++i) {
        const double left = i > 0 ? from[i - 1] : 0.0, right = i < N - 1 ? from[i + 1] : 0.0;
        to[i] = (1.0 + left + right) / 2.0;
    }
    return 0;
}

/* The residual's largest component; flag = 1 while it is above the threshold. */
static int32_t check(const qd_host_kernel_info *info, void *const *args) {
    State *s = state_of(args);
    double worst = 0.0;
    int i;
    (void)info;
    for (i = 0; i < N; ++i) {
        const double left = i > 0 ? s->x[i - 1] : 0.0, right = i < N - 1 ? s->x[i + 1] : 0.0;
        const double r = fabs(1.0 - (2.0 * s->x[i] - left - right));
        if (r > worst) worst = r;
    }
    s->iterations += 1;
    s->flag = worst > CONVERGE_THRESHOLD && s->iterations < CONVERGE_MAX_ITERATIONS;
    return 0;
}

typedef struct {
    qd_module module; /* the GPU kernels' module; 0 on the CPU */
    qd_kernel init, sweep, check;
    uint64_t state;
    uint32_t dir[2];
    qd_arg args[2][2];
} Solver;

/* The backend named on the command line (default: cpu), by the names qd_backend_name gives. */
static qd_backend backend_of(int argc, char **argv) {
    uint32_t b;
    if (argc == 1) return QD_BACKEND_CPU;
    if (argc == 3 && strcmp(argv[1], "--backend") == 0)
        for (b = QD_BACKEND_CPU; strcmp(qd_backend_name((qd_backend)b), "unknown") != 0; ++b)
            if (strcmp(argv[2], qd_backend_name((qd_backend)b)) == 0) return (qd_backend)b;
    fprintf(stderr, "usage: %s [--backend cpu|cuda]\n", argv[0]);
    exit(2);
}

/* The three kernels: host functions on the CPU, the PTX of converge_kernels.cu on a GPU. */
static void get_kernels(Solver *v, qd_context ctx, qd_backend backend) {
    v->module = 0;
    if (backend == QD_BACKEND_CPU) {
        CHECK(qd_kernel_from_host_fn(ctx, init, "init", &v->init));
        CHECK(qd_kernel_from_host_fn(ctx, sweep, "sweep", &v->sweep));
        CHECK(qd_kernel_from_host_fn(ctx, check, "check", &v->check));
        return;
    }
#ifdef QD_CONVERGE_HAVE_PTX
    CHECK(qd_module_load(ctx, kConvergePtx, sizeof kConvergePtx, &v->module));
    CHECK(qd_kernel_get(v->module, "converge_init", &v->init));
    CHECK(qd_kernel_get(v->module, "converge_sweep", &v->sweep));
    CHECK(qd_kernel_get(v->module, "converge_check", &v->check));
#else
    fprintf(stderr, "converge: built without nvcc: no GPU kernels for the %s backend\n",
            qd_backend_name(backend));
    exit(1);
#endif
}

static void launch(qd_stream s, qd_kernel k, const qd_arg *args, uint32_t n) {
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    CHECK(qd_launch(s, k, &cfg, args, n));
}

/* One iteration: two sweeps (x -> y -> x), then the check. */
static void iteration(Solver *v, qd_stream s) {
    launch(s, v->sweep, v->args[0], 2);
    launch(s, v->sweep, v->args[1], 2);
    launch(s, v->check, v->args[0], 1);
}

int main(int argc, char **argv) {
    const qd_backend backend = backend_of(argc, argv);
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    qd_context ctx;
    qd_stream s;
    qd_graph graph = 0;
    qd_conditional_desc loop = QD_CONDITIONAL_DESC_INIT;
    qd_status st;
    Solver v;
    State on_device, by_host;
    uint32_t flag = 1, host_syncs = 0, d;
    char why[512] = "";

    desc.backend = backend;
    CHECK(qd_context_create(&desc, &ctx));
    CHECK(qd_stream_create(ctx, NULL, &s));
    get_kernels(&v, ctx, backend);
    CHECK(qd_mem_alloc_async(s, sizeof(State), &v.state));
    for (d = 0; d < 2; ++d) {
        v.dir[d] = d;
        v.args[d][0].data = &v.state;
        v.args[d][0].size = sizeof v.state;
        v.args[d][1].data = &v.dir[d];
        v.args[d][1].size = sizeof v.dir[d];
    }

    /* On the device: init, then WHILE (flag) { sweep; sweep; check } as one graph. */
    CHECK(qd_stream_begin_capture(s));
    launch(s, v.init, v.args[0], 1);
    loop.kind = QD_CONDITIONAL_WHILE;
    loop.condition = v.state + offsetof(State, flag);
    st = qd_stream_begin_conditional(s, &loop);
    if (st == QD_ERROR_NOT_SUPPORTED) {
        /* No conditional nodes here: the capture goes on without one; end it and drop it. */
        snprintf(why, sizeof why, "%s", qd_last_error_message());
        CHECK(qd_stream_end_capture(s, &graph));
        CHECK(qd_graph_destroy(graph));
        graph = 0;
    } else {
        CHECK(st);
        iteration(&v, s);
        CHECK(qd_stream_end_conditional(s));
        CHECK(qd_stream_end_capture(s, &graph));
        CHECK(qd_graph_launch(graph, s));
        CHECK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&on_device, v.state, sizeof(State)));
        CHECK(qd_stream_synchronize(s)); /* once, after the whole solve */
    }

    /* On the host: the same kernels, one synchronization per iteration to read the flag. */
    launch(s, v.init, v.args[0], 1);
    while (flag) {
        iteration(&v, s);
        CHECK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&flag, v.state + offsetof(State, flag),
                              sizeof flag));
        CHECK(qd_stream_synchronize(s));
        ++host_syncs;
    }
    CHECK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&by_host, v.state, sizeof(State)));
    CHECK(qd_stream_synchronize(s));

    if (by_host.iterations >= CONVERGE_MAX_ITERATIONS) {
        fprintf(stderr, "no convergence in %u iterations\n", by_host.iterations);
        return 1;
    }
    if (!graph) {
        printf(
            "skipped: the device loop on %s: %s (the host loop alone converged in %u "
            "iterations, u(mid) = %.6f)\n",
            qd_backend_name(backend), why, by_host.iterations, by_host.x[N / 2]);
    } else if (on_device.iterations != by_host.iterations ||
               memcmp(on_device.x, by_host.x, sizeof on_device.x) != 0) {
        fprintf(stderr, "the device loop (%u iterations) and the host loop (%u) differ on %s\n",
                on_device.iterations, by_host.iterations, qd_backend_name(backend));
        return 1;
    } else {
        printf(
            "ok: %s: converged in %u iterations, u(mid) = %.6f; the graph's loop used 1 host "
            "synchronization, the host loop %u; identical bit for bit\n",
            qd_backend_name(backend), on_device.iterations, on_device.x[N / 2], host_syncs);
        CHECK(qd_graph_destroy(graph));
    }

    CHECK(qd_mem_free_async(s, v.state));
    CHECK(qd_stream_synchronize(s));
    CHECK(qd_kernel_destroy(v.init));
    CHECK(qd_kernel_destroy(v.sweep));
    CHECK(qd_kernel_destroy(v.check));
    if (v.module) CHECK(qd_module_unload(v.module));
    CHECK(qd_stream_destroy(s));
    CHECK(qd_context_destroy(ctx));
    return 0;
}
