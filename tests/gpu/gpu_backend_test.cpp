// White-box tests of the shared GPU backend (src/backends/gpu) over a fake driver table, so they
// run on every machine, GPU or not. The fake keeps just enough state (a primary context, streams
// with pending work, events, modules, a thread's current context) to check what the backend
// promises about the driver: which native calls it makes, with which flags and arguments, that
// borrowed streams are never destroyed, that sticky faults mark the context lost and name the
// kernel, that another library's current context is left alone, and - by failing the Nth driver
// call of a scenario for every N (docs/reliability.md, category 13) - that no failure leaks or
// crashes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/common/callback_scope.h"
#include "backends/cuda/cuda_constants.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "common/error.h"

namespace gpu = qd::backend::gpu;
using gpu::Result;

namespace {

// ---------------------------------------------------------------------------------------------
// The fake driver
// ---------------------------------------------------------------------------------------------

// The CUresult values the fake driver returns: the real driver's, from the one header that
// holds them.
constexpr Result kOk = qd::cuda_abi::kSuccess, kInvalidValue = qd::cuda_abi::kInvalidValue,
                 kOutOfMemory = qd::cuda_abi::kOutOfMemory, kInvalidPtx = qd::cuda_abi::kInvalidPtx,
                 kNotFound = qd::cuda_abi::kNotFound, kNotReady = qd::cuda_abi::kNotReady,
                 kIllegalAddress = qd::cuda_abi::kIllegalAddress, kUnknown = qd::cuda_abi::kUnknown;

struct FakeStream {
    unsigned flags = 0;
    int priority = 0;
    gpu::NativeContext ctx = nullptr;
    int pending = 0;  // queued work not yet complete
};
struct FakeEvent {
    unsigned flags = 0;
    FakeStream *stream = nullptr;  // where it was last recorded
    bool pending = false;
};
struct FakeLaunch {
    std::vector<void *> params;
    std::string kernel;
    bool code_loaded = false;  // func_load had loaded the kernel before this launch
};

struct Fake {
    std::mutex mutex;
    gpu::NativeContext primary = reinterpret_cast<gpu::NativeContext>(0x1000);
    gpu::NativeContext other = reinterpret_cast<gpu::NativeContext>(0x2000);
    int retains = 0;
    std::set<FakeStream *> streams;
    std::set<FakeEvent *> events;
    std::set<std::string *> modules;  // a module is its image text
    std::set<void *> host_blocks;
    std::map<uint64_t, size_t> device_blocks;
    uint64_t next_address = 0x7000'0000'0000;
    int stream_destroys = 0;
    int dead_stream_calls = 0;  // query/synchronize on a stream already destroyed
    std::vector<FakeLaunch> launches;
    std::set<std::string> loaded_functions;  // by func_load
    std::string last_image;  // what module_load_data read (up to the NUL)
    int work_per_launch = 0;  // 1: launches leave the stream busy until synchronized

    // Fault injection: the Nth counted call fails with fail_code; sticky makes every later call
    // fail with it too.
    long calls = 0;
    long fail_at = 0;
    Result fail_code = kUnknown;
    Result sticky = kOk;

    void reset() {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto *s : streams) delete s;
        for (auto *e : events) delete e;
        for (auto *m : modules) delete m;
        for (void *p : host_blocks) free(p);
        streams.clear();
        events.clear();
        modules.clear();
        host_blocks.clear();
        device_blocks.clear();
        retains = 0;
        stream_destroys = 0;
        launches.clear();
        loaded_functions.clear();
        last_image.clear();
        work_per_launch = 0;
        calls = 0;
        fail_at = 0;
        fail_code = kUnknown;
        sticky = kOk;
    }
};

Fake g_fake;
thread_local gpu::NativeContext t_current = nullptr;
thread_local std::vector<gpu::NativeContext> t_stack;

Result inject() {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    ++g_fake.calls;
    if (g_fake.sticky != kOk) return g_fake.sticky;
    if (g_fake.fail_at != 0 && g_fake.calls == g_fake.fail_at) return g_fake.fail_code;
    return kOk;
}
#define INJECT()                                                                               \
    do {                                                                                       \
        if (Result r_ = inject(); r_ != kOk) return r_;                                        \
    } while (0)

struct Param2 {
    const char *name;
    std::vector<uint32_t> sizes;
};
const Param2 kFunctions[] = {{"k0", {}}, {"k2", {8, 4}}, {"k1", {8}}};

