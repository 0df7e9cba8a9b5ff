/*
 * qd.h: the public C API of qd, an embeddable runtime for GPU streams and events.
 *
 * This header is the documentation. Read "Conventions" once; every function below then lists
 * its threading rules and every status it can return, with the condition that triggers it.
 *
 * ---------------------------------------------------------------------------------------------
 * Conventions (apply to every function unless its own text says otherwise)
 * ---------------------------------------------------------------------------------------------
 *
 * Status.   Every function returns a qd_status: 0 (QD_SUCCESS) is success, a positive value
 *           is a non-error status (QD_NOT_READY), a negative value is an error. On an error,
 *           qd_last_error_message() holds a thread-local sentence naming the cause; it is only
 *           written on failure. Output parameters are written only on QD_SUCCESS.
 *           Each function lists the statuses it returns ("- QD_ERROR_...: when"), except two
 *           that every function returning qd_status may return and no list repeats: QD_SUCCESS
 *           and QD_ERROR_INTERNAL (a defect of qd, never a caller's mistake; the message names
 *           it). abi/describe reads these lists, and the fuzzers check every status against
 *           them.
 *
 * Which error wins. When several arguments are wrong, the status is that of the first class of
 *           check that fails, in this order; within a class, arguments are checked in the
 *           order of the parameter list, and an array's elements in index order:
 *           1. checks that need nothing but the arguments' own values: a NULL pointer the call
 *              needs, input or output (descriptors, arrays with a non-zero count, callbacks,
 *              names, outputs); counts; struct_size; flags; launch dimensions and argument
 *              lists; duplicated elements; address arithmetic that wraps
 *              (QD_ERROR_INVALID_ARGUMENT, QD_ERROR_OVERFLOW);
 *           2. every handle argument, then every handle inside an array argument (a task's
 *              kernel, a join's children): QD_ERROR_INVALID_HANDLE;
 *           3. handles of different contexts: QD_ERROR_WRONG_CONTEXT;
 *           4. the context's state: QD_ERROR_FORKED, QD_ERROR_DEVICE_LOST;
 *           5. checks that need the objects or the backend (an object's kind, an address's
 *              allocation, timing flags, pool capacity, ...), in the order the function lists.
 *           So qd_host_free(bad_ctx, NULL) is QD_ERROR_INVALID_ARGUMENT, and a join of
 *           {lease of another context, 0} is QD_ERROR_INVALID_HANDLE, as a launch of a bad
 *           stream with a kernel of another context is.
 *
 * Handles.  Objects are named by opaque 64-bit handles (slot, generation and type tag). 0 is
 *           never a valid handle. A handle that is 0, forged, of the wrong type, or names an
 *           object that was destroyed (or whose context was destroyed) gives
 *           QD_ERROR_INVALID_HANDLE; it never crashes and never falls back to another object.
 *           Handles of two different contexts mixed in one call give QD_ERROR_WRONG_CONTEXT,
 *           except where a function allows it (qd_stream_wait_event, "Several devices"): then
 *           contexts of the same backend may be mixed, and contexts of different backends give
 *           QD_ERROR_WRONG_CONTEXT.
 *
 * Streams.  Every call that schedules work takes the stream as its first argument and it is
 *           required: 0 is QD_ERROR_INVALID_HANDLE ("stream is required"). No call consults the
 *           thread-local active stream behind the caller's back.
 *
 * Threads.  Every function may be called from any thread, concurrently, on the same or
 *           different objects. A call racing with the destruction of an object it names either
 *           completes as if it came first, or returns QD_ERROR_INVALID_HANDLE; this holds for
 *           the object's context too (a call that resolved a context its destroy then swept
 *           gets QD_ERROR_INVALID_HANDLE, never a status about the state the destroy removed).
 *           The only thread-local state is the active stream and the last error message.
 *           Nested calls: a qd call made while another qd call on the same thread is in
 *           progress (from a hazard handler, a CPU module's constructor or destructor, or a
 *           callback run inline) may destroy any object, the outer call's own objects and
 *           context included (except where a blocking call is refused, below): the outer
 *           call then completes as if the destroy came after it, or returns
 *           QD_ERROR_INVALID_HANDLE, and what it uses is released when the outermost call on
 *           the thread returns.
 *           Blocking functions (the *_synchronize family, qd_context_destroy) called from inside
 *           a host kernel or host callback running on the same context, or from a CPU module's
 *           constructor or destructor (qd_module_load) of that context, return
 *           QD_ERROR_INVALID_OPERATION instead of deadlocking.
 *
 * Descriptors. Public structs start with uint32_t struct_size; initialise them with their
 *           INIT macro. A struct_size smaller than the first released size of that struct
 *           (QD_STRUCT_FIRST_SIZES, after the structs) gives QD_ERROR_INVALID_ARGUMENT. Any
 *           larger size is accepted: qd reads and writes only the bytes both the caller and the
 *           library know (an input's unknown fields are ignored; an output's are left as the
 *           caller had them), so a caller built against an older or a newer header works.
 *
 * Arrays of structs. An array of a struct that starts with struct_size (qd_task) is read at
 *           the stride of its first element's struct_size, so a caller built against a newer,
 *           larger struct is read correctly: every element must have the same struct_size,
 *           a multiple of 8 and at most 1024 (else QD_ERROR_INVALID_ARGUMENT). A struct
 *           without struct_size (qd_arg) never grows; new fields go into a new struct.
 *
 * Lost contexts. After a device fault (on the CPU backend: a host kernel returning non-zero),
 *           the context is lost: every later call that names it or one of its objects and
 *           would touch the device returns QD_ERROR_DEVICE_LOST, and the message names the
 *           kernel that faulted. Two groups keep working, so programs can report and clean up:
 *           queries of qd's own bookkeeping (qd_context_get_stats, qd_stream_get_context,
 *           qd_stream_get_priority, qd_stream_priority_range, qd_stream_get_active,
 *           qd_stream_set_active, and from 0.3 qd_stream_is_capturing and qd_stream_get_flags),
 *           and cleanup (every *_destroy, qd_stream_release, qd_module_unload, qd_host_free),
 *           which releases the object and returns QD_SUCCESS. qd_mem_free_async does touch
 *           the device and returns QD_ERROR_DEVICE_LOST; context destroy frees such blocks.
 *
 * Work queued before a loss. Work that has not started when the context becomes lost never
 *           runs, even though it was queued before the fault: kernels, copies, memsets, graph
 *           replays and host callbacks (qd_launch_host_fn's fn is then never called, on every
 *           backend; qd_launch_host_status_fn's fn is, once, with QD_ERROR_DEVICE_LOST: that
 *           is what it is for); work that had started finishes. On the CPU backend records,
 *           waits and frees still complete, so every synchronize returns
 *           (QD_ERROR_DEVICE_LOST). A dropped qd_launch_host_fn callback is never called and
 *           its user_data is passed nowhere later, so whoever keeps something alive for a
 *           queued callback (a closure, a buffer: bindings do) must not wait for the call to
 *           release it: when qd_context_destroy returns, every callback queued on the context
 *           has run or been dropped (or, from qd_launch_host_status_fn, been called), and what
 *           is still kept for one can be released.
 *
 * Signals.  No qd function is async-signal-safe: never call one from a signal handler. qd's
 *           locks are not re-entrant, so a handler that interrupts a qd call and calls qd
 *           itself can deadlock (qd_stream_query from a handler spins forever on the lock the
 *           interrupted thread holds). The CPU backend's worker threads block every
 *           asynchronous signal (all but SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS and
 *           SIGPROF), so a process-directed signal (kill, SIGINT, SIGTERM, SIGCHLD, timers) is
 *           delivered to one of the program's own threads, and host kernels and callbacks run
 *           with that mask; qd_context_create leaves the calling thread's mask as it was. On
 *           GPU backends host callbacks run on the driver's thread, with the driver's mask.
 *
 * Fork.     A context created before fork() returns QD_ERROR_FORKED from every call in the
 *           child (destroy calls only forget it there). Contexts created in the child work.
 *           This holds whatever the parent's other threads were doing in qd at the fork: qd's
 *           process-wide locks are taken around fork() (pthread_atfork) so the child never
 *           inherits one held, and in the child qd_context_destroy, qd_stream_destroy,
 *           qd_stream_release, qd_event_destroy, qd_kernel_destroy and qd_module_unload on
 *           inherited objects only make their handles invalid: they wait for nothing and
 *           release nothing (the inherited objects' memory stays, as a leak, in the child).
 *           A fork costs qd's prepare handler one lock per handle slot ever used.
 *
 * Raw pointers. Host pointers passed by the caller (argument data, memcpy sources) cannot be
 *           checked by qd. A pointer that is not NULL is trusted to be valid for the size given.
 *
 * Versions. "since 0.1" marks the release a symbol first appeared in. Numbered values are never
 *           renumbered or reused.
 */
#ifndef QD_QD_H
#define QD_QD_H

/* The public header is laid out by hand, as the documentation it is: one descriptor macro per
 * line, tables aligned for reading (abi/describe reads it). clang-format leaves it alone. */
/* clang-format off */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define QD_API __attribute__((visibility("default")))
#else
#define QD_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version (since 0.1)
 * ------------------------------------------------------------------------------------------- */

#define QD_VERSION_MAJOR 0
#define QD_VERSION_MINOR 3
#define QD_VERSION_PATCH 0
/** Encoded as (major << 16) | (minor << 8) | patch. */
#define QD_VERSION ((QD_VERSION_MAJOR << 16) | (QD_VERSION_MINOR << 8) | QD_VERSION_PATCH)

/* ---------------------------------------------------------------------------------------------
 * Status codes (since 0.1). One X-macro generates the values and their names.
 * X(name, value, description)
 * ------------------------------------------------------------------------------------------- */

#define QD_STATUS_LIST(X)                                                                       \
    X(QD_SUCCESS, 0, "success")                                                                \
    X(QD_NOT_READY, 1, "the work or event has not completed yet")                              \
    X(QD_ERROR_INVALID_ARGUMENT, -1, "an argument is out of its documented range")             \
    X(QD_ERROR_INVALID_HANDLE, -2, "a handle is 0, forged, of the wrong type, or destroyed")   \
    X(QD_ERROR_WRONG_CONTEXT, -3, "handles of different contexts were mixed in one call")      \
    X(QD_ERROR_INVALID_OPERATION, -4, "the object does not allow this operation")             \
    X(QD_ERROR_OUT_OF_MEMORY, -5, "host or device memory is exhausted")                       \
    X(QD_ERROR_OVERFLOW, -6, "a size or count overflows its arithmetic")                      \
    X(QD_ERROR_INVALID_ADDRESS, -7, "an address is not a live allocation of this context")    \
    X(QD_ERROR_POOL_EXHAUSTED, -8, "every stream of the context's pool is leased")            \
    X(QD_ERROR_NOT_FOUND, -9, "a named kernel or file does not exist")                        \
    X(QD_ERROR_INVALID_IMAGE, -10, "a module image cannot be loaded")                         \
    X(QD_ERROR_TIMING_DISABLED, -11, "an event was created without QD_EVENT_TIMING")          \
    X(QD_ERROR_NOT_RECORDED, -12, "an event was never recorded")                              \
    X(QD_ERROR_NOT_SUPPORTED, -13, "the backend does not support this operation")            \
    X(QD_ERROR_BACKEND_UNAVAILABLE, -14, "the backend or device is not available")           \
    X(QD_ERROR_DEVICE_LOST, -15, "a device fault made the context unusable")                  \
    X(QD_ERROR_FORKED, -16, "the context was inherited across fork()")                        \
    X(QD_ERROR_LAUNCH_FAILED, -17, "the backend rejected the launch")                         \
    X(QD_ERROR_INTERNAL, -18, "an internal error; please report it")                          \
    X(QD_ERROR_HAZARD, -19, "validation found a hazard in this call (since 0.2)")

/** Status returned by every qd function. */
typedef int32_t qd_status;

#define QD_STATUS_ENUM_ENTRY_(name, value, text) name = value,
enum qd_status_code { QD_STATUS_LIST(QD_STATUS_ENUM_ENTRY_) QD_STATUS_CODE_FORCE_32_ = 0x7fffffff };
#undef QD_STATUS_ENUM_ENTRY_

/* ---------------------------------------------------------------------------------------------
 * Handles and enums (since 0.1)
 * ------------------------------------------------------------------------------------------- */

typedef uint64_t qd_context;
typedef uint64_t qd_stream;
typedef uint64_t qd_event;
typedef uint64_t qd_module;
typedef uint64_t qd_kernel;

/** Backends. Stored as uint32_t in descriptors. */
typedef enum qd_backend {
    QD_BACKEND_DEFAULT = 0, /**< the embedded default: the CPU backend */
    QD_BACKEND_CPU = 1,     /**< asynchronous streams on host threads; always available */
    QD_BACKEND_CUDA = 2,    /**< NVIDIA driver, loaded at run time as libcuda.so.1 */
    QD_BACKEND_HIP = 3,     /**< AMD HIP, loaded at run time as libamdhip64.so */
    QD_BACKEND_FORCE_32_ = 0x7fffffff
} qd_backend;

/** Stream creation flags (qd_stream_desc.flags). */
enum qd_stream_flags {
    /** The stream does not synchronise with the native legacy default stream (GPU). Every qd
     *  stream already behaves so (GPU streams are always created non-blocking, as in cuda.core),
     *  so the flag only states it; the CPU backend has no legacy stream. */
    QD_STREAM_NON_BLOCKING = 1u << 0
};

/** Context creation flags (qd_context_desc.flags; since 0.2).
 *  The environment variable QD_VALIDATE (read with secure_getenv when a context is created)
 *  turns validation on for every context without a code change: "1" as QD_CONTEXT_VALIDATE,
 *  "error" as QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL, "0" or empty leaves the flags as
 *  given; any other value makes qd_context_create fail with QD_ERROR_INVALID_ARGUMENT. */
enum qd_context_flags {
    /** Validation mode ("Validation"): every operation queued on the context's streams is
     *  checked for unsynchronised cross-stream access and unsafe frees, which are reported. */
    QD_CONTEXT_VALIDATE = 1u << 0,
    /** With QD_CONTEXT_VALIDATE: a call whose operation would be a hazard is also refused with
     *  QD_ERROR_HAZARD (the report is still delivered; nothing is queued). Alone it is
     *  QD_ERROR_INVALID_ARGUMENT. */
    QD_CONTEXT_VALIDATE_FAIL = 1u << 1
};

/** Event creation flags. */
enum qd_event_flags {
    /** The event records a timestamp, so qd_event_elapsed_ms can use it. */
    QD_EVENT_TIMING = 1u << 0
};

/* ---------------------------------------------------------------------------------------------
 * Descriptors (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Parameters of qd_context_create. */
typedef struct qd_context_desc {
    uint32_t struct_size;
    uint32_t backend;            /**< a qd_backend value */
    uint32_t device;             /**< device ordinal; must be 0 on the CPU backend */
    uint32_t stream_pool_size;   /**< most streams leased at once; 0 = 32; at most 4096 */
    uint32_t event_pool_size;    /**< fork/join events kept for reuse; 0 = 256 */
    uint32_t cpu_worker_threads; /**< CPU backend worker threads; 0 = max(2, CPUs this process
                                      may use); at most 256; other backends ignore it. With
                                      one worker per usable CPU the
                                      workers are pinned one per CPU; the environment variable
                                      QD_CPU_PIN_WORKERS=0 (read with secure_getenv) turns that
                                      off, e.g. for a host thread that polls in a tight loop. */
    uint32_t flags;              /**< qd_context_flags (since 0.2; 0 in 0.1) */
    uint32_t reserved;           /**< must be 0 */
} qd_context_desc;
#define QD_CONTEXT_DESC_INIT                                                                    \
    { (uint32_t)sizeof(qd_context_desc), (uint32_t)QD_BACKEND_DEFAULT, 0u, 0u, 0u, 0u, 0u, 0u }

/** Parameters of qd_stream_create. */
typedef struct qd_stream_desc {
    uint32_t struct_size;
    uint32_t flags;   /**< qd_stream_flags */
    int32_t priority; /**< lower is more urgent, as in CUDA; 0 = default; clamped to the
                           backend's range (qd_stream_priority_range, which says how
                           priorities are scheduled) */
    uint32_t reserved;
} qd_stream_desc;
#define QD_STREAM_DESC_INIT { (uint32_t)sizeof(qd_stream_desc), 0u, 0, 0u }

