// The GPU backend's objects, written once over the DriverTable. See README.md for the
// decisions (primary context, default stream, stream flags, faults, fork).
//
// Ownership: every object holds a shared_ptr to its DeviceContext, which owns the retained
// primary context, so the primary context is released only after the last stream, event,
// module or kernel of the qd context is gone, whatever order the core drops them in.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "backends/common/callback_scope.h"
#include "backends/common/dl_library.h"
#include "common/fork_generation.h"
#include "backends/common/live_registry.h"
#include "backends/backend.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"

namespace qd::backend::gpu {

class GpuStream;

// --- Process-wide guards ---------------------------------------------------------------------

// g_fork_generation (common/fork_generation.h): an object made with another value
// was inherited from the parent of a fork, and the driver must not be called for it.

// GPU drivers run host callbacks on threads of their own and forbid driver calls from them:
// the trampoline runs each callback under CallbackScope(device_context, true)
// (backends/common/callback_scope.h), and in_driver_callback() refuses driver calls there.

// The rule for a native result code, or null when the table has none.
const ErrorRule *find_rule(const DriverTable &table, Result result);

// --- DeviceContext -----------------------------------------------------------------------------

class DeviceContext {
  public:
    DeviceContext(const DriverTable &table, NativeCounters &counters, uint32_t ordinal,
                  NativeDevice device, NativeContext native);
    ~DeviceContext();
    DeviceContext(const DeviceContext &) = delete;
    DeviceContext &operator=(const DeviceContext &) = delete;

    const DriverTable &t;
    NativeCounters &counters;
    const uint32_t ordinal;
    const NativeDevice device;
    const NativeContext native;
    // A part of a split (split.cpp): the green context `native` was made from, destroyed with
    // this object instead of releasing the primary context (the green context holds its own
    // retain of it); null for a context on the primary context.
    NativeGreenCtx green = nullptr;
    int least_priority = 0;
    int greatest_priority = 0;

    // The checks at the top of every entry that reaches the driver: three relaxed loads.
    qd_status usable() const {
        if (shut_down_.load(std::memory_order_relaxed)) return refuse_shut_down();
        if (g_fork_generation.load(std::memory_order_relaxed) != fork_generation_)
            return refuse_forked();
        if (in_driver_callback()) return refuse_in_callback();
        return QD_SUCCESS;
    }
    // True in a fork child for a context made in the parent: destructors then only forget.
    bool forked() const noexcept {
        return g_fork_generation.load(std::memory_order_relaxed) != fork_generation_;
    }
    // Destructors may not call the driver from a host callback or a fork child.
    bool can_release_now() const noexcept { return !forked() && !in_driver_callback(); }

    // Maps a failed result to a qd status and writes the message. A sticky result marks the
    // context lost; the message names last_kernel (the last kernel launched on the stream where
    // the fault surfaced) when known. Codes without a rule give fallback.
    qd_status fail_call(Result result, qd_status fallback, Fn fn, const char *last_kernel);

    // Where faults are reported: the owning Context's LostState, detached at its destruction.
    void attach_lost_state(LostState *lost);

    // Kernel names live as long as the context, so a stream can keep a bare pointer to the
    // last kernel it launched (for fault messages) without owning the kernel.
    const char *intern(const char *name);

    // Every live stream, so Context::synchronize waits for qd's streams only (not for work
    // other libraries queued on the same primary context).
    // A stream registers once a shared_ptr owns it and unregisters in its destructor.
    void register_stream(GpuStream &stream);
    void unregister_stream(LiveRegistry<GpuStream>::Entry entry) noexcept {
        streams_.remove(entry);
    }
    std::vector<std::shared_ptr<GpuStream>> live_streams();

    // Native releases. They never block. A stream with work in flight leaves a "tail" event
    // behind so that Context::synchronize still waits for that work. Called from a host
    // callback, a release is deferred to the next call from an ordinary thread; in a fork child
    // it is dropped (the child cannot use the parent's driver state).
    void release_stream(NativeStream stream, bool owned);
    void release_event(NativeEvent event);
    void release_module(NativeModule module);
    void release_host(void *ptr);
    // A timeline's word (timeline.h) that queued driver operations may still read or write:
    // freed with this context, after every stream of it (none is tracked per operation).
    void retire_word(void *word);
    void release_graph(NativeGraph graph);
    void release_graph_exec(NativeGraphExec exec);

