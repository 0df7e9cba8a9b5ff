// The fake GPU driver (see fake_gpu_driver.h).
#include "fake_gpu_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace qdt::fake_gpu {

Fake g_fake;
namespace {
thread_local gpu::NativeContext t_current = nullptr;
thread_local std::vector<gpu::NativeContext> t_stack;
}  // namespace
gpu::NativeContext &current_context() { return t_current; }
std::vector<gpu::NativeContext> &context_stack() { return t_stack; }
std::atomic<long> g_ctx_queries{0};

Fake::~Fake() {
    for (auto *d : resource_descs) delete d;
}

void Fake::reset() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto *s : streams) delete s;
    for (auto *e : events) delete e;
    for (auto *m : modules) delete m;
    for (void *p : host_blocks) free(p);
    for (uint64_t p : backed_blocks) free(reinterpret_cast<void *>(static_cast<uintptr_t>(p)));
    for (auto *c : captures) delete c;
    for (auto *g : graphs) delete g;
    for (auto *g : execs) delete g;
    for (auto *g : greens) delete g;
    for (auto *d : resource_descs) delete d;
    greens.clear();
    resource_descs.clear();
    partition_calls.clear();
    sm_count = 132;
    sm_min_partition = 8;
    sm_alignment = 8;
    captures.clear();
    graphs.clear();
    execs.clear();
    capture_mode = -1;
    graph_launches = 0;
    graph_uploads = 0;
    hold_host_fns = false;
    held_host_fns.clear();
    value_writes.clear();
    value_waits.clear();
    streams.clear();
    events.clear();
    modules.clear();
    host_blocks.clear();
    device_blocks.clear();
    backed_blocks.clear();
    retains = 0;
    stream_destroys = 0;
    launches.clear();
    loaded_functions.clear();
    last_image.clear();
    work_per_launch = 0;
    compute_major = 9;
    driver_version = 13000;
    backed_memory = false;
    peer_access = true;
    peer_enabled.clear();
    pool_access.clear();
    peer_copies = 0;
    copies_checked_in_current_context = false;
    last_peer_copy = {nullptr, nullptr};
    calls = 0;
    fail_at = 0;
    fail_code = kUnknown;
    sticky = kOk;
}

Result inject() {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    ++g_fake.calls;
    if (g_fake.sticky != kOk) return g_fake.sticky;
    if (g_fake.fail_at != 0 && g_fake.calls == g_fake.fail_at) return g_fake.fail_code;
    return kOk;
}
#define INJECT()                                                                                   \
    do {                                                                                           \
        if (Result r_ = inject(); r_ != kOk) return r_;                                            \
    } while (0)

struct Param2 {
    const char *name;
    std::vector<uint32_t> sizes;
};
const Param2 kFunctions[] = {{"k0", {}}, {"k2", {8, 4}}, {"k1", {8}}};