/** Grid and block of a launch. Every dimension must be at least 1.
 *
 *  CPU semantics: the host kernel is called once per block, in row-major block order
 *  (x fastest), one block after another on the stream's worker thread. The kernel loops over
 *  the threads of its block itself, using qd_host_kernel_info.block_dim. Each block gets a
 *  zeroed scratch buffer of shared_mem_bytes (its "shared memory"). */
typedef struct qd_launch_config {
    uint32_t struct_size;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem_bytes;
} qd_launch_config;
#define QD_LAUNCH_CONFIG_INIT { (uint32_t)sizeof(qd_launch_config), {1u, 1u, 1u}, {1u, 1u, 1u}, 0u }

/** One kernel argument: size bytes read from data. qd copies them before qd_launch returns.
 *  qd_arg never grows (it has no struct_size): arrays of it have the stride sizeof(qd_arg). */
typedef struct qd_arg {
    const void *data;
    uint64_t size;
} qd_arg;

/** Largest number of arguments of one launch, and the largest total argument size. */
#define QD_MAX_ARGS 64u
#define QD_MAX_ARG_BYTES 4096u

/* Launch attributes (since 0.3): qd_launch_ex, and qd_task's attrs. What a launch asks of the
 * device beyond grid, block and shared memory. Every attribute is checked before anything is
 * queued; one the backend or device cannot honour is QD_ERROR_NOT_SUPPORTED naming it, never
 * dropped. What each means on each backend:
 *
 * CLUSTER_DIM (cluster[3]): the grid's blocks are grouped into thread-block clusters of
 *   cluster[0] x cluster[1] x cluster[2] blocks (each >= 1; each grid dimension a multiple of
 *   the cluster's). CUDA: CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, on devices of compute
 *   capability 9.0 and above (else QD_ERROR_NOT_SUPPORTED naming the device's capability); the
 *   kernel decides whether it fits (QD_ERROR_LAUNCH_FAILED otherwise). HIP: NOT_SUPPORTED. CPU:
 *   accepted and checked; blocks run one after another as without it (a CPU block has no
 *   distributed shared memory to share).
 * PROGRAMMATIC_SERIALIZATION (value 1 on, 0 off): programmatic dependent launch (PDL). The
 *   kernel may start before the previous kernel of its stream has finished, once every block
 *   of that kernel has triggered (or exited); it must call the device's grid-dependency wait
 *   (cudaGridDependencySynchronize, griddepcontrol.wait) before it reads what the previous
 *   kernel wrote. CUDA: CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (compute
 *   capability 9.0 and above; an older device runs it in plain stream order, as the driver
 *   does). In a capture (CUDA 12.3+ drivers) the graph keeps the programmatic edge to the
 *   previous kernel node of its stream. HIP: NOT_SUPPORTED. CPU: plain stream order.
 * PRIORITY (value): the launch's priority, lower is more urgent, clamped to the backend's
 *   range (qd_stream_priority_range), in place of its stream's priority for this launch only.
 *   CUDA: CU_LAUNCH_ATTRIBUTE_PRIORITY. HIP: NOT_SUPPORTED. CPU: while the launch is queued,
 *   its stream, whenever it is handed to the workers (it gets work, or its wait completes),
 *   takes the more urgent of the launch's and its own priority level, so when a worker has a
 *   choice of ready streams it takes the one holding the more urgent launch first (with the
 *   aging of qd_stream_priority_range's levels); work on one stream stays in order.
 * COMPLETION_EVENT (event): the event, of the stream's context, is recorded by the launch: it
 *   completes once every block of the launch has started (or exited), which may be long before
 *   the kernel ends, so work that waits on it must not read what the kernel writes. CUDA:
 *   CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT (a timing event is refused by the driver:
 *   QD_ERROR_LAUNCH_FAILED). HIP: NOT_SUPPORTED. CPU: completes when the launch starts its last
 *   block (blocks run in order). In a capture it is NOT_SUPPORTED (a graph node records no
 *   event of the caller's).
 *
 * Refusals, in the order of "Which error wins": a kind that is not a qd_launch_attr_kind, a
 * kind given twice, a nonzero field the kind does not use, a cluster dimension of 0 or one
 * that does not divide the grid, a PROGRAMMATIC_SERIALIZATION value other than 0 or 1:
 * QD_ERROR_INVALID_ARGUMENT; a completion event that is 0, not an event or destroyed:
 * QD_ERROR_INVALID_HANDLE; one of another context: QD_ERROR_WRONG_CONTEXT; each message names
 * the attribute's index ("attrs[2]", "tasks[1].attrs[0]"). Then the backend's
 * QD_ERROR_NOT_SUPPORTED, naming the attribute.
 *
 * Observers: the timeline trace lists a launch's attributes in its slice's args; the
 * validation mode orders a PDL launch after its predecessor as any stream-ordered operation
 * (it cannot see a kernel that reads before its grid-dependency wait: that race is the
 * kernel's, "Validation"), and sees a completion event's record as a record made just before
 * the launch (what waits on it is ordered after the launch's predecessors, not after the
 * launch). */

/** The kind of a launch attribute (since 0.3). Numbered values are never reused. */
typedef enum qd_launch_attr_kind {
    QD_LAUNCH_ATTR_CLUSTER_DIM = 1,
    QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION = 2,
    QD_LAUNCH_ATTR_PRIORITY = 3,
    QD_LAUNCH_ATTR_COMPLETION_EVENT = 4
} qd_launch_attr_kind;

/** One launch attribute (since 0.3). qd_launch_attr never grows (it has no struct_size):
 *  arrays of it have the stride sizeof(qd_launch_attr); a new kind uses the fields there are.
 *  Every field the kind does not use must be 0. */
typedef struct qd_launch_attr {
    qd_launch_attr_kind kind; /**< what the attribute is */
    int32_t value;            /**< PRIORITY: the priority; PROGRAMMATIC_SERIALIZATION: 1 on,
                                   0 off */
    uint32_t cluster[3];      /**< CLUSTER_DIM: blocks per cluster in x, y, z */
    uint32_t reserved0;       /**< must be 0 */
    qd_event event;           /**< COMPLETION_EVENT: the event the launch records */
    uint64_t reserved[2];     /**< must be 0 */
} qd_launch_attr;

/** Most attributes of one launch: one of each kind. */
#define QD_MAX_LAUNCH_ATTRS 4u

/** One task of qd_launch_parallel. An array of tasks is read at the stride of
 *  tasks[0].struct_size (Conventions, "Arrays of structs"); fields may be added at the end. */
typedef struct qd_task {
    uint32_t struct_size;
    uint32_t group;          /**< tasks of one group run in order; groups run concurrently */
    qd_kernel kernel;
    qd_launch_config config;
    const qd_arg *args;      /**< num_args entries; may be NULL when num_args is 0 */
    uint32_t num_args;
    uint32_t reserved;
    const qd_launch_attr *attrs; /**< (since 0.3) num_attrs entries, as qd_launch_ex's; read
                                      only when tasks[0].struct_size covers them */
    uint32_t num_attrs;          /**< (since 0.3) */
    uint32_t reserved2;          /**< (since 0.3) must be 0 */
} qd_task;
#define QD_TASK_INIT { (uint32_t)sizeof(qd_task), 0u, 0u, QD_LAUNCH_CONFIG_INIT, NULL, 0u, 0u, NULL, 0u, 0u }

/** What a CPU host kernel receives for one block. */
typedef struct qd_host_kernel_info {
    uint32_t struct_size;
    uint32_t block_idx[3];
    uint32_t grid_dim[3];
    uint32_t block_dim[3];
    uint32_t shared_mem_bytes;
    void *shared_mem; /**< zeroed scratch of shared_mem_bytes for this block; NULL when 0 */
} qd_host_kernel_info;

/** A CPU kernel. args[i] points to the copy of argument i, as in cuLaunchKernel's
 *  kernelParams. Return 0 on success; any other value is a device fault: the context becomes
 *  lost (QD_ERROR_DEVICE_LOST) and the message names the kernel. A CPU module exports
 *  functions of this type by name. */
typedef int32_t (*qd_host_kernel_fn)(const qd_host_kernel_info *info, void *const *args);

/** A host callback run in stream order. */
typedef void (*qd_host_fn)(void *user_data);

/** Statistics of one context (qd_context_get_stats). */
typedef struct qd_context_stats {
    uint32_t struct_size;
    uint32_t reserved;
    uint64_t live_streams;        /**< streams with a valid handle: created, imported, leased
                                       and the default stream */
    uint64_t live_events;         /**< events created by the user and not destroyed */
    uint64_t live_modules;
    uint64_t live_kernels;
    uint64_t stream_pool_capacity;/**< most streams leased at once */
    uint64_t stream_pool_created; /**< native streams the pool has created so far */
    uint64_t stream_pool_leased;  /**< leases held now (acquire, fork, parallel launch) */
    uint64_t stream_pool_hits;    /**< leases served by a stream the pool already had */
    uint64_t stream_pool_misses;  /**< leases that had to create a stream */
    uint64_t event_pool_created;  /**< native events the fork/join event pool has created */
    uint64_t event_pool_hits;
    uint64_t event_pool_misses;
    uint64_t live_allocations;    /**< qd_mem_alloc_async blocks not yet freed (not the blocks
                                       a graph owns, "Graphs": never counted here) */
    uint64_t bytes_allocated;     /**< their total size */
    uint64_t host_bytes_allocated;/**< qd_host_alloc bytes not yet freed */
    uint64_t live_graphs;         /**< (since 0.2) graphs (qd_stream_end_capture) not yet
                                       destroyed */
    uint64_t hazards_reported;    /**< (since 0.2) hazards the validation mode reported
                                       ("Validation"); 0 when it is off */
    uint64_t live_timelines;      /**< (since 0.3) timelines ("Timelines") not yet destroyed */
} qd_context_stats;
#define QD_CONTEXT_STATS_INIT                                                                   \
    { (uint32_t)sizeof(qd_context_stats), 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u }

/** What qd_device_get_info reports. */
typedef struct qd_device_info {
    uint32_t struct_size;
    uint32_t backend;          /**< qd_backend */
    uint32_t device;           /**< ordinal */
    uint32_t driver_version;   /**< CUDA: cuDriverGetVersion (e.g. 13000); HIP:
                                    hipDriverGetVersion; CPU: 0 */
    uint32_t compute_major;    /**< CUDA compute capability; HIP: the device's (gfx) major and
                                    minor as the runtime reports them; CPU: 0 */
    uint32_t compute_minor;
    uint32_t multiprocessors;  /**< GPU: multiprocessors; CPU: hardware threads */
    uint32_t reserved;
    uint64_t total_memory;     /**< bytes of device memory; CPU: 0 (unknown) */
    char name[128];            /**< NUL-terminated */
    uint32_t split_granularity;/**< (since 0.3) every count of qd_context_split is a multiple
                                    of it ("SM partitions"); CUDA: the SMs scheduled together
                                    (8 on compute capability 9.x); CPU: 1; 0: this device
                                    cannot be split (HIP, a CUDA driver before 12.4) */
    uint32_t split_minimum;    /**< (since 0.3) the smallest count of qd_context_split; 0 where
                                    split_granularity is 0 */
} qd_device_info;
#define QD_DEVICE_INFO_INIT { (uint32_t)sizeof(qd_device_info), 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, {0}, 0u, 0u }

/** The first released size of every struct that starts with struct_size, in one table:
 *  X(struct, size in bytes, version it was released in). qd refuses a struct_size below it and
 *  accepts every size from it up (Conventions, "Descriptors"); a field appended later never
 *  changes these numbers. */
#define QD_STRUCT_FIRST_SIZES(X)                                                                \
    X(qd_context_desc, 32u, 0.1)                                                                \
    X(qd_stream_desc, 16u, 0.1)                                                                 \
    X(qd_launch_config, 32u, 0.1)                                                               \
    X(qd_task, 64u, 0.1)                                                                        \
    X(qd_host_kernel_info, 56u, 0.1)                                                            \
    X(qd_context_stats, 128u, 0.1)                                                              \
    X(qd_device_info, 168u, 0.1)                                                              \
    X(qd_hazard, 80u, 0.2)                                                                      \
    X(qd_conditional_desc, 24u, 0.3)

/* ---------------------------------------------------------------------------------------------
 * Status, errors and version (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Name of a status, e.g. "QD_ERROR_INVALID_HANDLE"; "QD_STATUS_UNKNOWN" for other values.
 *  Threads: any. Never NULL; the string is static. */
QD_API const char *qd_status_name(qd_status status);

/** Thread-local description of the last failure on this thread ("" if none yet). Written only
 *  by calls that fail; valid until the next failing qd call on this thread. Never NULL. */
QD_API const char *qd_last_error_message(void);

/** The library's version, encoded like QD_VERSION. Compare with QD_VERSION to detect a header
 *  and library mismatch. Threads: any. */
QD_API uint32_t qd_version(void);

/* ---------------------------------------------------------------------------------------------
 * Devices (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Number of devices of a backend. The CPU backend always has exactly 1.
 *  Threads: any. The first call for a GPU backend loads its driver (once per process).
 *  - QD_ERROR_INVALID_ARGUMENT: count is NULL, or backend is not a qd_backend value.
 *  - QD_ERROR_BACKEND_UNAVAILABLE: the backend was not built in, its driver cannot be loaded, or
 *    it failed to initialise; the message carries the loader's or driver's reason. */
QD_API qd_status qd_device_count(qd_backend backend, uint32_t *count);

/** Describe one device.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL, out->struct_size is too small, backend is not a
 *    qd_backend value, or device >= qd_device_count.
 *  - QD_ERROR_BACKEND_UNAVAILABLE: as for qd_device_count. */
QD_API qd_status qd_device_get_info(qd_backend backend, uint32_t device, qd_device_info *out);

/** Name of a backend (since 0.3): "cpu", "cuda" or "hip", the names that the bindings and the
 *  qd tool use; "default" for QD_BACKEND_DEFAULT and "unknown" for any other value. It names
 *  every backend this header knows, built into this library or not (qd_device_count says which
 *  are available). Backends are numbered from QD_BACKEND_CPU up without gaps, so counting up
 *  from QD_BACKEND_CPU until the name is "unknown" visits every backend the library knows.
 *  Threads: any. Never NULL; the string is static. */
QD_API const char *qd_backend_name(qd_backend backend);

/* ---------------------------------------------------------------------------------------------
 * Contexts (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Create a context: one (backend, device), with its default stream, stream pool and event
 *  pool. On the CPU backend this starts cpu_worker_threads worker threads.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: desc or out is NULL; struct_size too small; backend unknown;
 *    device out of range; pool size, or a CPU context's worker count, above its limit; flags has bits that are
 *    not qd_context_flags, or QD_CONTEXT_VALIDATE_FAIL without QD_CONTEXT_VALIDATE; reserved
 *    not 0; the environment variable QD_VALIDATE has a value other than "", "0", "1" or
 *    "error"; QD_TRACE is set and the trace cannot start (see "Timeline trace"; from
 *    release 0.2).
 *  - QD_ERROR_BACKEND_UNAVAILABLE: the backend cannot be loaded (see qd_device_count).
 *  - QD_ERROR_OUT_OF_MEMORY: the handle table, threads or native context could not be made. */
QD_API qd_status qd_context_create(const qd_context_desc *desc, qd_context *out);

/** Destroy a context. Waits for all work already queued on any of its streams (drains), then
 *  destroys every child (streams, pooled streams, events, modules, kernels), frees every
 *  allocation still registered, and invalidates every child handle: later calls with them
 *  return QD_ERROR_INVALID_HANDLE. Other threads' active-stream entries for it become inert.
 *  Before freeing its memory it also waits for the streams of other contexts on which
 *  qd_memcpy_peer_async queued copies to or from that memory (their work queued so far), so
 *  no queued copy reads or writes freed memory; a qd_memcpy_peer_async naming this context
 *  that races the destroy completes first or returns QD_ERROR_INVALID_HANDLE. A free of one
 *  of its blocks refused while the destroy runs (QD_ERROR_HAZARD, a capture) leaves the block
 *  to the destroy, which frees it after the drain. Called from a hazard handler inside a peer
 *  copy of this context's memory, the memory is freed once that copy has run.
 *  Threads: any thread except a worker of this context. Blocks until the drain completes.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or already destroyed.
 *  - QD_ERROR_INVALID_OPERATION: called from a host kernel or callback of this context (a CPU
 *    module's constructor or destructor included: qd_module_load), or of another context whose
 *    stream has a peer copy of this context's memory queued (the destroy would wait for that
 *    stream, so for itself). */