    // Native captures open on this context: while there are any, Context::synchronize skips
    // the streams the driver says are capturing (their work is recorded, not run, and a
    // synchronize would invalidate the capture).
    std::atomic<int> open_captures{0};

    // qd's condition kernel (DriverTable::condition_image): loaded at the first call, kept
    // until this context is destroyed (its graphs, which launch it, hold the context). With
    // this context current. QD_ERROR_NOT_SUPPORTED when the vendor has none or the image has
    // no code for this device (the message says a kernel setting the handle itself works).
    qd_status condition_kernel(NativeFunction *out);
    void release_device_now(DevicePtr address);

    // Waits for (and destroys) the tail events; runs deferred releases.
    qd_status drain_tails();
    void run_deferred();

    // qd_launch_host_status_fn's calls queued and not called yet (stream.cpp). The driver drops
    // a host function queued behind a fault, so shut_down() calls what is left: after the
    // destroy's drain, when the driver calls none of them any more.
    struct StatusCall {
        qd_host_status_fn fn;
        void *user_data;
        uint64_t handle;
        DeviceContext *owner;
    };
    void add_status_call(StatusCall *call);
    // Removes call; false when it was not there (shut_down() took it).
    bool take_status_call(StatusCall *call);
    // Has the owning Context been marked lost?
    bool lost();

    void shut_down();
    bool is_shut_down() const { return shut_down_.load(std::memory_order_relaxed); }

  private:
    enum class Kind { owned_stream, borrowed_stream, event, module, host, graph, graph_exec };
    struct Deferred {
        Kind kind;
        void *handle;
    };

    qd_status refuse_shut_down() const;
    qd_status refuse_forked() const;
    qd_status refuse_in_callback() const;
    void release(Kind kind, void *handle);
    void add_tail(NativeStream stream);

    const uint64_t fork_generation_;
    std::atomic<bool> shut_down_{false};

    std::mutex lost_mutex_;
    LostState *lost_ = nullptr;

    std::mutex status_calls_mutex_;
    std::unordered_set<StatusCall *> status_calls_;

    std::mutex names_mutex_;
    std::set<std::string> names_;

    LiveRegistry<GpuStream> streams_;

    std::mutex tails_mutex_;
    std::vector<NativeEvent> tails_;

    std::mutex retired_words_mutex_;
    std::vector<void *> retired_words_;

    std::mutex deferred_mutex_;
    std::vector<Deferred> deferred_;
    std::atomic<bool> has_deferred_{false};

    std::mutex condition_mutex_;
    NativeModule condition_module_ = nullptr;  // unloaded by the destructor
    NativeFunction condition_function_ = nullptr;
};

// Makes the DeviceContext's device current on the calling thread for one scope, by the
// strategy the driver table chose (DriverTable::current_model), and leaves the thread as it
// found it for any other library that uses the same driver.
//
// context_stack (CUDA): the common case (ours already current) costs one driver call. A thread
// with no current context gets ours and keeps it (cheap next time; nobody else was using the
// thread's slot). A thread where another library made a different context current gets ours
// pushed and popped again, so that library finds its own context unchanged afterwards.
// current_device (HIP): the same with the thread's current device: set when it differs, and
// the previous device restored at the end of the scope.
class ScopedCurrent {
  public:
    // A call that names a stream of this context (launch, record, wait, copies, allocations,
    // synchronize, query) passes stream_call = true: when the driver runs such calls in the
    // stream's own context whatever is current (DriverTable::stream_calls_use_stream_context),
    // nothing is checked or switched, which keeps a driver call off every enqueue.
    // enter = false makes an empty scope that calls nothing (see DriverEntry).
    explicit ScopedCurrent(const DeviceContext &dc, bool stream_call = false, bool enter = true)
        : t_(dc.t) {
        if (!enter || (stream_call && t_.stream_calls_use_stream_context)) return;
        if (t_.current_model == CurrentModel::context_stack) {
            enter_context(dc.native);
        } else {
            enter_device(dc.device);
        }
    }
    ~ScopedCurrent() {
        if (restore_) restore();
    }
    ScopedCurrent(const ScopedCurrent &) = delete;
    ScopedCurrent &operator=(const ScopedCurrent &) = delete;

    bool ok() const { return status_ == t_.success; }
    Result status() const { return status_; }
    Fn failed_entry() const { return failed_; }

