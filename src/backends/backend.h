// The interface a backend implements. src/core drives backends only through these classes, so a
// backend (CPU, or the shared GPU implementation filled by CUDA or HIP) slots in without
// touching src/api or src/core.
//
// Rules every backend follows:
// - No handle encoding here: backends see objects, never qd handles. The core validates
//   handles, contexts, argument shapes and sizes before it calls a backend.
// - Every method returns a qd_status. A failure also writes the thread-local message with
//   qd::fail() (src/common/error.h); the message names the native reason where there is one.
// - No exception escapes a backend method except std::bad_alloc, which the API boundary maps
//   to QD_ERROR_OUT_OF_MEMORY.
// - Enqueue methods (launch, record, wait, mem*, host_fn) never block on device work.
// - Lifetime: the core holds backend objects by std::shared_ptr. Dropping the last core
//   reference to a Stream or Event must return at once even with work in flight; the backend
//   keeps whatever it needs alive until that work completes (CPU: the scheduler holds a
//   reference; CUDA: cuStreamDestroy already defers release).
// - A Kernel keeps its Module's code alive (it holds a reference), and queued work keeps the
//   Kernel alive, so unloading a module with queued launches is safe.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace qd::backend {

class Capture;
class Context;
class Event;
class Graph;
class Kernel;
class Module;
class Stream;
class Timeline;

// Grid, block and shared memory of one launch, already validated by the core: every dimension
// is >= 1 and the block and thread counts fit in 32 bits.
struct LaunchDims {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem_bytes;
};

// The attributes of one launch (qd_launch_ex, "Launch attributes" in qd.h), already checked by
// the core: each kind at most once, the cluster's dimensions >= 1 and dividing the grid, the
// completion event one of this backend's context. A default LaunchAttrs asks for nothing.
struct LaunchAttrs {
    uint32_t cluster[3] = {0, 0, 0};    // CLUSTER_DIM: all 0 when not given
    bool programmatic = false;          // PROGRAMMATIC_SERIALIZATION given with value 1
    bool has_priority = false;          // PRIORITY given
    int32_t priority = 0;               // its value, unclamped
    Event *completion_event = nullptr;  // COMPLETION_EVENT

    bool has_cluster() const noexcept { return cluster[0] != 0; }
    bool empty() const noexcept {
        return !has_cluster() && !programmatic && !has_priority && completion_event == nullptr;
    }
};

// The name of the first attribute `attrs` gives, in qd_launch_attr_kind order
// ("CLUSTER_DIM", ...), for messages; "" when it is empty.
const char *first_attr_name(const LaunchAttrs &attrs) noexcept;

// The sticky "lost" state of a context. Backends set it on a device fault; the core reads it on
// every call (one relaxed load) and turns it into QD_ERROR_DEVICE_LOST with the message.
class LostState {
  public:
    bool lost() const noexcept { return lost_.load(std::memory_order_acquire); }
    std::string message() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return message_;
    }
    // The first fault wins: later faults keep the first message, which names the root cause.
    // The fault that makes the state lost then calls the hook (on_lost), outside the mutex.
    void mark_lost(std::string message) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (lost_.load(std::memory_order_relaxed)) return;
            message_ = std::move(message);
            lost_.store(true, std::memory_order_release);
        }
        if (hook_) hook_(hook_data_);
    }
    // What a backend runs once when its context becomes lost, on the thread whose fault did it,
    // with no lock of this state held (the CPU backend releases the waiters of its timelines:
    // a lost context never leaves one hanging). Set once, before any work can fault.
    void on_lost(void (*hook)(void *), void *data) noexcept {
        hook_ = hook;
        hook_data_ = data;
    }

  private:
    std::atomic<bool> lost_{false};
    mutable std::mutex mutex_;
    std::string message_;
    void (*hook_)(void *) = nullptr;
    void *hook_data_ = nullptr;
};

class Stream {
  public:
    virtual ~Stream() = default;