QD_API qd_status qd_context_destroy(qd_context ctx);

/** Block until all work queued on every stream of the context has completed.
 *  Threads: any, except a host kernel or callback of this context.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: called from a host kernel or callback of this context.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: see Conventions. */
QD_API qd_status qd_context_synchronize(qd_context ctx);

/** The context's default stream: an ordinary stream handle that lives as long as the context.
 *  It cannot be destroyed or released. On the CPU backend it is a stream like any other (it
 *  does not synchronise with other streams).
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: see Conventions. */
QD_API qd_status qd_context_default_stream(qd_context ctx, qd_stream *out);

/** Copy the context's statistics into out (up to out->struct_size bytes).
 *  Threads: any. Counters are read without a global lock, so they are individually exact but
 *  may be mutually inconsistent while other threads work.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL or out->struct_size too small.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  Statistics stay readable on a lost or forked context. */
QD_API qd_status qd_context_get_stats(qd_context ctx, qd_context_stats *out);

/* ---------------------------------------------------------------------------------------------
 * SM partitions (since 0.3)
 *
 * qd_context_split makes, from one context, n contexts ("parts") that run their work on
 * disjoint sets of the device's execution units, so that latency-critical work in one part is
 * not crowded out by a saturating kernel in another (stream priorities cannot stop a kernel
 * from taking every SM).
 *
 * The units. CUDA: streaming multiprocessors; each part is a green context over its own SMs
 * (the driver's cuDevSmResourceSplitByCount, cuGreenCtxCreate); the parts' SMs are disjoint
 * from each other, and the parent context keeps using every SM of the device. The counts add
 * up to at most qd_device_info.multiprocessors; SMs left over belong to no part. CPU: worker
 * threads; the parent's worker count (qd_context_desc.cpu_worker_threads, or its default)
 * plays the SM count: each part starts counts[i] workers of its own, and where the process may
 * run on at least as many CPUs as the counts add up to, each part's workers are pinned to CPUs
 * no other part uses (QD_CPU_PIN_WORKERS=0 in the environment turns pinning off, as for any
 * context; otherwise the parts' workers float), so the same program runs where there is no GPU.
 * The parent's own workers are left as they are. HIP has no partitions: QD_ERROR_NOT_SUPPORTED.
 *
 * A part is a full context: streams, events, pools, modules, graphs, memory, the trace and the
 * validation mode work in it as in any context (it is made with the parent's pool sizes and
 * flags, and QD_VALIDATE and QD_TRACE apply to it as to qd_context_create). Its handles are
 * its own: mixing them with the parent's or another part's in one call is
 * QD_ERROR_WRONG_CONTEXT, except where contexts may be mixed, as qd_stream_wait_event: work of
 * two parts (or of a part and its parent) is ordered by an event recorded in one and waited on
 * in the other, as between any two contexts of one device; memory moves between them as
 * between two contexts (qd_memcpy_peer_async). There is no context-wide record or wait (the
 * driver's cuGreenCtxRecordEvent): an event names one stream's point, so to order a part's
 * whole work, record an event on each of its streams that has work and wait on each.
 *
 * Lifetime. A part holds what it needs of the device itself (CUDA: its green context, which
 * retains the device's primary context; CPU: its own workers) and nothing of its parent, so
 * the parent and the parts may be destroyed in any order: destroying the parent neither waits
 * for nor ends the parts' work, and destroying a part releases its units. Each part is
 * destroyed with qd_context_destroy, like any context. A part can be split no further
 * (QD_ERROR_INVALID_OPERATION): split the parent again instead.
 * ------------------------------------------------------------------------------------------- */

/** The most parts of one qd_context_split (since 0.3). */
#define QD_MAX_SPLIT_PARTS 64u

/** (since 0.3) Make n contexts over disjoint sets of ctx's execution units: out[i] gets
 *  counts[i] of them ("SM partitions"). All or none: on an error nothing was made and out is
 *  left as it was. A part lost to a device fault is lost alone on the CPU backend; on CUDA a
 *  fault corrupts the device, so every context of it is lost (the primary context's rule).
 *  Threads: any, except a host kernel or callback of ctx.
 *  - QD_ERROR_INVALID_ARGUMENT: counts or out is NULL; n is 0 or above QD_MAX_SPLIT_PARTS; a
 *    count is 0; the counts add up to more units than ctx has (CUDA: its device's SMs; CPU:
 *    its worker threads); a count is below qd_device_info.split_minimum or not a multiple of
 *    qd_device_info.split_granularity; the driver cannot give a part exactly its count (the
 *    message names the rule and the counts).
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: ctx is itself a part; called from a host kernel or callback
 *    of ctx.
 *  - QD_ERROR_NOT_SUPPORTED: the backend has no partitions (HIP), or the CUDA driver has no
 *    green contexts (before CUDA 12.4); the message names the version needed.
 *  - QD_ERROR_OUT_OF_MEMORY: threads, handles or native contexts could not be made.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: see Conventions. */
QD_API qd_status qd_context_split(qd_context ctx, const uint32_t *counts, uint32_t n,
                                  qd_context *out);

/* ---------------------------------------------------------------------------------------------
 * Streams (since 0.1)
 *
 * A stream is an in-order queue of work. Different streams run concurrently. Three kinds of
 * stream handle exist: owned (qd_stream_create; destroy with qd_stream_destroy), leased
 * (qd_stream_acquire / qd_stream_fork; give back with qd_stream_release / qd_stream_join) and
 * borrowed (qd_stream_import; qd_stream_destroy forgets it but never destroys the native
 * stream). The default stream is none of these and cannot be destroyed.
 * ------------------------------------------------------------------------------------------- */

/** Create a stream owned by the caller.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL; desc is not NULL and has struct_size too small,
 *    unknown flags or reserved not 0. desc may be NULL (defaults).
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_OUT_OF_MEMORY: no handle slot or native stream could be made.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_create(qd_context ctx, const qd_stream_desc *desc, qd_stream *out);

/** Destroy an owned or borrowed stream. Returns at once, even with work in flight: that work
 *  still completes, and the native stream is released only afterwards. The handle is invalid
 *  from the moment this returns. A borrowed (imported) native stream is never destroyed.
 *  Threads: any. Two threads destroying the same stream: one succeeds, the other gets
 *  QD_ERROR_INVALID_HANDLE.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or already destroyed.
 *  - QD_ERROR_INVALID_OPERATION: stream is the default stream, or a pool lease (use
 *    qd_stream_release); stream is capturing ("Graphs"). */
QD_API qd_status qd_stream_destroy(qd_stream stream);

/** Block until all work queued on the stream so far has completed.
 *  Threads: any, except a host kernel or callback of the same context.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: called from a host kernel or callback of this context; stream
 *    is capturing ("Graphs").
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_synchronize(qd_stream stream);

/** QD_SUCCESS if all work queued on the stream has completed, QD_NOT_READY if not. Never blocks.
 *  Threads: any.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing ("Graphs").
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_query(qd_stream stream);

/** Make later work on stream wait until the event's most recent record (as of this call) has
 *  completed. Only the stream waits; the host does not block. Waiting on an event that was
 *  never recorded is a no-op, as in CUDA. Recording the event again later does not affect
 *  this wait.
 *  From release 0.2 on, the event may belong to another context of the same backend, on any
 *  device (CUDA's cuStreamWaitEvent accepts events of other contexts and devices; the CPU
 *  backend orders its contexts' workers the same way): this is how work on one device waits
 *  for work on another ("Several devices"). Destroying the event's context afterwards is allowed: its
 *  destroy drains its streams, so the record completes and the wait is released; a stream
 *  already waiting never hangs on a destroyed context. Mixes and what they return: same
 *  context, or two contexts of one backend: allowed; contexts of two backends (CPU and CUDA,
 *  CUDA and HIP): QD_ERROR_WRONG_CONTEXT; an event of a destroyed context:
 *  QD_ERROR_INVALID_HANDLE (its handles died with it).
 *  Threads: any.
 *  - QD_ERROR_INVALID_HANDLE: stream or event is 0, of the wrong type, or destroyed (or its
 *    context was).
 *  - QD_ERROR_WRONG_CONTEXT: stream and event belong to contexts of different backends.
 *  - QD_ERROR_INVALID_OPERATION: ("Graphs") stream is capturing and the event's latest record
 *    was made outside its capture (a record in another context always is); or the event's
 *    latest record is inside another capture (of either context).
 *    A stream that is not capturing and waits on a record made inside a capture of its own
 *    context joins it.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: the stream's or the event's context is lost or was
 *    inherited across fork(). */
QD_API qd_status qd_stream_wait_event(qd_stream stream, qd_event event);

/** Lease a stream from the context's pool. The lease is exclusive: no other holder gets the
 *  same stream until it is released, and every lease gets a fresh handle, so a handle kept
 *  after release is stale (QD_ERROR_INVALID_HANDLE), never an alias of someone else's stream.
 *  The pool is bounded by qd_context_desc.stream_pool_size; when every stream is leased the
 *  call fails at once with QD_ERROR_POOL_EXHAUSTED (it never blocks, and never hands out an
 *  aliased or default stream). A leased stream may still be running its previous holder's
 *  work; new work queues after it.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_POOL_EXHAUSTED: stream_pool_size leases are held already.
 *  - QD_ERROR_OUT_OF_MEMORY: a native stream could not be created.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_acquire(qd_context ctx, qd_stream *out);

/** Return a leased stream to its pool. Returns at once; work queued on it still completes.
 *  Threads: any.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, destroyed, or already released.
 *  - QD_ERROR_INVALID_OPERATION: stream is not a pool lease (owned, borrowed or default); the
 *    lease is capturing ("Graphs": join it back with qd_stream_join instead). */
QD_API qd_status qd_stream_release(qd_stream stream);

/** Fork: lease n streams from the pool into children[0..n) and make each wait for the work
 *  queued on parent so far (an event from the event pool; no host synchronisation).
 *  All or nothing: on any error no stream stays leased.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: children is NULL, or n is 0.
 *  - QD_ERROR_INVALID_HANDLE: parent is 0, not a stream, or destroyed.
 *  - QD_ERROR_POOL_EXHAUSTED: fewer than n streams are free in the pool (always when n is
 *    more than the pool's capacity, qd_context_desc.stream_pool_size).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_fork(qd_stream parent, uint32_t n, qd_stream *children);

/** Join: make parent wait for all work queued so far on each child (pooled events; no host
 *  synchronisation), then release every child to the pool. children must be pool leases
 *  (from qd_stream_fork or qd_stream_acquire) of parent's context. Everything is validated
 *  before anything is queued: on an error nothing changes. A child that is capturing
 *  ("Graphs") is released too (its handle is stale at once), but its stream stays with the
 *  capture until the capture ends. A failure of the device after some children's records
 *  were queued (QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST: not a refusal) leaves parent
 *  waiting for the children queued before it, and releases none.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: children is NULL, n is 0, or a child appears twice or equals
 *    parent.
 *  - QD_ERROR_INVALID_HANDLE: parent or a child is 0, not a stream, or destroyed/released.
 *  - QD_ERROR_WRONG_CONTEXT: a child belongs to another context.
 *  - QD_ERROR_INVALID_OPERATION: a child is not a pool lease; parent is capturing (or would
 *    join the capture of an earlier child) and a child is outside that capture or in another
 *    one ("Graphs"): nothing is queued or recorded, the capture stays as it was.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_join(qd_stream parent, const qd_stream *children, uint32_t n);

/** Set this thread's active stream for ctx and return the one it replaces in *previous
 *  (optional), so a scope can restore it. The active stream is a value for callers and
 *  bindings to read explicitly (qd_stream_get_active); no qd call ever uses it implicitly.
 *  It is per (thread, context).
 *
 *  Go: goroutines migrate between OS threads, so a thread-local value set in one goroutine
 *  may be read by another, or lost. Go code should carry its stream explicitly (the Go
 *  package does), or call runtime.LockOSThread for the whole scope that sets and reads it.
 *  Rust: use a guard that calls qd_stream_set_active with the previous value in Drop, and do
 *  not hold it across an .await (async tasks also move between threads).
 *
 *  Threads: affects only the calling thread.
 *  - QD_ERROR_INVALID_HANDLE: ctx or stream is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: stream belongs to another context.
 *  On an error the active stream is unchanged and *previous is not written. */
QD_API qd_status qd_stream_set_active(qd_context ctx, qd_stream stream, qd_stream *previous);

/** This thread's active stream for ctx: the last one set on this thread, or the default stream
 *  if none was set. The value is returned as set, even if that stream has since been
 *  destroyed (then using it gives QD_ERROR_INVALID_HANDLE; nothing falls back).
 *  Threads: reads only the calling thread's value.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed. */
QD_API qd_status qd_stream_get_active(qd_context ctx, qd_stream *out);

/** The context a stream belongs to.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed. */
QD_API qd_status qd_stream_get_context(qd_stream stream, qd_context *out);

/** The priority applied to the stream after clamping to the backend's range (lower is more
 *  urgent). Compare it with the requested one to know whether the request was applied.
 *  - QD_ERROR_INVALID_ARGUMENT: priority is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed. */
QD_API qd_status qd_stream_get_priority(qd_stream stream, int32_t *priority);

/** The backend's priority range: *least (the default, numerically largest) and *greatest (most
 *  urgent, numerically smallest). CPU: least 0, greatest -2.
 *  Scheduling, CPU backend: a free worker takes the ready stream of the most urgent priority
 *  (streams of one priority in turn, each for up to 32 operations while others wait), with
 *  aging: each time a more urgent stream is taken while a less urgent one waits for a worker,
 *  that priority is passed over once, and at its 8th pass its first waiting stream is taken
 *  instead. So streams of a more urgent priority that always have work cannot starve a less
 *  urgent one: a waiting priority is served within 10 turns of more urgent streams (9 when it
 *  is the only one waiting), however busy they are. Priorities never preempt
 *  an operation that is running. GPU backends: the driver's stream priorities, which are a
 *  hint to the hardware's scheduler (it may starve less urgent streams while more urgent ones
 *  always have work).
 *  - QD_ERROR_INVALID_ARGUMENT: least or greatest is NULL.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed. */
QD_API qd_status qd_stream_priority_range(qd_context ctx, int32_t *least, int32_t *greatest);

/** The native stream behind a handle (CUstream on CUDA, hipStream_t on HIP). The native
 *  stream stays owned by qd; it is valid until the handle is destroyed or released.
 *  - QD_ERROR_INVALID_ARGUMENT: native is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: the CPU backend has no native streams. */
QD_API qd_status qd_stream_native_handle(qd_stream stream, uint64_t *native);

/** Wrap a native stream created outside qd as a borrowed stream. qd never destroys it:
 *  qd_stream_destroy and qd_context_destroy only forget it. The caller keeps the native stream
 *  alive until the borrowed handle is destroyed.
 *  CUDA checks that the stream belongs to the context's device (QD_ERROR_INVALID_ARGUMENT
 *  otherwise); HIP offers no such query, so there the caller must import only streams of the
 *  context's device.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL or native is 0.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: the CPU backend has no native streams.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_import(qd_context ctx, uint64_t native, qd_stream *out);

/** Is the stream capturing (since 0.3)? *capturing is 1 while the stream is the origin of an
 *  open capture or has joined one ("Graphs": a child of qd_stream_fork or a stream that waited
 *  on an event recorded inside it), and 0 otherwise (before the capture begins, and from the
 *  moment qd_stream_end_capture returns). Call it before anything that a capture refuses or
 *  would record instead of run. It queues nothing and takes no lock, so it may be called on a
 *  capturing stream without touching the capture, and from a host callback. A capture begun or
 *  ended by another thread during the call may be seen either way.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: capturing is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed. */