Result f_init(unsigned) { return kOk; }
Result f_driver_get_version(int *v) {
    *v = g_fake.driver_version;
    return kOk;
}
Result f_get_error_name(Result e, const char **n) {
    switch (e) {
    case kOutOfMemory: *n = "CUDA_ERROR_OUT_OF_MEMORY"; return kOk;
    case kIllegalAddress: *n = "CUDA_ERROR_ILLEGAL_ADDRESS"; return kOk;
    case kInvalidPtx: *n = "CUDA_ERROR_INVALID_PTX"; return kOk;
    case kNotFound: *n = "CUDA_ERROR_NOT_FOUND"; return kOk;
    case kUnknown: *n = "CUDA_ERROR_UNKNOWN"; return kOk;
    default: *n = nullptr; return kInvalidValue;
    }
}
Result f_get_error_string(Result e, const char **s) {
    const char *n = nullptr;
    if (f_get_error_name(e, &n) != kOk) return kInvalidValue;
    *s = "fake description";
    return kOk;
}
Result f_device_get_count(int *n) {
    *n = 2;
    return kOk;
}
Result f_device_get(gpu::NativeDevice *d, int ordinal) {
    *d = ordinal;
    return kOk;
}
Result f_device_get_name(char *name, int len, gpu::NativeDevice) {
    snprintf(name, len, "Fake GPU");
    return kOk;
}
Result f_device_get_attribute(int *v, int attr, gpu::NativeDevice) {
    *v = attr == 75 ? g_fake.compute_major : attr == 76 ? 0 : attr == 16 ? 132 : -1;
    return *v < 0 ? kInvalidValue : kOk;
}
Result f_device_total_mem(size_t *b, gpu::NativeDevice) {
    *b = size_t{80} << 30;
    return kOk;
}
Result f_primary_retain(gpu::NativeContext *c, gpu::NativeDevice device) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    ++g_fake.retains;
    *c = device == 1 ? g_fake.primary1 : g_fake.primary;
    return kOk;
}
Result f_primary_release(gpu::NativeDevice) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    --g_fake.retains;
    return kOk;
}
Result f_ctx_get_current(gpu::NativeContext *c) {
    g_ctx_queries.fetch_add(1);
    *c = t_current;
    return kOk;
}
Result f_ctx_set_current(gpu::NativeContext c) {
    t_current = c;
    return kOk;
}
Result f_ctx_push(gpu::NativeContext c) {
    t_stack.push_back(t_current);
    t_current = c;
    return kOk;
}
Result f_ctx_pop(gpu::NativeContext *c) {
    if (t_stack.empty()) return kInvalidValue;
    *c = t_current;
    t_current = t_stack.back();
    t_stack.pop_back();
    return kOk;
}
Result f_priority_range(int *least, int *greatest) {
    INJECT();
    *least = 0;
    *greatest = -5;
    return kOk;
}
Result f_stream_create(gpu::NativeStream *s, unsigned flags, int priority) {
    INJECT();
    auto *fs = new FakeStream{flags, priority, t_current, 0};
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.streams.insert(fs);
    *s = reinterpret_cast<gpu::NativeStream>(fs);
    return kOk;
}
Result f_stream_destroy(gpu::NativeStream s) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.streams.erase(fs(s))) return 400;  // destroying twice: the real one crashes
    ++g_fake.stream_destroys;
    // Events recorded on this stream outlive it (as in the real driver): forget the stream.
    for (auto *e : g_fake.events)
        if (e->stream == fs(s)) e->stream = nullptr;
    delete fs(s);
    return kOk;
}
Result f_stream_query(gpu::NativeStream s) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.streams.count(fs(s))) return ++g_fake.dead_stream_calls, 400;  // real: SIGSEGV
    return fs(s)->pending ? kNotReady : kOk;
}
Result f_stream_synchronize(gpu::NativeStream s) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.streams.count(fs(s))) return ++g_fake.dead_stream_calls, 400;  // real: SIGSEGV
    if (fs(s)->capture) return qd::cuda_abi::kStreamCaptureUnsupported;
    fs(s)->pending = 0;
    for (auto *e : g_fake.events)
        if (e->stream == fs(s)) e->pending = false;
    return kOk;
}
Result f_stream_wait_event(gpu::NativeStream s, gpu::NativeEvent e, unsigned) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (fe(e)->capture && !fs(s)->capture) fs(s)->capture = fe(e)->capture;  // joins it
    return kOk;
}
// Not injected: the backend falls back to the priority it asked for, by design.
Result f_stream_get_priority(gpu::NativeStream s, int *p) {
    *p = fs(s)->priority;
    return kOk;
}
Result f_stream_get_flags(gpu::NativeStream s, unsigned *flags) {
    INJECT();
    *flags = fs(s)->flags;
    return kOk;
}
Result f_stream_get_ctx(gpu::NativeStream s, gpu::NativeContext *c) {
    INJECT();
    *c = fs(s)->ctx;
    return kOk;
}
Result f_event_create(gpu::NativeEvent *e, unsigned flags) {
    INJECT();
    auto *ev = new FakeEvent{flags, nullptr, false};
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.events.insert(ev);
    *e = reinterpret_cast<gpu::NativeEvent>(ev);
    return kOk;
}
Result f_event_destroy(gpu::NativeEvent e) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.events.erase(fe(e))) return 400;
    delete fe(e);
    return kOk;
}
Result f_event_record(gpu::NativeEvent e, gpu::NativeStream s) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    fe(e)->stream = fs(s);
    fe(e)->pending = fs(s)->pending > 0;
    fe(e)->capture = fs(s)->capture;
    return kOk;
}
Result f_event_query(gpu::NativeEvent e) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    return fe(e)->pending ? kNotReady : kOk;
}
Result f_event_synchronize(gpu::NativeEvent e) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (fe(e)->stream) fe(e)->stream->pending = 0;
    fe(e)->pending = false;
    return kOk;
}
Result f_event_elapsed(float *ms, gpu::NativeEvent a, gpu::NativeEvent b) {
    INJECT();
    if (fe(a)->pending || fe(b)->pending) return kNotReady;
    *ms = 1.5f;
    return kOk;
}
Result f_module_load(gpu::NativeModule *m, const void *image, unsigned n, int *options,
                     void **values) {
    INJECT();
    std::string text(static_cast<const char *>(image));  // reads up to the NUL, like the driver
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        g_fake.last_image = text;
    }
    if (text.find("bad") != std::string::npos) {
        for (unsigned i = 0; i < n; ++i)
            if (options[i] == 5)
                snprintf(static_cast<char *>(values[i]), 64, "line 1: syntax error");
        return kInvalidPtx;
    }
    auto *mod = new std::string(text);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.modules.insert(mod);
    *m = reinterpret_cast<gpu::NativeModule>(mod);
    return kOk;
}
Result f_module_get_function(gpu::NativeFunction *f, gpu::NativeModule, const char *name) {
    INJECT();
    for (const Param2 &p : kFunctions)
        if (!strcmp(p.name, name)) {
            *f = reinterpret_cast<gpu::NativeFunction>(const_cast<Param2 *>(&p));
            return kOk;
        }
    return kNotFound;
}
Result f_func_load(gpu::NativeFunction f) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.loaded_functions.insert(reinterpret_cast<const Param2 *>(f)->name);
    return kOk;
}
Result f_module_unload(gpu::NativeModule m) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.modules.erase(reinterpret_cast<std::string *>(m))) return 400;
    delete reinterpret_cast<std::string *>(m);
    return kOk;
}
Result f_param_info(gpu::NativeFunction f, size_t i, size_t *offset, size_t *size) {
    auto *p = reinterpret_cast<const Param2 *>(f);
    if (i >= p->sizes.size()) return kInvalidValue;
    *offset = 0;
    *size = p->sizes[i];
    return kOk;
}
std::vector<uint8_t> arg_bytes(const Param2 &p, void *const *params) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i < p.sizes.size(); ++i) {
        const auto *b = static_cast<const uint8_t *>(params[i]);
        out.insert(out.end(), b, b + p.sizes[i]);
    }
    return out;
}
Result f_launch(gpu::NativeFunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                unsigned, gpu::NativeStream s, void **params, void **) {
    INJECT();
    auto *p = reinterpret_cast<const Param2 *>(f);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (fs(s)->capture) {
        FakeGraph *g = fs(s)->capture->graph;
        g->kernels.push_back(p->name);
        g->kernel_attrs.emplace_back();
        g->args.push_back(arg_bytes(*p, params));
        fs(s)->capture->last_node = reinterpret_cast<gpu::NativeGraphNode>(g->kernels.size());
        return kOk;
    }
    FakeLaunch l;
    l.kernel = p->name;
    l.code_loaded = g_fake.loaded_functions.count(p->name) != 0;
    for (size_t i = 0; i < p->sizes.size(); ++i) l.params.push_back(params[i]);
    g_fake.launches.push_back(l);
    fs(s)->pending += g_fake.work_per_launch;
    return kOk;
}
// cuLaunchKernelEx: the launch above, keeping the attributes; a completion event is recorded.
Result f_launch_ex(const gpu::LaunchConfig *config, gpu::NativeFunction f, void **params,
                   void **extra) {
    Result r = f_launch(f, config->grid_x, config->grid_y, config->grid_z, config->block_x,
                        config->block_y, config->block_z, config->shared_mem_bytes, config->stream,
                        params, extra);
    if (r != kOk) return r;
    std::vector<gpu::LaunchAttribute> attrs(config->attrs, config->attrs + config->num_attrs);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (fs(config->stream)->capture) {
        fs(config->stream)->capture->graph->kernel_attrs.back() = attrs;
        return kOk;
    }
    g_fake.launches.back().ex = true;
    g_fake.launches.back().attrs = attrs;
    return kOk;
}
// Like the real driver, host functions run on a driver-owned thread.
Result f_launch_host_func(gpu::NativeStream s, gpu::HostFn fn, void *user) {
    INJECT();
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        if (fs(s)->capture) {
            fs(s)->capture->graph->host_fns.emplace_back(fn, user);
            return kOk;
        }
        if (g_fake.hold_host_fns) {
            g_fake.held_host_fns.emplace_back(fn, user);
            return kOk;
        }
    }
    std::thread(fn, user).join();
    return kOk;
}

