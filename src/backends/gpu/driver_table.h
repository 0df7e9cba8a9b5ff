// The driver table: every native function and constant the GPU backend uses, in neutral names.
//
// The GPU logic (contexts, streams, events, modules, launches, memory, error mapping) is written
// once over this table. A vendor folder only fills it: cuda/ with symbols from libcuda.so.1,
// hip/ with symbols (or small adapters) from libamdhip64.so. Nothing here names a vendor.
//
// Signatures follow the CUDA driver ABI, because most vendor functions match it as they are:
// handles are opaque pointers, device addresses are 64-bit integers, results and enums are ints.
// A vendor whose function differs (HIP's memcpy takes a direction, its device pointers are
// void*) fills the entry with a small adapter that converts.
#pragma once

#include <qd/qd.h>

#include <cstddef>
#include <cstdint>

namespace qd::backend::gpu {

// Opaque native handles. Distinct types so a stream can never be passed where an event goes.
struct NativeContextTag;
struct NativeStreamTag;
struct NativeEventTag;
struct NativeModuleTag;
struct NativeFunctionTag;
struct NativeGraphTag;
struct NativeGraphExecTag;
struct NativeMemPoolTag;
struct NativeGraphNodeTag;
struct NativeGreenCtxTag;
struct NativeResourceDescTag;
using NativeContext = NativeContextTag *;            // CUcontext
using NativeStream = NativeStreamTag *;              // CUstream / hipStream_t
using NativeEvent = NativeEventTag *;                // CUevent / hipEvent_t
using NativeModule = NativeModuleTag *;              // CUmodule / hipModule_t
using NativeFunction = NativeFunctionTag *;          // CUfunction / hipFunction_t
using NativeGraph = NativeGraphTag *;                // CUgraph / hipGraph_t
using NativeGraphExec = NativeGraphExecTag *;        // CUgraphExec / hipGraphExec_t
using NativeMemPool = NativeMemPoolTag *;            // CUmemoryPool / hipMemPool_t
using NativeGraphNode = NativeGraphNodeTag *;        // CUgraphNode / hipGraphNode_t
using NativeGreenCtx = NativeGreenCtxTag *;          // CUgreenCtx
using NativeResourceDesc = NativeResourceDescTag *;  // CUdevResourceDesc
using NativeDevice = int;                            // CUdevice / hipDevice_t
using DevicePtr = uint64_t;                          // CUdeviceptr
using Result = int;                                  // CUresult / hipError_t
using HostFn = void (*)(void *user_data);            // CUhostFn / hipHostFn_t

// What graph_exec_update reports (CUgraphExecUpdateResultInfo's layout): result is the
// driver's CUgraphExecUpdateResult (0: success), the nodes where it stopped, if any.
struct GraphExecUpdateInfo {
    int result;
    void *error_node;
    void *error_from_node;
};

// A kernel node's parameters for graph_exec_kernel_node_set_params: the layout of
// CUDA_KERNEL_NODE_PARAMS_v2, whose first ten fields are CUDA_KERNEL_NODE_PARAMS_v1, so it may
// be passed to either symbol (kernel and ctx stay null: `function` names the kernel).
struct KernelNodeParams {
    NativeFunction function;
    unsigned grid_x, grid_y, grid_z;
    unsigned block_x, block_y, block_z;
    unsigned shared_mem_bytes;
    void **params;
    void **extra;
    void *kernel;
    NativeContext ctx;
};

// CUgraphConditionalHandle: a 64-bit value naming one conditional node's value in a graph.
using ConditionalHandle = uint64_t;

// CUDA_CONDITIONAL_NODE_PARAMS: `bodies` is filled by graph_add_node with the node's body
// graphs (`size` of them), which the node owns.
struct ConditionalNodeParams {
    ConditionalHandle handle;
    int type;       // DriverTable::conditional_if / _while / _switch
    unsigned size;  // the number of bodies
    NativeGraph *bodies;
    NativeContext ctx;
};

// CUgraphNodeParams: {type, reserved[3], a 232-byte union, reserved}; qd fills the
// conditional member only (the rest stays zero, as the driver requires).
struct GraphNodeParams {
    int type;  // DriverTable::graph_node_conditional
    int reserved0[3];
    union {
        long long reserved1[29];
        ConditionalNodeParams conditional;
    };
    long long reserved2;
};

// CUmemAccessDesc / hipMemAccessDesc: {location {type, id}, flags}, three ints in both.
struct MemAccessDesc {
    int location_type;  // DriverTable::mem_location_device
    int location_id;    // the device ordinal given access
    int flags;          // DriverTable::mem_access_read_write
};

// CUdevResource (RESOURCE_ABI_VERSION 1): a tagged union the driver fills and reads; qd reads
// the SM fields only (the last two are 0 on drivers before CUDA 12.8, which lack them).
struct DevSmResource {
    unsigned sm_count;
    unsigned min_partition_size;     // minSmPartitionSize
    unsigned coscheduled_alignment;  // smCoscheduledAlignment
};
struct DevResource {
    int type;  // DriverTable::dev_resource_type_sm
    unsigned char internal_padding[92];
    union {
        DevSmResource sm;
        unsigned char oversize[48];
    };
};

// CUlaunchAttribute: {id, padding to 8, a 64-byte value union}. qd fills the members below.
struct LaunchAttribute {
    int id;  // DriverTable::launch_attr_*
    char pad[4];
    union {
        char bytes[64];
        struct {
            unsigned x, y, z;
        } cluster;         // launch_attr_cluster_dimension
        int programmatic;  // launch_attr_programmatic_serialization: 1 allowed
        int priority;      // launch_attr_priority
        struct {
            NativeEvent event;
            int flags;       // 0
        } completion_event;  // launch_attr_launch_completion_event
    } value;
};

// CUlaunchConfig: grid, block, shared memory, stream and the attribute list of launch_kernel_ex.
struct LaunchConfig {
    unsigned grid_x, grid_y, grid_z;
    unsigned block_x, block_y, block_z;
    unsigned shared_mem_bytes;
    NativeStream stream;
    LaunchAttribute *attrs;
    unsigned num_attrs;
};

// The driver-table list: X(name, required, parameters). Every entry returns a Result.
// "required = false" entries may be left null; the backend then does without them (the
// comment says how).
#define QD_GPU_DRIVER_TABLE(X)                                                                     \
    X(init, true, (unsigned flags))                                                                \
    X(driver_get_version, true, (int *version))                                                    \
    X(get_error_name, true, (Result error, const char **name))                                     \
    X(get_error_string, true, (Result error, const char **text))                                   \
    X(device_get_count, true, (int *count))                                                        \
    X(device_get, true, (NativeDevice * device, int ordinal))                                      \
    X(device_get_name, true, (char *name, int length, NativeDevice device))                        \
    X(device_get_attribute, true, (int *value, int attribute, NativeDevice device))                \
    X(device_total_mem, true, (size_t * bytes, NativeDevice device))                               \
    X(device_primary_ctx_retain, true, (NativeContext * ctx, NativeDevice device))                 \
    X(device_primary_ctx_release, true, (NativeDevice device))                                     \
    /* the current-context entries: required under CurrentModel::context_stack only */             \
    X(ctx_get_current, false, (NativeContext * ctx))                                               \
    X(ctx_set_current, false, (NativeContext ctx))                                                 \
    X(ctx_push_current, false, (NativeContext ctx))                                                \
    X(ctx_pop_current, false, (NativeContext * ctx))                                               \
    /* the current-device entries: required under CurrentModel::current_device only */             \
    X(device_get_current, false, (NativeDevice * device))                                          \
    X(device_set_current, false, (NativeDevice device))                                            \
    X(ctx_get_stream_priority_range, true, (int *least, int *greatest))                            \
    X(stream_create, true, (NativeStream * stream, unsigned flags, int priority))                  \
    X(stream_destroy, true, (NativeStream stream))                                                 \
    X(stream_query, true, (NativeStream stream))                                                   \
    X(stream_synchronize, true, (NativeStream stream))                                             \
    X(stream_wait_event, true, (NativeStream stream, NativeEvent event, unsigned flags))           \
    X(stream_get_priority, true, (NativeStream stream, int *priority))                             \
    /* optional: without it an imported stream's context is not checked */                         \
    X(stream_get_ctx, false, (NativeStream stream, NativeContext * ctx))                           \
    /* optional: without it an imported stream's flags are unknown (qd_stream_get_flags) */        \
    X(stream_get_flags, false, (NativeStream stream, unsigned *flags))                             \
    X(event_create, true, (NativeEvent * event, unsigned flags))                                   \
    X(event_destroy, true, (NativeEvent event))                                                    \
    X(event_record, true, (NativeEvent event, NativeStream stream))                                \
    X(event_query, true, (NativeEvent event))                                                      \
    X(event_synchronize, true, (NativeEvent event))                                                \
    X(event_elapsed_time, true, (float *ms, NativeEvent start, NativeEvent end))                   \
    X(module_load_data, true,                                                                      \
      (NativeModule * module, const void *image, unsigned num_options, int *options,               \
       void **option_values))                                                                      \
    X(module_get_function, true,                                                                   \
      (NativeFunction * function, NativeModule module, const char *name))                          \
    X(module_unload, true, (NativeModule module))                                                  \
    /* optional: without it launch arguments are not checked against the kernel's parameters */    \
    X(func_get_param_info, false,                                                                  \
      (NativeFunction function, size_t index, size_t * offset, size_t * size))                     \
    /* optional: without it a kernel's code is loaded by its first launch, which under the */      \
    /* driver's lazy loading may wait for work in flight (see GpuModule::get_kernel) */            \
    X(func_load, false, (NativeFunction function))                                                 \
    X(launch_kernel, true,                                                                         \
      (NativeFunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,                 \
       unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_mem_bytes,            \
       NativeStream stream, void **params, void **extra))                                          \
    /* optional, launch attributes (qd_launch_ex): without it every attribute is */                \
    /* QD_ERROR_NOT_SUPPORTED naming DriverTable::launch_ex_requires */                            \
    X(launch_kernel_ex, false,                                                                     \
      (const LaunchConfig *config, NativeFunction function, void **params, void **extra))          \
    X(launch_host_func, true, (NativeStream stream, HostFn fn, void *user_data))                   \
    X(mem_alloc_async, true, (DevicePtr * address, size_t bytes, NativeStream stream))             \
    X(mem_free_async, true, (DevicePtr address, NativeStream stream))                              \
    X(mem_free, true, (DevicePtr address))                                                         \
    X(memcpy_async, true, (DevicePtr dst, DevicePtr src, size_t bytes, NativeStream stream))       \
    X(memset_d8_async, true,                                                                       \
      (DevicePtr dst, unsigned char value, size_t bytes, NativeStream stream))                     \
    X(host_alloc, true, (void **ptr, size_t bytes, unsigned flags))                                \
    X(host_free, true, (void *ptr))                                                                \
    /* native graphs, all optional: without every one of them the core records a capture */        \
    /* itself and a replay re-issues the recorded operations (core/capture/) */                    \
    X(stream_begin_capture, false, (NativeStream stream, int mode))                                \
    X(stream_end_capture, false, (NativeStream stream, NativeGraph * graph))                       \
    X(stream_is_capturing, false, (NativeStream stream, int *status))                              \
    X(graph_instantiate, false,                                                                    \
      (NativeGraphExec * exec, NativeGraph graph, unsigned long long flags))                       \
    X(graph_launch, false, (NativeGraphExec exec, NativeStream stream))                            \
    X(graph_exec_update, false,                                                                    \
      (NativeGraphExec exec, NativeGraph graph, GraphExecUpdateInfo * info))                       \
    X(graph_exec_destroy, false, (NativeGraphExec exec))                                           \
    X(graph_destroy, false, (NativeGraph graph))                                                   \
    /* optional, rebinding a kernel node of a driver graph (qd_graph_set_kernel_args): the */      \
    /* capture finds each launch's node with stream_get_capture_info; without both entries a */    \
    /* rebind of a driver graph is QD_ERROR_NOT_SUPPORTED naming DriverTable::rebind_requires */   \
    X(stream_get_capture_info, false,                                                              \
      (NativeStream stream, int *status, unsigned long long *id, NativeGraph *graph,               \
       const NativeGraphNode **dependencies, size_t *num_dependencies))                            \
    X(graph_exec_kernel_node_set_params, false,                                                    \
      (NativeGraphExec exec, NativeGraphNode node, const KernelNodeParams *params))                \
    /* optional, the other form of a rebind, where a node's parameters name its kernel in a */     \
    /* way qd cannot write (HIP: a host-side symbol): `node` takes `source`'s parameters as the */ \
    /* driver recorded them, `params` as the arguments. Used instead of */                         \
    /* graph_exec_kernel_node_set_params where DriverTable::rebind_by_source is set */             \
    X(graph_exec_kernel_node_set_args, false,                                                      \
      (NativeGraphExec exec, NativeGraphNode node, NativeGraphNode source, void **params))         \
    /* optional, conditional nodes in a driver graph (qd.h, "Conditionals"; graph.cpp): */         \
    /* without all four, and stream_get_capture_info, qd_stream_begin_conditional on a native */   \
    /* capture is QD_ERROR_NOT_SUPPORTED naming the missing entry and the version needed */        \
    X(graph_conditional_handle_create, false,                                                      \
      (ConditionalHandle * handle, NativeGraph graph, NativeContext ctx, unsigned default_value,   \
       unsigned flags))                                                                            \
    X(graph_add_node, false,                                                                       \
      (NativeGraphNode * node, NativeGraph graph, const NativeGraphNode *dependencies,             \
       size_t num_dependencies, GraphNodeParams *params))                                          \
    X(stream_begin_capture_to_graph, false,                                                        \
      (NativeStream stream, NativeGraph graph, const NativeGraphNode *dependencies,                \
       const void *edge_data, size_t num_dependencies, int mode))                                  \
    X(stream_update_capture_dependencies, false,                                                   \
      (NativeStream stream, NativeGraphNode * dependencies, size_t num_dependencies,               \
       unsigned flags))                                                                            \
    /* optional, qd_graph_upload: without it an upload instantiates only where */                  \
    /* DriverTable::upload_requires is null, else it is QD_ERROR_NOT_SUPPORTED naming that */      \
    X(graph_upload, false, (NativeGraphExec exec, NativeStream stream))                            \
    /* optional, several devices (qd.h): without device_can_access_peer no two devices are */      \
    /* peers; without ctx_enable_peer_access, device_get_mem_pool or mem_pool_set_access */        \
    /* peer access cannot be granted; without memcpy_peer_async a copy between contexts is */      \
    /* memcpy_async (unified addressing: the driver finds both devices from the addresses) */      \
    X(device_can_access_peer, false, (int *can_access, NativeDevice device, NativeDevice peer))    \
    X(ctx_enable_peer_access, false, (NativeContext peer, unsigned flags))                         \
    X(device_get_mem_pool, false, (NativeMemPool * pool, NativeDevice device))                     \
    X(mem_pool_set_access, false, (NativeMemPool pool, const MemAccessDesc *desc, size_t count))   \
    X(memcpy_peer_async, false,                                                                    \
      (DevicePtr dst, NativeContext dst_ctx, DevicePtr src, NativeContext src_ctx, size_t bytes,   \
       NativeStream stream))                                                                       \
    /* optional, SM partitions (qd_context_split, split.cpp): all seven, or partitions are */      \
    /* QD_ERROR_NOT_SUPPORTED naming DriverTable::green_ctx_requires */                            \
    X(device_get_dev_resource, false, (NativeDevice device, DevResource * resource, int type))     \
    X(dev_sm_resource_split_by_count, false,                                                       \
      (DevResource * result, unsigned *groups, const DevResource *input, DevResource *remaining,   \
       unsigned flags, unsigned min_count))                                                        \
    X(dev_resource_generate_desc, false,                                                           \
      (NativeResourceDesc * desc, DevResource * resources, unsigned count))                        \
    X(green_ctx_create, false,                                                                     \
      (NativeGreenCtx * ctx, NativeResourceDesc desc, NativeDevice device, unsigned flags))        \
    X(green_ctx_destroy, false, (NativeGreenCtx ctx))                                              \
    X(ctx_from_green_ctx, false, (NativeContext * ctx, NativeGreenCtx green))                      \
    X(green_ctx_stream_create, false,                                                              \
      (NativeStream * stream, NativeGreenCtx green, unsigned flags, int priority))                 \
    /* optional, timelines (qd.h): without both, qd_timeline_create is QD_ERROR_NOT_SUPPORTED */   \
    /* naming DriverTable::timeline_requires. A 64-bit word written by, and waited on (>=), */     \
    /* stream order: cuStreamWriteValue64 / cuStreamWaitValue64 (flags: write_value_default, */    \
    /* wait_value_geq) */                                                                          \
    X(stream_write_value64, false,                                                                 \
      (NativeStream stream, DevicePtr address, uint64_t value, unsigned flags))                    \
    X(stream_wait_value64, false,                                                                  \
      (NativeStream stream, DevicePtr address, uint64_t value, unsigned flags))

// One value per entry, in list order.
enum class Fn : uint32_t {
#define QD_GPU_FN_ENUM_(name, required, params) name,
    QD_GPU_DRIVER_TABLE(QD_GPU_FN_ENUM_)
#undef QD_GPU_FN_ENUM_
        count
};
constexpr size_t kFnCount = static_cast<size_t>(Fn::count);

// How one native result code maps to a qd status. sticky: the code means the context is
// corrupted (an asynchronous fault); the backend marks the context lost.
struct ErrorRule {
    Result code;
    qd_status status;
    bool sticky;
};

// How a driver decides which device a call addresses when it names no stream: the strategy
// ScopedCurrent follows (gpu_objects.h), chosen by the vendor loader.
enum class CurrentModel : uint8_t {
    // Each thread has a stack of current contexts (the CUDA driver API): ctx_get_current,
    // ctx_set_current, ctx_push_current and ctx_pop_current are required.
    context_stack,
    // Each thread has a current device whose primary context is implied (the HIP runtime):
    // device_get_current and device_set_current are required; the ctx_* entries may be null.
    current_device,
};

struct DriverTable {
    // --- read by every enqueue: first, on one cache line with nothing else ---
    Result success = 0;

