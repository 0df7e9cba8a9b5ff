/* qdgo.h: the C side of the Go binding, included by every cgo file of package qd.
 *
 * Every qd call goes through one static inline wrapper that makes the qd call and, if it failed,
 * copies qd_last_error_message() before returning. The message is thread-local and a goroutine
 * may run on another OS thread at its next cgo call, so it must be read inside the same C call
 * that failed; a second cgo call could read another thread's message.
 *
 * The plain wrappers, one per qd function that returns qd_status (gq_<name without qd_>), are
 * generated into qdgo_gen.h by abi/gen (abi/generators/go.py) from abi/qd-api.json, and included
 * below after the result types they return. This file holds what is not a plain wrapper: the
 * result types and gq_finish*, the trampolines into Go, the Go kernel header, and the wrappers
 * that do more than pass their parameters to one qd call. */
#ifndef QD_GO_QDGO_H
#define QD_GO_QDGO_H

#if defined(__has_include)
#if !__has_include(<qd/qd.h>)
#error "qd (Go binding): <qd/qd.h> not found. Point PKG_CONFIG_PATH at the folder holding qd.pc (an installed libqd, or <build>/meson-uninstalled for a build tree), or build with -tags qd_nopkgconfig and set CGO_CFLAGS=-I<repo>/include and CGO_LDFLAGS='-L<build>/src -Wl,-rpath,<build>/src'. bindings/go/test does this for you."
#endif
#endif

#include <qd/qd.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The outcome of one qd call: its status and, only on an error, a malloc'd copy of the
 * thread-local message (the Go side frees it). */
typedef struct gq_result {
    qd_status status;
    char *msg;
    uint32_t captured; /* launches of Go functions: 1 when the stream was capturing */
} gq_result;

static inline gq_result gq_finish(qd_status status) {
    gq_result r;
    r.status = status;
    r.msg = NULL;
    r.captured = 0;
    if (status < 0) r.msg = strdup(qd_last_error_message());
    return r;
}

/* The outcome of a qd call with one 64-bit output (a handle, an address, a count): value is
 * written only on success. Returning it by value keeps Go from allocating an output slot. */
typedef struct gq_u64 {
    qd_status status;
    char *msg;
    uint64_t value;
} gq_u64;

static inline gq_u64 gq_finish_u64(qd_status status, uint64_t value) {
    gq_u64 r;
    gq_result f = gq_finish(status);
    r.status = f.status;
    r.msg = f.msg;
    r.value = status == QD_SUCCESS ? value : 0;
    return r;
}

/* The outcome of a qd call with one pointer output (qd_host_alloc): ptr is written only on
 * success. */
typedef struct gq_ptr {
    qd_status status;
    char *msg;
    void *ptr;
} gq_ptr;

static inline gq_ptr gq_finish_ptr(qd_status status, void *ptr) {
    gq_ptr r;
    gq_result f = gq_finish(status);
    r.status = f.status;
    r.msg = f.msg;
    r.ptr = status == QD_SUCCESS ? ptr : NULL;
    return r;
}

/* One wrapper per qd function that returns qd_status: gq_stream_query, gq_event_record, ... */
#include "qdgo_gen.h"

/* Host callbacks and Go host kernels: C trampolines (trampolines.c) that call into Go. */
void gq_host_fn_trampoline(void *user_data);
void gq_host_status_fn_trampoline(qd_stream stream, qd_status status, void *user_data);
int32_t gq_host_kernel_trampoline(const qd_host_kernel_info *info, void *const *args);

/* The hidden first argument of every launch of a Go host kernel: which Go function to run and
 * the size of each user argument, so the kernel can check its argument accesses. */
typedef struct gq_go_kernel_header {
    uint64_t handle;  /* runtime/cgo.Handle of the kernel's Go function */
    uint32_t magic;   /* GQ_GO_KERNEL_MAGIC */
    uint32_t num_args;
    uint32_t sizes[QD_MAX_ARGS];
} gq_go_kernel_header;
#define GQ_GO_KERNEL_MAGIC 0x6f47647du
/* The magic of a launch made into a capture: its replays hold no launch reference (the graph
 * holds the function), so their last block lets go of nothing. */
#define GQ_GO_KERNEL_MAGIC_CAPTURED 0x6f47647eu
#define GQ_GO_KERNEL_HEADER_FIXED 16u