Result f_stream_begin_capture(gpu::NativeStream s, int mode) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (fs(s)->capture) return 401;  // CUDA_ERROR_ILLEGAL_STATE
    auto *c = new FakeCapture{fs(s), new FakeGraph};
    g_fake.captures.insert(c);
    fs(s)->capture = c;
    g_fake.capture_mode = mode;
    return kOk;
}
Result f_stream_end_capture(gpu::NativeStream s, gpu::NativeGraph *graph) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    FakeCapture *c = fs(s)->capture;
    if (!c || c->origin != fs(s)) return qd::cuda_abi::kStreamCaptureUnmatched;
    for (auto *x : g_fake.streams)
        if (x->capture == c) x->capture = nullptr;
    for (auto *e : g_fake.events)
        if (e->capture == c) e->capture = nullptr;
    g_fake.graphs.insert(c->graph);
    *graph = reinterpret_cast<gpu::NativeGraph>(c->graph);
    g_fake.captures.erase(c);
    delete c;
    return kOk;
}
Result f_stream_is_capturing(gpu::NativeStream s, int *status) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    *status = fs(s)->capture ? 1 : 0;
    return kOk;
}
Result f_graph_instantiate(gpu::NativeGraphExec *exec, gpu::NativeGraph graph, unsigned long long) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *x = new FakeGraph(*reinterpret_cast<FakeGraph *>(graph));
    g_fake.execs.insert(x);
    *exec = reinterpret_cast<gpu::NativeGraphExec>(x);
    return kOk;
}
Result f_graph_launch(gpu::NativeGraphExec exec, gpu::NativeStream s) {
    INJECT();
    std::vector<std::pair<gpu::HostFn, void *>> run;
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        auto *x = reinterpret_cast<FakeGraph *>(exec);
        if (!g_fake.execs.count(x)) return 400;
        ++g_fake.graph_launches;
        for (size_t i = 0; i < x->kernels.size(); ++i) {
            FakeLaunch l;
            l.kernel = x->kernels[i];
            l.arg_bytes = x->args[i];
            if (i < x->kernel_attrs.size()) {
                l.attrs = x->kernel_attrs[i];
                l.ex = !l.attrs.empty();
            }
            g_fake.launches.push_back(l);
            fs(s)->pending += g_fake.work_per_launch;
        }
        if (g_fake.hold_host_fns) {
            for (const auto &h : x->host_fns) g_fake.held_host_fns.push_back(h);
        } else {
            run = x->host_fns;
        }
    }
    for (const auto &h : run) std::thread(h.first, h.second).join();
    return kOk;
}
Result f_graph_exec_update(gpu::NativeGraphExec exec, gpu::NativeGraph graph,
                           gpu::GraphExecUpdateInfo *info) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *x = reinterpret_cast<FakeGraph *>(exec);
    auto *g = reinterpret_cast<FakeGraph *>(graph);
    *info = gpu::GraphExecUpdateInfo{0, nullptr, nullptr};
    if (x->kernels.size() != g->kernels.size() || x->host_fns.size() != g->host_fns.size()) {
        info->result = 2;  // CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
        return qd::cuda_abi::kGraphExecUpdateFailure;
    }
    *x = *g;
    return kOk;
}
Result f_stream_get_capture_info(gpu::NativeStream s, int *status, unsigned long long *id,
                                 gpu::NativeGraph *graph, const gpu::NativeGraphNode **deps,
                                 size_t *num) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    FakeCapture *c = fs(s)->capture;
    *status = c ? 1 : 0;
    *id = reinterpret_cast<uintptr_t>(c);
    *graph = c ? reinterpret_cast<gpu::NativeGraph>(c->graph) : nullptr;
    *deps = c ? &c->last_node : nullptr;
    *num = c && c->last_node ? 1 : 0;
    return kOk;
}
Result f_graph_exec_kernel_node_set_params(gpu::NativeGraphExec exec, gpu::NativeGraphNode node,
                                           const gpu::KernelNodeParams *params) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *x = reinterpret_cast<FakeGraph *>(exec);
    const size_t index = reinterpret_cast<uintptr_t>(node) - 1;
    if (!g_fake.execs.count(x) || index >= x->kernels.size()) return kInvalidValue;
    auto *p = reinterpret_cast<const Param2 *>(params->function);
    x->kernels[index] = p->name;
    x->args[index] = arg_bytes(*p, params->params);
    return kOk;
}
Result f_graph_upload(gpu::NativeGraphExec exec, gpu::NativeStream) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.execs.count(reinterpret_cast<FakeGraph *>(exec))) return 400;
    ++g_fake.graph_uploads;
    return kOk;
}
Result f_graph_exec_destroy(gpu::NativeGraphExec exec) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *x = reinterpret_cast<FakeGraph *>(exec);
    if (!g_fake.execs.erase(x)) return 400;
    delete x;
    return kOk;
}
Result f_graph_destroy(gpu::NativeGraph graph) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *g = reinterpret_cast<FakeGraph *>(graph);
    if (!g_fake.graphs.erase(g)) return 400;
    delete g;
    return kOk;
}
Result f_mem_alloc_async(gpu::DevicePtr *p, size_t bytes, gpu::NativeStream) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (g_fake.backed_memory) {
        void *block = malloc(bytes ? bytes : 1);
        if (!block) return kOutOfMemory;
        *p = reinterpret_cast<uintptr_t>(block);
        g_fake.backed_blocks.insert(*p);
    } else {
        *p = g_fake.next_address;
        g_fake.next_address += (bytes + 255) & ~size_t{255};
    }
    g_fake.device_blocks[*p] = bytes;
    return kOk;
}
// Caller holds g_fake.mutex.
Result release_block(gpu::DevicePtr p) {
    if (!g_fake.device_blocks.erase(p)) return kInvalidValue;
    if (g_fake.backed_blocks.erase(p)) free(reinterpret_cast<void *>(static_cast<uintptr_t>(p)));
    return kOk;
}
Result f_mem_free_async(gpu::DevicePtr p, gpu::NativeStream) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    return release_block(p);
}
Result f_mem_free(gpu::DevicePtr p) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    return release_block(p);
}
Result f_memcpy_async(gpu::DevicePtr dst, gpu::DevicePtr src, size_t bytes, gpu::NativeStream s) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (g_fake.copies_checked_in_current_context && t_current != fs(s)->ctx) return kInvalidValue;
    if (g_fake.backed_memory && bytes)
        memmove(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)),
                reinterpret_cast<const void *>(static_cast<uintptr_t>(src)), bytes);
    return kOk;
}
Result f_memset_async(gpu::DevicePtr dst, unsigned char value, size_t bytes, gpu::NativeStream) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (g_fake.backed_memory && bytes)
        memset(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)), value, bytes);
    return kOk;
}
Result f_device_can_access_peer(int *can, gpu::NativeDevice device, gpu::NativeDevice peer) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    *can = g_fake.peer_access && device != peer ? 1 : 0;
    return kOk;
}
Result f_ctx_enable_peer_access(gpu::NativeContext peer, unsigned flags) {
    INJECT();
    if (flags != 0 || peer == t_current || t_current == nullptr) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.peer_access) return qd::cuda_abi::kPeerAccessUnsupported;
    if (!g_fake.peer_enabled.insert({t_current, peer}).second)
        return qd::cuda_abi::kPeerAccessAlreadyEnabled;
    return kOk;
}
Result f_device_get_mem_pool(gpu::NativeMemPool *pool, gpu::NativeDevice device) {
    INJECT();
    *pool = reinterpret_cast<gpu::NativeMemPool>(static_cast<uintptr_t>(0x9000 + device));
    return kOk;
}
Result f_mem_pool_set_access(gpu::NativeMemPool pool, const gpu::MemAccessDesc *desc, size_t n) {
    INJECT();
    if (n != 1 || desc->location_type != 1 || desc->flags != 3) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.pool_access.insert(
        {static_cast<int>(reinterpret_cast<uintptr_t>(pool) - 0x9000), desc->location_id});
    return kOk;
}
Result f_memcpy_peer_async(gpu::DevicePtr dst, gpu::NativeContext dst_ctx, gpu::DevicePtr src,
                           gpu::NativeContext src_ctx, size_t bytes, gpu::NativeStream s) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (g_fake.copies_checked_in_current_context && t_current != fs(s)->ctx) return kInvalidValue;
    ++g_fake.peer_copies;
    g_fake.last_peer_copy = {dst_ctx, src_ctx};
    if (g_fake.backed_memory && bytes)
        memmove(reinterpret_cast<void *>(static_cast<uintptr_t>(dst)),
                reinterpret_cast<const void *>(static_cast<uintptr_t>(src)), bytes);
    return kOk;
}
Result f_stream_write_value64(gpu::NativeStream s, gpu::DevicePtr address, uint64_t value,
                              unsigned flags) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.host_blocks.count(reinterpret_cast<void *>(address))) return kInvalidValue;
    __atomic_store_n(reinterpret_cast<uint64_t *>(address), value, __ATOMIC_SEQ_CST);
    g_fake.value_writes.push_back({fs(s), address, value, flags});
    return kOk;
}
Result f_stream_wait_value64(gpu::NativeStream s, gpu::DevicePtr address, uint64_t value,
                             unsigned flags) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.host_blocks.count(reinterpret_cast<void *>(address))) return kInvalidValue;
    g_fake.value_waits.push_back({fs(s), address, value, flags});
    return kOk;
}
Result f_host_alloc(void **p, size_t bytes, unsigned) {
    INJECT();
    *p = malloc(bytes);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.host_blocks.insert(*p);
    return kOk;
}
Result f_host_free(void *p) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    if (!g_fake.host_blocks.erase(p)) return kInvalidValue;
    free(p);
    return kOk;
}

