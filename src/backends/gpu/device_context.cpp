// DeviceContext: the native state one qd GPU context shares with its objects. Error mapping,
// fault (lost) reporting, the stream registry that Context::synchronize walks, and native
// releases that must not block, must not run in a host callback, and must not run in a fork
// child.
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <mutex>

#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

const char *describe_result(const DriverTable &t, Result result, char *buf, size_t size) {
    const char *name = nullptr;
    const char *text = nullptr;
    if (t.get_error_name(result, &name) != t.success || name == nullptr) name = nullptr;
    if (t.get_error_string(result, &text) != t.success || text == nullptr) text = nullptr;
    if (name && text)
        snprintf(buf, size, "%s (%s)", name, text);
    else
        snprintf(buf, size, "%s error %d", t.api_name, result);
    return buf;
}

const ErrorRule *find_rule(const DriverTable &t, Result result) {
    for (size_t i = 0; i < t.num_error_rules; ++i)
        if (t.error_rules[i].code == result) return &t.error_rules[i];
    return nullptr;
}

// --- construction ------------------------------------------------------------------------

DeviceContext::DeviceContext(const DriverTable &table, NativeCounters &counters_in,
                             uint32_t ordinal_in, NativeDevice device_in, NativeContext native_in)
    : t(table),
      counters(counters_in),
      ordinal(ordinal_in),
      device(device_in),
      native(native_in),
      fork_generation_(g_fork_generation.load(std::memory_order_relaxed)) {}

DeviceContext::~DeviceContext() {
    if (!can_release_now()) return;  // a fork child or a host callback: only forget
    run_deferred();
    {
        ScopedCurrent current(*this);
        std::lock_guard<std::mutex> lock(tails_mutex_);
        for (NativeEvent e : tails_) {
            t.event_synchronize(e);
            t.event_destroy(e);
        }
        tails_.clear();
        if (condition_module_) t.module_unload(condition_module_);
        // Timeline words a stream may still have touched (retire_word): every stream of this
        // context is gone now, and so is its work.
        std::lock_guard<std::mutex> words(retired_words_mutex_);
        for (void *word : retired_words_) t.host_free(word);
        retired_words_.clear();
    }
    // A part's green context goes with it (its retain of the primary context too).
    if (green) {
        t.green_ctx_destroy(green);
        return;
    }
    // The primary context stays retained by every other library that uses it; releasing ours
    // only drops qd's reference.
    t.device_primary_ctx_release(device);
}

// --- refusals and error mapping ------------------------------------------------------------

qd_status DeviceContext::refuse_shut_down() const {
    return fail(QD_ERROR_INVALID_HANDLE, "the %s context is being destroyed", t.api_name);
}

qd_status DeviceContext::refuse_forked() const {
    return fail(QD_ERROR_FORKED,
                "this %s context was created before fork(); the child process cannot use it",
                t.api_name);
}

qd_status DeviceContext::refuse_in_callback() const {
    return fail(QD_ERROR_INVALID_OPERATION,
                "%s forbids driver calls from a host callback; queue the work from another "
                "thread",
                t.api_name);
}

qd_status DeviceContext::fail_call(Result result, qd_status fallback, Fn fn,
                                   const char *last_kernel) {
    char what[256];
    describe_result(t, result, what, sizeof what);
    const ErrorRule *rule = find_rule(t, result);
    if (rule == nullptr) return fail(fallback, "%s failed: %s", symbol_name(t, fn), what);
    if (!rule->sticky) return fail(rule->status, "%s failed: %s", symbol_name(t, fn), what);

    // A sticky fault: the context is corrupted for good. Name the kernel most likely at fault:
    // the last one launched on the stream where the fault surfaced. The fault may have happened
    // on another stream (the error is reported by whichever call comes next), so the last
    // kernels of the context's other streams are listed too.
    std::string others;
    int listed = 0;
    for (const auto &stream : live_streams()) {
        const char *k = stream->last_kernel();
        if (!k || (last_kernel && std::strcmp(k, last_kernel) == 0)) continue;
        if (others.find(std::string("'") + k + "'") != std::string::npos) continue;
        if (listed++ == 4) {
            others += ", ...";
            break;
        }
        others += std::string(others.empty() ? "'" : ", '") + k + "'";
    }
    char message[512];
    snprintf(message, sizeof message,
             "%s device fault on device %u: %s, reported by %s; last kernel launched on the "
             "faulting stream: %s%s%s%s",
             t.api_name, ordinal, what, symbol_name(t, fn), last_kernel ? "'" : "(none)",
             last_kernel ? last_kernel : "", last_kernel ? "'" : "",
             others.empty() ? "" : ("; last kernels of the other streams: " + others).c_str());
    {
        std::lock_guard<std::mutex> lock(lost_mutex_);
        if (lost_) lost_->mark_lost(message);
    }
    return fail(QD_ERROR_DEVICE_LOST, "%s", message);
}