/* Whether stream is capturing: qd_stream_query refuses exactly then with INVALID_OPERATION
 * (qd.h). Asked in the same C call as the launch of a Go function, which a capture holds
 * differently from a run (lifetime.go), and only while a capture of the context is open
 * (may_capture): a query that finds the stream idle tells the validation mode that the host
 * synchronized with it, which the program did not do. */
static inline uint32_t gq_capturing(qd_stream s, uint32_t may_capture) {
    return may_capture && qd_stream_query(s) == QD_ERROR_INVALID_OPERATION;
}
static inline void gq_set_header_magic(void *header, uint32_t captured) {
    uint32_t magic = captured ? GQ_GO_KERNEL_MAGIC_CAPTURED : GQ_GO_KERNEL_MAGIC;
    memcpy((char *)header + 8, &magic, sizeof magic);
}

/* ---- wrappers that do more than one plain qd call ----------------------------------------- */

/* The hazard handler of a context in fail mode: the refused call returns QD_ERROR_HAZARD with
 * the report as its message, so the report is not printed as well (one channel). */
static inline void gq_hazard_returned(const qd_hazard *hazard, void *user_data) {
    (void)hazard;
    (void)user_data;
}

/* qd_context_create from the descriptor's fields, then (fail_mode) the handler above; a context
 * made but not set up is destroyed again. */
static inline gq_u64 gq_context_create_from_fields(uint32_t backend, uint32_t device,
                                                   uint32_t stream_pool, uint32_t event_pool,
                                                   uint32_t workers, uint32_t flags,
                                                   uint32_t fail_mode) {
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    qd_context out = 0;
    d.backend = backend;
    d.flags = flags;
    d.device = device;
    d.stream_pool_size = stream_pool;
    d.event_pool_size = event_pool;
    d.cpu_worker_threads = workers;
    qd_status st = qd_context_create(&d, &out);
    if (st == QD_SUCCESS && fail_mode)
        st = qd_context_set_hazard_handler(out, gq_hazard_returned, NULL);
    if (st != QD_SUCCESS && out) {
        gq_u64 r = gq_finish_u64(st, 0);
        qd_context_destroy(out);
        return r;
    }
    return gq_finish_u64(st, out);
}
/* Sets the context's hazard handler again: the default (one line on stderr), or in fail mode
 * none (the error carries the report); QD_ERROR_INVALID_OPERATION when validation is off. */
static inline gq_result gq_context_reset_hazard_handler(qd_context c, uint32_t fail_mode) {
    return gq_context_set_hazard_handler(c, fail_mode ? gq_hazard_returned : NULL, NULL);
}

/* qd_stream_create from the descriptor's fields. */
static inline gq_u64 gq_stream_create_from_fields(qd_context c, uint32_t flags, int32_t priority) {
    qd_stream_desc d = QD_STREAM_DESC_INIT;
    d.flags = flags;
    d.priority = priority;
    return gq_stream_create(c, &d);
}
/* qd_stream_priority_range's two outputs packed in one value: least in the high 32 bits. */
static inline gq_u64 gq_stream_priority_range_packed(qd_context c) {
    int32_t least = 0, greatest = 0;
    qd_status st = qd_stream_priority_range(c, &least, &greatest);
    return gq_finish_u64(st, ((uint64_t)(uint32_t)least << 32) | (uint32_t)greatest);
}

/* A kernel whose function is the Go trampoline (a Go host kernel). */
static inline gq_u64 gq_kernel_from_go_trampoline(qd_context c, const char *name) {
    return gq_kernel_from_host_fn(c, gq_host_kernel_trampoline, name);
}

/* A launch whose argument values lie back to back in blob, sizes[i] bytes each: the qd_arg
 * array is built here, on the C stack, so Go never hands C memory that holds Go pointers.
 * config NULL is one block of one thread. */