const gpu::ErrorRule kRules[] = {
    {kOutOfMemory, QD_ERROR_OUT_OF_MEMORY, false}, {kInvalidPtx, QD_ERROR_INVALID_IMAGE, false},
    {kNotFound, QD_ERROR_NOT_FOUND, false},        {kIllegalAddress, QD_ERROR_DEVICE_LOST, true},
    {kUnknown, QD_ERROR_INTERNAL, false},
};

uint64_t fake_fat_size(const void *image, uint64_t available) {
    if (available < 16 || memcmp(image, "FAT!", 4) != 0) return 0;
    uint64_t size = 0;
    memcpy(&size, static_cast<const char *>(image) + 8, 8);
    return size;
}

// --- SM partitions ---------------------------------------------------------------------------

Result f_device_get_dev_resource(gpu::NativeDevice, gpu::DevResource *r, int type) {
    INJECT();
    if (type != qd::cuda_abi::kDevResourceTypeSm) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    std::memset(r, 0, sizeof *r);
    r->type = type;
    r->sm.sm_count = g_fake.sm_count;
    r->sm.min_partition_size = g_fake.sm_min_partition;
    r->sm.coscheduled_alignment = g_fake.sm_alignment;
    return kOk;
}
Result f_split_by_count(gpu::DevResource *result, unsigned *groups, const gpu::DevResource *input,
                        gpu::DevResource *remaining, unsigned flags, unsigned min_count) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.partition_calls.push_back("split " + std::to_string(min_count) +
                                     (*groups > 1 ? " x" + std::to_string(*groups) : ""));
    if (flags != 0 || input->type != qd::cuda_abi::kDevResourceTypeSm || *groups == 0)
        return kInvalidValue;
    const unsigned align = g_fake.sm_alignment ? g_fake.sm_alignment : 8;
    unsigned take = (min_count + align - 1) / align * align;
    if (take < g_fake.sm_min_partition) take = g_fake.sm_min_partition;
    // As many groups as were asked for and fit; the rest of the input is the remainder.
    const unsigned made = std::min(*groups, take ? input->sm.sm_count / take : 0u);
    for (unsigned k = 0; k < made; ++k) {
        result[k] = *input;
        result[k].sm.sm_count = take;
    }
    if (remaining) {
        *remaining = *input;
        remaining->sm.sm_count = input->sm.sm_count - made * take;
    }
    *groups = made;
    return kOk;
}
Result f_generate_desc(gpu::NativeResourceDesc *desc, gpu::DevResource *resources, unsigned n) {
    INJECT();
    if (n != 1) return kInvalidValue;
    auto *d = new unsigned(resources[0].sm.sm_count);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.partition_calls.push_back("desc " + std::to_string(*d));
    g_fake.resource_descs.insert(d);
    *desc = reinterpret_cast<gpu::NativeResourceDesc>(d);
    return kOk;
}
Result f_green_ctx_create(gpu::NativeGreenCtx *ctx, gpu::NativeResourceDesc desc, gpu::NativeDevice,
                          unsigned flags) {
    INJECT();
    if (flags != qd::cuda_abi::kGreenCtxDefaultStream) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *d = reinterpret_cast<unsigned *>(desc);
    if (!g_fake.resource_descs.count(d)) return kInvalidValue;
    auto *g = new FakeGreen{*d, 0};
    g_fake.greens.insert(g);
    ++g_fake.retains;  // a green context retains the primary context
    g_fake.partition_calls.push_back("green_create " + std::to_string(g->sm_count));
    *ctx = reinterpret_cast<gpu::NativeGreenCtx>(g);
    return kOk;
}
Result f_green_ctx_destroy(gpu::NativeGreenCtx ctx) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *g = reinterpret_cast<FakeGreen *>(ctx);
    if (!g_fake.greens.erase(g)) return 400;
    --g_fake.retains;
    g_fake.partition_calls.push_back("green_destroy " + std::to_string(g->sm_count));
    delete g;
    return kOk;
}
Result f_ctx_from_green_ctx(gpu::NativeContext *c, gpu::NativeGreenCtx ctx) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *g = reinterpret_cast<FakeGreen *>(ctx);
    if (!g_fake.greens.count(g)) return 400;
    g_fake.partition_calls.push_back("from_green");
    *c = reinterpret_cast<gpu::NativeContext>(&g->as_context);
    return kOk;
}
Result f_green_ctx_stream_create(gpu::NativeStream *s, gpu::NativeGreenCtx ctx, unsigned flags,
                                 int priority) {
    INJECT();
    if (flags != qd::cuda_abi::kStreamNonBlocking) return kInvalidValue;
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    auto *g = reinterpret_cast<FakeGreen *>(ctx);
    if (!g_fake.greens.count(g)) return 400;
    g_fake.partition_calls.push_back("green_stream");
    auto *fs =
        new FakeStream{flags, priority, reinterpret_cast<gpu::NativeContext>(&g->as_context), 0};
    g_fake.streams.insert(fs);
    *s = reinterpret_cast<gpu::NativeStream>(fs);
    return kOk;
}