    // True when every call that takes a stream handle (launch, event record, stream wait,
    // async copies, memset, stream-ordered alloc/free, host functions, stream synchronize and
    // query) runs in that stream's context whatever context is current on the calling thread.
    // The backend then skips its current-context check on those calls. False: it makes its
    // context current around each of them (and restores the caller's).
    bool stream_calls_use_stream_context = false;

    CurrentModel current_model = CurrentModel::context_stack;

    // --- functions (filled by the vendor loader) ---
#define QD_GPU_FN_MEMBER_(name, required, params) Result(*name) params = nullptr;
    QD_GPU_DRIVER_TABLE(QD_GPU_FN_MEMBER_)
#undef QD_GPU_FN_MEMBER_

    // The vendor's name of each entry ("cuLaunchKernel"), used in messages. Filled by the
    // loader; entries it leaves null read as the neutral name.
    const char *symbol[kFnCount] = {};

    // --- identity ---
    qd_backend kind = QD_BACKEND_DEFAULT;
    const char *api_name = "";  // "CUDA", "HIP": the prefix of messages

    // --- result codes ---
    Result not_ready = 0;
    Result invalid_value = 0;  // what func_get_param_info returns past the last parameter
    Result peer_access_already_enabled = 0;  // ctx_enable_peer_access, granted before
    const ErrorRule *error_rules = nullptr;  // codes not listed map to the call's fallback
    size_t num_error_rules = 0;