static inline gq_result gq_too_many_args(void) {
    gq_result r;
    r.status = QD_ERROR_INVALID_ARGUMENT;
    r.msg = strdup("more than QD_MAX_ARGS (64) arguments");
    return r;
}
static inline gq_result gq_launch_blob(qd_stream s, qd_kernel k, const qd_launch_config *config,
                                       const qd_launch_attr *attrs, uint32_t num_attrs,
                                       uint8_t *blob, const uint32_t *sizes, uint32_t n,
                                       uint32_t go_header, uint32_t may_capture) {
    qd_arg args[QD_MAX_ARGS];
    uint64_t offset = 0;
    uint32_t captured = 0;
    gq_result r;
    if (n > QD_MAX_ARGS) return gq_too_many_args();
    if (go_header) {
        captured = gq_capturing(s, may_capture);
        gq_set_header_magic(blob, captured);
    }
    for (uint32_t i = 0; i < n; ++i) {
        args[i].data = blob + offset;
        args[i].size = sizes[i];
        offset += sizes[i];
    }
    /* Without attributes qd_launch itself: the plain launch keeps its path. */
    r = gq_finish(num_attrs ? qd_launch_ex(s, k, config, attrs, num_attrs, n ? args : NULL, n)
                            : qd_launch(s, k, config, n ? args : NULL, n));
    r.captured = captured;
    return r;
}
/* qd_graph_set_kernel_args of arguments packed in one Go blob (as gq_launch_blob's). */
static inline gq_result gq_graph_set_kernel_args_blob(qd_graph g, uint32_t node, uint8_t *blob,
                                                      const uint32_t *sizes, uint32_t n) {
    qd_arg args[QD_MAX_ARGS];
    uint64_t offset = 0;
    if (n > QD_MAX_ARGS) return gq_too_many_args();
    for (uint32_t i = 0; i < n; ++i) {
        args[i].data = blob + offset;
        args[i].size = sizes[i];
        offset += sizes[i];
    }
    return gq_finish(qd_graph_set_kernel_args(g, node, n ? args : NULL, n));
}
/* A launch of pre-packed arguments (C memory), after an optional leading argument (a Go
 * kernel's header, in Go memory without pointers). */
static inline gq_result gq_launch_packed(qd_stream s, qd_kernel k, const qd_launch_config *config,
                                         void *lead, uint32_t lead_size,
                                         const qd_arg *packed, uint32_t n, uint32_t may_capture) {
    qd_arg args[QD_MAX_ARGS];
    gq_result r;
    if (!lead) return gq_finish(qd_launch(s, k, config, n ? packed : NULL, n));
    if (n + 1 > QD_MAX_ARGS) return gq_too_many_args();
    args[0].data = lead;
    args[0].size = lead_size;
    for (uint32_t i = 0; i < n; ++i) args[i + 1] = packed[i];
    r.captured = gq_capturing(s, may_capture);
    gq_set_header_magic(lead, r.captured);
    {
        uint32_t captured = r.captured;
        r = gq_finish(qd_launch(s, k, config, args, n + 1));
        r.captured = captured;
    }
    return r;
}
/* qd_launch_parallel, marking the Go kernel headers among the tasks' arguments (C memory),
 * n_headers of them, with whether the stream is capturing. */
static inline gq_result gq_launch_parallel_marking_headers(qd_stream s, const qd_task *tasks,
                                                           uint32_t n, void *const *headers,
                                                           uint32_t n_headers,
                                                           uint32_t may_capture) {
    uint32_t captured = n_headers ? gq_capturing(s, may_capture) : 0;
    gq_result r;
    for (uint32_t i = 0; i < n_headers; ++i) gq_set_header_magic(headers[i], captured);
    r = gq_finish(qd_launch_parallel(s, tasks, n));
    r.captured = captured;
    return r;
}
/* qd_launch_host_fn of a Go function (handle: its runtime/cgo.Handle) through the trampoline,
 * saying whether the stream was capturing. */
static inline gq_result gq_launch_go_host_fn(qd_stream s, uintptr_t handle, uint32_t may_capture) {
    uint32_t captured = gq_capturing(s, may_capture);
    gq_result r = gq_finish(qd_launch_host_fn(s, gq_host_fn_trampoline, (void *)handle));
    r.captured = captured;
    return r;
}
/* qd_launch_host_status_fn of a Go function (handle: its runtime/cgo.Handle) through the
 * trampoline; qd refuses it on a capturing stream, so it is never captured. */
static inline gq_result gq_launch_go_host_status_fn(qd_stream s, uintptr_t handle) {
    return gq_launch_host_status_fn(s, gq_host_status_fn_trampoline, (void *)handle);
}
/* A graph replay, then (marker non-zero) a host callback after it on the same stream, which
 * runs once the replay has: captured is 1 when the marker was queued. */
static inline gq_result gq_graph_launch_marked(qd_graph g, qd_stream s, uintptr_t marker) {
    gq_result r = gq_finish(qd_graph_launch(g, s));
    if (r.status == QD_SUCCESS && marker)
        r.captured = qd_launch_host_fn(s, gq_host_fn_trampoline, (void *)marker) == QD_SUCCESS;
    return r;
}

#endif /* QD_GO_QDGO_H */