QD_API qd_status qd_stream_is_capturing(qd_stream stream, int32_t *capturing);

/** The stream's qd_stream_flags (since 0.3): those of qd_stream_desc.flags it was created with;
 *  QD_STREAM_NON_BLOCKING for the default stream and for pool leases (created so); for a
 *  borrowed stream (qd_stream_import), QD_STREAM_NON_BLOCKING when the native stream was created
 *  non-blocking (cuStreamGetFlags, hipStreamGetFlags, read at import) and 0 when it
 *  synchronises with the legacy default stream. Queues nothing and takes no lock; allowed while
 *  the stream captures.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: flags is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: stream is borrowed and the driver cannot read a stream's flags
 *    (no cuStreamGetFlags or hipStreamGetFlags; CUDA 5.5 and HIP 5.2 have them): the message
 *    names the missing entry. */
QD_API qd_status qd_stream_get_flags(qd_stream stream, uint32_t *flags);

/* ---------------------------------------------------------------------------------------------
 * Events (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Create an event. flags: 0 or QD_EVENT_TIMING.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL, or flags has unknown bits.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_event_create(qd_context ctx, uint32_t flags, qd_event *out);

/** Destroy an event. Returns at once, even if a record is pending; streams already waiting on
 *  it still wait for that record.
 *  - QD_ERROR_INVALID_HANDLE: event is 0, not an event, or already destroyed. */
QD_API qd_status qd_event_destroy(qd_event event);

/** Record the event on the stream: it completes when all work queued on the stream so far has
 *  completed. Recording again replaces the previous record for later queries and waits.
 *  - QD_ERROR_INVALID_HANDLE: stream or event is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: stream and event belong to different contexts.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_event_record(qd_stream stream, qd_event event);

/** QD_SUCCESS if the most recent record has completed (or the event was never recorded),
 *  QD_NOT_READY if not. Never blocks.
 *  - QD_ERROR_INVALID_HANDLE: event is 0, not an event, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: the latest record is inside a capture that is still open
 *    ("Graphs").
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_event_query(qd_event event);

/** Block until the most recent record has completed (returns at once if never recorded).
 *  Threads: any, except a host kernel or callback of the same context.
 *  - QD_ERROR_INVALID_HANDLE: event is 0, not an event, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: called from a host kernel or callback of this context; the
 *    latest record is inside a capture that is still open ("Graphs").
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_event_synchronize(qd_event event);

/** Milliseconds between the completion of start's and end's most recent records (negative if
 *  end completed first). Timestamps come from a monotonic clock (CPU) or the device (GPU).
 *  - QD_ERROR_INVALID_ARGUMENT: ms is NULL.
 *  - QD_ERROR_INVALID_HANDLE: start or end is 0, not an event, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: start and end belong to different contexts.
 *  - QD_ERROR_TIMING_DISABLED: start or end was created without QD_EVENT_TIMING.
 *  - QD_ERROR_NOT_RECORDED: start or end was never recorded.
 *  - QD_NOT_READY: a record has not completed yet (*ms is not written).
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_event_elapsed_ms(qd_event start, qd_event end, float *ms);

/* ---------------------------------------------------------------------------------------------
 * Timelines (since 0.3)
 *
 * A timeline is a 64-bit counter that only grows (Vulkan and D3D12 call it a timeline
 * semaphore). A stream signals it (qd_timeline_signal: when the work queued before has
 * completed, the counter becomes the value) and waits for it (qd_timeline_wait: later work
 * starts once the counter has reached the value), and so does the host (qd_timeline_host_signal,
 * qd_timeline_host_wait, qd_timeline_query). Unlike an event, a wait names a value, not a
 * record: it may be queued before the signal that satisfies it, and it waits for it.
 *
 * Values. A timeline starts at its initial value. Each signal, from a stream or the host, must
 * be above every value signalled or queued for signalling on the timeline before it; a signal
 * that is not is refused at the call (QD_ERROR_INVALID_ARGUMENT: always known then, since the
 * timeline remembers the largest value queued so far). Signals queued on different streams
 * may complete in another order than they were queued: the counter takes the largest value
 * that has completed, so it never goes back. A wait for a value at or below the counter is
 * satisfied at once (a wait for 0 always is).
 *
 * Lifetime. A timeline lives as long as its handle or the work queued on it, whichever lasts
 * longer: qd_timeline_destroy returns at once; signals already queued still complete and waits
 * already queued still wait for them. A queued stream wait that can no longer be satisfied (its
 * timeline was destroyed, or its context's destroy began, and no signal queued or made before
 * reaches its value) is released, and the work behind it runs, so a destroy never hangs on
 * it; so is every wait of a lost context (its work is skipped: Conventions, "Work queued
 * before a loss"). Waits that satisfy each other in a cycle (stream A waits for a value that
 * only a signal queued behind a wait of stream B reaches, and B's for one behind A's) never
 * complete; that is a deadlock of the program, not of qd.
 *
 * Graphs. A capture does not take timeline operations: qd_timeline_signal and qd_timeline_wait
 * on a capturing stream are QD_ERROR_INVALID_OPERATION, and the capture goes on.
 *
 * Validation ("Validation") sees a signal and a wait that it satisfies as ordering: a wait for
 * value v orders its stream after the work queued before the first signal queued with a value
 * of at least v, and a host wait (or a query that found the value reached) orders the host the
 * same way. A wait queued before any signal that reaches its value orders its stream after
 * everything queued so far on the context's streams (a hazard may be missed, none is invented).
 *
 * Backends. CPU: a 64-bit counter; a stream that reaches a wait for a value not yet signalled
 * is parked and handed back to the workers by the signal (no polling, no worker blocked).
 * CUDA and HIP: a 64-bit word of pinned host memory, written by cuStreamWriteValue64 and
 * waited on by cuStreamWaitValue64 (greater or equal; hipStreamWriteValue64 and
 * hipStreamWaitValue64 on HIP); qd_timeline_query and qd_timeline_host_wait read the word (a
 * host wait polls it, sleeping up to 1 ms between looks), qd_timeline_host_signal writes it.
 * Two differences from the CPU backend follow from the driver: a signal writes its value, so
 * signals of two streams that complete out of value order leave the smaller one (order them,
 * or signal from one stream); and closing a timeline with a queued wait that no signal reaches
 * raises the word to that wait's value, which releases the timeline's other queued waits too.
 * ------------------------------------------------------------------------------------------- */

typedef uint64_t qd_timeline;

/** Create a timeline of ctx whose counter starts at initial_value (since 0.3). Counted in
 *  qd_context_stats.live_timelines until destroyed.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: the driver has no stream memory operations on 64-bit words (CUDA
 *    before 11.7, HIP without hipStreamWaitValue64); the message names the missing entry and
 *    the version needed.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_timeline_create(qd_context ctx, uint64_t initial_value, qd_timeline *out);

/** Destroy a timeline (since 0.3). Returns at once: signals already queued still complete,
 *  waits already queued still wait for them, and a queued wait that no signal queued or made
 *  before this call reaches is released ("Lifetime" above). A host thread blocked in
 *  qd_timeline_host_wait on it returns QD_ERROR_INVALID_HANDLE.
 *  Threads: any. Two threads destroying the same timeline: one succeeds, the other gets
 *  QD_ERROR_INVALID_HANDLE.
 *  - QD_ERROR_INVALID_HANDLE: timeline is 0, not a timeline, or already destroyed. */
QD_API qd_status qd_timeline_destroy(qd_timeline timeline);

/** Queue a signal on stream (since 0.3): once the work queued on stream before it has
 *  completed, the timeline's counter becomes value (or stays, if a signal of a larger value
 *  completed first), and the waits it satisfies are released.
 *  Threads: any.
 *  - QD_ERROR_INVALID_HANDLE: stream or timeline is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: stream and timeline belong to different contexts.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED.
 *  - QD_ERROR_INVALID_ARGUMENT: value is not above every value signalled or queued for
 *    signalling on the timeline before this call (the message names the largest one); nothing
 *    is queued.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing ("Graphs"); nothing is queued.
 *  - QD_ERROR_HAZARD: validation's fail mode refused it ("Validation").
 *  - QD_ERROR_OUT_OF_MEMORY. */
QD_API qd_status qd_timeline_signal(qd_stream stream, qd_timeline timeline, uint64_t value);

/** Queue a wait on stream (since 0.3): work queued on stream after it starts once the
 *  timeline's counter has reached value. Only the stream waits; the host does not block. The
 *  signal that satisfies it may be queued (or made by the host) later.
 *  Threads: any.
 *  - QD_ERROR_INVALID_HANDLE: stream or timeline is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: stream and timeline belong to different contexts.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing ("Graphs"); nothing is queued.
 *  - QD_ERROR_HAZARD: validation's fail mode refused it ("Validation").
 *  - QD_ERROR_OUT_OF_MEMORY. */
QD_API qd_status qd_timeline_wait(qd_stream stream, qd_timeline timeline, uint64_t value);

/** Signal from the host (since 0.3): the counter becomes value now, and the waits it satisfies
 *  (of streams and of host threads) are released.
 *  Threads: any, host kernels and callbacks included.
 *  - QD_ERROR_INVALID_HANDLE: timeline is 0, not a timeline, or destroyed.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED.
 *  - QD_ERROR_INVALID_ARGUMENT: value is not above every value signalled or queued for
 *    signalling on the timeline before this call (the message names the largest one); the
 *    counter is unchanged. */
QD_API qd_status qd_timeline_host_signal(qd_timeline timeline, uint64_t value);

/** Block the calling thread until the timeline's counter has reached value, for at most
 *  timeout_ns nanoseconds (since 0.3). timeout_ns 0 only looks (never blocks); UINT64_MAX waits
 *  without a limit. A thread blocked here sleeps (after a bounded spin); it is woken by the
 *  signal that reaches value, by the loss of the context (QD_ERROR_DEVICE_LOST), or by the
 *  destroy of the timeline or its context (QD_ERROR_INVALID_HANDLE): it never hangs on a lost
 *  or destroyed context.
 *  Threads: any; from a host kernel or callback of the timeline's context only with timeout_ns
 *  0 (a blocking wait there could wait for itself).
 *  - QD_NOT_READY: the counter had not reached value when the timeout expired.
 *  - QD_ERROR_INVALID_HANDLE: timeline is 0, not a timeline, or destroyed (also during the
 *    wait).
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: the context is lost (also during the wait) or was
 *    inherited across fork().
 *  - QD_ERROR_INVALID_OPERATION: timeout_ns is not 0 and the call comes from a host kernel or
 *    callback of the timeline's context. */
QD_API qd_status qd_timeline_host_wait(qd_timeline timeline, uint64_t value, uint64_t timeout_ns);

/** The timeline's counter now, into *value (since 0.3). Never blocks.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: value is NULL.
 *  - QD_ERROR_INVALID_HANDLE: timeline is 0, not a timeline, or destroyed.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_timeline_query(qd_timeline timeline, uint64_t *value);

/* ---------------------------------------------------------------------------------------------
 * Modules and kernels (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Load a module. image/size is: CPU: the path of a shared library (size bytes, no NUL needed),
 *  which must contain a '/' so that no library search path is consulted; its exported
 *  qd_host_kernel_fn functions are kernels. CUDA: PTX (NUL-terminated text), cubin or fatbin.
 *  HIP: a code object (ELF) or a clang offload bundle of them; a truncated bundle or ELF is
 *  QD_ERROR_INVALID_IMAGE before the runtime reads it.
 *  - QD_ERROR_INVALID_ARGUMENT: image or out is NULL, size is 0, or (CPU) the path has no '/'
 *    or contains a NUL byte.
 *  CPU: the library's constructors run inside this call, on the calling thread, holding the
 *  dynamic loader's lock; they may call qd (Conventions, "Threads", nested calls), and run as
 *  a callback of ctx: blocking calls on ctx from them (qd_context_destroy, the
 *  *_synchronize family) return QD_ERROR_INVALID_OPERATION, since a worker of ctx may be
 *  waiting for that lock. A blocking call there on another context waits while the lock is
 *  held: it deadlocks if a worker of that context unloads a module meanwhile.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_NOT_FOUND: (CPU) no file at that path.
 *  - QD_ERROR_INVALID_IMAGE: the loader or driver rejected the image; the message says why.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_module_load(qd_context ctx, const void *image, uint64_t size, qd_module *out);

/** Unload a module. Its kernels' handles become invalid. Work already queued keeps the module's
 *  code alive until it completes.
 *  CPU: the library's destructors run when its last use ends: inside a later qd call of the
 *  thread that unloaded it (or of the last thread that used it), when the context is
 *  destroyed, or, when queued work held the last use, on the worker of the context that ran
 *  that work. Wherever they run, they hold the dynamic loader's lock and run as a callback of
 *  the module's context: a blocking call on that context from them returns
 *  QD_ERROR_INVALID_OPERATION, as from a host kernel (on its worker it would wait for
 *  itself).
 *  - QD_ERROR_INVALID_HANDLE: module is 0, not a module, or already unloaded. */
QD_API qd_status qd_module_unload(qd_module module);

/** Find a kernel in a module by name (CPU: the exported symbol; CUDA, HIP: the function name).
 *  Each call returns a new handle; destroy it with qd_kernel_destroy or let qd_module_unload do
 *  it.
 *  GPU: the kernel's code is loaded onto the device here, not at its first launch, so qd_launch
 *  never waits for a code load. Under the driver's lazy module loading (CUDA's default) that
 *  load may wait for work already in flight in the context, so get kernels before queueing
 *  work that waits on the host (e.g. a kernel polling a host flag).
 *  - QD_ERROR_INVALID_ARGUMENT: name or out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: module is 0, not a module, or unloaded, including by a
 *    qd_module_unload on another thread that overlaps this call (then no kernel is made: no
 *    kernel handle of a module stays valid after its unload has returned).
 *  - QD_ERROR_NOT_FOUND: the module has no kernel of that name.
 *  - QD_ERROR_INVALID_IMAGE: (GPU) the driver could not load the kernel's code on this device.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_kernel_get(qd_module module, const char *name, qd_kernel *out);

/** Make a kernel from a host function (CPU backend only). name (optional) is used in messages.
 *  - QD_ERROR_INVALID_ARGUMENT: fn or out is NULL.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: ctx is not a CPU context.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_kernel_from_host_fn(qd_context ctx, qd_host_kernel_fn fn, const char *name,
                                        qd_kernel *out);

/** Destroy a kernel handle. Work already queued with it still runs.
 *  - QD_ERROR_INVALID_HANDLE: kernel is 0, not a kernel, or already destroyed. */
QD_API qd_status qd_kernel_destroy(qd_kernel kernel);

/* ---------------------------------------------------------------------------------------------
 * Launch (since 0.1)
 * ------------------------------------------------------------------------------------------- */