    // --- flag and enum values ---
    unsigned stream_default_flags = 0;      // a stream that syncs with the legacy stream
    unsigned stream_non_blocking_flag = 0;  // a stream that does not
    unsigned event_default_flags = 0;       // with timing
    unsigned event_disable_timing_flag = 0;
    unsigned host_alloc_flags = 0;  // pinned, usable from every context
    int attr_compute_major = 0;
    int attr_compute_minor = 0;
    int attr_multiprocessors = 0;
    int jit_error_log_buffer = 0;        // module_load_data options: where the JIT writes
    int jit_error_log_buffer_bytes = 0;  // its error log, and the buffer's size
    int capture_mode = 0;                // stream_begin_capture's mode (see the loaders)
    int capture_status_none = 0;         // stream_is_capturing: the stream is not capturing
    int mem_location_device = 0;         // MemAccessDesc::location_type of a device
    int mem_access_read_write = 0;       // MemAccessDesc::flags: read and write

    // Conditional nodes (graph_add_node): CU_GRAPH_NODE_TYPE_CONDITIONAL, the
    // CUgraphConditionalNodeType values, CU_GRAPH_COND_ASSIGN_DEFAULT and
    // CU_STREAM_SET_CAPTURE_DEPENDENCIES.
    int graph_node_conditional = 0;
    int conditional_if = 0;
    int conditional_while = 0;
    int conditional_switch = 0;
    unsigned conditional_assign_default = 0;
    unsigned set_capture_dependencies = 0;
    // The image (a fat binary with one cubin per architecture) holding the kernel
    // `condition_kernel_name`(handle, const uint32_t *word), which sets a conditional's value
    // from a condition word; null where the vendor has none. Loaded once per device context,
    // at the first conditional with a condition word (DeviceContext::condition_kernel).
    const void *condition_image = nullptr;
    const char *condition_kernel_name = "";
    const char *condition_kernel_architectures = "";  // for messages: "sm_75 sm_80 ..."
    Result no_binary_for_gpu = 0;  // module_load_data: the image has no code for this device