Result f_init(unsigned) { return kOk; }
Result f_driver_get_version(int *v) { *v = 13000; return kOk; }
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
Result f_device_get_count(int *n) { *n = 2; return kOk; }
Result f_device_get(gpu::NativeDevice *d, int ordinal) { *d = ordinal; return kOk; }
Result f_device_get_name(char *name, int len, gpu::NativeDevice) {
    snprintf(name, len, "Fake GPU");
    return kOk;
}
Result f_device_get_attribute(int *v, int attr, gpu::NativeDevice) {
    *v = attr == 75 ? 9 : attr == 76 ? 0 : attr == 16 ? 132 : -1;
    return *v < 0 ? kInvalidValue : kOk;
}
Result f_device_total_mem(size_t *b, gpu::NativeDevice) { *b = size_t{80} << 30; return kOk; }
Result f_primary_retain(gpu::NativeContext *c, gpu::NativeDevice) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    ++g_fake.retains;
    *c = g_fake.primary;
    return kOk;
}
Result f_primary_release(gpu::NativeDevice) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    --g_fake.retains;
    return kOk;
}
std::atomic<long> g_ctx_queries{0};  // ctx_get_current calls
Result f_ctx_get_current(gpu::NativeContext *c) {
    g_ctx_queries.fetch_add(1);
    *c = t_current;
    return kOk;
}
Result f_ctx_set_current(gpu::NativeContext c) { t_current = c; return kOk; }
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
FakeStream *fs(gpu::NativeStream s) { return reinterpret_cast<FakeStream *>(s); }
FakeEvent *fe(gpu::NativeEvent e) { return reinterpret_cast<FakeEvent *>(e); }
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
    fs(s)->pending = 0;
    for (auto *e : g_fake.events)
        if (e->stream == fs(s)) e->pending = false;
    return kOk;
}
Result f_stream_wait_event(gpu::NativeStream, gpu::NativeEvent, unsigned) { INJECT(); return kOk; }
// Not injected: the backend falls back to the priority it asked for, by design.
Result f_stream_get_priority(gpu::NativeStream s, int *p) {
    *p = fs(s)->priority;
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
            if (options[i] == 5) snprintf(static_cast<char *>(values[i]), 64, "line 1: syntax error");
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
Result f_launch(gpu::NativeFunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                unsigned, gpu::NativeStream s, void **params, void **) {
    INJECT();
    auto *p = reinterpret_cast<const Param2 *>(f);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    FakeLaunch l;
    l.kernel = p->name;
    l.code_loaded = g_fake.loaded_functions.count(p->name) != 0;
    for (size_t i = 0; i < p->sizes.size(); ++i) l.params.push_back(params[i]);
    g_fake.launches.push_back(l);
    fs(s)->pending += g_fake.work_per_launch;
    return kOk;
}
// Like the real driver, host functions run on a driver-owned thread.
Result f_launch_host_func(gpu::NativeStream, gpu::HostFn fn, void *user) {
    INJECT();
    std::thread(fn, user).join();
    return kOk;
}
Result f_mem_alloc_async(gpu::DevicePtr *p, size_t bytes, gpu::NativeStream) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    *p = g_fake.next_address;
    g_fake.next_address += (bytes + 255) & ~size_t{255};
    g_fake.device_blocks[*p] = bytes;
    return kOk;
}
Result f_mem_free_async(gpu::DevicePtr p, gpu::NativeStream) {
    INJECT();
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    return g_fake.device_blocks.erase(p) ? kOk : kInvalidValue;
}
Result f_mem_free(gpu::DevicePtr p) {
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    return g_fake.device_blocks.erase(p) ? kOk : kInvalidValue;
}
Result f_memcpy_async(gpu::DevicePtr, gpu::DevicePtr, size_t, gpu::NativeStream) { INJECT(); return kOk; }
Result f_memset_async(gpu::DevicePtr, unsigned char, size_t, gpu::NativeStream) { INJECT(); return kOk; }
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
    {kOutOfMemory, QD_ERROR_OUT_OF_MEMORY, false},
    {kInvalidPtx, QD_ERROR_INVALID_IMAGE, false},
    {kNotFound, QD_ERROR_NOT_FOUND, false},
    {kIllegalAddress, QD_ERROR_DEVICE_LOST, true},
    {kUnknown, QD_ERROR_INTERNAL, false},
};

uint64_t fake_fat_size(const void *image, uint64_t available) {
    if (available < 16 || memcmp(image, "FAT!", 4) != 0) return 0;
    uint64_t size = 0;
    memcpy(&size, static_cast<const char *>(image) + 8, 8);
    return size;
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
    t.launch_host_func = f_launch_host_func;
    t.mem_alloc_async = f_mem_alloc_async;
    t.mem_free_async = f_mem_free_async;
    t.mem_free = f_mem_free;
    t.memcpy_async = f_memcpy_async;
    t.memset_d8_async = f_memset_async;
    t.host_alloc = f_host_alloc;
    t.host_free = f_host_free;
    return t;
}

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

using qd::backend::Context;
using qd::backend::Driver;
using qd::backend::Event;
using qd::backend::Kernel;
using qd::backend::LaunchDims;
using qd::backend::Module;
using qd::backend::Stream;

const LaunchDims kOneThread = {{1, 1, 1}, {1, 1, 1}, 0};