  private:
    // Out of line, as enter_device and restore: a stream call on CUDA takes none of them, and
    // the scope's inline part stays a few instructions in every enqueue.
    __attribute__((noinline)) void restore() {
        if (t_.current_model == CurrentModel::context_stack) {
            NativeContext popped = nullptr;
            t_.ctx_pop_current(&popped);
        } else {
            t_.device_set_current(previous_device_);
        }
    }
    __attribute__((noinline)) void enter_context(NativeContext ours) {
        NativeContext current = nullptr;
        Result r = t_.ctx_get_current(&current);
        if (r == t_.success && current == ours) return;
        if (r == t_.success && current == nullptr) {
            failed_ = Fn::ctx_set_current;
            status_ = t_.ctx_set_current(ours);
            return;
        }
        failed_ = Fn::ctx_push_current;
        status_ = t_.ctx_push_current(ours);
        restore_ = status_ == t_.success;
    }
    __attribute__((noinline)) void enter_device(NativeDevice ours) {
        failed_ = Fn::device_get_current;
        status_ = t_.device_get_current(&previous_device_);
        if (status_ != t_.success || previous_device_ == ours) return;
        failed_ = Fn::device_set_current;
        status_ = t_.device_set_current(ours);
        restore_ = status_ == t_.success;
    }

    const DriverTable &t_;
    Result status_ = 0;
    Fn failed_ = Fn::count;
    bool restore_ = false;
    NativeDevice previous_device_ = 0;
};

// The prologue of every backend entry that calls the driver for a DeviceContext, written once:
// the context must be usable (not shut down, not inherited across fork, not called from a
// driver callback thread), then its device is made current (ScopedCurrent) until the scope
// ends. A failure is already mapped to a qd status with its message; last_kernel is what a
// fault surfacing here names.
//
//     DriverEntry entry(*dc_, /*stream_call=*/true, last_kernel());
//     if (!entry.ok()) return entry.status();
class DriverEntry {
  public:
    // Inline: on the enqueue path (a usable context, a stream call on CUDA) it is the three
    // checks of usable() and one of the driver table's flags.
    __attribute__((always_inline))
    DriverEntry(DeviceContext &dc, bool stream_call = false, const char *last_kernel = nullptr)
        : status_(dc.usable()), current_(dc, stream_call, status_ == QD_SUCCESS) {
        if (__builtin_expect(status_ == QD_SUCCESS && !current_.ok(), 0))
            status_ = dc.fail_call(current_.status(), QD_ERROR_INTERNAL, current_.failed_entry(),
                                   last_kernel);
    }
    DriverEntry(const DriverEntry &) = delete;
    DriverEntry &operator=(const DriverEntry &) = delete;

    bool ok() const { return status_ == QD_SUCCESS; }
    qd_status status() const { return status_; }

  private:
    qd_status status_;
    // Entered only when the context is usable: a refused call makes no driver call at all (a
    // fork child must not touch the driver).
    ScopedCurrent current_;
};

// --- Streams, events, modules, kernels -------------------------------------------------------

class GpuKernel;

class GpuStream final : public Stream, public std::enable_shared_from_this<GpuStream> {
  public:
    GpuStream(std::shared_ptr<DeviceContext> dc, NativeStream stream, bool owned, int32_t priority);
    ~GpuStream() override;

    qd_status launch_ex(Kernel &kernel, const LaunchDims &dims, const LaunchAttrs &attrs,
                        const qd_arg *args, uint32_t num_args) override;  // launch_attrs.cpp
    qd_status launch(Kernel &kernel, const LaunchDims &dims, const qd_arg *args,
                     uint32_t num_args) override;
    qd_status record(Event &event) override;
    qd_status wait(Event &event) override;
    qd_status synchronize() override;
    qd_status query() override;
    qd_status mem_alloc(uint64_t bytes, uint64_t *address) override;
    qd_status mem_free(uint64_t address) override;
    qd_status memcpy(uint64_t dst, uint64_t src, uint64_t bytes) override;
    qd_status memset(uint64_t dst, uint8_t value, uint64_t bytes) override;
    qd_status host_fn(qd_host_fn fn, void *user_data) override;
    qd_status host_status_fn(qd_host_status_fn fn, uint64_t handle, void *user_data) override;
    qd_status signal(Timeline &timeline, uint64_t value) override;      // timeline.cpp
    qd_status wait_value(Timeline &timeline, uint64_t value) override;  // timeline.cpp
    qd_status begin_capture(std::unique_ptr<Capture> *out) override;
    qd_status memcpy_peer(uint64_t dst, Context &dst_ctx, uint64_t src, Context &src_ctx,
                          uint64_t bytes) override;  // peer.cpp
    int32_t priority() const override { return priority_; }
    qd_status native_flags(uint32_t *flags) const override;
    // A borrowed stream's qd_stream_flags, read at import; -1 when the driver cannot say.
    void set_native_flags(int64_t flags) { native_flags_ = flags; }
    // The stream's own native stream (qd_stream_native_handle), whatever a capture redirects.
    uint64_t native_handle() const override { return reinterpret_cast<uintptr_t>(stream_); }