void DeviceContext::attach_lost_state(LostState *lost) {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    lost_ = lost;
}

void DeviceContext::add_status_call(StatusCall *call) {
    std::lock_guard<std::mutex> lock(status_calls_mutex_);
    status_calls_.insert(call);
}

bool DeviceContext::take_status_call(StatusCall *call) {
    std::lock_guard<std::mutex> lock(status_calls_mutex_);
    return status_calls_.erase(call) != 0;
}

bool DeviceContext::lost() {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    return lost_ != nullptr && lost_->lost();
}

const char *DeviceContext::intern(const char *name) {
    std::lock_guard<std::mutex> lock(names_mutex_);
    return names_.insert(name).first->c_str();
}

// --- stream registry ----------------------------------------------------------------------

void DeviceContext::register_stream(GpuStream &stream) {
    stream.registered_ = streams_.add(&stream, &stream.registry_entry_);
}

std::vector<std::shared_ptr<GpuStream>> DeviceContext::live_streams() {
    std::vector<std::shared_ptr<GpuStream>> out = streams_.snapshot();
    out.erase(std::remove_if(out.begin(), out.end(),
                             [](const std::shared_ptr<GpuStream> &s) { return s->forgotten(); }),
              out.end());
    return out;
}

// --- releases -------------------------------------------------------------------------------

void DeviceContext::release_stream(NativeStream stream, bool owned) {
    release(owned ? Kind::owned_stream : Kind::borrowed_stream, stream);
}
void DeviceContext::release_event(NativeEvent event) { release(Kind::event, event); }
void DeviceContext::release_module(NativeModule module) { release(Kind::module, module); }
void DeviceContext::release_host(void *ptr) { release(Kind::host, ptr); }

void DeviceContext::retire_word(void *word) {
    std::lock_guard<std::mutex> lock(retired_words_mutex_);
    retired_words_.push_back(word);
}
void DeviceContext::release_graph(NativeGraph graph) { release(Kind::graph, graph); }
void DeviceContext::release_graph_exec(NativeGraphExec exec) { release(Kind::graph_exec, exec); }

void DeviceContext::release_device_now(DevicePtr address) {
    if (!can_release_now()) return;
    ScopedCurrent current(*this);
    t.mem_free(address);
}

void DeviceContext::release(Kind kind, void *handle) {
    if (forked()) return;  // the parent still owns these; the child must not touch the driver
    if (in_driver_callback()) {
        std::lock_guard<std::mutex> lock(deferred_mutex_);
        deferred_.push_back({kind, handle});
        has_deferred_.store(true, std::memory_order_release);
        return;
    }
    ScopedCurrent current(*this);
    switch (kind) {
    case Kind::owned_stream: {
        auto stream = static_cast<NativeStream>(handle);
        // The driver defers the native release until the stream's work is done, but
        // Context::synchronize can no longer name this stream: leave an event behind for it.
        if (t.stream_query(stream) == t.not_ready) add_tail(stream);
        t.stream_destroy(stream);
        counters.streams_destroyed.fetch_add(1, std::memory_order_relaxed);
        break;
    }
    case Kind::borrowed_stream:
        // Never touched again: its owner may already have destroyed it (see Stream::forget).
        counters.streams_forgotten.fetch_add(1, std::memory_order_relaxed);
        break;
    case Kind::event:
        t.event_destroy(static_cast<NativeEvent>(handle));
        counters.events_destroyed.fetch_add(1, std::memory_order_relaxed);
        break;
    case Kind::module:
        // The driver keeps the code alive for work already queued with it.
        t.module_unload(static_cast<NativeModule>(handle));
        counters.modules_unloaded.fetch_add(1, std::memory_order_relaxed);
        break;
    case Kind::host: t.host_free(handle); break;
    case Kind::graph: t.graph_destroy(static_cast<NativeGraph>(handle)); break;
    case Kind::graph_exec:
        // Launches in flight complete: the driver frees the executable graph after them.
        t.graph_exec_destroy(static_cast<NativeGraphExec>(handle));
        counters.graphs_destroyed.fetch_add(1, std::memory_order_relaxed);
        break;
    }
}