class GpuBackend : public ::testing::Test {
  protected:
    void SetUp() override {
        g_fake.reset();
        t_current = nullptr;
        t_stack.clear();
        ASSERT_EQ(gpu::make_gpu_driver(fake_table(), qd::backend::DlLibrary(), &driver_), QD_SUCCESS)
            << qd::last_error_message();
        qd::backend::ContextParams params;
        ASSERT_EQ(driver_->create_context(params, &ctx_), QD_SUCCESS) << qd::last_error_message();
    }
    void TearDown() override {
        if (ctx_) {
            ctx_->synchronize();
            ctx_->shutdown();
            ctx_.reset();
        }
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_EQ(g_fake.retains, 0) << "the primary context was not released";
        EXPECT_TRUE(g_fake.streams.empty()) << g_fake.streams.size() << " native streams leaked";
        EXPECT_TRUE(g_fake.events.empty()) << g_fake.events.size() << " native events leaked";
        EXPECT_TRUE(g_fake.modules.empty()) << g_fake.modules.size() << " modules leaked";
    }

    std::shared_ptr<Stream> stream(uint32_t flags = QD_STREAM_NON_BLOCKING, int priority = 0) {
        std::shared_ptr<Stream> s;
        EXPECT_EQ(ctx_->create_stream(flags, priority, &s), QD_SUCCESS) << qd::last_error_message();
        return s;
    }
    std::shared_ptr<Kernel> kernel(const char *name) {
        std::shared_ptr<Module> m;
        const char ptx[] = "// fake ptx";
        EXPECT_EQ(ctx_->load_module(ptx, sizeof ptx, &m), QD_SUCCESS) << qd::last_error_message();
        std::shared_ptr<Kernel> k;
        EXPECT_EQ(m->get_kernel(name, &k), QD_SUCCESS) << qd::last_error_message();
        return k;  // holds the module
    }

    std::unique_ptr<Driver> driver_;
    std::unique_ptr<Context> ctx_;
};

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

TEST(GpuDriverTable, MissingRequiredEntry_BackendUnavailableNamingIt) {
    gpu::DriverTable t = fake_table();
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::count);
    t.launch_kernel = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::launch_kernel)] = "cuLaunchKernel";
    std::unique_ptr<Driver> d;
    EXPECT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_ERROR_BACKEND_UNAVAILABLE);
    EXPECT_NE(std::string(qd::last_error_message()).find("cuLaunchKernel"), std::string::npos);
    // Optional entries may be missing.
    t = fake_table();
    t.func_get_param_info = nullptr;
    t.stream_get_ctx = nullptr;
    t.func_load = nullptr;
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::count);
}

TEST(GpuDriverTable, SetEntryFillsTheNamedMember) {
    gpu::DriverTable t;
    gpu::set_entry(t, gpu::Fn::stream_query, reinterpret_cast<void *>(&f_stream_query));
    EXPECT_EQ(t.stream_query, &f_stream_query);
    EXPECT_TRUE(gpu::has_entry(t, gpu::Fn::stream_query));
    EXPECT_FALSE(gpu::has_entry(t, gpu::Fn::stream_create));
    EXPECT_STREQ(gpu::entry_name(gpu::Fn::memset_d8_async), "memset_d8_async");
}

TEST_F(GpuBackend, DeviceInfo_FromTheTable) {
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_EQ(driver_->device_info(1, &info), QD_SUCCESS);
    EXPECT_STREQ(info.name, "Fake GPU");
    EXPECT_EQ(info.compute_major, 9u);
    EXPECT_EQ(info.multiprocessors, 132u);
    EXPECT_EQ(info.driver_version, 13000u);
    EXPECT_EQ(driver_->device_info(2, &info), QD_ERROR_INVALID_ARGUMENT);
}

TEST_F(GpuBackend, Streams_AlwaysNonBlockingWithClampedPriorities) {
    auto nb = stream(QD_STREAM_NON_BLOCKING, 0);
    auto plain = stream(0, 0);  // no flag: still non-blocking (never tied to the legacy stream)
    auto urgent = stream(QD_STREAM_NON_BLOCKING, -9);
    auto lazy = stream(QD_STREAM_NON_BLOCKING, 3);
    EXPECT_EQ(fs(reinterpret_cast<gpu::NativeStream>(nb->native_handle()))->flags, 1u);
    EXPECT_EQ(fs(reinterpret_cast<gpu::NativeStream>(plain->native_handle()))->flags, 1u);
    EXPECT_EQ(urgent->priority(), -5);
    EXPECT_EQ(lazy->priority(), 0);
    int32_t least = 1, greatest = 1;
    ctx_->priority_range(&least, &greatest);
    EXPECT_EQ(least, 0);
    EXPECT_EQ(greatest, -5);
}