    // Queue a kernel. args/num_args are the caller's (validated: non-null data, size > 0,
    // total <= QD_MAX_ARG_BYTES); the backend copies what it needs before returning, because
    // the caller may overwrite them at once.
    virtual qd_status launch(Kernel &kernel, const LaunchDims &dims, const qd_arg *args,
                             uint32_t num_args) = 0;
    // Queue a kernel with launch attributes (never empty: the core calls launch() for none),
    // which Context::check_launch_attrs accepted for these dims. The default refuses them.
    virtual qd_status launch_ex(Kernel &kernel, const LaunchDims &dims, const LaunchAttrs &attrs,
                                const qd_arg *args, uint32_t num_args);
    // Record `event` at the current tail of this stream.
    virtual qd_status record(Event &event) = 0;
    // Make later work wait for the event's most recent record as of this call (captured now,
    // so re-recording the event later does not change this wait). Never recorded: no-op.
    virtual qd_status wait(Event &event) = 0;
    // Block the host until all work queued so far has completed.
    virtual qd_status synchronize() = 0;
    // QD_SUCCESS when idle, QD_NOT_READY otherwise.
    virtual qd_status query() = 0;

    // Stream-ordered memory. mem_alloc may return the address at once; it is only valid for
    // work queued after it. mem_free releases after the work queued before it. mem_alloc (and
    // Context::host_alloc) reserve the end guard past `bytes` (common/limits.h: kEndGuard);
    // their messages name `bytes`.
    virtual qd_status mem_alloc(uint64_t bytes, uint64_t *address) = 0;
    virtual qd_status mem_free(uint64_t address) = 0;
    virtual qd_status memcpy(uint64_t dst, uint64_t src, uint64_t bytes) = 0;
    virtual qd_status memset(uint64_t dst, uint8_t value, uint64_t bytes) = 0;
    virtual qd_status host_fn(qd_host_fn fn, void *user_data) = 0;
    // qd_launch_host_status_fn: fn(handle, status, user_data) is called exactly once once this
    // returns QD_SUCCESS: in stream order with QD_SUCCESS; with QD_ERROR_DEVICE_LOST when the
    // context was lost before its turn (where the backend skips the work, or when the context
    // shuts down); with QD_ERROR_INVALID_HANDLE when the context shut down before its turn.
    // Never from under a lock of the backend. The default refuses it.
    virtual qd_status host_status_fn(qd_host_status_fn fn, uint64_t handle, void *user_data);
    // qd_memcpy_peer_async: copy between memory of dst_ctx and of src_ctx (contexts of this
    // backend, one of them this stream's; the core checked both ranges). The default is
    // memcpy(): one address space (the CPU backend).
    virtual qd_status memcpy_peer(uint64_t dst, Context &dst_ctx, uint64_t src, Context &src_ctx,
                                  uint64_t bytes);

    // qd_stream_get_flags of a borrowed native stream: its qd_stream_flags, read when it was
    // imported, or QD_ERROR_NOT_SUPPORTED with the reason (streams qd creates carry the flags of
    // their creation in core instead).
    virtual qd_status native_flags(uint32_t *flags) const;
    // The applied priority (after clamping).
    virtual int32_t priority() const = 0;
    // The native stream (CUstream / hipStream_t); 0 when the backend has none.
    virtual uint64_t native_handle() const { return 0; }
    // qd_stream_native_handle: the native stream, or QD_ERROR_NOT_SUPPORTED with the backend's
    // reason when it has none.
    virtual qd_status get_native_handle(uint64_t *out) const;
    // Native graph capture (qd.h, "Graphs"; core/capture/capture.h drives it). Starts a driver
    // capture with this stream as its origin: from then on the driver records, instead of
    // running, the work queued here and on every stream that waits on an event recorded inside it. Backends
    // without native graphs return QD_ERROR_NOT_SUPPORTED (with the reason) and the core
    // records and re-issues the operations itself.
    virtual qd_status begin_capture(std::unique_ptr<Capture> *out);

    // Timelines (qd.h, "Timelines"; the core checked the context and that a signal's value
    // grows). signal: once the work queued so far has completed, the counter becomes `value`
    // (or stays, if it is already above) and the waits it satisfies are released. wait_value:
    // later work starts once the counter has reached `value`; the signal may come later. The
    // defaults refuse (a backend without timelines never makes one).
    virtual qd_status signal(Timeline &timeline, uint64_t value);
    virtual qd_status wait_value(Timeline &timeline, uint64_t value);