/** Queue a kernel on stream. The argument values are copied before this returns, so the caller
 *  may overwrite or free args and their data at once. config may be NULL (one block of one
 *  thread).
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: config->struct_size too small or a dimension is 0; args is
 *    NULL with num_args > 0; an argument has size 0 or NULL data; num_args > QD_MAX_ARGS.
 *  - QD_ERROR_OVERFLOW: the total argument size exceeds QD_MAX_ARG_BYTES, or the grid's block
 *    count or the block's thread count overflows 32 bits.
 *  - QD_ERROR_INVALID_HANDLE: stream or kernel is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: kernel belongs to another context than stream.
 *  - QD_ERROR_LAUNCH_FAILED: the backend rejected the configuration for this kernel, or
 *    (CUDA 12.4+) the arguments' count or sizes do not match the kernel's parameters. HIP cannot
 *    describe a kernel's parameters, so there the arguments are passed unchecked.
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, the launch would race or use freed memory
 *    ("Validation"): nothing is queued.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_launch(qd_stream stream, qd_kernel kernel, const qd_launch_config *config,
                           const qd_arg *args, uint32_t num_args);

/** (since 0.3) qd_launch with launch attributes ("Launch attributes", before qd_task): attrs
 *  has num_attrs entries (may be NULL when num_attrs is 0; then this is qd_launch). config may
 *  be NULL (one block of one thread), and args as for qd_launch. The whole
 *  call is checked before anything is queued: a refused call queues nothing and records no
 *  event. In a capture the attributes are recorded with the launch and given to its graph node.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: as for qd_launch; attrs is NULL with num_attrs > 0; num_attrs
 *    > QD_MAX_LAUNCH_ATTRS; an attribute's kind is unknown or given twice, a field it does not
 *    use is not 0, its cluster has a dimension of 0 or one that does not divide the grid, or
 *    its PROGRAMMATIC_SERIALIZATION value is not 0 or 1 (the message names attrs[i]).
 *  - QD_ERROR_OVERFLOW: as for qd_launch.
 *  - QD_ERROR_INVALID_HANDLE: stream or kernel is 0, of the wrong type, or destroyed; a
 *    COMPLETION_EVENT's event is 0, not an event, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: kernel or a completion event belongs to another context than
 *    stream.
 *  - QD_ERROR_NOT_SUPPORTED: the backend or device cannot honour an attribute (the message
 *    names it): a cluster below compute capability 9.0; (HIP) every attribute; (CUDA) a
 *    driver without cuLaunchKernelEx (11.8); a completion event on a capturing stream; (CUDA)
 *    a programmatic launch captured by a driver older than 12.3.
 *  - QD_ERROR_LAUNCH_FAILED, QD_ERROR_HAZARD: as for qd_launch.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_launch_ex(qd_stream stream, qd_kernel kernel, const qd_launch_config *config,
                              const qd_launch_attr *attrs, uint32_t num_attrs, const qd_arg *args,
                              uint32_t num_args);

/** Stream-parallel launch. Tasks with the same group run in order on one pooled stream;
 *  different groups run concurrently. Every task starts only after the work already queued on
 *  stream, and stream waits for all of them: later work on stream sees their results. No host
 *  synchronisation: fork and join use pooled events.
 *  Groups are mapped to streams in order of first appearance. If fewer pool streams are free
 *  than there are groups, groups share the free streams round-robin (still ordered within a
 *  group, less concurrent); if none is free the call fails with QD_ERROR_POOL_EXHAUSTED.
 *  Queuing costs O(n log n) in num_tasks at most, however many distinct groups there are.
 *  Every task is validated before anything is queued; on an error nothing is queued, no lease
 *  is kept, and argument storage may be reused at once as for qd_launch. In the validation
 *  mode's fail mode the fork, every launch and the join are checked whole before any is
 *  queued ("Validation"). A launch that fails in the device after earlier ones were queued
 *  (QD_ERROR_LAUNCH_FAILED, QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST: not a refusal)
 *  queues no later task, but stream still waits for every pooled stream.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: tasks is NULL with num_tasks > 0; tasks[0].struct_size is
 *    smaller than the first qd_task, larger than 1024 or not a multiple of 8; a task's
 *    struct_size differs from tasks[0]'s; a task is invalid as for qd_launch (config, args)
 *    or, where struct_size covers them (from 0.3), as for qd_launch_ex (attrs, num_attrs;
 *    reserved2 is not 0).
 *    num_tasks 0 is a successful no-op.
 *  - QD_ERROR_OVERFLOW, QD_ERROR_INVALID_HANDLE, QD_ERROR_WRONG_CONTEXT: as for qd_launch, and
 *    from 0.3 a task's completion event as for qd_launch_ex.
 *  - QD_ERROR_NOT_SUPPORTED: (from 0.3) a task's attribute as for qd_launch_ex.
 *  - QD_ERROR_POOL_EXHAUSTED: no stream of the pool is free.
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, a task would race or use freed memory
 *    ("Validation"): no task is queued.
 *  - QD_ERROR_LAUNCH_FAILED, QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_launch_parallel(qd_stream stream, const qd_task *tasks, uint32_t num_tasks);

/** Queue a host callback: fn(user_data) runs on a host thread after all earlier work on stream,
 *  and later work waits for it. The callback must not call blocking qd functions on the same
 *  context (they return QD_ERROR_INVALID_OPERATION); on GPUs it must make no qd call that
 *  reaches the driver (those return QD_ERROR_INVALID_OPERATION too). If this call fails, fn is
 *  never called. If the context is lost before fn starts, fn is never called either, and
 *  user_data is not used again: release what it keeps alive when qd_context_destroy returns
 *  at the latest (Conventions, "Work queued before a loss"). fn runs with every asynchronous
 *  signal blocked on the CPU backend (Conventions, "Signals").
 *  GPU: CUDA runs the callbacks of all streams on one driver thread, and an event record queued
 *  behind a callback that has not returned yet is invisible until it does (queries report the
 *  previous state, waits do not wait for it). Do not block in a callback to delay device work.
 *  - QD_ERROR_INVALID_ARGUMENT: fn is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: ("Graphs") stream is capturing natively on a HIP runtime whose
 *    host functions are stream callbacks, which a capture cannot hold; (from 0.3 on) stream
 *    records into a conditional's body of a CUDA driver graph ("Conditionals").
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_launch_host_fn(qd_stream stream, qd_host_fn fn, void *user_data);

/** A host callback that learns how its stream fared (since 0.3): stream is the handle it was
 *  queued on (it may be stale by the time fn runs: use it to tell callbacks apart, or in a qd
 *  call that then returns QD_ERROR_INVALID_HANDLE), status is QD_SUCCESS when the earlier work
 *  of the stream completed, or the reason it will never run (qd_launch_host_status_fn). */
typedef void (*qd_host_status_fn)(qd_stream stream, qd_status status, void *user_data);

/** Queue a host callback that runs whatever happens to the context (since 0.3), as CUDA's
 *  cuStreamAddCallback and CuPy's add_callback: fn(stream, status, user_data) is called exactly
 *  once for every call that returned QD_SUCCESS, so cleanup code in fn runs either way:
 *  - status QD_SUCCESS: fn runs in stream order, after all earlier work on stream, and later
 *    work waits for it, as qd_launch_host_fn's fn (same thread, signal mask and rules: no
 *    blocking qd call on the same context, no driver call on GPUs);
 *  - status QD_ERROR_DEVICE_LOST: the context was lost before fn's turn came (Conventions,
 *    "Work queued before a loss"). CPU: fn is called in its turn all the same, on the worker,
 *    so a synchronize of the stream that returns QD_ERROR_DEVICE_LOST returns after it. GPU:
 *    when the driver still calls it, on its callback thread; when the driver dropped it (CUDA
 *    does after a fault), qd_context_destroy calls it on its own thread before it returns.
 *    Either way fn has been called when qd_context_destroy returns;
 *  - status QD_ERROR_INVALID_HANDLE: the context's destroy began before fn's turn came (a call
 *    that raced the destroy): the destroy calls it (CPU: or the last release of the stream).
 *  A context destroyed with such callbacks pending drains first, so they run with QD_SUCCESS
 *  unless it is lost. On a context inherited across fork() the destroy calls none of them.
 *  Not captured: on a capturing stream the call is refused (a graph replays its host nodes, and
 *  a replay that the loss drops could not call fn for it; use qd_launch_host_fn in a capture).
 *  It is a host function operation like qd_launch_host_fn's, so the timeline trace and the
 *  validation mode see it. If this call fails, fn is never called.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: fn is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing ("Graphs"): nothing is queued and the
 *    capture goes on.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_launch_host_status_fn(qd_stream stream, qd_host_status_fn fn,
                                          void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Memory (since 0.1)
 *
 * Addresses are uint64_t. On the CPU backend device memory is host memory and an address is a
 * host pointer. On GPUs, unified addressing applies: memcpy works in any direction.
 * ------------------------------------------------------------------------------------------- */

/** Allocate bytes of device memory in stream order: the block may be used by work queued on
 *  stream after this call (other streams must be ordered after it with an event). The address
 *  is registered with the context until freed.
 *  From 0.3 on, on a capturing stream the block is the graph's: see "Graphs", "Memory inside a
 *  graph".
 *  - QD_ERROR_INVALID_ARGUMENT: address is NULL, or bytes is 0.
 *  - QD_ERROR_OVERFLOW: bytes exceeds what the backend can address (e.g. near UINT64_MAX).
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: (HIP) the runtime has no stream-ordered allocation
 *    (hipMallocAsync, a beta feature of HIP 5) or the device has no memory pools; ("Graphs")
 *    stream is capturing natively and the driver has no graph memory nodes (CUDA before 11.4,
 *    HIP before 5.7; the message names the minimum): nothing is allocated, the capture goes on.
 *  - QD_ERROR_INVALID_OPERATION: ("Graphs") the capture of stream ended, or began, during the
 *    call: nothing is allocated; stream records into a conditional's body ("Conditionals"):
 *    nothing is allocated, the capture goes on. (Before 0.3: stream is capturing.)
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_mem_alloc_async(qd_stream stream, uint64_t bytes, uint64_t *address);

/** Free a block in stream order: the memory is released after all work queued on stream so far
 *  has completed, and is not reused before then. Work on other streams that uses the block
 *  must be ordered before the free (record an event there and wait on it here). The address
 *  is unregistered at once: a second free fails.
 *  From 0.3 on, on a capturing stream only a block allocated inside the same capture is freed,
 *  in the graph ("Graphs", "Memory inside a graph").
 *  - QD_ERROR_INVALID_ADDRESS: address is not the start of a live allocation of this context
 *    (unknown, already freed, or from another context); ("Graphs") it is a block a graph or
 *    another capture owns, or a block of this capture already freed inside it.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing and the block was allocated outside the
 *    capture ("Graphs"): the block stays allocated and the caller's; stream records into a
 *    conditional's body ("Conditionals"): the block stays allocated in the capture.
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, the free is not ordered after a use of
 *    the block on another stream ("Validation"): the block stays allocated.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_mem_free_async(qd_stream stream, uint64_t address);

/** Copy bytes from src to dst in stream order. Either side may be device memory from
 *  qd_mem_alloc_async, host memory from qd_host_alloc, or (unchecked) any host memory.
 *  Ranges are checked against every live allocation of the process, of any context: a range
 *  that starts inside an allocation must end inside it, and a range may not start at an
 *  allocation's end (one past its last byte: qd keeps that byte with the block, so it is never
 *  the caller's own memory). A range
 *  inside an allocation of another context is allowed (unified addressing; on the CPU backend
 *  all of it is host memory): order that context's streams with events, as for two streams.
 *  When that context is on another device, the stream's context must first be given access to
 *  its memory (qd_context_enable_peer_access(the stream's context, that context)); without it
 *  the driver refuses the copy (below). qd_memcpy_peer_async needs no such grant.
 *  bytes 0 is a successful no-op.
 *  - QD_ERROR_INVALID_ARGUMENT: dst or src is 0 while bytes > 0.
 *  - QD_ERROR_OVERFLOW: dst + bytes or src + bytes wraps around.
 *  - QD_ERROR_INVALID_ADDRESS: a range runs past the end of the allocation it starts in, or
 *    starts exactly at an allocation's end; or (GPU backends) a range lies in memory of another
 *    device that the stream's context was not given access to ("cuMemcpyAsync failed").
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, the copy would race or use freed memory
 *    ("Validation"): nothing is queued.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_memcpy_async(qd_stream stream, uint64_t dst, uint64_t src, uint64_t bytes);

/** Set bytes bytes at dst to value, in stream order. Errors as for qd_memcpy_async (dst only).
 */
QD_API qd_status qd_memset_async(qd_stream stream, uint64_t dst, uint8_t value, uint64_t bytes);

/** Allocate bytes of pinned (page-locked on GPUs) host memory, registered with the context.
 *  - QD_ERROR_INVALID_ARGUMENT: out is NULL, or bytes is 0.
 *  - QD_ERROR_OVERFLOW: bytes exceeds what the host can address.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_host_alloc(qd_context ctx, uint64_t bytes, void **out);

/** Free memory from qd_host_alloc immediately. The caller must make sure no queued work still
 *  uses it (synchronize first).
 *  - QD_ERROR_INVALID_ARGUMENT: ptr is NULL.
 *  - QD_ERROR_INVALID_ADDRESS: ptr is not a live qd_host_alloc block of this context.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, work queued that uses the block is not
 *    ordered before the free ("Validation"): the block stays allocated. */
QD_API qd_status qd_host_free(qd_context ctx, void *ptr);

/* ---------------------------------------------------------------------------------------------
 * Graphs (since 0.2)
 *
 * A graph is a piece of stream work captured once and replayed many times. Capture starts on
 * one stream (its origin) with qd_stream_begin_capture. From then on, work queued on the
 * origin, and on every stream that joins the capture, is recorded instead of run. A stream
 * joins a capture by waiting on an event recorded inside it: the children of qd_stream_fork
 * (the fork records on the origin and each child waits), the pooled streams of
 * qd_launch_parallel, and any stream that qd_stream_wait_event's an event recorded in the
 * capture. qd_stream_end_capture ends it and returns the graph; every stream that joined must
 * have joined back first (the origin waits, directly or through other streams, for the last
 * operation of each: qd_stream_join, or a record there and a wait on the origin).
 *
 * What is captured: qd_launch, qd_launch_parallel, qd_launch_host_fn, qd_memcpy_async,
 * qd_memset_async, qd_stream_fork and qd_stream_join, qd_event_record and qd_stream_wait_event
 * between streams of the capture, and (since 0.3) qd_mem_alloc_async and qd_mem_free_async
 * (below, "Memory inside a graph"). A record of a user event inside a capture is a dependency
 * inside the graph only: the event itself is not recorded, neither by the capture nor by
 * replays, and querying or synchronizing it while the capture is open is
 * QD_ERROR_INVALID_OPERATION, as is waiting on it from a stream of another capture.
 * Argument values are copied at capture, as qd_launch copies them; memcpy and memset keep
 * their addresses, and host callbacks their fn and user_data, which must stay valid as long as
 * the graph may be replayed.
 *
 * What is refused while a stream captures (QD_ERROR_INVALID_OPERATION, and the capture stays
 * as it was, usable): qd_stream_synchronize and qd_stream_query of it, qd_mem_free_async on it
 * of a block allocated outside the capture, a wait on an event last
 * recorded outside the capture (and so a qd_stream_join into it of a child outside it),
 * qd_stream_destroy and qd_stream_release of it, qd_stream_begin_capture on it again, and
 * (since 0.3) qd_launch_host_status_fn on it. (Before 0.3 also qd_graph_launch on it.)
 * A call of several parts (qd_stream_fork,
 * qd_stream_join, qd_launch_parallel) is recorded whole or, refused, not at all. qd_context_synchronize is allowed: captured
 * work never runs, so it waits only for work queued outside captures.
 *
 * Pool leases taken during a capture (qd_stream_fork, qd_launch_parallel) are not handed to
 * anyone else until the capture ends: a joined child's handle is stale at once, as after any
 * join, but its stream stays with the capture (a later qd_launch_parallel of the same capture
 * reuses it) and goes back to the pool when qd_stream_end_capture returns, or when the context
 * is destroyed.
 *
 * Replay (qd_graph_launch) queues the whole graph on a stream of the graph's context: it starts
 * after the work already queued there, later work there waits for all of it, and its branches
 * run with the same ordering and concurrency as the captured calls had (no host
 * synchronization). CPU: replay re-queues the recorded tasks on pooled streams, forked and
 * joined by pooled events. CUDA, HIP (since 0.2): the capture is also a driver stream capture
 * (relaxed mode, so that any thread may end it), ended and instantiated by
 * qd_stream_end_capture, and a replay is one graph launch (cuGraphLaunch / hipGraphLaunch); the
 * driver orders the launches of one graph after each other, on any stream. A driver without
 * the graph entry points, or a context with the timeline trace or validation attached, gets
 * the CPU's way: a replay re-queues the recorded operations (one driver call each), so those
 * observers see each one. A host function queued during a native capture on a HIP runtime
 * whose host functions are stream callbacks (no hipLaunchHostFunc) is QD_ERROR_NOT_SUPPORTED,
 * nothing is queued and the capture goes on. A driver error inside a native capture ends it as
 * a whole: qd_stream_end_capture then returns QD_ERROR_INVALID_OPERATION with the driver's
 * reason, and no graph.
 *
 * Child graphs (since 0.3). qd_graph_launch on a capturing stream (the origin, a forked lane,
 * a stream in a conditional's body) records the graph into the capture, as a child graph node
 * (cuGraphAddChildGraphNode) would: its operations as they are at the call (its rebound
 * argument values included; destroying, updating, rebinding or launching it afterwards changes
 * nothing of the capture), after the work captured on that stream before and before the work
 * captured there after, its streams' branches keeping their order and concurrency. The
 * operations are copied into the capture (on CUDA and HIP too, never a driver child node):
 * qd_graph_debug_dot shows them, its kernel launches are kernel nodes of the new graph in
 * order, the validation mode checks them at each replay, and a graph captured so may be
 * launched inside another capture in turn. Refused with QD_ERROR_NOT_SUPPORTED, recording
 * nothing (the capture goes on): a graph that allocates ("Memory inside a graph"), a graph with
 * conditionals, and (CUDA, HIP) a graph with host functions on a stream in a conditional's body.
 * A graph exists only once its capture ended, so it is never launched into its own capture.
 *
 * New arguments without a new capture: capture the same calls again with other values and
 * call qd_graph_update(graph, new_graph), as cuGraphExecUpdate does: the shape must be the
 * same, and every later replay of graph uses the new values. To change one launch's arguments
 * only, rebind its kernel node (since 0.3): qd_graph_set_kernel_args, as
 * cuGraphExecKernelNodeSetParams does, without a capture.
 *
 * Memory inside a graph (since 0.3). qd_mem_alloc_async on a capturing stream allocates a
 * block the graph owns, and qd_mem_free_async of it on a stream of the same capture frees it in
 * the graph. The rule: every block allocated inside a capture is freed inside it, after its
 * last use there; qd_stream_end_capture refuses a capture with a block not freed (the message
 * names its address; the capture stays open, so free it and end again). The address the call
 * returns is the block every replay uses: each replay allocates it where the captured alloc
 * was and frees it where the captured free was, and work of the graph may use it between the
 * two (the replay's alloc is a write of the whole block on its stream, as qd_mem_alloc_async's
 * is). Outside that window the block is not the caller's: using it is a use after free (the
 * validation mode reports it, "Validation"), and qd_mem_free_async of it outside its capture,
 * or twice inside it, is QD_ERROR_INVALID_ADDRESS. Copies and sets are checked against it like
 * against any block, during the capture and after (a range running past its end is
 * QD_ERROR_INVALID_ADDRESS). qd_context_get_stats counts no block a graph owns.
 * Since every replay uses the same block, the replays of a graph that allocates run one after
 * the other, whatever streams they are queued on (each after the one queued before it).
 * CPU, and the re-issue path (a driver without graph entries, or with the trace or validation
 * attached at capture): the capture allocates each block once, on the allocating stream; a
 * replay's alloc and free only order the work on it, and the block is released when the graph
 * is destroyed (or, given to another by qd_graph_update, that one too) and every replay queued
 * by then is done: qd_graph_destroy still returns at once.
 * CUDA and HIP native graphs: the alloc and free become the graph's memory nodes
 * (cuMemAllocAsync and cuMemFreeAsync captured; a driver without them, before CUDA 11.4 or HIP
 * 5.7, refuses the alloc with QD_ERROR_NOT_SUPPORTED and the capture goes on); the block
 * exists only inside the graph's launches, so such a graph is always launched as the driver
 * graph (the trace or validation attached later does not see its operations) and cannot take
 * part in qd_graph_update. A driver error inside the capture ends it as any other does.
 * ------------------------------------------------------------------------------------------- */