TEST_F(GpuBackend, ImportedStream_IsForgottenNeverDestroyed) {
    const qd::backend::gpu::NativeCounters *c = gpu::native_counters(driver_.get());
    ASSERT_NE(c, nullptr);
    gpu::NativeStream raw = nullptr;
    t_current = g_fake.primary;
    ASSERT_EQ(f_stream_create(&raw, 1, 0), kOk);
    const int destroys = g_fake.stream_destroys;
    const uint64_t destroyed = c->streams_destroyed;
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(ctx_->import_stream(reinterpret_cast<uintptr_t>(raw), &s), QD_SUCCESS);
        EXPECT_EQ(s->native_handle(), reinterpret_cast<uintptr_t>(raw));
        auto k = kernel("k0");
        EXPECT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS);
    }
    EXPECT_EQ(g_fake.stream_destroys, destroys) << "qd destroyed a borrowed stream";
    EXPECT_EQ(c->streams_destroyed, destroyed);
    EXPECT_GE(c->streams_forgotten, 1u);
    {
        auto owned = stream();
    }
    EXPECT_EQ(g_fake.stream_destroys, destroys + 1) << "an owned stream must be destroyed";
    EXPECT_EQ(f_stream_destroy(raw), kOk);  // the owner's job
}

// The bug this catches: a borrowed stream whose qd handle was destroyed stayed in the
// context's synchronize list while something still referenced it, and context destroy called
// cuStreamSynchronize on a native stream its owner (PyTorch) had already destroyed: SIGSEGV.
TEST_F(GpuBackend, ForgottenImportedStream_IsNeverTouchedAfterItsOwnerDestroysIt) {
    gpu::NativeStream raw = nullptr;
    t_current = g_fake.primary;
    ASSERT_EQ(f_stream_create(&raw, 1, 0), kOk);
    std::shared_ptr<Stream> s;
    ASSERT_EQ(ctx_->import_stream(reinterpret_cast<uintptr_t>(raw), &s), QD_SUCCESS);
    s->forget();                             // the core does this when the handle is destroyed
    ASSERT_EQ(f_stream_destroy(raw), kOk);   // the owner destroys it at once
    const int dead_before = g_fake.dead_stream_calls;
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << qd::last_error_message();
    s.reset();                               // the last reference goes later
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(g_fake.dead_stream_calls, dead_before) << "qd touched a forgotten native stream";
}

TEST_F(GpuBackend, Import_PseudoStreamsAndForeignContexts_InvalidArgument) {
    std::shared_ptr<Stream> s;
    EXPECT_EQ(ctx_->import_stream(1, &s), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(ctx_->import_stream(2, &s), QD_ERROR_INVALID_ARGUMENT);
    gpu::NativeStream foreign = nullptr;
    t_current = g_fake.other;
    ASSERT_EQ(f_stream_create(&foreign, 1, 0), kOk);
    EXPECT_EQ(ctx_->import_stream(reinterpret_cast<uintptr_t>(foreign), &s),
              QD_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(qd::last_error_message()).find("another"), std::string::npos);
    f_stream_destroy(foreign);
}

TEST_F(GpuBackend, Launch_ParamsPointAtTheCallersData_NoCopy) {
    auto s = stream();
    auto k = kernel("k2");
    uint64_t a = 1;
    uint32_t b = 2;
    qd_arg args[2] = {{&a, 8}, {&b, 4}};
    ASSERT_EQ(s->launch(*k, kOneThread, args, 2), QD_SUCCESS) << qd::last_error_message();
    ASSERT_EQ(g_fake.launches.size(), 1u);
    EXPECT_EQ(g_fake.launches[0].params[0], &a);
    EXPECT_EQ(g_fake.launches[0].params[1], &b);
}

// Under lazy module loading a kernel's first launch would load its code, and that load may wait
// for the whole context: the launch would block, or deadlock behind a kernel that waits on the
// host. get_kernel loads the code, so no launch ever does.
TEST_F(GpuBackend, KernelGet_LoadsTheCode_SoNoLaunchHasTo) {
    auto s = stream();
    auto k = kernel("k0");
    EXPECT_EQ(g_fake.loaded_functions.count("k0"), 1u) << "get_kernel left the code unloaded";
    ASSERT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS) << qd::last_error_message();
    ASSERT_EQ(g_fake.launches.size(), 1u);
    EXPECT_TRUE(g_fake.launches[0].code_loaded);
}

