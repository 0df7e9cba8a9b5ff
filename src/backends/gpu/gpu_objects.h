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
#include <vector>

#include "backends/common/fork_generation.h"
#include "backends/backend.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/library.h"

namespace qd::backend::gpu {

class GpuStream;

// --- Process-wide guards ---------------------------------------------------------------------

// g_fork_generation (backends/common/fork_generation.h): an object made with another value
// was inherited from the parent of a fork, and the driver must not be called for it.

// The DeviceContext whose host callback the calling thread is running, or null. GPU drivers
// run host callbacks on threads of their own and forbid driver calls from them. A thread-local
// beside the two that docs/design.md allows (active stream, last error; "Implementation rules")
// because nothing else can tell, on a driver-owned thread, whose callback is running:
// in_callback() rests on it.
inline thread_local const void *t_callback_owner __attribute__((tls_model("initial-exec"))) = nullptr;
inline const void *callback_owner() noexcept { return t_callback_owner; }

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
    int least_priority = 0;
    int greatest_priority = 0;

    // The checks at the top of every entry that reaches the driver: three relaxed loads.
    qd_status usable() const {
        if (shut_down_.load(std::memory_order_relaxed)) return refuse_shut_down();
        if (g_fork_generation.load(std::memory_order_relaxed) != fork_generation_)
            return refuse_forked();
        if (callback_owner() != nullptr) return refuse_in_callback();
        return QD_SUCCESS;
    }
    // True in a fork child for a context made in the parent: destructors then only forget.
    bool forked() const noexcept {
        return g_fork_generation.load(std::memory_order_relaxed) != fork_generation_;
    }
    // Destructors may not call the driver from a host callback or a fork child.
    bool can_release_now() const noexcept { return !forked() && callback_owner() == nullptr; }

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
    void register_stream(const std::shared_ptr<GpuStream> &stream);
    std::vector<std::shared_ptr<GpuStream>> live_streams();

    // Native releases. They never block. A stream with work in flight leaves a "tail" event
    // behind so that Context::synchronize still waits for that work. Called from a host
    // callback, a release is deferred to the next call from an ordinary thread; in a fork child
    // it is dropped (the child cannot use the parent's driver state).
    void release_stream(NativeStream stream, bool owned);
    void release_event(NativeEvent event);
    void release_module(NativeModule module);
    void release_host(void *ptr);
    void release_device_now(DevicePtr address);

    // Waits for (and destroys) the tail events; runs deferred releases.
    qd_status drain_tails();
    void run_deferred();

    void shut_down();
    bool is_shut_down() const { return shut_down_.load(std::memory_order_relaxed); }

  private:
    enum class Kind { owned_stream, borrowed_stream, event, module, host };
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

    std::mutex names_mutex_;
    std::set<std::string> names_;

    std::mutex streams_mutex_;
    std::vector<std::weak_ptr<GpuStream>> streams_;
    size_t streams_prune_at_ = 64;

    std::mutex tails_mutex_;
    std::vector<NativeEvent> tails_;

    std::mutex deferred_mutex_;
    std::vector<Deferred> deferred_;
    std::atomic<bool> has_deferred_{false};
};

// Makes the DeviceContext's native context current on the calling thread for one scope (calls
// on a stream skip it when the driver runs them in the stream's context; see the constructor).
// The common case (already current) costs one driver call. A thread with no current context
// gets ours and keeps it (cheap next time; nobody else was using the thread's slot). A thread
// where another library made a different context current gets ours pushed and popped again, so
// that library (PyTorch, CuPy, cuda.core) finds its own context unchanged afterwards.
class ScopedCurrent {
  public:
    // A call that names a stream of this context (launch, record, wait, copies, allocations,
    // synchronize, query) passes stream_call = true: when the driver runs such calls in the
    // stream's own context whatever is current (DriverTable::stream_calls_use_stream_context),
    // nothing is checked or switched, which keeps a driver call off every enqueue.
    explicit ScopedCurrent(const DeviceContext &dc, bool stream_call = false) : t_(dc.t) {
        if (stream_call && t_.stream_calls_use_stream_context) return;
        NativeContext current = nullptr;
        Result r = t_.ctx_get_current(&current);
        if (r == t_.success && current == dc.native) return;
        if (r == t_.success && current == nullptr) {
            status_ = t_.ctx_set_current(dc.native);
            return;
        }
        status_ = t_.ctx_push_current(dc.native);
        pushed_ = status_ == t_.success;
    }
    ~ScopedCurrent() {
        if (pushed_) {
            NativeContext popped = nullptr;
            t_.ctx_pop_current(&popped);
        }
    }
    ScopedCurrent(const ScopedCurrent &) = delete;
    ScopedCurrent &operator=(const ScopedCurrent &) = delete;