/** A captured graph. Destroy with qd_graph_destroy. */
typedef uint64_t qd_graph;

/** Start capturing the work queued on stream (it becomes the capture's origin).
 *  Threads: any. Captures on different streams (also on different threads) are independent.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: stream is already capturing (its own capture, or one it
 *    joined); (CUDA, HIP) the driver refused to begin a capture on it (an imported stream that
 *    another library is capturing).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_begin_capture(qd_stream stream);

/** End the capture whose origin is stream and return what it recorded as a new graph (an
 *  empty capture gives an empty graph, whose replay is a no-op). The streams that joined the
 *  capture stop capturing, and the pool leases it held go back to the pool.
 *  On QD_ERROR_INVALID_OPERATION because a stream has not joined back, or (from 0.3 on) a block
 *  allocated inside the capture is not freed, the capture stays open and unchanged: join that
 *  stream, or free that block, and call this again.
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: graph is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed; or its context's destroy
 *    began after the capture did (the destroy ends every capture).
 *  - QD_ERROR_INVALID_OPERATION: stream is not capturing; stream joined a capture but is not
 *    its origin; a conditional is still open in the capture (from 0.3)
 *    (qd_stream_end_conditional); a stream that joined the capture has not joined back to the
 *    origin (the message names its handle, or says it was a stream of qd_launch_parallel); a
 *    block allocated inside the capture is not freed inside it (the message names its address;
 *    "Graphs", "Memory inside a graph"); (CUDA, HIP)
 *    the driver invalidated the capture because an operation inside it failed: the capture is
 *    over, no graph is returned, and its leases go back to the pool.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_end_capture(qd_stream stream, qd_graph *graph);

/** Replay graph on stream, a stream of the graph's context (any stream: not necessarily the
 *  one it was captured on; from 0.3 on, a capturing stream records it: "Graphs", "Child
 *  graphs"). The whole graph starts after the work already queued on stream,
 *  and later work on stream waits for all of it. Never blocks. Branches run on pooled streams
 *  that are leased for the call and given back before it returns (their work still runs in
 *  order); if the pool has fewer free streams than the graph has branches, branches share
 *  streams, and if it has none, every branch runs on stream itself, in an order the graph
 *  allows (less concurrent, never wrong).
 *  Threads: any; replays of one graph may be queued concurrently with each other and with
 *  qd_graph_update (each replay uses the values current when it is queued). On CUDA and HIP a
 *  replay of a native graph also runs after the replays of the same graph queued before it, and
 *  so does every replay of a graph that allocates (from 0.3 on, "Memory inside a graph").
 *  An operation that fails in the device after others of the replay were queued
 *  (QD_ERROR_LAUNCH_FAILED, QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST: not a refusal) ends
 *  the replay there, and stream still waits for every branch queued so far.
 *  - QD_ERROR_INVALID_HANDLE: graph or stream is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: stream belongs to another context than graph.
 *  - QD_ERROR_INVALID_OPERATION: graph allocates ("Memory inside a graph") and the call is
 *    nested in a replay of it (from a hazard handler). (Before 0.3: stream is capturing.)
 *  - QD_ERROR_NOT_SUPPORTED: (from 0.3) stream is capturing and graph allocates, has
 *    conditionals, or (CUDA, HIP) has host functions and stream is in a conditional's body
 *    ("Child graphs"): nothing is recorded, the capture goes on.
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, an operation of the graph would race or
 *    use freed memory ("Validation"): no operation of the replay is queued.
 *  - QD_ERROR_LAUNCH_FAILED, QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_graph_launch(qd_graph graph, qd_stream stream);

/** Give graph the values of from, a graph captured from the same calls with other arguments:
 *  every later replay of graph runs from's kernels, launch dimensions, argument values (those
 *  rebound on from with qd_graph_set_kernel_args included), copy and set ranges and host
 *  callbacks. Replays already queued keep their values. from stays valid and unchanged.
 *  The shape must match: the same number of streams, and the same operations in the same
 *  order on the same streams, with the same dependencies between them, and (from 0.3 on) the same
 *  sizes for the blocks allocated inside (a free frees the same one). graph then replays from's
 *  operations on from's blocks, which both graphs own from then on.
 *  Threads: any.
 *  - QD_ERROR_INVALID_HANDLE: graph or from is 0, not a graph, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: graph and from belong to different contexts.
 *  - QD_ERROR_INVALID_OPERATION: the shapes differ (the message names the first difference);
 *    either graph allocates inside a native driver graph (from 0.3 on, "Memory inside a graph");
 *    (CUDA, HIP) the driver refused to update the instantiated graph (the message names its
 *    reason); the graph keeps its values.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_graph_update(qd_graph graph, qd_graph from);

/* Kernel nodes (since 0.3). A graph's kernel nodes are the kernel launches its capture
 * recorded, numbered from 0 in the order they were queued during the capture: each qd_launch,
 * and each task of a qd_launch_parallel in task order. Only the graph's own launches count: a
 * launch queued inside a conditional's body ("Conditionals") is no kernel node (neither counted
 * nor rebindable), and the numbering skips it. After qd_graph_update(graph, from) they are
 * from's (the same number: the shapes match). */

/** The number of kernel nodes of graph (since 0.3; 0 for a graph that launched no kernel).
 *  Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: count is NULL.
 *  - QD_ERROR_INVALID_HANDLE: graph is 0, not a graph, or destroyed.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_graph_kernel_node_count(qd_graph graph, uint32_t *count);

/** Rebind kernel node `node` of graph (since 0.3): every later replay runs that launch with
 *  these argument values, copied before this returns (as qd_launch copies them); its kernel,
 *  launch dimensions and every other node stay as they were. Replays already queued keep the
 *  values they were queued with. The count and the size of every argument must equal the
 *  node's captured launch's. The validation mode checks the new values at the next replay as
 *  it checks any launch's. A later qd_graph_update(graph, from) replaces them with from's
 *  values (from's own rebound ones included). On CUDA this is one
 *  cuGraphExecKernelNodeSetParams on the instantiated graph (which it instantiates first if it
 *  was never launched).
 *  On an error nothing changes.
 *  Threads: any; concurrent with replays and with qd_graph_update as qd_graph_update is (each
 *  replay uses the values current when it is queued).
 *  - QD_ERROR_INVALID_ARGUMENT: args is NULL with num_args > 0; an argument has size 0 or NULL
 *    data; num_args > QD_MAX_ARGS; node is not less than qd_graph_kernel_node_count; num_args
 *    or an argument's size differs from the captured launch's (the message names the first
 *    difference).
 *  - QD_ERROR_OVERFLOW: the total argument size exceeds QD_MAX_ARG_BYTES.
 *  - QD_ERROR_INVALID_HANDLE: graph is 0, not a graph, or destroyed.
 *  - QD_ERROR_NOT_SUPPORTED: (CUDA, HIP) the graph is a driver graph and the driver cannot
 *    rebind a node of it (the message names the entry point and the minimum version: CUDA
 *    11.3; on HIP a runtime with hipStreamGetCaptureInfo_v2, hipGraphKernelNodeGetParams and
 *    hipGraphExecKernelNodeSetParams, HIP 4.5). On HIP the node keeps the kernel, dimensions
 *    and shared memory the runtime recorded at capture; only its arguments change.
 *  - QD_ERROR_INVALID_OPERATION: (CUDA, HIP) the driver refused the new values (the message
 *    names its reason).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_graph_set_kernel_args(qd_graph graph, uint32_t node, const qd_arg *args,
                                          uint32_t num_args);

/** Destroy a graph. Returns at once: replays already queued still run to completion, and the
 *  blocks the graph owns ("Memory inside a graph") are released after them. The handle is
 *  invalid from the moment this returns.
 *  - QD_ERROR_INVALID_HANDLE: graph is 0, not a graph, or already destroyed. */
QD_API qd_status qd_graph_destroy(qd_graph graph);

/** (since 0.3) Prepare graph's replays on stream ahead of the first qd_graph_launch, so that the
 *  first launch costs what later ones do (as cuGraphUpload). Stream-ordered: the upload runs
 *  after the work already queued on stream, and a launch on any stream after this call returns
 *  uses what it prepared; the results of every replay are the same with or without it.
 *  CUDA and HIP, a graph launched as the driver graph: instantiates it if no launch did yet,
 *  then queues cuGraphUpload on stream (HIP: hipGraphUpload where the runtime has it, else it
 *  instantiates only). CPU, and every graph whose replays re-issue its operations (a driver without
 *  graph entries, the trace or validation attached): a replay needs only the pooled events of
 *  its branches, which this creates in the context's event pool now; nothing is queued, and it
 *  is cheap. Calling it again, or after a launch, is allowed and does nothing more.
 *  Refused while stream is capturing (as CUDA refuses cuGraphUpload on a capturing stream): an
 *  upload is no operation of a graph, and the capture stays as it was.
 *  Threads: any; concurrent with replays, updates and rebinds of graph.
 *  - QD_ERROR_INVALID_HANDLE: graph or stream is 0, of the wrong type, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: stream belongs to another context than graph.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing.
 *  - QD_ERROR_NOT_SUPPORTED: (CUDA) the driver lacks cuGraphUpload (the message names the
 *    minimum driver version: CUDA 11.1); nothing was instantiated or queued.
 *  - QD_ERROR_LAUNCH_FAILED: (CUDA, HIP) the driver refused the upload (the message names its
 *    reason).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_graph_upload(qd_graph graph, qd_stream stream);

/** Flags of qd_graph_debug_dot (since 0.3). */
enum qd_graph_dot_flags {
    /** Label every node with its details too: a launch's argument sizes and shared memory, the
     *  addresses of copies, sets and blocks, a host function's pointers. */
    QD_GRAPH_DOT_VERBOSE = 1u << 0
};

/** (since 0.3) Write graph to path as a Graphviz DOT digraph (as cuGraphDebugDotPrint does), from
 *  the operations qd recorded at capture: the same output on every backend, for a graph that
 *  is launched as a driver graph too. Each stream of the capture is a cluster "lane N" (lane 0:
 *  the stream the capture began on); each operation a node: a launch labelled with its kernel's
 *  name, grid and block; a copy, set, alloc or free with its bytes; a host function; a record
 *  and a wait (the ordering points of fork, join, qd_launch_parallel and events recorded and
 *  waited inside the capture); a conditional, with each of its bodies a cluster of its own.
 *  Edges are the dependencies as recorded: the order of one lane (solid), and each wait on its
 *  record (dashed; a lane joins the capture by a wait, and the lane it waited on started it:
 *  "fork" from a lane to a lane it started, "join" back, else "event"); a conditional's edges
 *  to the first operations of its bodies are labelled with the body ("then", "else", "case N",
 *  "body"); a free's dotted edge names the alloc of its block. Values a qd_graph_update or
 *  qd_graph_set_kernel_args gave later are not shown: the shape is the same. path is written
 *  whole (a temporary file next to it, renamed over it), never left half-written.
 *  flags: 0 or QD_GRAPH_DOT_VERBOSE.
 *  Threads: any; concurrent with replays, updates and rebinds of graph.
 *  - QD_ERROR_INVALID_ARGUMENT: path is NULL or empty; flags has unknown bits; path cannot be
 *    written (its directory does not exist or is not writable), or path exists and is not a
 *    regular file (a directory, FIFO, device or socket, which is never replaced).
 *  - QD_ERROR_INVALID_HANDLE: graph is 0, not a graph, or destroyed.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_graph_debug_dot(qd_graph graph, const char *path, uint32_t flags);

/* Conditionals (since 0.3): branches and loops decided on the device inside a captured graph.
 *
 * qd_stream_begin_conditional, on a capturing stream, adds a conditional node to the capture
 * at that stream's place; from then on the work queued on that stream (and on every stream
 * that joins it there: the children of a qd_stream_fork, the pooled streams of
 * qd_launch_parallel) is the node's first body, not work after the node.
 * qd_stream_next_branch closes a body and opens the next one (IF_ELSE: the else body; SWITCH:
 * the next case), qd_stream_end_conditional closes the last, and the work queued after it
 * follows the whole node. Every stream that joined a body must have joined back to the
 * conditional's stream before next_branch or end (as qd_stream_end_capture's rule); those
 * streams stop capturing when their body closes. A conditional may be opened inside a body
 * (nesting); each call acts on the innermost conditional open on its stream.
 *
 * The node's value is decided on the device, at each replay, when the node is reached:
 *  - IF:      value != 0 runs the body.
 *  - IF_ELSE: value != 0 runs the then body (the first), else the else body.
 *  - WHILE:   runs the body while value != 0, deciding before the first iteration and after
 *             each one (0 before the first: no iteration).
 *  - SWITCH:  runs case number `value` when value < num_cases; any other value runs no case.
 * A condition word (qd_conditional_desc.condition) is any compiler's way to give the value:
 * the address of a uint32_t in memory of the context (qd_mem_alloc_async; CPU: host memory
 * of the context) that the graph's kernels write; its value at the decision point (before the
 * node, and for WHILE after each iteration, with every operation of the body done) is the
 * value. The word is read as the graph runs, never at capture. Without a word (condition 0)
 * the graph's own kernels set the value with cudaGraphSetConditional on the handle
 * qd_conditional_handle returns, which needs a CUDA driver graph (see below). Its value is
 * assigned at each launch of the graph: 1 for a WHILE (the first iteration always runs and
 * the body's kernels decide each next one: a do-while), 0 for the other kinds.
 *
 * CPU: a replay queues one host task per conditional node on the node's stream, which reads
 * the word and runs the chosen body's operations inline on that worker, in their captured
 * order (a topological order of the body), a nested conditional the same way. It waits on no
 * other stream or worker, so it cannot deadlock; a body's branches run one after another
 * there. The trace and the validation mode see the host task, not the operations inside it.
 * CUDA: a conditional is a conditional node of the driver graph (CUDA 12.3 for IF and WHILE,
 * 12.8 for IF_ELSE and SWITCH; an older driver is QD_ERROR_NOT_SUPPORTED naming both
 * versions). Its bodies are captured by the driver into the node's body graphs. With a
 * condition word, a one-thread kernel of qd's, built into libqd for every GPU architecture
 * nvcc 13 targets (sm_75 to sm_121), sets the node's value from the word just before the node
 * and, for WHILE, at the end of each iteration; on a GPU it has no code for, a conditional
 * with a word is QD_ERROR_NOT_SUPPORTED (condition 0 still works). The driver allows kernels,
 * copies, sets and nested conditionals in a body: qd_launch_host_fn on a stream that records
 * into a body is QD_ERROR_NOT_SUPPORTED (nothing queued, the capture goes on). A replay is one
 * driver launch, also with the trace or validation attached later (they see the launch, not
 * the operations inside it).
 * HIP (5.2 has no conditional nodes), and a GPU context that records without a driver graph
 * (the trace or validation attached at the capture: it cannot run device work inline on the
 * host): qd_stream_begin_conditional is QD_ERROR_NOT_SUPPORTED.
 * qd_graph_update needs the same conditionals, with bodies of the same shape. (CUDA) The
 * driver updates no conditional node's parameters and each capture has handles of its own, so
 * where it refuses to update a graph with conditionals, the graph takes from's driver graph and
 * is instantiated again at its next launch or rebind (a cost of one instantiation).
 * The launches inside a body are not kernel nodes ("Kernel nodes": qd_graph_set_kernel_args
 * rebinds the graph's own launches only). Memory inside a graph is allocated and freed outside
 * its conditionals: qd_mem_alloc_async and qd_mem_free_async on a stream that records into a
 * body are QD_ERROR_INVALID_OPERATION (nothing is allocated or freed, the capture goes on);
 * the body may use a block allocated before the conditional and freed after it.
 */