TEST_F(GpuBackend, KernelGet_CodeLoadFails_ErrorNamesTheDriverCall_NoKernel) {
    std::shared_ptr<Module> m;
    const char ptx[] = "// fake ptx";
    ASSERT_EQ(ctx_->load_module(ptx, sizeof ptx, &m), QD_SUCCESS) << qd::last_error_message();
    // get_kernel makes two counted calls: find the function, then load it. Fail the load.
    g_fake.fail_at = g_fake.calls + 2;
    g_fake.fail_code = kOutOfMemory;
    std::shared_ptr<Kernel> k;
    EXPECT_EQ(m->get_kernel("k0", &k), QD_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(k, nullptr);
    EXPECT_NE(std::string(qd::last_error_message()).find("func_load"), std::string::npos)
        << qd::last_error_message();
    g_fake.fail_at = g_fake.calls + 2;
    g_fake.fail_code = 12345;  // no rule: the call's fallback
    EXPECT_EQ(m->get_kernel("k0", &k), QD_ERROR_INVALID_IMAGE);
    EXPECT_FALSE(ctx_->lost_state().lost());
}

TEST_F(GpuBackend, Launch_ArgumentsNotMatchingTheParameters_RefusedBeforeTheDriver) {
    auto s = stream();
    auto k = kernel("k2");
    uint64_t a = 1;
    uint32_t b = 2;
    qd_arg one[1] = {{&a, 8}};
    qd_arg wrong_size[2] = {{&a, 8}, {&a, 8}};
    EXPECT_EQ(s->launch(*k, kOneThread, one, 1), QD_ERROR_LAUNCH_FAILED);
    EXPECT_NE(std::string(qd::last_error_message()).find("k2"), std::string::npos);
    EXPECT_EQ(s->launch(*k, kOneThread, wrong_size, 2), QD_ERROR_LAUNCH_FAILED);
    EXPECT_TRUE(g_fake.launches.empty());
    (void)b;
}

TEST_F(GpuBackend, StickyFault_MarksTheContextLost_NamingTheLastKernel) {
    auto s = stream();
    auto quiet = stream();
    auto k = kernel("k1");
    uint64_t a = 0;
    qd_arg args[1] = {{&a, 8}};
    ASSERT_EQ(s->launch(*k, kOneThread, args, 1), QD_SUCCESS);
    g_fake.sticky = kIllegalAddress;
    EXPECT_EQ(s->synchronize(), QD_ERROR_DEVICE_LOST);
    EXPECT_TRUE(ctx_->lost_state().lost());
    const std::string m = ctx_->lost_state().message();
    EXPECT_NE(m.find("'k1'"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << m;
    // Seen again elsewhere: still lost, the first message stays.
    EXPECT_EQ(quiet->query(), QD_ERROR_DEVICE_LOST);
    EXPECT_EQ(ctx_->lost_state().message(), m);
    g_fake.sticky = kOk;  // let TearDown release everything
}

TEST_F(GpuBackend, NonStickyErrors_MapByRuleOrFallback_ContextNotLost) {
    auto s = stream();
    uint64_t addr = 0;
    g_fake.fail_at = g_fake.calls + 1;
    g_fake.fail_code = kOutOfMemory;
    EXPECT_EQ(s->mem_alloc(4096, &addr), QD_ERROR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(qd::last_error_message()).find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos);
    auto k = kernel("k0");
    g_fake.fail_at = g_fake.calls + 1;
    g_fake.fail_code = 12345;  // no rule: the call's fallback, and a readable number
    EXPECT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_ERROR_LAUNCH_FAILED);
    EXPECT_NE(std::string(qd::last_error_message()).find("12345"), std::string::npos)
        << qd::last_error_message();
    EXPECT_EQ(s->mem_alloc(uint64_t{1} << 60, &addr), QD_ERROR_OVERFLOW);
    EXPECT_FALSE(ctx_->lost_state().lost());
}

// A driver that runs stream calls in the stream's own context: the enqueue path makes no
// current-context call at all, and leaves another library's context current.
TEST(GpuBackendStreamContext, StreamCallsUseTheStreamsContext_NoCurrentContextCalls) {
    g_fake.reset();
    t_current = g_fake.other;
    gpu::DriverTable t = fake_table();
    t.stream_calls_use_stream_context = true;
    std::unique_ptr<Driver> driver;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver), QD_SUCCESS) << qd::last_error_message();
    std::unique_ptr<Context> ctx;
    ASSERT_EQ(driver->create_context(qd::backend::ContextParams(), &ctx), QD_SUCCESS);
    std::shared_ptr<Stream> s;
    ASSERT_EQ(ctx->create_stream(QD_STREAM_NON_BLOCKING, 0, &s), QD_SUCCESS);
    std::shared_ptr<Module> m;
    const char ptx[] = "// fake ptx";
    ASSERT_EQ(ctx->load_module(ptx, sizeof ptx, &m), QD_SUCCESS);
    std::shared_ptr<Kernel> k;
    ASSERT_EQ(m->get_kernel("k0", &k), QD_SUCCESS);
    std::shared_ptr<Event> e;
    ASSERT_EQ(ctx->create_event(0, &e), QD_SUCCESS);
    uint64_t addr = 0;
    const long before = g_ctx_queries.load();
    EXPECT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS);
    EXPECT_EQ(s->record(*e), QD_SUCCESS);
    EXPECT_EQ(s->wait(*e), QD_SUCCESS);
    EXPECT_EQ(s->mem_alloc(64, &addr), QD_SUCCESS);
    EXPECT_EQ(s->memset(addr, 0, 64), QD_SUCCESS);
    EXPECT_EQ(s->mem_free(addr), QD_SUCCESS);
    EXPECT_EQ(s->query(), QD_SUCCESS);
    EXPECT_EQ(g_ctx_queries.load(), before) << "an enqueue checked the current context";
    EXPECT_EQ(t_current, g_fake.other);
    t_current = nullptr;
    e.reset();
    k.reset();
    m.reset();
    s.reset();
    ctx->synchronize();
    ctx->shutdown();
    ctx.reset();
}

