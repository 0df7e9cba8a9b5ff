// A fake GPU driver: a DriverTable (src/backends/gpu/driver_table.h) whose entries keep just enough
// state to drive the shared GPU layer without a GPU - a primary context, streams with pending
// work, events, modules, a thread's current context - and that can fail any call on demand.
//
// Used by the white-box tests of the GPU layer (tests/gpu/gpu_backend_test.cpp) and by the
// backend conformance suite (tests/conformance/), which runs the backend.h contract over
// make_gpu_driver(fake_table(), ...). Built as the static library qd_fake_gpu_driver
// (tests/meson.build) when the GPU layer is built in.
//
// What the fake models, and what it does not:
// - Work: a launch adds `work_per_launch` units of pending work to its stream (0 by default);
//   hold(stream) adds one. Pending work completes when the stream or an event on it is
//   synchronized, or when complete_all_work() is called. A query meanwhile says not ready.
// - Events: a record is pending while its stream has pending work at record time.
// - stream_wait_event orders nothing (every stream runs "at once").
// - Host functions run at enqueue, on a thread of their own (the real driver's callback thread),
//   joined before launch_host_func returns: they never wait for pending work.
// - Memory: addresses are made up and memcpy/memset do nothing, unless `backed_memory` is set
//   before the allocations: then device memory is host memory (malloc) and copies and sets
//   happen at enqueue.
// - Modules: any image loads unless its text contains "bad" (then INVALID_PTX with a JIT log);
//   every module has the functions k0 (no parameters), k1 (8 bytes) and k2 (8 and 4 bytes).
// - Devices: two, each with its own primary context (`primary`, `primary1`). Peer access is
//   possible between them while `peer_access` is true; grants are recorded (`peer_enabled`,
//   `pool_access`) and peer copies counted (`peer_copies`; real when backed_memory is set).
// - SM partitions (green contexts): device 0 has `sm_count` SMs with the split rule
//   `sm_min_partition` / `sm_alignment` (0 and 0 model a driver before CUDA 12.8, which reports
//   the SM count only). A split cuts one group rounded up to the alignment from its input; each
//   green context retains the primary context (as the real one does) and converts to a context
//   of its own; `partition_calls` lists the partition calls made, in order ("split 16",
//   "desc 16", "green_create 16", "from_green", "green_stream", "green_destroy 16").
// - Timelines: stream_write_value64 stores the value into the word (pinned host memory) at
//   enqueue and is recorded (value_writes); stream_wait_value64 is recorded (value_waits) and
//   orders nothing.
// - Fault injection: the Nth counted call fails with fail_code (fail_at = N); `sticky` makes
//   every counted call fail.
//
// The state is process-wide (g_fake); call reset() at the start of every test.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/cuda_constants.h"
#include "backends/gpu/driver_table.h"

namespace qdt::fake_gpu {

namespace gpu = qd::backend::gpu;
using gpu::Result;

// The CUresult values the fake driver returns: the real driver's, from the one header that
// holds them.
constexpr Result kOk = qd::cuda_abi::kSuccess, kInvalidValue = qd::cuda_abi::kInvalidValue,
                 kOutOfMemory = qd::cuda_abi::kOutOfMemory, kInvalidPtx = qd::cuda_abi::kInvalidPtx,
                 kNotFound = qd::cuda_abi::kNotFound, kNotReady = qd::cuda_abi::kNotReady,
                 kIllegalAddress = qd::cuda_abi::kIllegalAddress, kUnknown = qd::cuda_abi::kUnknown;

struct FakeCapture;
struct FakeStream {
    unsigned flags = 0;
    int priority = 0;
    gpu::NativeContext ctx = nullptr;
    int pending = 0;                 // queued work not yet complete
    FakeCapture *capture = nullptr;  // the stream capture it records into
};
struct FakeEvent {
    unsigned flags = 0;
    FakeStream *stream = nullptr;  // where it was last recorded
    bool pending = false;
    FakeCapture *capture = nullptr;  // last recorded inside this capture
};
// A captured graph (and, copied, an executable graph): the kernels and host functions queued
// on the capture's streams, in order.
// Each kernel keeps its argument bytes (each parameter at its size, in order); its node is
// its index + 1 (graph_exec_kernel_node_set_params names it so in an executable).
struct FakeGraph {
    std::vector<std::string> kernels;
    std::vector<std::vector<gpu::LaunchAttribute>> kernel_attrs;  // each kernel's, as captured
    std::vector<std::vector<uint8_t>> args;
    std::vector<std::pair<gpu::HostFn, void *>> host_fns;
};
struct FakeCapture {
    FakeStream *origin = nullptr;
    FakeGraph *graph = nullptr;
    gpu::NativeGraphNode last_node = nullptr;  // stream_get_capture_info's dependency set
};
// A green context: its SMs, and the context it converts to (the address of `as_context`).
struct FakeGreen {
    unsigned sm_count = 0;
    char as_context = 0;
};
struct FakeLaunch {
    std::vector<void *> params;
    std::vector<uint8_t> arg_bytes;  // a graph launch's kernel: its argument bytes
    std::string kernel;
    bool code_loaded = false;  // func_load had loaded the kernel before this launch
    // launch_kernel_ex (cuLaunchKernelEx): true, with the attributes exactly as passed.
    bool ex = false;
    std::vector<gpu::LaunchAttribute> attrs;
};

struct Fake {
    std::mutex mutex;
    gpu::NativeContext primary = reinterpret_cast<gpu::NativeContext>(0x1000);
    gpu::NativeContext other = reinterpret_cast<gpu::NativeContext>(0x2000);
    gpu::NativeContext primary1 = reinterpret_cast<gpu::NativeContext>(0x3000);  // device 1's
    // Several devices: whether device 0 and 1 may access each other, the grants made
    // (ctx_enable_peer_access: {current context, peer context}; mem_pool_set_access: {pool's
    // device, device given access}) and the peer copies with their {dst, src} contexts.
    bool peer_access = true;
    std::set<std::pair<gpu::NativeContext, gpu::NativeContext>> peer_enabled;
    std::set<std::pair<int, int>> pool_access;
    int peer_copies = 0;
    // As CUDA does: a copy's addresses are checked in the thread's current context, so with
    // this set a copy made while another context than its stream's is current is
    // CUDA_ERROR_INVALID_VALUE.
    bool copies_checked_in_current_context = false;
    std::pair<gpu::NativeContext, gpu::NativeContext> last_peer_copy{nullptr, nullptr};
    int retains = 0;
    std::set<FakeStream *> streams;
    std::set<FakeEvent *> events;
    std::set<std::string *> modules;  // a module is its image text
    std::set<void *> host_blocks;
    std::map<uint64_t, size_t> device_blocks;
    std::set<uint64_t> backed_blocks;  // the device blocks that are malloc'd (backed_memory)
    uint64_t next_address = 0x7000'0000'0000;
    int stream_destroys = 0;
    int dead_stream_calls = 0;  // query/synchronize on a stream already destroyed
    std::vector<FakeLaunch> launches;
    std::set<std::string> loaded_functions;  // by func_load
    std::string last_image;                  // what module_load_data read (up to the NUL)
    int work_per_launch = 0;                 // 1: launches leave the stream busy until synchronized
    int compute_major = 9;                   // the devices' compute capability (major)
    int driver_version = 13000;              // driver_get_version
    bool backed_memory = false;  // device allocations are malloc'd host memory; copies are real