/** The kind of a conditional (since 0.3). */
typedef enum qd_conditional_kind {
    QD_CONDITIONAL_IF = 1,
    QD_CONDITIONAL_IF_ELSE = 2,
    QD_CONDITIONAL_WHILE = 3,
    QD_CONDITIONAL_SWITCH = 4
} qd_conditional_kind;

/** The most cases of one SWITCH conditional (since 0.3). */
#define QD_MAX_CONDITIONAL_CASES 1024u

/** A conditional's description (since 0.3): qd_stream_begin_conditional. */
typedef struct qd_conditional_desc {
    uint32_t struct_size;     /**< sizeof(qd_conditional_desc) */
    qd_conditional_kind kind; /**< IF, IF_ELSE, WHILE or SWITCH */
    uint32_t num_cases;       /**< SWITCH: its bodies, numbered 0..num_cases-1 (1 to
                                   QD_MAX_CONDITIONAL_CASES); every other kind: 0 */
    uint64_t condition;       /**< device address of the uint32_t condition word, or 0: the
                                   graph's kernels set the value (qd_conditional_handle) */
} qd_conditional_desc;

// clang-format off
#define QD_CONDITIONAL_DESC_INIT { (uint32_t)sizeof(qd_conditional_desc), QD_CONDITIONAL_IF, 0u, 0u }
// clang-format on

/** (since 0.3) Open a conditional on stream, which must be capturing: the work queued on it
 *  from now on is the conditional's first body (IF: the body; IF_ELSE: the then body; WHILE: the loop body;
 *  SWITCH: case 0). Refused, nothing changes.
 *  Threads: any, but the calls on one capture's conditionals are made in the order the
 *  bodies are meant (as the operations queued into them).
 *  - QD_ERROR_INVALID_ARGUMENT: desc is NULL; desc->struct_size too small; kind is not a
 *    qd_conditional_kind; num_cases is 0 or above QD_MAX_CONDITIONAL_CASES for SWITCH, or not 0
 *    for another kind; condition is not a multiple of 4.
 *  - QD_ERROR_OVERFLOW: condition + 4 wraps.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_ADDRESS: the word's 4 bytes run past the end of the allocation they
 *    start in, or start exactly at a block's end (as qd_memset_async's range).
 *  - QD_ERROR_INVALID_OPERATION: stream is not capturing.
 *  - QD_ERROR_NOT_SUPPORTED: (CUDA) the driver is older than the kind needs, or lacks an entry
 *    point (the message names the versions: 12.3, 12.8 for IF_ELSE and SWITCH); qd's condition
 *    kernel has no code for this GPU (condition is not 0); (HIP) always; (CUDA, HIP) the capture
 *    records without a driver graph (the trace or validation is attached); condition is 0 and
 *    the capture is not a CUDA driver graph (only one lets kernels set the value).
 *  - QD_ERROR_LAUNCH_FAILED: (CUDA) qd's condition kernel could not be queued before the node;
 *    it is then left in the graph, setting a value no node reads.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_begin_conditional(qd_stream stream, const qd_conditional_desc *desc);

/** (since 0.3) Close the current body of the innermost conditional open on stream and open its next one
 *  (IF_ELSE: the else body; SWITCH: the next case). Refused, nothing changes.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: no conditional is open on stream (its own; one opened on
 *    another stream is that stream's); the conditional is IF or WHILE (one body), or its
 *    last body is open already (IF_ELSE's else body; SWITCH's case num_cases-1); a stream
 *    that joined the body has not joined back (the message names it); (CUDA) the driver
 *    could not capture the next body: the call moved on all the same, and
 *    qd_stream_end_capture fails (nothing recorded).
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_next_branch(qd_stream stream);

/** (since 0.3) Close the innermost conditional open on stream: the work queued on stream after this call
 *  follows the whole conditional. Bodies never opened (IF_ELSE without next_branch; SWITCH's
 *  later cases) are empty. Refused, nothing changes.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: no conditional is open on stream; a stream that joined the
 *    body has not joined back (the message names it); (CUDA) the driver could not close the
 *    node: it is closed all the same, and qd_stream_end_capture fails (nothing recorded).
 *  - QD_ERROR_LAUNCH_FAILED: (CUDA) qd's condition kernel could not be queued at the end of a
 *    WHILE body (nothing changed: the conditional stays open).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_stream_end_conditional(qd_stream stream);

/** (since 0.3) The native handle (CUgraphConditionalHandle) of the innermost conditional open on stream,
 *  for the graph's kernels that call cudaGraphSetConditional themselves.
 *  - QD_ERROR_INVALID_ARGUMENT: handle is NULL.
 *  - QD_ERROR_INVALID_HANDLE: stream is 0, not a stream, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: no conditional is open on stream.
 *  - QD_ERROR_NOT_SUPPORTED: the capture is not a CUDA driver graph (the CPU backend, HIP, or
 *    the trace or validation attached at the capture).
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_conditional_handle(qd_stream stream, uint64_t *handle);

/* ---------------------------------------------------------------------------------------------
 * Timeline trace (since 0.2)
 *
 * A trace records every operation a context's streams run (launches by kernel name, copies,
 * sets and allocs with the bytes asked for, host callbacks, frees, event records and waits, the
 * parts of fork, join, qd_launch_parallel and graph replays) with the time it ran on the device or
 * the CPU backend's worker, and writes it as a Chrome trace event JSON file that Perfetto
 * (ui.perfetto.dev) and chrome://tracing open; `qd trace view FILE.json -o FILE.html` draws it
 * as a page. In the file: one process per context, one track per stream, one track per host
 * thread for the enqueue calls, an arrow from each event record to each wait that consumed it
 * (fork, join, qd_launch_parallel and graph replays included), and markers for a fault (the
 * kernel that lost the context), for a stream pool found empty (on the track of the thread
 * whose qd_stream_acquire, qd_stream_fork or qd_launch_parallel failed for it) and for a full
 * ring.
 *
 * Arrows. An arrow joins a record to a wait that consumed it (the latest record of the event
 * when the wait was queued) in the same context or in another context traced into the same
 * file: a qd_stream_wait_event on an event of another context draws an arrow from that
 * context's process to this one's. It is a pair of flow events ("s", then "f", with an id that
 * no other arrow of the file uses, whichever contexts wrote it): it starts inside the record's
 * slice and ends where the wait was satisfied, the end of the wait's slice, never at a time
 * before its start. The end has no "bp" (binding point): it binds to the next slice that starts
 * on the waiting stream, the work the wait held back, which is where Perfetto and
 * chrome://tracing draw its head; binding to the enclosing slice ("bp":"e") would put the head
 * at the start of the wait's slice, which begins before the record when the wait really waited.
 * A wait with no later operation on its stream in the window has no slice to end on (the viewers
 * then draw no arrow for it; `qd trace view` still does). An arrow is drawn once both its
 * record and its wait are in the file: the file joins them each time a context writes its part,
 * so the later of the two writes draws it, and it stays while both parts do, also after either
 * context's destroy. A wait on an event whose latest record was not traced (before the start or
 * after the stop of its context's trace, past a full ring, or by a context that is not traced
 * into this file) has no arrow. Each context puts its times on the host's clock through its own
 * reference event (see qd_trace_start), so the times of two contexts may differ by the time a
 * synchronization takes to return; an arrow across contexts that this would draw backwards ends
 * at its start instead.
 *
 * The window. Tracing is per context: qd_trace_start opens a window, qd_trace_stop closes it
 * and writes the file. The window holds exactly the operations whose call (qd_launch, ...)
 * returned after qd_trace_start returned and before qd_trace_stop was called; an operation
 * racing with start or stop on another thread may fall on either side. Operations still
 * running on the device when qd_trace_stop is called are in the window: stop waits for them
 * to complete (not for later work) and writes their times. qd_trace_flush writes the window
 * so far without closing it.
 *
 * The file. Several contexts may trace into one path: each writes its own part (its process
 * in the file), and a context that writes again replaces its own part, so the file is complete
 * valid JSON after every write and holds the contexts of this process written to that path
 * (up to the bound below). Each write goes to a new file of a unique name next to PATH
 * (PATH.tmp-XXXXXX, made with mkstemp and given the permissions of the file it replaces) and
 * is renamed over PATH, so two processes or contexts writing one path never share a temporary
 * file. PATH must be a regular file or absent: a directory, FIFO, device or socket at PATH is
 * refused with QD_ERROR_INVALID_ARGUMENT, at start and at every write, and never replaced.
 * The files' table lives until the process ends: a stop or flush on another thread while the
 * process exits, or in an atexit handler, writes as usual.
 *
 * Bounded memory. A window records at most QD_TRACE_CAPACITY operations (an environment
 * variable, read with secure_getenv at each start: 1 to 16777216, default 65536). When it is
 * full the newest operations are dropped, not the oldest: operations past the capacity run as
 * usual but are not recorded; the file counts them (process label "dropped N" and a "trace
 * full: N operations not recorded" marker).
 * A file keeps the parts of at most 64 destroyed contexts: when one more context whose part
 * is in the file is destroyed, the part of the context destroyed first is dropped, in memory
 * and in the file, and the file counts the dropped parts (a process "qd trace file" labelled
 * "parts of N destroyed contexts dropped (a file keeps the last 64)"). Live contexts' parts
 * are never dropped.
 *
 * Without code changes. The environment variable QD_TRACE=PATH (read with secure_getenv when
 * a context is created) is a qd_trace_start(ctx, PATH) at every qd_context_create and, unless
 * the program stopped it, a qd_trace_stop at qd_context_destroy (after the drain, so work in
 * flight at destroy is in the file; a file that cannot be written then is reported on stderr).
 * A context destroyed while traced through qd_trace_start is stopped the same way.
 *
 * Cost. Never started, a context pays nothing (no observer is attached). While on, every
 * operation costs one timing-event record on its stream: its end, which is also the next
 * operation's begin while the stream is busy and nothing else was queued on it between them
 * (one event query tells; on an idle stream the begin is recorded too, so that no slice counts
 * idle time), plus a mutex and two host clock reads (an event record or wait also a
 * process-wide lock, shared by every traced context). The timing events come from a pool that
 * a start fills and that reuses the events of operations already done (each read once, as the
 * file would read it); the rest are read when the file is written, never on the launch path
 * (bench/RESULTS.md has the figures). After the first start the context keeps its observer: a
 * stopped trace costs each operation one extra indirect call and an atomic load (an event
 * record also the process-wide lock).
 * ------------------------------------------------------------------------------------------- */

/** Start tracing ctx: open a new window whose operations will be written to path (by
 *  qd_trace_stop, qd_trace_flush, or the context's destroy). Blocks briefly: it records and
 *  waits for a reference event that puts the streams' clocks on the host's. A window of an
 *  earlier start .. stop is discarded (its file stays as written).
 *  Threads: any, except a host kernel or callback of this context.
 *  - QD_ERROR_INVALID_ARGUMENT: path is NULL or empty; QD_TRACE_CAPACITY is set and not a
 *    number in 1..16777216; path cannot be written (its directory does not exist or is not
 *    writable: checked by creating a temporary file next to it), or path exists and is not a
 *    regular file (a directory, FIFO, device or socket); tracing stays off.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: ctx is already being traced (a second start, or QD_TRACE is
 *    set); the running window is unchanged. Called from a host kernel or callback of ctx.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_trace_start(qd_context ctx, const char *path);

/** Stop tracing ctx and write the file: operations queued after this is called are not
 *  recorded; the window's operations still running are waited for (only they), then the file
 *  is written. Works on a lost context (the file then marks the fault). On a write failure
 *  tracing is off all the same and the window is kept: qd_trace_flush writes it again.
 *  Threads: any, except a host kernel or callback of this context. Blocks until the window's
 *  operations have completed.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: ctx is not being traced (never started, or already
 *    stopped). Called from a host kernel or callback of ctx.
 *  - QD_ERROR_INVALID_ARGUMENT: the file cannot be written (its directory was removed or made
 *    read-only since qd_trace_start, or something other than a regular file is now at the
 *    path, which is left as it is; the message names the path and the reason).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_FORKED. */
QD_API qd_status qd_trace_stop(qd_context ctx);

/** Write the window so far to its path without stopping: the operations whose call returned
 *  before this one, waited for until they complete. Tracing goes on, and a later flush or stop
 *  rewrites the file with everything (the window is not emptied: QD_TRACE_CAPACITY still counts
 *  from the start). After a stop, writes the stopped window again.
 *  Threads: any, except a host kernel or callback of this context. Blocks until those
 *  operations have completed.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: ctx was never traced. Called from a host kernel or callback
 *    of ctx.
 *  - QD_ERROR_INVALID_ARGUMENT: the file cannot be written (as for qd_trace_stop).
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_FORKED. */
QD_API qd_status qd_trace_flush(qd_context ctx);

/* ---------------------------------------------------------------------------------------------
 * Several devices (since 0.2)
 *
 * One context is one device; a program drives several devices with one context each (several
 * contexts on one device are allowed too, and share that device). qd does not implement
 * collectives: it orders work around them. Three things cross contexts:
 * - ordering: qd_stream_wait_event accepts an event of another context of the same backend,
 *   so a stream on one device waits for a record on another without a host synchronisation;
 * - peer access: qd_context_can_access_peer and qd_context_enable_peer_access, so kernels of
 *   one device may read and write memory of another (on CUDA: cuCtxEnablePeerAccess and, for
 *   the stream-ordered pool qd allocates from, cuMemPoolSetAccess);
 * - copies: qd_memcpy_peer_async copies between memory of two contexts in stream order, with
 *   each side checked against its own context's allocations.
 * Collective libraries (NCCL, RCCL) run on the native streams of qd streams
 * (qd_stream_native_handle), ordered by qd events recorded and waited on around them.
 *
 * The validation mode checks all three when the contexts validate ("Validation", across
 * contexts): ordering by events and by the host's synchronizes of either context, peer copies,
 * copies and kernels on one context's streams that name blocks of another, frees while the
 * other context still uses a block. A context that does not validate is not checked, and its
 * events order a waiting validating stream after everything queued so far.
 *
 * Contexts of different backends are never mixed: QD_ERROR_WRONG_CONTEXT. The CPU backend
 * supports all of it between CPU contexts (they share the host's memory: peer access is always
 * possible and granting it changes nothing), so programs and tests run without a GPU.
 * ------------------------------------------------------------------------------------------- */