// The current-device strategy (CurrentModel::current_device, HIP's model): no ctx_* entry is
// needed; a call that names no stream makes our device current for its scope and gives the
// thread back the device another library had made current.
thread_local gpu::NativeDevice t_device = 0;
thread_local gpu::NativeDevice t_device_at_event_create = -1;
std::atomic<long> g_device_sets{0};

TEST(GpuCurrentDevice, MissingEntriesOfTheChosenStrategy_AreNamed) {
    gpu::DriverTable t = fake_table();
    t.ctx_pop_current = nullptr;
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::ctx_pop_current);
    t.current_model = gpu::CurrentModel::current_device;
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::device_get_current);
    t.device_get_current = [](gpu::NativeDevice *d) { *d = t_device; return kOk; };
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::device_set_current);
    t.device_set_current = [](gpu::NativeDevice d) { t_device = d; return kOk; };
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::count) << "the ctx_* entries are optional here";
}

TEST(GpuCurrentDevice, CallsRunOnOurDevice_AndTheCallersDeviceIsRestored) {
    g_fake.reset();
    gpu::DriverTable t = fake_table();
    t.current_model = gpu::CurrentModel::current_device;
    t.ctx_get_current = nullptr;
    t.ctx_set_current = nullptr;
    t.ctx_push_current = nullptr;
    t.ctx_pop_current = nullptr;
    t.device_get_current = [](gpu::NativeDevice *d) { *d = t_device; return kOk; };
    t.device_set_current = [](gpu::NativeDevice d) {
        g_device_sets.fetch_add(1);
        t_device = d;
        return kOk;
    };
    t.event_create = [](gpu::NativeEvent *e, unsigned flags) {
        t_device_at_event_create = t_device;
        return f_event_create(e, flags);
    };
    std::unique_ptr<Driver> driver;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver), QD_SUCCESS)
        << qd::last_error_message();
    std::unique_ptr<Context> ctx;
    ASSERT_EQ(driver->create_context(qd::backend::ContextParams(), &ctx), QD_SUCCESS)
        << qd::last_error_message();

    t_device = 3;  // another library's device is current on this thread
    std::shared_ptr<Event> e;
    ASSERT_EQ(ctx->create_event(false, &e), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(t_device_at_event_create, 0) << "the event was not created on our device";
    EXPECT_EQ(t_device, 3) << "the caller's current device was not restored";

    t_device = 0;  // ours already current: nothing is switched
    const long sets = g_device_sets.load();
    ASSERT_EQ(e->query(), QD_SUCCESS);
    EXPECT_EQ(g_device_sets.load(), sets);

    e.reset();
    ctx->synchronize();
    ctx->shutdown();
    ctx.reset();
}

// One callback-owner thread-local serves every backend (backends/common/callback_scope.h): a
// CPU host kernel (a worker thread, not a driver thread) may call the GPU driver; a GPU host
// callback (on the driver's own thread) may not.
TEST_F(GpuBackend, CallbackScope_CpuWorkerMayCallTheDriver_DriverCallbackThreadMayNot) {
    auto s = stream();
    int cpu_scheduler = 0;
    {
        qd::backend::CallbackScope scope(&cpu_scheduler, /*driver_thread=*/false);
        EXPECT_EQ(s->query(), QD_SUCCESS) << qd::last_error_message();
        EXPECT_FALSE(ctx_->in_callback());
    }
    {
        qd::backend::CallbackScope scope(&cpu_scheduler, /*driver_thread=*/true);
        EXPECT_EQ(s->query(), QD_ERROR_INVALID_OPERATION);
    }
    EXPECT_EQ(s->query(), QD_SUCCESS) << "the scope was not restored";
}

TEST_F(GpuBackend, CurrentContext_OtherLibrarysIsRestored_EmptyThreadGetsOurs) {
    auto s = stream();
    t_current = g_fake.other;
    EXPECT_EQ(s->query(), QD_SUCCESS);
    EXPECT_EQ(t_current, g_fake.other) << "another library's current context was changed";
    EXPECT_TRUE(t_stack.empty()) << "push without pop";
    std::thread([&] {
        EXPECT_EQ(s->query(), QD_SUCCESS);
        EXPECT_EQ(t_current, g_fake.primary);
    }).join();
}