    void forget() override { forgotten_.store(true, std::memory_order_release); }
    bool forgotten() const { return forgotten_.load(std::memory_order_acquire); }

    // Where this stream's operations go: its own native stream, or, while a conditional is
    // open on it in a native capture (graph.cpp), the capture's stream that records the
    // conditional's body. One relaxed load: the capture swaps it under the core's capture lock,
    // which every operation on a capturing stream takes too.
    NativeStream native() const { return active_.load(std::memory_order_relaxed); }
    // Its own native stream: what is synchronized, queried, destroyed and begins a capture.
    NativeStream own() const { return stream_; }
    // The capture's redirection (graph.cpp): `to` until it restores own() or the previous one.
    void redirect(NativeStream to) { active_.store(to, std::memory_order_relaxed); }
    bool owned() const { return owned_; }
    const std::shared_ptr<DeviceContext> &device_context() const { return dc_; }
    const char *last_kernel() const { return last_kernel_.load(std::memory_order_relaxed); }

  private:
    qd_status fail(Result result, qd_status fallback, Fn fn) {
        return dc_->fail_call(result, fallback, fn, last_kernel());
    }
    // A copy runs in the stream's context, but the driver checks its addresses in the thread's
    // current context: with device 0 current, a copy on device 1's stream of device 1's pool
    // memory that device 0 was not granted is CUDA_ERROR_INVALID_VALUE (found with NCCL on two
    // H200s). A copy refused so is made again with this stream's context current (the caller's
    // is restored after); `first` is returned when that cannot be done.
    template <class Copy>
    Result again_in_own_context(Result first, Copy &&copy) {
        ScopedCurrent current(*dc_);
        if (!current.ok()) return first;
        return copy();
    }

    std::shared_ptr<DeviceContext> dc_;
    const DriverTable &t_;
    const NativeStream stream_;
    std::atomic<NativeStream> active_;  // native(): stream_ unless a capture redirects it
    const bool owned_;
    const int32_t priority_;
    int64_t native_flags_ = QD_STREAM_NON_BLOCKING;  // written once, before it is shared
    // Set on every launch (one relaxed store); points into DeviceContext's interned names.
    std::atomic<const char *> last_kernel_{nullptr};
    std::atomic<bool> forgotten_{false};  // a borrowed stream whose handle is gone
    friend class DeviceContext;           // sets the two below in register_stream()
    LiveRegistry<GpuStream>::Entry registry_entry_;
    bool registered_ = false;
};

class GpuEvent final : public Event {
  public:
    GpuEvent(std::shared_ptr<DeviceContext> dc, NativeEvent event, bool timing);
    ~GpuEvent() override;

    bool timing() const override { return timing_; }
    bool recorded() const override { return recorded_.load(std::memory_order_acquire); }
    qd_status query() override;
    qd_status synchronize() override;

    NativeEvent native() const { return event_; }
    // The recording stream's last kernel at record time: the one a fault seen here names.
    void note_recorded(const char *last_kernel) {
        last_kernel_.store(last_kernel, std::memory_order_relaxed);
        recorded_.store(true, std::memory_order_release);
    }
    const char *last_kernel() const { return last_kernel_.load(std::memory_order_relaxed); }

  private:
    std::shared_ptr<DeviceContext> dc_;
    const DriverTable &t_;
    const NativeEvent event_;
    const bool timing_;
    std::atomic<bool> recorded_{false};
    std::atomic<const char *> last_kernel_{nullptr};
};

class GpuModule final : public Module, public std::enable_shared_from_this<GpuModule> {
  public:
    GpuModule(std::shared_ptr<DeviceContext> dc, NativeModule module);
    ~GpuModule() override;

    qd_status get_kernel(const char *name, std::shared_ptr<Kernel> *out) override;

  private:
    std::shared_ptr<DeviceContext> dc_;
    const NativeModule module_;
};

class GpuKernel final : public Kernel {
  public:
    // num_params = kUnknownParams when the driver cannot describe the parameters.
    static constexpr uint32_t kUnknownParams = UINT32_MAX;