    // What a driver needs to rebind a kernel node of a driver graph (stream_get_capture_info and
    // graph_exec_kernel_node_set_params or graph_exec_kernel_node_set_args), for the
    // QD_ERROR_NOT_SUPPORTED message: "CUDA 11.3".
    const char *rebind_requires = "";
    // True when a rebind is graph_exec_kernel_node_set_args (the node's own parameters, the
    // arguments replaced) rather than graph_exec_kernel_node_set_params (parameters written
    // whole from the core's kernel and dimensions): HIP, whose node names its kernel by a
    // host-side symbol.
    bool rebind_by_source = false;
    // What a driver needs to upload a driver graph (graph_upload), for the
    // QD_ERROR_NOT_SUPPORTED message: "CUDA 11.1". Null: without the entry, qd_graph_upload only
    // instantiates the graph (a runtime whose upload is optional).
    const char *upload_requires = nullptr;
    // Timelines (stream_write_value64, stream_wait_value64): the flags of a plain write and of a
    // wait until the word is at least the value (CU_STREAM_WAIT_VALUE_GEQ), and what a driver
    // needs, for the QD_ERROR_NOT_SUPPORTED message: "CUDA 11.7 ...".
    unsigned write_value_default = 0;
    unsigned wait_value_geq = 0;
    const char *timeline_requires = "";