TEST_F(GpuBackend, DestroyWithPendingWork_LeavesATail_ContextSyncWaitsForIt) {
    g_fake.work_per_launch = 1;
    auto k = kernel("k0");
    {
        auto s = stream();
        ASSERT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS);
    }  // destroyed with work in flight: returns at once
    size_t events_now = 0;
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        events_now = g_fake.events.size();
    }
    EXPECT_EQ(events_now, 1u) << "no tail event was left for the pending work";
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    EXPECT_TRUE(g_fake.events.empty()) << "the tail was not drained";
}

TEST_F(GpuBackend, HostFn_InCallbackTrue_DriverCallsRefused_ReleasesDeferred) {
    auto s = stream();
    struct Probe {
        Context *ctx;
        std::shared_ptr<Stream> victim;
        Stream *s;
        bool in_callback = false;
        qd_status launch_status = 0, query_status = 0;
    } probe{ctx_.get(), stream(), s.get()};
    const int destroys = g_fake.stream_destroys;
    ASSERT_EQ(s->host_fn(
                  [](void *u) {
                      auto *p = static_cast<Probe *>(u);
                      p->in_callback = p->ctx->in_callback();
                      p->query_status = p->s->query();
                      p->victim.reset();  // the native destroy must wait for an ordinary thread
                  },
                  &probe),
              QD_SUCCESS);
    EXPECT_TRUE(probe.in_callback);
    EXPECT_FALSE(ctx_->in_callback());
    EXPECT_EQ(probe.query_status, QD_ERROR_INVALID_OPERATION);
    EXPECT_EQ(g_fake.stream_destroys, destroys) << "a driver call was made from the callback";
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS);  // runs the deferred release
    EXPECT_EQ(g_fake.stream_destroys, destroys + 1);
}

TEST_F(GpuBackend, Modules_TextIsTerminated_BadImagesSayWhy) {
    std::shared_ptr<Module> m;
    const char text[] = "// ptx without NUL";
    ASSERT_EQ(ctx_->load_module(text, sizeof text - 1, &m), QD_SUCCESS);
    EXPECT_EQ(g_fake.last_image, "// ptx without NUL");
    const char bad[] = "bad ptx";
    EXPECT_EQ(ctx_->load_module(bad, sizeof bad, &m), QD_ERROR_INVALID_IMAGE);
    EXPECT_NE(std::string(qd::last_error_message()).find("syntax error"), std::string::npos)
        << qd::last_error_message();

    // An ELF whose section table lies past the end of the buffer: refused before the driver.
    unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    uint64_t shoff = 4096;
    memcpy(elf + 40, &shoff, 8);
    uint16_t shentsize = 64, shnum = 3;
    memcpy(elf + 58, &shentsize, 2);
    memcpy(elf + 60, &shnum, 2);
    g_fake.last_image.clear();
    EXPECT_EQ(ctx_->load_module(elf, sizeof elf, &m), QD_ERROR_INVALID_IMAGE);
    EXPECT_NE(std::string(qd::last_error_message()).find("truncated"), std::string::npos);
    EXPECT_TRUE(g_fake.last_image.empty()) << "the driver saw a truncated image";

    unsigned char fat[32] = {'F', 'A', 'T', '!'};
    uint64_t fat_size = 64;
    memcpy(fat + 8, &fat_size, 8);
    EXPECT_EQ(ctx_->load_module(fat, sizeof fat, &m), QD_ERROR_INVALID_IMAGE);

    std::shared_ptr<Kernel> k;
    ASSERT_EQ(ctx_->load_module(text, sizeof text, &m), QD_SUCCESS);
    EXPECT_EQ(m->get_kernel("nope", &k), QD_ERROR_NOT_FOUND);
    EXPECT_NE(std::string(qd::last_error_message()).find("nope"), std::string::npos);
}

TEST_F(GpuBackend, Shutdown_LaterEnqueuesFailWithInvalidHandle) {
    auto s = stream();
    ctx_->shutdown();
    std::shared_ptr<Stream> s2;
    EXPECT_EQ(ctx_->create_stream(0, 0, &s2), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->query(), QD_ERROR_INVALID_HANDLE);
}

TEST_F(GpuBackend, Events_TimingFlagAndElapsed) {
    auto s = stream();
    std::shared_ptr<Event> a, b;
    ASSERT_EQ(ctx_->create_event(true, &a), QD_SUCCESS);
    ASSERT_EQ(ctx_->create_event(false, &b), QD_SUCCESS);
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        std::set<unsigned> flags;
        for (auto *e : g_fake.events) flags.insert(e->flags);
        EXPECT_EQ(flags, (std::set<unsigned>{0u, 2u}));
    }
    EXPECT_FALSE(a->recorded());
    ASSERT_EQ(s->record(*a), QD_SUCCESS);
    ASSERT_EQ(s->record(*b), QD_SUCCESS);
    EXPECT_TRUE(a->recorded());
    EXPECT_EQ(s->wait(*a), QD_SUCCESS);
    float ms = 0;
    EXPECT_EQ(ctx_->elapsed_ms(*a, *a, &ms), QD_SUCCESS);
    EXPECT_FLOAT_EQ(ms, 1.5f);
}