    // Called when the handle of a borrowed (imported) stream is destroyed, directly or by its
    // context's destroy. Its owner may destroy the native stream at once, so from here on the
    // backend must never touch it again (no synchronize, query or destroy), even while this
    // object is still referenced.
    virtual void forget() {}
};

class Event {
  public:
    virtual ~Event() = default;
    virtual bool timing() const = 0;
    // True once record() was called at least once.
    virtual bool recorded() const = 0;
    // QD_SUCCESS if the latest record completed or there was none, QD_NOT_READY otherwise.
    virtual qd_status query() = 0;
    virtual qd_status synchronize() = 0;
};

// A timeline (qd.h, "Timelines"): a 64-bit counter that only grows. Queued signals and waits
// hold it (Stream::signal, Stream::wait_value), so dropping the core's reference returns at
// once.
class Timeline {
  public:
    virtual ~Timeline() = default;
    // The counter now.
    virtual uint64_t value() const = 0;
    // qd_timeline_host_signal: the counter becomes `value` now (the core checked it grows);
    // the waits it satisfies, of streams and of host threads, are released.
    virtual qd_status host_signal(uint64_t value) = 0;
    // qd_timeline_host_wait: blocks until the counter reaches `value` or timeout_ns passes
    // (0: only looks; UINT64_MAX: no limit). QD_SUCCESS, QD_NOT_READY at the timeout,
    // QD_ERROR_DEVICE_LOST when the context is lost, QD_ERROR_INVALID_HANDLE once close() ran:
    // each written with fail() but QD_SUCCESS.
    virtual qd_status host_wait(uint64_t value, uint64_t timeout_ns) = 0;
    // The handle is gone (qd_timeline_destroy, or the context's destroy before its drain): no
    // signal but those queued or made so far will come, so a queued wait that none of them
    // reaches is released, and host waiters return QD_ERROR_INVALID_HANDLE. A signal or wait
    // of a call that resolved the handle before still works.
    virtual void close() = 0;
};

// A native graph: what one capture recorded, instantiated for launch.
class Graph {
  public:
    // Dropping the last reference returns at once; launches in flight complete, and what they
    // need (host-function payloads) lives until they have.
    virtual ~Graph() = default;
    // Queue the whole graph on `stream` (a stream of the same context, not capturing): it
    // starts after the work queued there, and later work there waits for all of it. Launches
    // of one graph are ordered after each other (the driver's rule), on any stream.
    virtual qd_status launch(Stream &stream) = 0;
    // Take the argument values, copy ranges and host functions of `from`, a graph of the same
    // shape; later launches use them. QD_ERROR_INVALID_OPERATION (naming the driver's reason)
    // when the driver refuses, and this graph is unchanged.
    virtual qd_status update(Graph &from) = 0;
    // qd_graph_set_kernel_args: later launches run kernel node `index` (the index-th launch of
    // the capture, in the order they were queued) with these argument values; `kernel`, `dims`
    // are the node's, as captured (or as taken by an update). Launches already queued keep
    // theirs. QD_ERROR_NOT_SUPPORTED (naming the driver version needed) when the driver cannot.
    virtual qd_status set_kernel_args(uint32_t index, Kernel &kernel, const LaunchDims &dims,
                                      const qd_arg *args, uint32_t num_args) {
        (void)index, (void)kernel, (void)dims, (void)args, (void)num_args;
        return QD_ERROR_NOT_SUPPORTED;
    }
    // qd_graph_upload: prepare the launches ahead of the first (instantiate; where the driver
    // can, upload on `stream`, ordered there like a launch). Repeating it is allowed.
    // QD_ERROR_NOT_SUPPORTED (naming the driver version needed) when the driver cannot, with
    // nothing instantiated or queued.
    virtual qd_status upload(Stream &stream) {
        (void)stream;
        return QD_SUCCESS;
    }
};