    // SM partitions (split.cpp): CU_DEV_RESOURCE_TYPE_SM, CU_GREEN_CTX_DEFAULT_STREAM, and what
    // a driver needs for them, for the QD_ERROR_NOT_SUPPORTED message ("CUDA 12.4"); null where
    // the vendor has no partitions at all (HIP).
    int dev_resource_type_sm = 0;
    unsigned green_ctx_default_stream = 0;
    const char *green_ctx_requires = nullptr;

    // Launch attributes (launch_kernel_ex): the CUlaunchAttributeID values, and what a driver
    // needs for them, for the QD_ERROR_NOT_SUPPORTED message ("CUDA 11.8 ..."); null where the
    // vendor has no launch attributes at all (HIP: every attribute is refused, naming the API).
    int launch_attr_cluster_dimension = 0;
    int launch_attr_programmatic_serialization = 0;
    int launch_attr_priority = 0;
    int launch_attr_launch_completion_event = 0;
    const char *launch_ex_requires = nullptr;
    // The least compute capability (major) with thread-block clusters; 0: none.
    int cluster_min_compute_major = 0;
    // What a driver needs to capture a programmatic launch as a programmatic edge of the
    // graph, and the least driver_get_version value that has it (12030); 0: never.
    const char *programmatic_capture_requires = "";
    int programmatic_capture_min_version = 0;