// docs/reliability.md, category 13: fail the Nth driver call of a whole scenario, for every N.
// Whatever fails, nothing crashes, the failing step reports an error, and every native object is
// released.
TEST(GpuFaultInjection, EveryCallOfAScenario_FailsCleanly) {
    // chain_end: the driver calls made by the checked chain (before cleanup starts).
    auto scenario = [](bool *all_ok, long *chain_end) {
        *all_ok = true;
        *chain_end = 0;
        auto check = [&](qd_status st) {
            if (st != QD_SUCCESS) *all_ok = false;
            return st == QD_SUCCESS;
        };
        std::unique_ptr<Driver> driver;
        if (!check(gpu::make_gpu_driver(fake_table(), qd::backend::DlLibrary(), &driver))) return;
        std::unique_ptr<Context> ctx;
        if (!check(driver->create_context({}, &ctx))) return;
        {
            std::shared_ptr<Stream> s, s2;
            std::shared_ptr<Event> e;
            std::shared_ptr<Module> m;
            std::shared_ptr<Kernel> k;
            uint64_t addr = 0;
            void *host = nullptr;
            const char ptx[] = "// ptx";
            uint64_t a = 0;
            uint32_t b = 0;
            qd_arg args[2] = {{&a, 8}, {&b, 4}};
            if (check(ctx->create_stream(QD_STREAM_NON_BLOCKING, 0, &s)) &&
                check(ctx->create_stream(0, -1, &s2)) && check(ctx->create_event(true, &e)) &&
                check(ctx->load_module(ptx, sizeof ptx, &m)) && check(m->get_kernel("k2", &k)) &&
                check(s->launch(*k, kOneThread, args, 2)) && check(s->record(*e)) &&
                check(s2->wait(*e)) && check(s->mem_alloc(4096, &addr)) &&
                check(s->memcpy(addr, addr, 64)) && check(s->memset(addr, 1, 64)) &&
                check(s->mem_free(addr)) && check(ctx->host_alloc(64, &host)) &&
                check(s->host_fn([](void *) {}, nullptr)) && check(s->synchronize()) &&
                check(e->query()) && check(ctx->synchronize())) {
            }
            *chain_end = g_fake.calls;
            if (host) ctx->host_free(host);
        }
        ctx->synchronize();
        ctx->shutdown();
    };
    g_fake.reset();
    bool ok = false;
    long chain_end = 0, unused = 0;
    scenario(&ok, &chain_end);
    ASSERT_TRUE(ok) << "the scenario fails without injection: " << qd::last_error_message();
    const long total = g_fake.calls;
    ASSERT_GT(chain_end, 10);
    for (long n = 1; n <= total; ++n) {
        for (Result code : {kUnknown, kOutOfMemory, kIllegalAddress}) {
            g_fake.reset();
            g_fake.fail_at = n;
            g_fake.fail_code = code;
            scenario(&ok, &unused);
            std::lock_guard<std::mutex> lock(g_fake.mutex);
            if (n <= chain_end) {
                EXPECT_FALSE(ok) << "call " << n << " failed silently";
            }
            EXPECT_EQ(g_fake.retains, 0) << "call " << n << ", code " << code;
            EXPECT_TRUE(g_fake.streams.empty()) << "call " << n << ", code " << code;
            EXPECT_TRUE(g_fake.events.empty()) << "call " << n << ", code " << code;
            EXPECT_TRUE(g_fake.modules.empty()) << "call " << n << ", code " << code;
            EXPECT_TRUE(g_fake.host_blocks.empty()) << "call " << n << ", code " << code;
        }
    }
    g_fake.reset();
}

// In a fork child, inherited objects refuse with QD_ERROR_FORKED and their destruction makes no
// driver call (the child cannot use the parent's driver state).
TEST_F(GpuBackend, ForkChild_RefusesAndForgetsWithoutDriverCalls) {
    auto s = stream();
    std::shared_ptr<Event> e;
    ASSERT_EQ(ctx_->create_event(false, &e), QD_SUCCESS);
    fflush(stdout);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int bad = 0;
        bad += s->query() != QD_ERROR_FORKED;
        bad += e->query() != QD_ERROR_FORKED;
        std::shared_ptr<Stream> s2;
        bad += ctx_->create_stream(0, 0, &s2) != QD_ERROR_FORKED;
        const long before = g_fake.calls;
        const int destroys = g_fake.stream_destroys;
        s.reset();
        e.reset();
        ctx_->shutdown();
        ctx_.reset();
        bad += g_fake.calls != before;
        bad += g_fake.stream_destroys != destroys;
        _exit(bad);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