// An open native capture (Stream::begin_capture). Destroying it without end() abandons it:
// the driver capture is ended and what it recorded dropped.
class Capture {
  public:
    virtual ~Capture() = default;
    // A host function queued on `lane`, a stream of this capture: it runs once per launch of
    // the graph, so its payload belongs to the graph, not to a single call.
    // QD_ERROR_NOT_SUPPORTED when the driver's host-function entry cannot be captured (a
    // stream-callback fallback); nothing is queued and the capture stays usable.
    virtual qd_status host_fn(Stream &lane, qd_host_fn fn, void *user_data) = 0;
    // Before a stream-ordered allocation is queued on a stream of this capture (qd.h, "Memory
    // inside a graph"): QD_SUCCESS when the driver captures it as a graph memory node, else
    // QD_ERROR_NOT_SUPPORTED naming the minimum driver version (the core then queues nothing
    // and the capture stays usable).
    virtual qd_status can_allocate() { return QD_SUCCESS; }
    // A kernel launch on `lane` was just recorded by the driver: the capture notes its node,
    // the next kernel node in launch order (Graph::set_kernel_args). Never fails: a node it
    // cannot find makes that rebind QD_ERROR_NOT_SUPPORTED later.
    virtual void launched(Stream &lane) { (void)lane; }
    // Conditionals (qd.h, "Conditionals"; core/capture/conditionals.cpp calls these after its
    // own checks, under its capture lock). begin_conditional adds a conditional node of `kind`
    // with `bodies` bodies at `lane`'s place (the graph, or the body `lane` records into) and
    // sends the operations queued on `lane` from now on into its first body; with a condition
    // word (`condition` != 0) the node's value is read from it before the node (and, for
    // WHILE, after each iteration); *handle is the node's native handle
    // (qd_conditional_handle). next_branch moves `lane` to the next body; end_conditional
    // closes the innermost conditional `lane` opened: what follows on `lane` runs after the
    // whole node. A refusal (QD_ERROR_NOT_SUPPORTED naming the driver version needed, the
    // default) changes nothing and the capture goes on. A driver failure after the body's
    // capture ended cannot be undone: the step is done all the same (*done true, the lane
    // back where the conditional was opened) and the capture's end() fails.
    virtual qd_status begin_conditional(Stream &lane, qd_conditional_kind kind, uint32_t bodies,
                                        uint64_t condition, uint64_t *handle);
    virtual qd_status next_branch(Stream &lane, bool *done);
    virtual qd_status end_conditional(Stream &lane, bool *done);
    // End the capture on its origin (the graph is instantiated at its first launch, so one made
    // only to update another never is). Every stream that joined must
    // have joined back (the core checks that first). On failure the capture is over all the
    // same (the driver ended it) and nothing is returned.
    virtual qd_status end(std::shared_ptr<Graph> *out) = 0;
};

class Kernel {
  public:
    virtual ~Kernel() = default;
    virtual const char *name() const = 0;
};

class Module {
  public:
    virtual ~Module() = default;
    // QD_ERROR_NOT_FOUND with a message when the module has no such kernel.
    virtual qd_status get_kernel(const char *name, std::shared_ptr<Kernel> *out) = 0;
};

// One operation run now on the calling thread (Context::run_inline): a conditional's body
// replayed on the host (core/capture/conditional.h). Memcpy with a host dst reads device memory
// (the condition word).
struct InlineOp {
    enum class Kind : uint8_t { Launch, Memcpy, Memset, HostFn } kind = Kind::Launch;
    Kernel *kernel = nullptr;
    const LaunchDims *dims = nullptr;
    const qd_arg *args = nullptr;
    uint32_t num_args = 0;
    uint64_t dst = 0, src = 0, bytes = 0;
    uint8_t value = 0;
    qd_host_fn fn = nullptr;
    void *user_data = nullptr;
};

struct ContextParams {
    uint32_t device = 0;
    uint32_t worker_threads = 0;  // CPU only; 0 = backend default
};

class Context {
  public:
    virtual ~Context() = default;

    virtual qd_status create_stream(uint32_t flags, int32_t priority,
                                    std::shared_ptr<Stream> *out) = 0;
    // Wrap a foreign native stream; the backend must never destroy it.
    virtual qd_status import_stream(uint64_t native, std::shared_ptr<Stream> *out);
    virtual qd_status create_event(bool timing, std::shared_ptr<Event> *out) = 0;
    // qd_timeline_create: a timeline whose counter starts at `initial`. The default refuses
    // (QD_ERROR_NOT_SUPPORTED, naming the backend's reason).
    virtual qd_status create_timeline(uint64_t initial, std::shared_ptr<Timeline> *out);
    virtual qd_status load_module(const void *image, uint64_t size,
                                  std::shared_ptr<Module> *out) = 0;
    // CPU only; others return QD_ERROR_NOT_SUPPORTED.
    virtual qd_status kernel_from_host_fn(qd_host_kernel_fn fn, const char *name,
                                          std::shared_ptr<Kernel> *out);
    // Conditionals on the host (qd.h, "Conditionals"): can this backend run operations inline
    // on a worker (the CPU backend), and run one now, on the calling thread, which is a worker
    // of this context running a host task? A kernel that faults marks the context lost.
    // Others: false, and QD_ERROR_NOT_SUPPORTED.
    virtual bool runs_inline() const { return false; }
    virtual qd_status run_inline(const InlineOp &op);