    // False when launch_host_func is a stream-callback fallback (a HIP runtime without
    // hipLaunchHostFunc): a stream callback cannot be captured, so a host function inside a
    // native capture is refused (QD_ERROR_NOT_SUPPORTED) instead.
    bool host_func_capturable = true;

    // Pseudo stream handles that name "the legacy stream" or "the per-thread stream" rather
    // than a stream (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). qd refuses to import them.
    uintptr_t pseudo_streams[2] = {0, 0};

    // The size of a vendor fat-binary image whose header starts at image, or 0 when the bytes
    // are not one (the backend then treats them as ELF or text). May be null.
    uint64_t (*fat_binary_size)(const void *image, uint64_t available) = nullptr;
};

// Stores a symbol's address in the entry `fn` (the vendor loader's dlsym results).
void set_entry(DriverTable &table, Fn fn, void *address);
// True when the entry is filled.
bool has_entry(const DriverTable &table, Fn fn);
// True when every native-graph entry is filled (stream_begin_capture ... graph_destroy).
bool has_native_graphs(const DriverTable &table);
// The first SM-partition entry left null (device_get_dev_resource ... green_ctx_stream_create),
// or Fn::count when every one is filled.
Fn first_missing_partition_entry(const DriverTable &table);
// The first required entry left null, or Fn::count when the table is complete.
Fn first_missing(const DriverTable &table);
// The neutral name of an entry ("launch_kernel").
const char *entry_name(Fn fn);
// The vendor name of an entry if the loader gave one, else the neutral name.
inline const char *symbol_name(const DriverTable &table, Fn fn) {
    const char *name = table.symbol[static_cast<size_t>(fn)];
    return name ? name : entry_name(fn);
}

}  // namespace qd::backend::gpu