    // Graphs. A stream capture records launches and host functions into its graph; a stream
    // that waits on an event recorded in a capture joins it; synchronizing a capturing stream
    // fails (and invalidates nothing: the fake only reports it). A launch of an executable
    // graph runs its host functions (and appends its kernels to `launches`).
    std::set<FakeCapture *> captures;
    std::set<FakeGraph *> graphs;
    std::set<FakeGraph *> execs;
    int capture_mode = -1;  // the mode of the last stream_begin_capture
    int graph_launches = 0;
    int graph_uploads = 0;  // graph_upload calls on a known executable
    // Host functions are held (queued, not run) until run_held_host_fns(): "in flight".
    // Timelines: every stream_write_value64 (which stores the value into the word, a host
    // block) and stream_wait_value64 (which orders nothing), in order.
    struct ValueOp {
        FakeStream *stream;
        uint64_t address;
        uint64_t value;
        unsigned flags;
    };
    std::vector<ValueOp> value_writes, value_waits;
    bool hold_host_fns = false;
    std::vector<std::pair<gpu::HostFn, void *>> held_host_fns;

    // SM partitions.
    unsigned sm_count = 132;
    unsigned sm_min_partition = 8;
    unsigned sm_alignment = 8;
    std::set<FakeGreen *> greens;
    std::set<unsigned *> resource_descs;  // a descriptor is its SM count
    std::vector<std::string> partition_calls;

    // Fault injection: the Nth counted call fails with fail_code; sticky makes every later call
    // fail with it too.
    long calls = 0;
    long fail_at = 0;
    Result fail_code = kUnknown;
    Result sticky = kOk;

    // Frees every native object the fake holds and restores the defaults.
    void reset();
    // Resource descriptors have no destroy call in the driver: the fake frees what the last
    // test left at exit.
    ~Fake();
};

extern Fake g_fake;
// The calling thread's current context and its push stack (ctx_* entries). Functions, not
// extern thread_locals: GCC's UBSan flags a reference bound to another unit's thread_local
// (through its TLS wrapper) as a null reference.
gpu::NativeContext &current_context();
std::vector<gpu::NativeContext> &context_stack();
// ctx_get_current calls so far.
extern std::atomic<long> g_ctx_queries;

// The fake of a native handle.
inline FakeStream *fs(gpu::NativeStream s) { return reinterpret_cast<FakeStream *>(s); }
inline FakeEvent *fe(gpu::NativeEvent e) { return reinterpret_cast<FakeEvent *>(e); }

// A complete table over the f_* entries below (CUDA's context-stack model, kind CUDA, API name
// "FAKE"). Tests may replace entries of their copy.
gpu::DriverTable fake_table();

// Adds one unit of pending work to the native stream `native` (a Stream's native_handle()):
// it stays busy, and events recorded on it stay pending, until complete_all_work() or a
// synchronize.
void hold(uint64_t native);
// Completes every pending piece of work of every stream and event.
void complete_all_work();
// Runs the host functions held while hold_host_fns was set, in queue order.
void run_held_host_fns();

// The entries, for tests that call the fake directly (creating a "foreign" native stream) or
// wrap one.
Result f_stream_create(gpu::NativeStream *s, unsigned flags, int priority);
Result f_stream_destroy(gpu::NativeStream s);
Result f_stream_query(gpu::NativeStream s);
Result f_event_create(gpu::NativeEvent *e, unsigned flags);

}  // namespace qdt::fake_gpu