    GpuKernel(std::shared_ptr<GpuModule> module, NativeFunction function, const char *name,
              std::vector<uint32_t> param_sizes, bool params_known);

    const char *name() const override { return name_; }
    NativeFunction function() const { return function_; }

    // QD_SUCCESS when the arguments match the kernel's parameters (count and each size), or
    // when the driver could not describe them. The driver reads each parameter's size from
    // the kernel, so a short argument would be over-read: this turns that into an error.
    qd_status check_args(const qd_arg *args, uint32_t num_args) const {
        if (!params_known_) return QD_SUCCESS;
        if (num_args != param_sizes_.size()) return arg_count_mismatch(num_args);
        for (uint32_t i = 0; i < num_args; ++i)
            if (args[i].size != param_sizes_[i]) return arg_size_mismatch(i, args[i].size);
        return QD_SUCCESS;
    }

  private:
    qd_status arg_count_mismatch(uint32_t num_args) const;
    qd_status arg_size_mismatch(uint32_t index, uint64_t size) const;

    std::shared_ptr<GpuModule> module_;  // keeps the code loaded while this handle lives
    const NativeFunction function_;
    const char *const name_;  // interned in the DeviceContext
    const std::vector<uint32_t> param_sizes_;
    const bool params_known_;
};

// --- Context and driver -------------------------------------------------------------------------

// The split rule of a device (split.cpp): every part's SM count is a multiple of *granularity
// and at least *minimum, from the device's SM resource (whole) and compute capability major.
void split_rule(const DevResource &whole, int compute_major, unsigned *granularity,
                unsigned *minimum);

class GpuContext final : public Context {
  public:
    explicit GpuContext(std::shared_ptr<DeviceContext> dc);
    ~GpuContext() override;

    qd_status create_stream(uint32_t flags, int32_t priority,
                            std::shared_ptr<Stream> *out) override;
    qd_status import_stream(uint64_t native, std::shared_ptr<Stream> *out) override;
    qd_status create_event(bool timing, std::shared_ptr<Event> *out) override;
    qd_status create_timeline(uint64_t initial,
                              std::shared_ptr<Timeline> *out) override;  // timeline.cpp
    qd_status load_module(const void *image, uint64_t size, std::shared_ptr<Module> *out) override;
    qd_status synchronize() override;
    qd_status elapsed_ms(Event &start, Event &end, float *ms) override;
    void priority_range(int32_t *least, int32_t *greatest) const override;
    qd_status host_alloc(uint64_t bytes, void **out) override;
    void host_free(void *ptr) override;
    void mem_free_now(uint64_t address) override;
    bool in_callback() const override { return callback_owner() == dc_.get(); }
    void shutdown() override;
    qd_status can_access_peer(Context &peer, bool *out) override;  // peer.cpp
    qd_status enable_peer_access(Context &peer) override;          // peer.cpp
    qd_status split(const uint32_t *counts, uint32_t n,
                    std::vector<std::unique_ptr<Context>> *out) override;  // split.cpp
    qd_status check_launch_attrs(const LaunchAttrs &attrs, const LaunchDims &dims,
                                 bool capturing) override;  // launch_attrs.cpp
    const DeviceContext &device_context() const { return *dc_; }

  private:
    std::shared_ptr<DeviceContext> dc_;
};

class GpuDriver final : public Driver {
  public:
    GpuDriver(const DriverTable &table, DlLibrary library, uint32_t device_count);

    qd_backend kind() const override { return table_.kind; }
    qd_status device_count(uint32_t *out) override;
    qd_status device_info(uint32_t device, qd_device_info *out) override;
    qd_status create_context(const ContextParams &params, std::unique_ptr<Context> *out) override;

    NativeCounters &counters() { return counters_; }

  private:
    qd_status fail(Result result, qd_status fallback, Fn fn);

    const DriverTable table_;  // never moves: every DeviceContext refers to it
    DlLibrary library_;
    const uint32_t device_count_;
    NativeCounters counters_;
};

// Image inspection (module.cpp): the bytes the driver will read from an ELF or fat binary, so a
// truncated image is refused instead of over-read. 0 when the image is neither (text).
// QD_ERROR_INVALID_IMAGE (with a message) for a malformed or truncated binary.
qd_status binary_image_extent(const DriverTable &table, const void *image, uint64_t size,
                              uint64_t *extent);

}  // namespace qd::backend::gpu