    // Can this context's launches honour `attrs` with `dims` (qd_launch_ex) on a stream that is
    // `capturing` (natively or not)? The core asks before anything of the call is queued.
    // QD_ERROR_NOT_SUPPORTED names the attribute and the reason (the device, the driver
    // version). The default refuses every attribute.
    virtual qd_status check_launch_attrs(const LaunchAttrs &attrs, const LaunchDims &dims,
                                         bool capturing);

    // Peer access (qd_context_can_access_peer, qd_context_enable_peer_access): may work of this
    // context access memory of `peer` (another context of the same backend, never this one)?
    // The defaults say yes and grant nothing: one address space (the CPU backend).
    virtual qd_status can_access_peer(Context &peer, bool *out);
    // Grants this context's work access to peer's memory; QD_ERROR_NOT_SUPPORTED with the
    // reason when the devices cannot. Granting it again is a successful no-op.
    virtual qd_status enable_peer_access(Context &peer);

    // qd_context_split (qd.h, "SM partitions"): n contexts over disjoint sets of this context's
    // units, counts[i] each (the core checked n, every count > 0, and that this context is no
    // part itself). The backend checks the counts against its units, minimum and granularity
    // (QD_ERROR_INVALID_ARGUMENT naming the rule). All or none: on failure *out is untouched
    // and nothing is left running. A part holds nothing of this context, which may go first.
    // The default: QD_ERROR_NOT_SUPPORTED with the reason.
    virtual qd_status split(const uint32_t *counts, uint32_t n,
                            std::vector<std::unique_ptr<Context>> *out);

    // Block until all work queued on every stream of this context has completed, including
    // streams whose core handle is already gone but whose work is still pending.
    virtual qd_status synchronize() = 0;
    // Milliseconds between two completed timing events (the core has checked timing flags and
    // that both were recorded); QD_NOT_READY if either has not completed.
    virtual qd_status elapsed_ms(Event &start, Event &end, float *ms) = 0;
    virtual void priority_range(int32_t *least, int32_t *greatest) const = 0;

    virtual qd_status host_alloc(uint64_t bytes, void **out) = 0;
    virtual void host_free(void *ptr) = 0;
    // Free a device allocation immediately; used by context destroy after the drain.
    virtual void mem_free_now(uint64_t address) = 0;

    // True when the calling thread is running a host kernel or callback of this context; the
    // core then refuses blocking calls instead of deadlocking.
    virtual bool in_callback() const = 0;

    // Stop accepting work and release threads and native resources. Called once by the core's
    // context destroy after synchronize(); enqueues racing with it fail with
    // QD_ERROR_INVALID_HANDLE. Must not be called from a worker thread.
    virtual void shutdown() = 0;

    LostState &lost_state() noexcept { return lost_; }
    const LostState &lost_state() const noexcept { return lost_; }

  private:
    LostState lost_;
};

// One per backend kind, created once per process and never destroyed.
class Driver {
  public:
    virtual ~Driver() = default;
    virtual qd_backend kind() const = 0;
    virtual qd_status device_count(uint32_t *out) = 0;
    virtual qd_status device_info(uint32_t device, qd_device_info *out) = 0;
    virtual qd_status create_context(const ContextParams &params,
                                     std::unique_ptr<Context> *out) = 0;
};

// The driver of a backend kind, loaded on first use. QD_ERROR_BACKEND_UNAVAILABLE (with the
// loader's or driver's reason) when it was not built in or cannot be loaded. Implemented in
// src/backends/registry.cpp, the one file that knows every backend.
qd_status get_driver(uint32_t kind, Driver **out);

}  // namespace qd::backend