    bool ok() const { return status_ == t_.success; }
    Result status() const { return status_; }
    Fn failed_entry() const { return pushed_ ? Fn::ctx_push_current : Fn::ctx_set_current; }

  private:
    const DriverTable &t_;
    Result status_ = 0;
    bool pushed_ = false;
};

// --- Streams, events, modules, kernels -------------------------------------------------------

class GpuKernel;

class GpuStream final : public Stream {
  public:
    GpuStream(std::shared_ptr<DeviceContext> dc, NativeStream stream, bool owned,
              int32_t priority);
    ~GpuStream() override;

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
    int32_t priority() const override { return priority_; }
    uint64_t native_handle() const override { return reinterpret_cast<uintptr_t>(stream_); }

    void forget() override { forgotten_.store(true, std::memory_order_release); }
    bool forgotten() const { return forgotten_.load(std::memory_order_acquire); }

    NativeStream native() const { return stream_; }
    bool owned() const { return owned_; }
    const char *last_kernel() const { return last_kernel_.load(std::memory_order_relaxed); }

  private:
    qd_status fail(Result result, qd_status fallback, Fn fn) {
        return dc_->fail_call(result, fallback, fn, last_kernel());
    }

    std::shared_ptr<DeviceContext> dc_;
    const DriverTable &t_;
    const NativeStream stream_;
    const bool owned_;
    const int32_t priority_;
    // Set on every launch (one relaxed store); points into DeviceContext's interned names.
    std::atomic<const char *> last_kernel_{nullptr};
    std::atomic<bool> forgotten_{false};  // a borrowed stream whose handle is gone
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

class GpuContext final : public Context {
  public:
    explicit GpuContext(std::shared_ptr<DeviceContext> dc);
    ~GpuContext() override;

    qd_status create_stream(uint32_t flags, int32_t priority,
                            std::shared_ptr<Stream> *out) override;
    qd_status import_stream(uint64_t native, std::shared_ptr<Stream> *out) override;
    qd_status create_event(bool timing, std::shared_ptr<Event> *out) override;
    qd_status load_module(const void *image, uint64_t size,
                          std::shared_ptr<Module> *out) override;
    qd_status synchronize() override;
    qd_status elapsed_ms(Event &start, Event &end, float *ms) override;
    void priority_range(int32_t *least, int32_t *greatest) const override;
    qd_status host_alloc(uint64_t bytes, void **out) override;
    void host_free(void *ptr) override;
    void mem_free_now(uint64_t address) override;
    bool in_callback() const override { return callback_owner() == dc_.get(); }
    void shutdown() override;

  private:
    std::shared_ptr<DeviceContext> dc_;
};

class GpuDriver final : public Driver {
  public:
    GpuDriver(const DriverTable &table, Library library, uint32_t device_count);

    qd_backend kind() const override { return table_.kind; }
    qd_status device_count(uint32_t *out) override;
    qd_status device_info(uint32_t device, qd_device_info *out) override;
    qd_status create_context(const ContextParams &params, std::unique_ptr<Context> *out) override;

    NativeCounters &counters() { return counters_; }

  private:
    qd_status fail(Result result, qd_status fallback, Fn fn);

    const DriverTable table_;  // never moves: every DeviceContext refers to it
    Library library_;
    const uint32_t device_count_;
    NativeCounters counters_;
};

// Image inspection (module.cpp): the bytes the driver will read from an ELF or fat binary, so a
// truncated image is refused instead of over-read. 0 when the image is neither (text).
// QD_ERROR_INVALID_IMAGE (with a message) for a malformed or truncated binary.
qd_status binary_image_extent(const DriverTable &table, const void *image, uint64_t size,
                              uint64_t *extent);

}  // namespace qd::backend::gpu