void DeviceContext::add_tail(NativeStream stream) {
    NativeEvent event = nullptr;
    if (t.event_create(&event, t.event_disable_timing_flag) != t.success) return;
    if (t.event_record(event, stream) != t.success) {
        t.event_destroy(event);
        return;
    }
    std::lock_guard<std::mutex> lock(tails_mutex_);
    // Keep the list short in programs that destroy busy streams often: drop finished tails.
    if (tails_.size() >= 32) {
        auto done = std::remove_if(tails_.begin(), tails_.end(), [this](NativeEvent e) {
            if (t.event_query(e) == t.not_ready) return false;
            t.event_destroy(e);
            return true;
        });
        tails_.erase(done, tails_.end());
    }
    tails_.push_back(event);
}

qd_status DeviceContext::drain_tails() {
    run_deferred();
    std::vector<NativeEvent> tails;
    {
        std::lock_guard<std::mutex> lock(tails_mutex_);
        tails.swap(tails_);
    }
    qd_status status = QD_SUCCESS;
    ScopedCurrent current(*this);
    for (NativeEvent e : tails) {
        Result r = t.event_synchronize(e);
        if (r != t.success && status == QD_SUCCESS)
            status = fail_call(r, QD_ERROR_INTERNAL, Fn::event_synchronize, nullptr);
        t.event_destroy(e);
    }
    return status;
}

void DeviceContext::run_deferred() {
    if (!has_deferred_.load(std::memory_order_acquire)) return;
    if (!can_release_now()) return;
    std::vector<Deferred> work;
    {
        std::lock_guard<std::mutex> lock(deferred_mutex_);
        work.swap(deferred_);
        has_deferred_.store(false, std::memory_order_relaxed);
    }
    for (const Deferred &d : work) release(d.kind, d.handle);
}

qd_status DeviceContext::condition_kernel(NativeFunction *out) {
    std::lock_guard<std::mutex> lock(condition_mutex_);
    if (condition_function_) {
        *out = condition_function_;
        return QD_SUCCESS;
    }
    if (!t.condition_image)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "this %s backend has no condition kernel of qd's, so a conditional cannot "
                    "take a condition word; give condition 0 and set the value from the graph's "
                    "own kernels (qd_conditional_handle)",
                    t.api_name);
    NativeModule module = nullptr;
    Result r = t.module_load_data(&module, t.condition_image, 0, nullptr, nullptr);
    if (r != t.success) {
        if (r == t.no_binary_for_gpu) {
            int major = 0, minor = 0;
            t.device_get_attribute(&major, t.attr_compute_major, device);
            t.device_get_attribute(&minor, t.attr_compute_minor, device);
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "qd's condition kernel has no code for this GPU (sm_%d%d; libqd carries "
                        "it for %s), so a conditional cannot take a condition word here; a "
                        "conditional with condition 0 whose kernels set the value themselves "
                        "(qd_conditional_handle) still works",
                        major, minor, t.condition_kernel_architectures);
        }
        return fail_call(r, QD_ERROR_NOT_SUPPORTED, Fn::module_load_data, nullptr);
    }
    NativeFunction function = nullptr;
    r = t.module_get_function(&function, module, t.condition_kernel_name);
    // Its code is loaded now, not by a launch that could wait for work in flight (README.md).
    if (r == t.success && t.func_load) r = t.func_load(function);
    if (r != t.success) {
        t.module_unload(module);
        return fail_call(r, QD_ERROR_INTERNAL, Fn::module_get_function, nullptr);
    }
    condition_module_ = module;
    condition_function_ = function;
    *out = function;
    return QD_SUCCESS;
}

void DeviceContext::shut_down() {
    shut_down_.store(true, std::memory_order_relaxed);
    if (!forked()) {
        // Host status callbacks the driver dropped (a fault) or never reached: each is called
        // once, here, on the destroying thread, outside every lock.
        std::unordered_set<StatusCall *> left;
        {
            std::lock_guard<std::mutex> lock(status_calls_mutex_);
            left.swap(status_calls_);
        }
        const qd_status status = lost() ? QD_ERROR_DEVICE_LOST : QD_ERROR_INVALID_HANDLE;
        for (StatusCall *call : left) {
            call->fn(call->handle, status, call->user_data);
            delete call;
        }
    }
    if (!can_release_now()) return;
    drain_tails();
}

}  // namespace qd::backend::gpu