gpu::DriverTable fake_table() {
    gpu::DriverTable t;
    t.kind = QD_BACKEND_CUDA;
    t.api_name = "FAKE";
    t.success = kOk;
    t.not_ready = kNotReady;
    t.invalid_value = kInvalidValue;
    t.error_rules = kRules;
    t.num_error_rules = sizeof kRules / sizeof kRules[0];
    t.stream_default_flags = 0;
    t.stream_non_blocking_flag = 1;
    t.event_default_flags = 0;
    t.event_disable_timing_flag = 2;
    t.host_alloc_flags = 1;
    t.attr_compute_major = 75;
    t.attr_compute_minor = 76;
    t.attr_multiprocessors = 16;
    t.jit_error_log_buffer = 5;
    t.jit_error_log_buffer_bytes = 6;
    t.pseudo_streams[0] = 1;
    t.pseudo_streams[1] = 2;
    t.fat_binary_size = fake_fat_size;
    t.init = f_init;
    t.driver_get_version = f_driver_get_version;
    t.get_error_name = f_get_error_name;
    t.get_error_string = f_get_error_string;
    t.device_get_count = f_device_get_count;
    t.device_get = f_device_get;
    t.device_get_name = f_device_get_name;
    t.device_get_attribute = f_device_get_attribute;
    t.device_total_mem = f_device_total_mem;
    t.device_primary_ctx_retain = f_primary_retain;
    t.device_primary_ctx_release = f_primary_release;
    t.ctx_get_current = f_ctx_get_current;
    t.ctx_set_current = f_ctx_set_current;
    t.ctx_push_current = f_ctx_push;
    t.ctx_pop_current = f_ctx_pop;
    t.ctx_get_stream_priority_range = f_priority_range;
    t.stream_create = f_stream_create;
    t.stream_destroy = f_stream_destroy;
    t.stream_query = f_stream_query;
    t.stream_synchronize = f_stream_synchronize;
    t.stream_wait_event = f_stream_wait_event;
    t.stream_get_priority = f_stream_get_priority;
    t.stream_get_ctx = f_stream_get_ctx;
    t.stream_get_flags = f_stream_get_flags;
    t.event_create = f_event_create;
    t.event_destroy = f_event_destroy;
    t.event_record = f_event_record;
    t.event_query = f_event_query;
    t.event_synchronize = f_event_synchronize;
    t.event_elapsed_time = f_event_elapsed;
    t.module_load_data = f_module_load;
    t.module_get_function = f_module_get_function;
    t.module_unload = f_module_unload;
    t.func_get_param_info = f_param_info;
    t.func_load = f_func_load;
    t.launch_kernel = f_launch;
    t.launch_kernel_ex = f_launch_ex;
    t.launch_attr_cluster_dimension = 4;
    t.launch_attr_programmatic_serialization = 6;
    t.launch_attr_priority = 8;
    t.launch_attr_launch_completion_event = 12;
    t.launch_ex_requires = "CUDA 11.8 (driver 520) or newer";
    t.cluster_min_compute_major = 9;
    t.programmatic_capture_requires = "CUDA 12.3 (driver 545) or newer";
    t.programmatic_capture_min_version = 12030;
    t.launch_host_func = f_launch_host_func;
    t.mem_alloc_async = f_mem_alloc_async;
    t.mem_free_async = f_mem_free_async;
    t.mem_free = f_mem_free;
    t.memcpy_async = f_memcpy_async;
    t.memset_d8_async = f_memset_async;
    t.host_alloc = f_host_alloc;
    t.host_free = f_host_free;
    t.stream_begin_capture = f_stream_begin_capture;
    t.stream_end_capture = f_stream_end_capture;
    t.stream_is_capturing = f_stream_is_capturing;
    t.graph_instantiate = f_graph_instantiate;
    t.graph_launch = f_graph_launch;
    t.graph_exec_update = f_graph_exec_update;
    t.graph_exec_destroy = f_graph_exec_destroy;
    t.graph_destroy = f_graph_destroy;
    t.stream_get_capture_info = f_stream_get_capture_info;
    t.graph_exec_kernel_node_set_params = f_graph_exec_kernel_node_set_params;
    t.rebind_requires = "CUDA 11.3 (driver 465) or newer";
    t.graph_upload = f_graph_upload;
    t.upload_requires = "CUDA 11.1 (driver 455) or newer";
    t.stream_write_value64 = f_stream_write_value64;
    t.stream_wait_value64 = f_stream_wait_value64;
    t.timeline_requires = "CUDA 11.7 (driver 515) or newer (cuStreamWriteValue64_v2)";
    t.capture_mode = 2;
    t.device_can_access_peer = f_device_can_access_peer;
    t.ctx_enable_peer_access = f_ctx_enable_peer_access;
    t.device_get_mem_pool = f_device_get_mem_pool;
    t.mem_pool_set_access = f_mem_pool_set_access;
    t.memcpy_peer_async = f_memcpy_peer_async;
    t.peer_access_already_enabled = qd::cuda_abi::kPeerAccessAlreadyEnabled;
    t.mem_location_device = qd::cuda_abi::kMemLocationTypeDevice;
    t.mem_access_read_write = qd::cuda_abi::kMemAccessProtReadWrite;
    t.device_get_dev_resource = f_device_get_dev_resource;
    t.dev_sm_resource_split_by_count = f_split_by_count;
    t.dev_resource_generate_desc = f_generate_desc;
    t.green_ctx_create = f_green_ctx_create;
    t.green_ctx_destroy = f_green_ctx_destroy;
    t.ctx_from_green_ctx = f_ctx_from_green_ctx;
    t.green_ctx_stream_create = f_green_ctx_stream_create;
    t.dev_resource_type_sm = qd::cuda_abi::kDevResourceTypeSm;
    t.green_ctx_default_stream = qd::cuda_abi::kGreenCtxDefaultStream;
    t.green_ctx_requires = "CUDA 12.4 (driver 550) or newer";
    return t;
}

void hold(uint64_t native) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    FakeStream *s = fs(reinterpret_cast<gpu::NativeStream>(static_cast<uintptr_t>(native)));
    if (g_fake.streams.count(s)) ++s->pending;
}

void run_held_host_fns() {
    std::vector<std::pair<gpu::HostFn, void *>> run;
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        run.swap(g_fake.held_host_fns);
    }
    for (const auto &h : run) std::thread(h.first, h.second).join();
}

void complete_all_work() {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    for (auto *s : g_fake.streams) s->pending = 0;
    for (auto *e : g_fake.events) e->pending = false;
}

}  // namespace qdt::fake_gpu