/** Whether work of ctx can be given access to memory of peer (qd_context_enable_peer_access).
 *  *can_access is 1 or 0. Two contexts on the same device always can; two devices can when the
 *  driver reports peer access between them (CUDA: cuDeviceCanAccessPeer; a driver without that
 *  query reports 0); CPU contexts always can. qd_memcpy_peer_async works either way.
 *  Threads: any. Since 0.2.
 *  - QD_ERROR_INVALID_ARGUMENT: can_access is NULL; ctx and peer are the same context.
 *  - QD_ERROR_INVALID_HANDLE: ctx or peer is 0, not a context, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: ctx and peer are contexts of different backends.
 *  - QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: either context is lost or inherited across fork. */
QD_API qd_status qd_context_can_access_peer(qd_context ctx, qd_context peer, uint32_t *can_access);

/** Let work of ctx (kernels, copies on its streams) access memory of peer: device memory
 *  from qd_mem_alloc_async of peer (CUDA: cuCtxEnablePeerAccess from ctx's device, and
 *  cuMemPoolSetAccess granting ctx's device read and write access to the pool peer allocates
 *  from) and peer's memory in general. One direction only: call it with the two swapped for
 *  the other. Granting it again is a successful no-op; it lasts while both contexts live (the
 *  grant belongs to the devices, so it outlives them when other contexts or libraries use the
 *  same devices). Two contexts on one device, and CPU contexts, need nothing: success.
 *  Threads: any. Since 0.2.
 *  - QD_ERROR_INVALID_ARGUMENT: ctx and peer are the same context.
 *  - QD_ERROR_INVALID_HANDLE: ctx or peer is 0, not a context, or destroyed.
 *  - QD_ERROR_WRONG_CONTEXT: ctx and peer are contexts of different backends.
 *  - QD_ERROR_NOT_SUPPORTED: the devices cannot access each other
 *    (qd_context_can_access_peer gives 0), or the driver lacks the peer or pool functions; the
 *    message names the devices and the reason.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED. */
QD_API qd_status qd_context_enable_peer_access(qd_context ctx, qd_context peer);

/** Copy bytes from src, memory of src_ctx, to dst, memory of dst_ctx, in stream order on
 *  stream, a stream of dst_ctx or of src_ctx (either side may issue it; the copy starts after
 *  the work already queued on stream, and later work there sees it). Work on the other
 *  context that produces src or consumes dst must be ordered with events, as for two streams
 *  (qd_stream_wait_event across contexts). Each range must lie inside one live allocation of
 *  its context (qd_mem_alloc_async or qd_host_alloc of that context); dst_ctx may equal
 *  src_ctx. CUDA: cuMemcpyPeerAsync (the driver copies directly when peer access is enabled
 *  and stages the copy otherwise, so enabling it is not required); CPU: a memcpy on the
 *  stream's worker. bytes 0 is a successful no-op. Not captured: on a capturing stream it is
 *  QD_ERROR_INVALID_OPERATION (qd_memcpy_async is captured).
 *  Threads: any. Since 0.2.
 *  - QD_ERROR_INVALID_ARGUMENT: dst or src is 0 while bytes > 0.
 *  - QD_ERROR_OVERFLOW: dst + bytes or src + bytes wraps around.
 *  - QD_ERROR_INVALID_HANDLE: stream, dst_ctx or src_ctx is 0, of the wrong type, or destroyed
 *    (also when its destroy began during this call: qd_context_destroy).
 *  - QD_ERROR_WRONG_CONTEXT: stream belongs to neither dst_ctx nor src_ctx; dst_ctx and src_ctx
 *    are contexts of different backends.
 *  - QD_ERROR_INVALID_ADDRESS: dst is not inside a live allocation of dst_ctx, or src of
 *    src_ctx, or a range runs past the end of its allocation.
 *  - QD_ERROR_INVALID_OPERATION: stream is capturing ("Graphs").
 *  - QD_ERROR_HAZARD: with QD_CONTEXT_VALIDATE_FAIL, the copy would race or use freed memory
 *    ("Validation"): nothing is queued.
 *  - QD_ERROR_OUT_OF_MEMORY, QD_ERROR_DEVICE_LOST, QD_ERROR_FORKED: of any of the three
 *    contexts. */
QD_API qd_status qd_memcpy_peer_async(qd_stream stream, uint64_t dst, qd_context dst_ctx,
                                      uint64_t src, qd_context src_ctx, uint64_t bytes);

/* ---------------------------------------------------------------------------------------------
 * Validation (since 0.2)
 *
 * The validation mode reports the stream bugs nothing else reports: a kernel on one stream
 * reading memory another stream is still writing, memory freed on one stream while another
 * still uses it, and memory used after its free. It is off by default and costs nothing then;
 * turn it on per context with QD_CONTEXT_VALIDATE (qd_context_desc.flags), or for every
 * context with the environment variable QD_VALIDATE=1 (qd_context_flags says how it is read).
 *
 * The model is a happens-before race detector. Each stream has a vector clock, and so has the
 * host. Every operation queued on a stream ticks its clock. Ordering moves clocks exactly as
 * the real ordering does: qd_event_record copies the stream's clock into the event,
 * qd_stream_wait_event merges it into the waiting stream; qd_stream_fork, qd_stream_join,
 * qd_launch_parallel and qd_graph_launch are records and waits on pooled events and move the
 * clocks the same way. The host learns a stream's clock from qd_stream_synchronize, an event's
 * from qd_event_synchronize, every stream's from qd_context_synchronize (and from a query
 * returning QD_SUCCESS: qd_stream_query, qd_event_query), and everything the host knows is
 * ordered before every operation it queues afterwards, on any stream. Host callbacks, host
 * kernels and the program's own threads order nothing in this model.
 *
 * What is tracked: every block of qd_mem_alloc_async and qd_host_alloc of the context. Each
 * remembers its last writes and the reads since, each with its stream, its clock and its
 * operation. Accesses are:
 *   - qd_memcpy_async: reads [src, src+bytes), writes [dst, dst+bytes), exactly;
 *   - qd_memset_async: writes [dst, dst+bytes);
 *   - a kernel launch (qd_launch, qd_launch_parallel, graph replays): every 8-byte word of an
 *     argument whose value is an address inside a tracked block is an access to that block
 *     from that address to its end, read-write unless qd_kernel_set_param_access says
 *     otherwise;
 *   - qd_mem_alloc_async writes the whole block on its stream (other streams must be ordered
 *     after the allocation), qd_mem_free_async and qd_host_free release it.
 * Memory outside qd's blocks (the program's own host buffers) is not tracked. Not checked:
 * what host callbacks (qd_launch_host_fn), host kernels and the program's threads touch, and a
 * kernel's real extent (an argument counts from its address to the block's end, as above).
 *
 * What is reported (qd_hazard_kind): a write and another access to overlapping bytes, on
 * different streams, neither ordered before the other (QD_HAZARD_RACE); a free while an
 * access on another stream (or, for qd_host_free, any access) is not ordered before it
 * (QD_HAZARD_FREE_IN_USE: order it with an event, as PyTorch's record_stream does); an access
 * to a freed block (QD_HAZARD_USE_AFTER_FREE). A block is remembered as freed until qd hands
 * its addresses out again, or until the host has synchronized with its free: after that the
 * program's own allocator may legitimately return that memory (on the CPU backend device
 * memory is host memory), so it is no longer reported. Destroying a context with work in
 * flight is not a hazard. Each report names both operations (kernel names, memcpy, memset,
 * alloc, free), both streams (by handle), the block, and the offset of the first byte both
 * touch; it goes to the context's hazard handler (by default one line on stderr, starting
 * "qd: hazard:") and is counted in qd_context_stats.hazards_reported. With
 * QD_CONTEXT_VALIDATE_FAIL the offending call also returns QD_ERROR_HAZARD and queues nothing,
 * and the model is left as it was before the call.
 *
 * A refused call queues nothing, also when it is made of several parts: qd_launch_parallel
 * (its fork, every task's launch, its join) and qd_graph_launch (every operation of every
 * branch, and the waits between them) are checked whole, each part seeing the ordering of the
 * parts before it, before any part is queued; a hazard in any part refuses the call with
 * QD_ERROR_HAZARD, reported once, and no part runs. qd_memcpy_peer_async is one operation.
 * qd_stream_fork and qd_stream_join touch no memory: validation orders them and never refuses
 * them; their own refusals queue nothing too (a fork the pool cannot serve,
 * QD_ERROR_POOL_EXHAUSTED; a join of a child outside the parent's capture,
 * QD_ERROR_INVALID_OPERATION). A part that fails in the device after others were queued is
 * not a refusal: each call says what it leaves queued then.
 *
 * Across contexts. The validating contexts of one backend share one happens-before domain:
 * their streams' clocks, their events' clocks and their blocks. An event recorded on a stream
 * of one context and waited on by a stream of another orders the two; a synchronize or query
 * of any of them (stream, event or context) orders the host, and so the work it queues
 * afterwards on any of them; a block is checked wherever it is touched: by
 * qd_memcpy_peer_async, by a qd_memcpy_async or a kernel on another context's stream naming
 * it, by a free while another context still copies from it. A report goes to the handler of
 * the context whose call found the hazard, and is counted there (qd_hazard.context); its
 * streams and its block may be of the other context, and that calling context's
 * QD_CONTEXT_VALIDATE_FAIL decides whether the call is refused. Destroying a validating context drains
 * its work, so the host is ordered after it; its streams, events and blocks then leave the
 * domain, and the other contexts go on validating.
 * A context that does not validate is outside the domain: its operations and its
 * synchronizes are not seen, so what its streams touch is not checked, and an ordering that
 * passes through a host synchronize of it is not known (a race may be reported: validate
 * every context that orders work, QD_VALIDATE=1 does). A wait by a validating context's
 * stream on an event of a context that does not validate orders that stream after all the
 * work queued so far on validating contexts, since the record may have waited for any of it:
 * a hazard this hides is missed, none is invented.
 *
 * Launch attributes (since 0.3, "Launch attributes"). A programmatic (PDL) launch is ordered
 * after its stream's earlier work like any launch: the model trusts the kernel to wait for its
 * grid dependency before it reads what the previous kernel wrote, and cannot see one that reads
 * before that wait (a race inside the device that no report names). A COMPLETION_EVENT is a
 * record made just before its launch: work waiting on it is ordered after the launch's
 * predecessors, not after the launch's own accesses (using them is reported as a race).
 *
 * Cost when on: one mutex and a few map look-ups per operation, plus a scan of every launch's
 * argument words (bench/RESULTS.md records it). Off: none (no observer is attached).
 * ------------------------------------------------------------------------------------------- */

/** What kind of hazard a qd_hazard reports. */
typedef enum qd_hazard_kind {
    QD_HAZARD_RACE = 1,           /**< a write and another access, unordered, two streams */
    QD_HAZARD_FREE_IN_USE = 2,    /**< a free not ordered after an access of the block */
    QD_HAZARD_USE_AFTER_FREE = 3, /**< an access to a block after its free was queued */
    QD_HAZARD_KIND_FORCE_32_ = 0x7fffffff
} qd_hazard_kind;

/** How a kernel uses the memory a parameter points to (qd_kernel_set_param_access). */
typedef enum qd_param_access {
    QD_PARAM_READ_WRITE = 0, /**< the default: the kernel may read and write it */
    QD_PARAM_READ = 1,       /**< the kernel only reads it: reads on several streams are fine */
    QD_PARAM_WRITE = 2,      /**< the kernel only writes it */
    QD_PARAM_IGNORE = 3,     /**< not memory (or memory the kernel never touches): not checked */
    /** The kernel reads and writes only its own part of the memory, chosen by its other
     *  arguments (a data-parallel split: each task of a qd_launch_parallel takes a slice of one
     *  buffer). qd cannot see the parts, so launches of this kernel (the same kernel object)
     *  are not checked against each other for it; against every other operation they count as
     *  read-write as usual. */
    QD_PARAM_PARTITIONED = 4,
    QD_PARAM_ACCESS_FORCE_32_ = 0x7fffffff
} qd_param_access;

/** One hazard, as the hazard handler receives it. Every pointer in it is valid only during
 *  the handler's call. "The operation" is the one being queued when the hazard was found;
 *  "the other" is the earlier one it conflicts with. */
typedef struct qd_hazard {
    uint32_t struct_size;
    uint32_t kind;               /**< qd_hazard_kind */
    qd_context context;          /**< the context whose call found it (whose handler gets it);
                                      the streams and the block may be of another validating
                                      context ("Validation", across contexts) */
    qd_stream stream;            /**< the operation's stream, or 0 when it had no handle (a
                                      pooled stream of qd_launch_parallel or a graph replay) or
                                      is the host (qd_host_free) */
    qd_stream other_stream;      /**< the other operation's stream, as above (its handle at the
                                      time of that operation; it may be stale now) */
    uint64_t allocation;         /**< the block's address (qd_mem_alloc_async, qd_host_alloc) */
    uint64_t allocation_bytes;   /**< its size */
    uint64_t offset;             /**< the first byte of the block both operations touch */
    const char *operation;       /**< e.g. "kernel 'consume' (read)", "memcpy (write)", "free";
                                      a kernel's mode is its parameter's declared access:
                                      "(read)", "(write)" or "(read-write)" */
    const char *other_operation; /**< the same for the other operation ("alloc (write)" for a
                                      qd_mem_alloc_async, named by its stream's handle) */
    const char *message;         /**< the whole report in one line, as the default handler
                                      prints it */
} qd_hazard;

/** Receives a hazard. Called on the thread whose call found it, before that call returns, with
 *  no qd lock held: it may call qd functions, except on streams of the same context, which
 *  would be checked while the report is pending (their hazards are reported too). It may
 *  destroy objects, the reporting call's own (its kernel, its stream) and its context included
 *  (Conventions, "Threads", nested calls): the reporting call then completes as if the destroy
 *  came after it, or returns QD_ERROR_INVALID_HANDLE. */
typedef void (*qd_hazard_fn)(const qd_hazard *hazard, void *user_data);

/** Install the context's hazard handler: fn(hazard, user_data) is called once per hazard
 *  found from now on, instead of the default (one line on stderr). fn NULL restores the
 *  default. Threads: any; a report being delivered on another thread may still reach the
 *  previous handler.
 *  - QD_ERROR_INVALID_HANDLE: ctx is 0, not a context, or destroyed.
 *  - QD_ERROR_INVALID_OPERATION: validation is off for this context (QD_CONTEXT_VALIDATE,
 *    QD_VALIDATE). */
QD_API qd_status qd_context_set_hazard_handler(qd_context ctx, qd_hazard_fn fn, void *user_data);

/** Declare how the kernel uses the memory its parameter `index` points to (a qd_param_access
 *  value), for the validation mode: by default every parameter that points into a tracked
 *  block is read-write, so two streams running the same kernel on one input would be
 *  reported; QD_PARAM_READ says they only read it. The declaration belongs to this kernel
 *  handle (each qd_kernel_get returns a new one) and applies to launches queued after the
 *  call (a graph keeps the declarations its kernels had when it was captured); it is
 *  accepted, and kept, when validation is off. Threads: any.
 *  - QD_ERROR_INVALID_ARGUMENT: index >= QD_MAX_ARGS, or access is not a qd_param_access.
 *  - QD_ERROR_INVALID_HANDLE: kernel is 0, not a kernel, or destroyed. */
QD_API qd_status qd_kernel_set_param_access(qd_kernel kernel, uint32_t index, uint32_t access);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* clang-format on */
#endif /* QD_QD_H */
