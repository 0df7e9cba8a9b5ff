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

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/common/callback_scope.h"
#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_objects.h"
#include "common/error.h"
#include "fake_gpu_driver.h"

namespace {

// The fake driver (tests/support/fake_gpu_driver.h): g_fake, fake_table(), the thread's current
// context current_context(), fault injection.
using namespace qdt::fake_gpu;

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
        current_context() = nullptr;
        context_stack().clear();
        ASSERT_EQ(gpu::make_gpu_driver(fake_table(), qd::backend::DlLibrary(), &driver_),
                  QD_SUCCESS)
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
        EXPECT_TRUE(g_fake.graphs.empty()) << g_fake.graphs.size() << " native graphs leaked";
        EXPECT_TRUE(g_fake.execs.empty()) << g_fake.execs.size() << " executable graphs leaked";
        EXPECT_TRUE(g_fake.captures.empty()) << g_fake.captures.size() << " captures left open";
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
    current_context() = g_fake.primary;
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
    { auto owned = stream(); }
    EXPECT_EQ(g_fake.stream_destroys, destroys + 1) << "an owned stream must be destroyed";
    EXPECT_EQ(f_stream_destroy(raw), kOk);  // the owner's job
}

// The bug this catches: a borrowed stream whose qd handle was destroyed stayed in the
// context's synchronize list while something still referenced it, and context destroy called
// cuStreamSynchronize on a native stream its owner (PyTorch) had already destroyed: SIGSEGV.
TEST_F(GpuBackend, ForgottenImportedStream_IsNeverTouchedAfterItsOwnerDestroysIt) {
    gpu::NativeStream raw = nullptr;
    current_context() = g_fake.primary;
    ASSERT_EQ(f_stream_create(&raw, 1, 0), kOk);
    std::shared_ptr<Stream> s;
    ASSERT_EQ(ctx_->import_stream(reinterpret_cast<uintptr_t>(raw), &s), QD_SUCCESS);
    s->forget();                            // the core does this when the handle is destroyed
    ASSERT_EQ(f_stream_destroy(raw), kOk);  // the owner destroys it at once
    const int dead_before = g_fake.dead_stream_calls;
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << qd::last_error_message();
    s.reset();  // the last reference goes later
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(g_fake.dead_stream_calls, dead_before) << "qd touched a forgotten native stream";
}

TEST_F(GpuBackend, Import_PseudoStreamsAndForeignContexts_InvalidArgument) {
    std::shared_ptr<Stream> s;
    EXPECT_EQ(ctx_->import_stream(1, &s), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(ctx_->import_stream(2, &s), QD_ERROR_INVALID_ARGUMENT);
    gpu::NativeStream foreign = nullptr;
    current_context() = g_fake.other;
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
    EXPECT_NE(std::string(qd::last_error_message()).find("CUDA_ERROR_OUT_OF_MEMORY"),
              std::string::npos);
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
    current_context() = g_fake.other;
    gpu::DriverTable t = fake_table();
    t.stream_calls_use_stream_context = true;
    std::unique_ptr<Driver> driver;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver), QD_SUCCESS)
        << qd::last_error_message();
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
    EXPECT_EQ(current_context(), g_fake.other);
    current_context() = nullptr;
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
    t.device_get_current = [](gpu::NativeDevice *d) {
        *d = t_device;
        return kOk;
    };
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::device_set_current);
    t.device_set_current = [](gpu::NativeDevice d) {
        t_device = d;
        return kOk;
    };
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
    t.device_get_current = [](gpu::NativeDevice *d) {
        *d = t_device;
        return kOk;
    };
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
    current_context() = g_fake.other;
    EXPECT_EQ(s->query(), QD_SUCCESS);
    EXPECT_EQ(current_context(), g_fake.other) << "another library's current context was changed";
    EXPECT_TRUE(context_stack().empty()) << "push without pop";
    std::thread([&] {
        EXPECT_EQ(s->query(), QD_SUCCESS);
        EXPECT_EQ(current_context(), g_fake.primary);
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

// qd_launch_host_status_fn in the GPU layer: the driver's call passes QD_SUCCESS and the
// handle, inside the driver-callback scope, and leaves nothing for the shutdown.
TEST_F(GpuBackend, HostStatusFn_DriverCallsIt_WithSuccessAndTheHandle_InCallbackScope) {
    auto s = stream();
    struct Seen {
        Context *ctx;
        int calls = 0;
        qd_status status = QD_NOT_READY;
        uint64_t handle = 0;
        bool in_callback = false;
    } seen{ctx_.get()};
    ASSERT_EQ(s->host_status_fn(
                  [](qd_stream h, qd_status st, void *u) {
                      auto *p = static_cast<Seen *>(u);
                      ++p->calls;
                      p->status = st;
                      p->handle = h;
                      p->in_callback = p->ctx->in_callback();
                  },
                  0x1234, &seen),
              QD_SUCCESS)
        << qd::last_error_message();
    EXPECT_EQ(seen.calls, 1);
    EXPECT_EQ(seen.status, QD_SUCCESS);
    EXPECT_EQ(seen.handle, 0x1234u);
    EXPECT_TRUE(seen.in_callback);
    s.reset();
    ctx_->synchronize();
    ctx_->shutdown();
    EXPECT_EQ(seen.calls, 1) << "the shutdown called it again";
    ctx_.reset();
}

void count_status(qd_stream, qd_status status, void *u) {
    auto *seen = static_cast<std::vector<qd_status> *>(u);
    seen->push_back(status);
}

// The driver drops host functions queued behind a fault (cuLaunchHostFunc): the shutdown of the
// context calls each one it never called, once, with QD_ERROR_DEVICE_LOST.
TEST_F(GpuBackend, HostStatusFn_DroppedByTheDriverAfterAFault_ShutdownCallsItWithDeviceLost) {
    auto s = stream();
    auto k = kernel("k1");
    uint64_t a = 0;
    qd_arg args[1] = {{&a, 8}};
    std::vector<qd_status> seen;
    g_fake.hold_host_fns = true;  // queued, not run: "in flight"
    ASSERT_EQ(s->launch(*k, kOneThread, args, 1), QD_SUCCESS);
    ASSERT_EQ(s->host_status_fn(count_status, 1, &seen), QD_SUCCESS);
    g_fake.sticky = kIllegalAddress;
    EXPECT_EQ(s->synchronize(), QD_ERROR_DEVICE_LOST);
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        g_fake.held_host_fns.clear();  // the driver drops them
        g_fake.hold_host_fns = false;
    }
    EXPECT_TRUE(seen.empty());
    g_fake.sticky = kOk;  // let the native releases succeed
    s.reset();
    k.reset();
    ctx_->synchronize();
    ctx_->shutdown();
    ASSERT_EQ(seen.size(), 1u) << "not called exactly once by the shutdown";
    EXPECT_EQ(seen[0], QD_ERROR_DEVICE_LOST);
    ctx_.reset();
}

// A launch the driver refused is never called, not even by the shutdown.
TEST_F(GpuBackend, HostStatusFn_RefusedByTheDriver_IsNeverCalled) {
    auto s = stream();
    std::vector<qd_status> seen;
    g_fake.sticky = kIllegalAddress;
    EXPECT_NE(s->host_status_fn(count_status, 1, &seen), QD_SUCCESS);
    g_fake.sticky = kOk;
    s.reset();
    ctx_->synchronize();
    ctx_->shutdown();
    EXPECT_TRUE(seen.empty()) << "a refused call's fn was called";
    ctx_.reset();
}

// qd_stream_get_flags of a borrowed stream: the native flags read at import; without the
// driver entry, QD_ERROR_NOT_SUPPORTED naming it.
TEST_F(GpuBackend, ImportedStream_FlagsAreTheNativeOnes_WithoutTheEntryNotSupported) {
    current_context() = g_fake.primary;
    gpu::NativeStream blocking = nullptr, non_blocking = nullptr;
    ASSERT_EQ(f_stream_create(&blocking, 0, 0), kOk);
    ASSERT_EQ(f_stream_create(&non_blocking, 1, 0), kOk);
    {
        std::shared_ptr<Stream> b, nb;
        ASSERT_EQ(ctx_->import_stream(reinterpret_cast<uintptr_t>(blocking), &b), QD_SUCCESS);
        ASSERT_EQ(ctx_->import_stream(reinterpret_cast<uintptr_t>(non_blocking), &nb), QD_SUCCESS);
        uint32_t f = 7;
        ASSERT_EQ(b->native_flags(&f), QD_SUCCESS);
        EXPECT_EQ(f, 0u);
        ASSERT_EQ(nb->native_flags(&f), QD_SUCCESS);
        EXPECT_EQ(f, uint32_t(QD_STREAM_NON_BLOCKING));
    }
    gpu::DriverTable t = fake_table();
    t.stream_get_flags = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::stream_get_flags)] = "cuStreamGetFlags";
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> b;
        ASSERT_EQ(c->import_stream(reinterpret_cast<uintptr_t>(blocking), &b), QD_SUCCESS);
        uint32_t f = 7;
        EXPECT_EQ(b->native_flags(&f), QD_ERROR_NOT_SUPPORTED);
        EXPECT_EQ(f, 7u);
        const std::string msg = qd::last_error_message();
        EXPECT_NE(msg.find("cuStreamGetFlags"), std::string::npos) << msg;
        EXPECT_NE(msg.find("5.5"), std::string::npos) << msg;
    }
    c->synchronize();
    c->shutdown();
    EXPECT_EQ(f_stream_destroy(blocking), kOk);
    EXPECT_EQ(f_stream_destroy(non_blocking), kOk);
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
// ---------------------------------------------------------------------------------------------
// Native graphs (graph.cpp): capture, instantiate, launch, update; host-function payloads
// ---------------------------------------------------------------------------------------------

using qd::backend::Capture;
using qd::backend::Graph;

void count_call(void *user) { ++*static_cast<std::atomic<int> *>(user); }

TEST_F(GpuBackend, NativeCapture_RecordsInsteadOfRunning_GraphLaunchRunsIt_RelaxedMode) {
    auto s = stream();
    auto k = kernel("k0");
    std::unique_ptr<Capture> cap;
    ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(g_fake.capture_mode, 2) << "stream_begin_capture takes the table's capture_mode";
    std::atomic<int> calls{0};
    ASSERT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS);
    ASSERT_EQ(cap->host_fn(*s, count_call, &calls), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(calls.load(), 0) << "a captured host function ran at capture";
    EXPECT_TRUE(g_fake.launches.empty()) << "a captured launch ran at capture";
    std::shared_ptr<Graph> g;
    ASSERT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
    cap.reset();
    for (int i = 0; i < 3; ++i) ASSERT_EQ(g->launch(*s), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(g_fake.graph_launches, 3);
    EXPECT_EQ(g_fake.launches.size(), 3u);
    EXPECT_EQ(calls.load(), 3) << "the captured host function runs once per launch";
    g.reset();  // TearDown checks that the graph and its executable were destroyed
}

TEST_F(GpuBackend, NativeGraph_DestroyedWithLaunchesInFlight_HostFnPayloadLivesUntilTheyRan) {
    // The trampoline record of a captured host function belongs to the graph, not to its first
    // call, and a launch holds it until it ran: destroying the graph with launches in flight
    // frees nothing they still call (AddressSanitizer reports the use after free this once was).
    auto s = stream();
    std::unique_ptr<Capture> cap;
    ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
    std::atomic<int> calls{0};
    ASSERT_EQ(cap->host_fn(*s, count_call, &calls), QD_SUCCESS);
    std::shared_ptr<Graph> g;
    ASSERT_EQ(cap->end(&g), QD_SUCCESS);
    cap.reset();
    g_fake.hold_host_fns = true;  // launched host functions are now "in flight"
    ASSERT_EQ(g->launch(*s), QD_SUCCESS);
    ASSERT_EQ(g->launch(*s), QD_SUCCESS);
    g.reset();
    EXPECT_EQ(calls.load(), 0);
    g_fake.hold_host_fns = false;
    run_held_host_fns();  // each launch: the host function, then its epilogue
    EXPECT_EQ(calls.load(), 2);
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS);  // runs the releases the epilogue deferred
}

TEST_F(GpuBackend, NativeGraph_Update_TakesTheOtherGraphsValuesAndHostFns_OtherShapeRefused) {
    auto s = stream();
    auto k = kernel("k0");
    std::atomic<int> a{0}, b{0};
    auto capture = [&](std::atomic<int> *counter, int launches) {
        std::unique_ptr<Capture> cap;
        EXPECT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        for (int i = 0; i < launches; ++i)
            EXPECT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS);
        EXPECT_EQ(cap->host_fn(*s, count_call, counter), QD_SUCCESS);
        std::shared_ptr<Graph> g;
        EXPECT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
        return g;
    };
    std::shared_ptr<Graph> ga = capture(&a, 1), gb = capture(&b, 1), gc = capture(&b, 2);
    ASSERT_TRUE(ga && gb && gc);
    ASSERT_EQ(ga->update(*gb), QD_SUCCESS) << qd::last_error_message();
    gb.reset();  // ga holds what its nodes now call
    ASSERT_EQ(ga->launch(*s), QD_SUCCESS);
    EXPECT_EQ(a.load(), 0);
    EXPECT_EQ(b.load(), 1);
    EXPECT_EQ(ga->update(*gc), QD_ERROR_INVALID_OPERATION);
    EXPECT_NE(std::string(qd::last_error_message()).find("refused"), std::string::npos)
        << qd::last_error_message();
    ASSERT_EQ(ga->launch(*s), QD_SUCCESS);
    EXPECT_EQ(b.load(), 2) << "a refused update changed the graph";
}

// The argument bytes a graph launch gave its i-th kernel, as one uint64.
uint64_t launched_arg(size_t i) {
    uint64_t v = 0;
    EXPECT_LT(i, g_fake.launches.size());
    if (i < g_fake.launches.size() && g_fake.launches[i].arg_bytes.size() == 8)
        std::memcpy(&v, g_fake.launches[i].arg_bytes.data(), 8);
    return v;
}

TEST_F(GpuBackend, NativeGraph_SetKernelArgs_RebindsTheNodeOfThatLaunch_AlsoAfterAnUpdate) {
    auto s = stream();
    auto k = kernel("k1");  // one 8-byte parameter
    auto capture = [&](uint64_t base) {
        std::unique_ptr<Capture> cap;
        EXPECT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        for (uint64_t i = 0; i < 3; ++i) {
            uint64_t v = base + i;
            const qd_arg arg = {&v, 8};
            EXPECT_EQ(s->launch(*k, kOneThread, &arg, 1), QD_SUCCESS);
            cap->launched(*s);  // as the core's router does after each captured launch
        }
        std::shared_ptr<Graph> g;
        EXPECT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
        return g;
    };
    std::shared_ptr<Graph> ga = capture(1), gb = capture(4);
    ASSERT_TRUE(ga && gb);
    // Before the first launch: the rebind instantiates the graph.
    uint64_t v = 20;
    const qd_arg arg = {&v, 8};
    ASSERT_EQ(ga->set_kernel_args(1, *k, kOneThread, &arg, 1), QD_SUCCESS)
        << qd::last_error_message();
    ASSERT_EQ(ga->launch(*s), QD_SUCCESS);
    ASSERT_EQ(g_fake.launches.size(), 3u);
    EXPECT_EQ(launched_arg(0), 1u);
    EXPECT_EQ(launched_arg(1), 20u);
    EXPECT_EQ(launched_arg(2), 3u);
    // After an update the nodes of the executable still name the launches.
    ASSERT_EQ(ga->update(*gb), QD_SUCCESS);
    gb.reset();
    v = 60;
    ASSERT_EQ(ga->set_kernel_args(2, *k, kOneThread, &arg, 1), QD_SUCCESS)
        << qd::last_error_message();
    g_fake.launches.clear();
    ASSERT_EQ(ga->launch(*s), QD_SUCCESS);
    EXPECT_EQ(launched_arg(0), 4u);
    EXPECT_EQ(launched_arg(1), 5u);
    EXPECT_EQ(launched_arg(2), 60u);
    // A node the capture did not name: refused, nothing changed.
    v = 99;
    EXPECT_EQ(ga->set_kernel_args(3, *k, kOneThread, &arg, 1), QD_ERROR_NOT_SUPPORTED);
    g_fake.launches.clear();
    ASSERT_EQ(ga->launch(*s), QD_SUCCESS);
    EXPECT_EQ(launched_arg(0), 4u);
    EXPECT_EQ(launched_arg(2), 60u);
}

TEST_F(GpuBackend, NativeGraph_SetKernelArgs_WithoutTheEntries_NotSupportedNamingTheVersion) {
    gpu::DriverTable t = fake_table();
    t.graph_exec_kernel_node_set_params = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::graph_exec_kernel_node_set_params)] =
        "cuGraphExecKernelNodeSetParams_v2";
    EXPECT_TRUE(gpu::has_native_graphs(t)) << "rebinding is not needed for native graphs";
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::shared_ptr<Module> m;
        std::shared_ptr<Kernel> k;
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(c->load_module(ptx, sizeof ptx, &m), QD_SUCCESS);
        ASSERT_EQ(m->get_kernel("k1", &k), QD_SUCCESS);
        std::unique_ptr<Capture> cap;
        ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        uint64_t v = 1;
        const qd_arg arg = {&v, 8};
        ASSERT_EQ(s->launch(*k, kOneThread, &arg, 1), QD_SUCCESS);
        cap->launched(*s);
        std::shared_ptr<Graph> g;
        ASSERT_EQ(cap->end(&g), QD_SUCCESS);
        EXPECT_EQ(g->set_kernel_args(0, *k, kOneThread, &arg, 1), QD_ERROR_NOT_SUPPORTED);
        const std::string msg = qd::last_error_message();
        EXPECT_NE(msg.find("cuGraphExecKernelNodeSetParams_v2"), std::string::npos) << msg;
        EXPECT_NE(msg.find("11.3"), std::string::npos) << msg;
        ASSERT_EQ(g->launch(*s), QD_SUCCESS);
        EXPECT_EQ(g_fake.graph_launches, 1) << "the graph still launches";
    }
    c->synchronize();
    c->shutdown();
}

// One kernel launch captured natively on a context of driver t, ended as a graph; `run` gets the
// stream and the graph.
template <class Run>
void with_native_graph(const gpu::DriverTable &t, Run run) {
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::shared_ptr<Module> m;
        std::shared_ptr<Kernel> k;
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(c->load_module(ptx, sizeof ptx, &m), QD_SUCCESS);
        ASSERT_EQ(m->get_kernel("k1", &k), QD_SUCCESS);
        std::unique_ptr<Capture> cap;
        ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        uint64_t v = 1;
        const qd_arg arg = {&v, 8};
        ASSERT_EQ(s->launch(*k, kOneThread, &arg, 1), QD_SUCCESS);
        std::shared_ptr<Graph> g;
        ASSERT_EQ(cap->end(&g), QD_SUCCESS);
        run(*s, *g);
    }
    c->synchronize();
    c->shutdown();
}

TEST_F(GpuBackend, NativeGraph_Upload_InstantiatesAndUploadsOnce_TheLaunchReusesIt) {
    with_native_graph(fake_table(), [](Stream &s, Graph &g) {
        EXPECT_EQ(g_fake.execs.size(), 0u) << "instantiated before the upload";
        ASSERT_EQ(g.upload(s), QD_SUCCESS) << qd::last_error_message();
        EXPECT_EQ(g_fake.execs.size(), 1u);
        EXPECT_EQ(g_fake.graph_uploads, 1);
        ASSERT_EQ(g.upload(s), QD_SUCCESS);
        EXPECT_EQ(g_fake.execs.size(), 1u) << "a second upload instantiated again";
        ASSERT_EQ(g.launch(s), QD_SUCCESS);
        EXPECT_EQ(g_fake.execs.size(), 1u) << "the launch instantiated again";
        EXPECT_EQ(g_fake.graph_launches, 1);
        EXPECT_EQ(g_fake.launches.size(), 1u);
    });
}

TEST_F(GpuBackend, NativeGraph_Upload_WithoutTheEntry_NotSupportedNamingTheVersion_NothingMade) {
    gpu::DriverTable t = fake_table();
    t.graph_upload = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::graph_upload)] = "cuGraphUpload";
    EXPECT_TRUE(gpu::has_native_graphs(t)) << "uploading is not needed for native graphs";
    with_native_graph(t, [](Stream &s, Graph &g) {
        EXPECT_EQ(g.upload(s), QD_ERROR_NOT_SUPPORTED);
        const std::string msg = qd::last_error_message();
        EXPECT_NE(msg.find("cuGraphUpload"), std::string::npos) << msg;
        EXPECT_NE(msg.find("11.1"), std::string::npos) << msg;
        EXPECT_EQ(g_fake.execs.size(), 0u) << "a refused upload instantiated the graph";
        ASSERT_EQ(g.launch(s), QD_SUCCESS);
        EXPECT_EQ(g_fake.graph_launches, 1) << "the graph still launches";
    });
}

TEST_F(GpuBackend, NativeGraph_Upload_WithoutTheEntryWhereItIsOptional_InstantiatesOnly) {
    // HIP: a runtime without hipGraphUpload (DriverTable::upload_requires null).
    gpu::DriverTable t = fake_table();
    t.graph_upload = nullptr;
    t.upload_requires = nullptr;
    with_native_graph(t, [](Stream &s, Graph &g) {
        ASSERT_EQ(g.upload(s), QD_SUCCESS) << qd::last_error_message();
        EXPECT_EQ(g_fake.execs.size(), 1u);
        EXPECT_EQ(g_fake.graph_uploads, 0);
        ASSERT_EQ(g.launch(s), QD_SUCCESS);
        EXPECT_EQ(g_fake.execs.size(), 1u);
    });
}

TEST_F(GpuBackend, NativeCapture_StreamCallbackHostFns_RefusedWithNotSupported_CaptureGoesOn) {
    // A HIP runtime without hipLaunchHostFunc: host functions are stream callbacks, which a
    // capture cannot hold. A host function inside a capture is refused; nothing is queued.
    gpu::DriverTable t = fake_table();
    t.host_func_capturable = false;
    t.symbol[static_cast<size_t>(gpu::Fn::launch_host_func)] = "hipStreamAddCallback";
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::unique_ptr<Capture> cap;
        ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        std::atomic<int> calls{0};
        EXPECT_EQ(cap->host_fn(*s, count_call, &calls), QD_ERROR_NOT_SUPPORTED);
        EXPECT_NE(std::string(qd::last_error_message()).find("hipStreamAddCallback"),
                  std::string::npos)
            << qd::last_error_message();
        std::shared_ptr<Graph> g;
        ASSERT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
        ASSERT_EQ(g->launch(*s), QD_SUCCESS);
        EXPECT_EQ(calls.load(), 0);
        EXPECT_EQ(g_fake.graph_launches, 1);
    }
    c->synchronize();
    c->shutdown();
}

TEST_F(GpuBackend, NativeGraphs_AnEntryAbsent_BeginCaptureNotSupported) {
    gpu::DriverTable t = fake_table();
    t.graph_exec_update = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::graph_exec_update)] = "cuGraphExecUpdate_v2";
    EXPECT_FALSE(gpu::has_native_graphs(t));
    EXPECT_EQ(gpu::first_missing(t), gpu::Fn::count) << "the graph entries are optional";
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::unique_ptr<Capture> cap;
        EXPECT_EQ(s->begin_capture(&cap), QD_ERROR_NOT_SUPPORTED);
        EXPECT_FALSE(cap);
        EXPECT_TRUE(g_fake.captures.empty()) << "the driver capture began anyway";
    }
    c->synchronize();
    c->shutdown();
}

// A driver reporting a chosen version (g_reported_version), for can_allocate.
int g_reported_version = 0;
gpu::Result reported_version(int *v) {
    *v = g_reported_version;
    return 0;
}

// qd_mem_alloc_async inside a native capture needs graph memory nodes: CUDA 11.4, HIP 5.7. An
// older driver is refused before anything is queued, naming the minimum; the capture goes on.
TEST_F(GpuBackend, NativeCapture_CanAllocate_FromCuda11_4AndHip5_7_ElseNotSupportedNamingIt) {
    struct Case {
        qd_backend kind;
        int version;
        qd_status want;
        const char *minimum;
    };
    const Case cases[] = {{QD_BACKEND_CUDA, 11030, QD_ERROR_NOT_SUPPORTED, "CUDA 11.4"},
                          {QD_BACKEND_CUDA, 11040, QD_SUCCESS, ""},
                          {QD_BACKEND_HIP, 50231111, QD_ERROR_NOT_SUPPORTED, "HIP 5.7"},
                          {QD_BACKEND_HIP, 60000000, QD_SUCCESS, ""}};
    for (const Case &k : cases) {
        gpu::DriverTable t = fake_table();
        t.kind = k.kind;
        t.driver_get_version = reported_version;
        g_reported_version = k.version;
        std::unique_ptr<Driver> d;
        ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
        std::unique_ptr<Context> c;
        ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
        {
            std::shared_ptr<Stream> s;
            ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
            std::unique_ptr<Capture> cap;
            ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS) << qd::last_error_message();
            const size_t blocks = g_fake.device_blocks.size();
            EXPECT_EQ(cap->can_allocate(), k.want) << k.version;
            if (k.want != QD_SUCCESS) {
                const std::string why = qd::last_error_message();
                EXPECT_NE(why.find(k.minimum), std::string::npos) << why;
            }
            EXPECT_EQ(g_fake.device_blocks.size(), blocks) << "the check allocated";
            std::shared_ptr<Graph> g;
            EXPECT_EQ(cap->end(&g), QD_SUCCESS)
                << "the capture went on: " << qd::last_error_message();
        }
        c->synchronize();
        c->shutdown();
    }
}

// ---------------------------------------------------------------------------------------------
// Conditional nodes in a native capture (graph.cpp, "Conditionals")
// ---------------------------------------------------------------------------------------------

// The conditional entries over the fake: what the GPU layer asked of them. A body stream
// "captures" into the body graph it was given (its launches are noted with their stream).
struct CondFake {
    gpu::DriverTable base;  // the fake's own entries, which these wrap
    int version = 12080;
    int handle_creates = 0;
    unsigned handle_flags = 0;
    std::vector<gpu::GraphNodeParams> added;  // graph_add_node's parameters
    std::vector<size_t> added_deps;           // and its number of dependencies
    gpu::NativeGraph bodies[2] = {reinterpret_cast<gpu::NativeGraph>(0xB0D0),
                                  reinterpret_cast<gpu::NativeGraph>(0xB0D1)};
    std::map<gpu::NativeStream, gpu::NativeGraph> body_captures;      // open ones
    std::vector<gpu::NativeGraph> began;                              // every body capture begun
    std::vector<std::pair<std::string, gpu::NativeStream>> launches;  // kernel, stream
    std::vector<std::pair<gpu::NativeStream, gpu::NativeGraphNode>> deps_set;
};
CondFake g_cond;

gpu::DriverTable cond_table() {
    gpu::DriverTable t = fake_table();
    g_cond = CondFake{};
    g_cond.base = t;
    t.driver_get_version = [](int *v) -> gpu::Result {
        *v = g_cond.version;
        return kOk;
    };
    t.graph_conditional_handle_create = [](gpu::ConditionalHandle *h, gpu::NativeGraph,
                                           gpu::NativeContext, unsigned, unsigned flags) {
        ++g_cond.handle_creates;
        g_cond.handle_flags = flags;
        *h = 42;
        return kOk;
    };
    t.graph_add_node = [](gpu::NativeGraphNode *node, gpu::NativeGraph,
                          const gpu::NativeGraphNode *, size_t n, gpu::GraphNodeParams *p) {
        p->conditional.bodies = g_cond.bodies;
        g_cond.added.push_back(*p);
        g_cond.added_deps.push_back(n);
        *node = reinterpret_cast<gpu::NativeGraphNode>(0xC0DE);
        return kOk;
    };
    t.stream_begin_capture_to_graph = [](gpu::NativeStream s, gpu::NativeGraph g,
                                         const gpu::NativeGraphNode *, const void *, size_t, int) {
        g_cond.body_captures[s] = g;
        g_cond.began.push_back(g);
        return kOk;
    };
    t.stream_end_capture = [](gpu::NativeStream s, gpu::NativeGraph *g) {
        auto it = g_cond.body_captures.find(s);
        if (it == g_cond.body_captures.end()) return g_cond.base.stream_end_capture(s, g);
        *g = it->second;
        g_cond.body_captures.erase(it);
        return kOk;
    };
    t.stream_update_capture_dependencies = [](gpu::NativeStream s, gpu::NativeGraphNode *deps,
                                              size_t n, unsigned) {
        if (n == 1) g_cond.deps_set.emplace_back(s, deps[0]);
        return kOk;
    };
    t.launch_kernel = [](gpu::NativeFunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned shared, gpu::NativeStream s,
                         void **params, void **extra) {
        // The fake's functions start with their name (fake_gpu_driver.cpp, Param2).
        g_cond.launches.emplace_back(*reinterpret_cast<const char *const *>(f), s);
        if (g_cond.body_captures.count(s)) return kOk;  // recorded into the body
        return g_cond.base.launch_kernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
    };
    static const char image[] = "// the condition kernel";
    t.condition_image = image;
    t.condition_kernel_name = "k2";  // takes 8 + 4 bytes: the handle and (part of) the word
    t.graph_node_conditional = 13;
    t.conditional_if = 0;
    t.conditional_while = 1;
    t.conditional_switch = 2;
    t.conditional_assign_default = 1;
    t.set_capture_dependencies = 1;
    return t;
}

gpu::NativeStream native_of(const Stream &s) {
    return reinterpret_cast<gpu::NativeStream>(static_cast<uintptr_t>(s.native_handle()));
}

// Without the entries (HIP 5.2, a CUDA driver before 12.3), or with a driver older than the
// kind needs (12.3 for IF and WHILE, 12.8 for IF_ELSE and SWITCH), begin_conditional is
// QD_ERROR_NOT_SUPPORTED naming the version; nothing is created or queued and the capture
// goes on.
TEST_F(GpuBackend, NativeConditional_OldDriverOrMissingEntry_NotSupportedNamingTheVersion) {
    struct Case {
        bool entries;
        int version;
        qd_conditional_kind kind;
        uint32_t bodies;
        const char *named;
    };
    const Case cases[] = {
        {false, 12080, QD_CONDITIONAL_IF, 1, "12.3"},
        {true, 12020, QD_CONDITIONAL_IF, 1, "12.3"},
        {true, 12020, QD_CONDITIONAL_WHILE, 1, "12.2"},
        {true, 12060, QD_CONDITIONAL_IF_ELSE, 2, "12.8"},
        {true, 12060, QD_CONDITIONAL_SWITCH, 3, "12.6"},
        {true, 12070, QD_CONDITIONAL_SWITCH, 1, "12.8"},  // one case: still a SWITCH node
    };
    for (const Case &k : cases) {
        gpu::DriverTable t = cond_table();
        g_cond.version = k.version;
        if (!k.entries) {
            t = fake_table();
            t.symbol[static_cast<size_t>(gpu::Fn::graph_conditional_handle_create)] =
                "cuGraphConditionalHandleCreate";
        }
        std::unique_ptr<Driver> d;
        ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
        std::unique_ptr<Context> c;
        ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
        {
            std::shared_ptr<Stream> s;
            ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
            std::unique_ptr<Capture> cap;
            ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS) << qd::last_error_message();
            const size_t streams = g_fake.streams.size();
            uint64_t handle = 0;
            EXPECT_EQ(cap->begin_conditional(*s, k.kind, k.bodies, 0x1000, &handle),
                      QD_ERROR_NOT_SUPPORTED)
                << k.version;
            const std::string why = qd::last_error_message();
            EXPECT_NE(why.find(k.named), std::string::npos) << why;
            if (!k.entries) {
                EXPECT_NE(why.find("cuGraphConditionalHandleCreate"), std::string::npos) << why;
                EXPECT_NE(why.find("HIP has none"), std::string::npos) << why;
            }
            EXPECT_EQ(g_cond.handle_creates, 0);
            EXPECT_TRUE(g_cond.added.empty());
            EXPECT_TRUE(g_cond.launches.empty()) << "the condition kernel was queued";
            EXPECT_EQ(g_fake.streams.size(), streams) << "a body stream was made";
            // The capture goes on: the lane still records into it.
            auto k0 = kernel("k0");
            ASSERT_EQ(s->launch(*k0, kOneThread, nullptr, 0), QD_SUCCESS);
            EXPECT_TRUE(g_fake.launches.empty()) << "the launch ran instead of being captured";
            std::shared_ptr<Graph> g;
            EXPECT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
        }
        c->synchronize();
        c->shutdown();
    }
}

// begin_conditional adds the node after the condition kernel on the lane, and the lane's
// operations go to a body stream capturing into the node's body graph; next_branch moves it
// to the next body; a WHILE's body ends with the condition kernel again; the end makes the node
// the lane's dependency set and restores the lane. The body stream is the capture's: made
// once, destroyed with it.
TEST_F(GpuBackend, NativeConditional_BodiesAreCapturedIntoTheNodesGraphs_TheLaneComesBack) {
    gpu::DriverTable t = cond_table();
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::shared_ptr<Module> m;
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(c->load_module(ptx, sizeof ptx, &m), QD_SUCCESS);
        std::shared_ptr<Kernel> k0;
        ASSERT_EQ(m->get_kernel("k0", &k0), QD_SUCCESS);
        const gpu::NativeStream own = native_of(*s);
        const size_t streams = g_fake.streams.size();
        std::unique_ptr<Capture> cap;
        ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        ASSERT_EQ(s->launch(*k0, kOneThread, nullptr, 0), QD_SUCCESS);  // before the node
        uint64_t handle = 0;
        ASSERT_EQ(cap->begin_conditional(*s, QD_CONDITIONAL_IF_ELSE, 2, 0x1000, &handle),
                  QD_SUCCESS)
            << qd::last_error_message();
        EXPECT_EQ(handle, 42u);
        EXPECT_EQ(g_cond.handle_flags, 1u) << "CU_GRAPH_COND_ASSIGN_DEFAULT (default 0)";
        ASSERT_EQ(g_cond.launches.size(), 2u);
        EXPECT_EQ(g_cond.launches[1], std::make_pair(std::string("k2"), own))
            << "the condition kernel runs on the lane before the node";
        ASSERT_EQ(g_cond.added.size(), 1u);
        EXPECT_EQ(g_cond.added[0].type, 13);
        EXPECT_EQ(g_cond.added[0].conditional.type, 0);
        EXPECT_EQ(g_cond.added[0].conditional.size, 2u);
        EXPECT_EQ(g_cond.added[0].conditional.handle, 42u);
        EXPECT_EQ(g_cond.added_deps[0], 1u) << "the node follows the condition kernel";
        ASSERT_EQ(g_fake.streams.size(), streams + 1) << "one body stream";
        ASSERT_EQ(g_cond.began, std::vector<gpu::NativeGraph>{g_cond.bodies[0]});
        ASSERT_EQ(s->launch(*k0, kOneThread, nullptr, 0), QD_SUCCESS);
        const gpu::NativeStream body = g_cond.launches.back().second;
        EXPECT_NE(body, own) << "a launch inside the body went to the lane's own stream";
        EXPECT_EQ(g_cond.body_captures.count(body), 1u);
        EXPECT_EQ(native_of(*s), own) << "the stream's native handle is its own";
        bool done = false;
        ASSERT_EQ(cap->next_branch(*s, &done), QD_SUCCESS) << qd::last_error_message();
        EXPECT_TRUE(done);
        EXPECT_EQ(g_cond.began.back(), g_cond.bodies[1]);
        ASSERT_EQ(s->launch(*k0, kOneThread, nullptr, 0), QD_SUCCESS);
        EXPECT_EQ(g_cond.launches.back().second, body);
        ASSERT_EQ(cap->end_conditional(*s, &done), QD_SUCCESS) << qd::last_error_message();
        EXPECT_TRUE(done);
        EXPECT_TRUE(g_cond.body_captures.empty()) << "the body's capture was not ended";
        ASSERT_EQ(g_cond.deps_set.size(), 1u);
        EXPECT_EQ(g_cond.deps_set[0].first, own);
        EXPECT_EQ(g_cond.deps_set[0].second, reinterpret_cast<gpu::NativeGraphNode>(0xC0DE));
        ASSERT_EQ(s->launch(*k0, kOneThread, nullptr, 0), QD_SUCCESS);
        EXPECT_EQ(g_cond.launches.back().second, own) << "the lane came back";
        // A WHILE with a word decides again at the end of each iteration; the body stream is
        // reused.
        const size_t before = g_cond.launches.size();
        ASSERT_EQ(cap->begin_conditional(*s, QD_CONDITIONAL_WHILE, 1, 0x1000, &handle), QD_SUCCESS);
        EXPECT_EQ(g_fake.streams.size(), streams + 1) << "the body stream was not reused";
        ASSERT_EQ(cap->end_conditional(*s, &done), QD_SUCCESS);
        ASSERT_EQ(g_cond.launches.size(), before + 2);
        EXPECT_EQ(g_cond.launches.back(), std::make_pair(std::string("k2"), body))
            << "the WHILE body ends with the condition kernel";
        // Condition 0: no kernel of qd's; the handle is for the user's kernels.
        ASSERT_EQ(cap->begin_conditional(*s, QD_CONDITIONAL_IF, 1, 0, &handle), QD_SUCCESS);
        ASSERT_EQ(cap->end_conditional(*s, &done), QD_SUCCESS);
        EXPECT_EQ(g_cond.launches.size(), before + 2) << "condition 0 queued a kernel";
        std::shared_ptr<Graph> g;
        ASSERT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
        cap.reset();
        EXPECT_EQ(g_fake.streams.size(), streams) << "the body stream outlived the capture";
    }
    c->synchronize();
    c->shutdown();
}

// The driver updates no conditional node's parameters, and each capture has handles of its
// own: an update the driver refuses between two graphs with conditionals (whose shapes the core
// checked) takes the other graph's source, instantiated again at the next launch. Without
// conditionals the refusal stays a refusal and the graph keeps its values.
TEST_F(GpuBackend, NativeConditional_UpdateRefusedByTheDriver_ReinstantiatesFromTheOtherGraph) {
    gpu::DriverTable t = cond_table();
    t.graph_exec_update = [](gpu::NativeGraphExec, gpu::NativeGraph,
                             gpu::GraphExecUpdateInfo *info) -> gpu::Result {
        *info = gpu::GraphExecUpdateInfo{5, nullptr, nullptr};  // PARAMETERS_CHANGED
        return qd::cuda_abi::kGraphExecUpdateFailure;
    };
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::shared_ptr<Module> m;
        const char ptx[] = "// fake ptx";
        ASSERT_EQ(c->load_module(ptx, sizeof ptx, &m), QD_SUCCESS);
        // Captures `name` followed by an IF without a word (or no IF).
        auto capture = [&](const char *name, bool conditional) {
            std::shared_ptr<Kernel> k;
            EXPECT_EQ(m->get_kernel(name, &k), QD_SUCCESS);
            std::unique_ptr<Capture> cap;
            EXPECT_EQ(s->begin_capture(&cap), QD_SUCCESS);
            uint64_t v = 7, h = 0;
            const qd_arg args[2] = {{&v, 8}, {&v, 4}};
            EXPECT_EQ(s->launch(*k, kOneThread, args, std::string(name) == "k0" ? 0 : 1),
                      QD_SUCCESS);
            bool done = false;
            if (conditional) {
                EXPECT_EQ(cap->begin_conditional(*s, QD_CONDITIONAL_IF, 1, 0, &h), QD_SUCCESS);
                EXPECT_EQ(cap->end_conditional(*s, &done), QD_SUCCESS);
            }
            std::shared_ptr<Graph> g;
            EXPECT_EQ(cap->end(&g), QD_SUCCESS) << qd::last_error_message();
            return g;
        };
        for (bool conditional : {true, false}) {
            auto g = capture("k0", conditional), from = capture("k1", conditional);
            ASSERT_EQ(g->launch(*s), QD_SUCCESS) << qd::last_error_message();  // instantiated
            ASSERT_EQ(g_fake.launches.back().kernel, "k0");
            const qd_status st = g->update(*from);
            ASSERT_EQ(g->launch(*s), QD_SUCCESS) << qd::last_error_message();
            if (conditional) {
                EXPECT_EQ(st, QD_SUCCESS) << qd::last_error_message();
                EXPECT_EQ(g_fake.launches.back().kernel, "k1") << "from's graph was not taken";
            } else {
                EXPECT_EQ(st, QD_ERROR_INVALID_OPERATION);
                EXPECT_EQ(g_fake.launches.back().kernel, "k0") << "the refused update changed it";
            }
        }
    }
    c->synchronize();
    c->shutdown();
}

// A capture abandoned with a conditional open ends the body's capture and the origin's, and
// destroys its body stream (TearDown checks that nothing leaked).
TEST_F(GpuBackend, NativeConditional_AbandonedOpen_EndsEveryCapture_LaneRestored) {
    gpu::DriverTable t = cond_table();
    std::unique_ptr<Driver> d;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d), QD_SUCCESS);
    std::unique_ptr<Context> c;
    ASSERT_EQ(d->create_context(qd::backend::ContextParams{}, &c), QD_SUCCESS);
    {
        std::shared_ptr<Stream> s;
        ASSERT_EQ(c->create_stream(0, 0, &s), QD_SUCCESS);
        std::unique_ptr<Capture> cap;
        ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
        uint64_t handle = 0;
        ASSERT_EQ(cap->begin_conditional(*s, QD_CONDITIONAL_IF, 1, 0, &handle), QD_SUCCESS);
        cap.reset();
        EXPECT_TRUE(g_cond.body_captures.empty());
        EXPECT_TRUE(g_fake.captures.empty());
    }
    c->synchronize();
    c->shutdown();
}

TEST_F(GpuBackend, NativeCapture_ContextSynchronizeSkipsCapturingStreams_AbandonEndsIt) {
    auto s = stream(), other = stream();
    auto k = kernel("k0");
    std::unique_ptr<Capture> cap;
    ASSERT_EQ(s->begin_capture(&cap), QD_SUCCESS);
    // A stream joins by waiting on an event recorded inside the capture.
    std::shared_ptr<Event> e;
    ASSERT_EQ(ctx_->create_event(false, &e), QD_SUCCESS);
    ASSERT_EQ(s->record(*e), QD_SUCCESS);
    ASSERT_EQ(other->wait(*e), QD_SUCCESS);
    ASSERT_EQ(other->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS);
    // The fake fails a synchronize of a capturing stream, as the driver does.
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(g_fake.captures.size(), 1u);
    cap.reset();  // abandoned: the driver capture ends and its graph is destroyed
    EXPECT_TRUE(g_fake.captures.empty());
    EXPECT_EQ(s->synchronize(), QD_SUCCESS) << "the origin is still capturing";
    EXPECT_EQ(other->synchronize(), QD_SUCCESS) << "a joined stream is still capturing";
}

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

// ---------------------------------------------------------------------------------------------
// Several devices (qd.h): peer access and peer copies over the fake's two devices
// ---------------------------------------------------------------------------------------------

class GpuTwoDevices : public GpuBackend {
  protected:
    void SetUp() override {
        GpuBackend::SetUp();
        qd::backend::ContextParams params;
        params.device = 1;
        ASSERT_EQ(driver_->create_context(params, &ctx1_), QD_SUCCESS) << qd::last_error_message();
    }
    void TearDown() override {
        if (ctx1_) {
            ctx1_->synchronize();
            ctx1_->shutdown();
            ctx1_.reset();
        }
        GpuBackend::TearDown();
    }
    std::unique_ptr<Context> ctx1_;
};

TEST_F(GpuTwoDevices, EnablePeerAccess_GrantsTheContextAndThePeersPool_OnceEach) {
    bool can = false;
    ASSERT_EQ(ctx_->can_access_peer(*ctx1_, &can), QD_SUCCESS) << qd::last_error_message();
    EXPECT_TRUE(can);
    ASSERT_EQ(ctx_->enable_peer_access(*ctx1_), QD_SUCCESS) << qd::last_error_message();
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        // From device 0's context (made current for the call) to device 1's.
        EXPECT_EQ(g_fake.peer_enabled.count({g_fake.primary, g_fake.primary1}), 1u);
        // Device 1's stream-ordered pool grants device 0 access.
        EXPECT_EQ(g_fake.pool_access.count({1, 0}), 1u);
    }
    // Again: the driver says "already enabled", which is success.
    EXPECT_EQ(ctx_->enable_peer_access(*ctx1_), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(current_context(), g_fake.primary) << "a fresh thread keeps our context current";
}

TEST_F(GpuTwoDevices, NoPeerAccessBetweenTheDevices_QueryIsZeroAndEnableIsNotSupported) {
    g_fake.peer_access = false;
    bool can = true;
    ASSERT_EQ(ctx_->can_access_peer(*ctx1_, &can), QD_SUCCESS);
    EXPECT_FALSE(can);
    EXPECT_EQ(ctx_->enable_peer_access(*ctx1_), QD_ERROR_NOT_SUPPORTED);
    const std::string msg = qd::last_error_message();
    EXPECT_NE(msg.find("device 0 cannot access the memory of device 1"), std::string::npos) << msg;
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    EXPECT_TRUE(g_fake.peer_enabled.empty());
    EXPECT_TRUE(g_fake.pool_access.empty());
}

TEST_F(GpuTwoDevices, DriverWithoutThePeerEntries_QueryIsZeroAndEnableNamesTheMissingEntry) {
    gpu::DriverTable t = fake_table();
    t.device_can_access_peer = nullptr;
    t.mem_pool_set_access = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::device_can_access_peer)] = "cuDeviceCanAccessPeer";
    std::unique_ptr<Driver> driver;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver), QD_SUCCESS);
    std::unique_ptr<Context> a, b;
    qd::backend::ContextParams params;
    ASSERT_EQ(driver->create_context(params, &a), QD_SUCCESS);
    params.device = 1;
    ASSERT_EQ(driver->create_context(params, &b), QD_SUCCESS);
    bool can = true;
    EXPECT_EQ(a->can_access_peer(*b, &can), QD_SUCCESS);
    EXPECT_FALSE(can);
    EXPECT_EQ(a->enable_peer_access(*b), QD_ERROR_NOT_SUPPORTED);
    EXPECT_NE(std::string(qd::last_error_message()).find("cuDeviceCanAccessPeer"),
              std::string::npos)
        << qd::last_error_message();
    for (auto *c : {&a, &b}) {
        (*c)->synchronize();
        (*c)->shutdown();
        c->reset();
    }
}

TEST_F(GpuTwoDevices, SameDevice_PeerAccessNeedsNothingAndCopiesArePlain) {
    std::unique_ptr<Context> again;
    ASSERT_EQ(driver_->create_context(qd::backend::ContextParams(), &again), QD_SUCCESS);
    bool can = false;
    ASSERT_EQ(ctx_->can_access_peer(*again, &can), QD_SUCCESS);
    EXPECT_TRUE(can);
    EXPECT_EQ(ctx_->enable_peer_access(*again), QD_SUCCESS);
    g_fake.backed_memory = true;
    auto s = stream();
    uint64_t a = 0, b = 0;
    ASSERT_EQ(s->mem_alloc(64, &a), QD_SUCCESS);
    ASSERT_EQ(s->mem_alloc(64, &b), QD_SUCCESS);
    ASSERT_EQ(s->memset(a, 0x5a, 64), QD_SUCCESS);
    ASSERT_EQ(s->memcpy_peer(b, *again, a, *ctx_, 64), QD_SUCCESS);
    EXPECT_EQ(reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(b))[63], 0x5a);
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_TRUE(g_fake.peer_enabled.empty());
        EXPECT_EQ(g_fake.peer_copies, 0) << "a copy within one device went through the peer entry";
    }
    s->mem_free(a);
    s->mem_free(b);
    again->synchronize();
    again->shutdown();
}

TEST_F(GpuTwoDevices, PeerCopy_BetweenDevices_UsesThePeerEntryWithBothContexts_BothDirections) {
    g_fake.backed_memory = true;
    auto s0 = stream();
    std::shared_ptr<Stream> s1;
    ASSERT_EQ(ctx1_->create_stream(QD_STREAM_NON_BLOCKING, 0, &s1), QD_SUCCESS);
    uint64_t a = 0, b = 0;
    ASSERT_EQ(s0->mem_alloc(256, &a), QD_SUCCESS);
    ASSERT_EQ(s1->mem_alloc(256, &b), QD_SUCCESS);
    ASSERT_EQ(s0->memset(a, 0x11, 256), QD_SUCCESS);
    ASSERT_EQ(s1->memcpy_peer(b, *ctx1_, a, *ctx_, 256), QD_SUCCESS);
    auto *pb = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(b));
    EXPECT_EQ(pb[0], 0x11);
    EXPECT_EQ(pb[255], 0x11);
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_EQ(g_fake.peer_copies, 1);
        EXPECT_EQ(g_fake.last_peer_copy.first, g_fake.primary1);
        EXPECT_EQ(g_fake.last_peer_copy.second, g_fake.primary);
    }
    ASSERT_EQ(s1->memset(b, 0x22, 256), QD_SUCCESS);
    ASSERT_EQ(s1->memcpy_peer(a, *ctx_, b, *ctx1_, 256), QD_SUCCESS);
    EXPECT_EQ(reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(a))[128], 0x22);
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_EQ(g_fake.peer_copies, 2);
        EXPECT_EQ(g_fake.last_peer_copy.first, g_fake.primary);
        EXPECT_EQ(g_fake.last_peer_copy.second, g_fake.primary1);
    }
    // A failing peer copy maps to a status with the driver's name for the call.
    g_fake.fail_at = g_fake.calls + 1;
    g_fake.fail_code = kInvalidValue;
    EXPECT_EQ(s1->memcpy_peer(a, *ctx_, b, *ctx1_, 256), QD_ERROR_INVALID_ADDRESS);
    EXPECT_NE(std::string(qd::last_error_message()).find("memcpy_peer_async"), std::string::npos)
        << qd::last_error_message();
    g_fake.fail_at = 0;
    // Waits across the two contexts reach the driver with the other context's event.
    std::shared_ptr<Event> e0;
    ASSERT_EQ(ctx_->create_event(false, &e0), QD_SUCCESS);
    ASSERT_EQ(s0->record(*e0), QD_SUCCESS);
    EXPECT_EQ(s1->wait(*e0), QD_SUCCESS);
    e0.reset();
    s0->mem_free(a);
    s1->mem_free(b);
    s1.reset();
}

// The driver checks a copy's addresses in the thread's current context (CUDA_ERROR_INVALID_VALUE
// for device 1's pool memory while device 0 is current, found on two H200s): a copy refused so
// is made again with the stream's context current, and the caller's context is restored.
TEST(GpuBackendStreamContext, CopyRefusedInTheCurrentContext_IsMadeAgainInTheStreamsContext) {
    g_fake.reset();
    g_fake.backed_memory = true;
    g_fake.copies_checked_in_current_context = true;
    gpu::DriverTable t = fake_table();
    t.stream_calls_use_stream_context = true;
    std::unique_ptr<Driver> driver;
    ASSERT_EQ(gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &driver), QD_SUCCESS);
    std::unique_ptr<Context> c0, c1;
    qd::backend::ContextParams params;
    ASSERT_EQ(driver->create_context(params, &c0), QD_SUCCESS);
    params.device = 1;
    ASSERT_EQ(driver->create_context(params, &c1), QD_SUCCESS);
    std::shared_ptr<Stream> s1;
    ASSERT_EQ(c1->create_stream(QD_STREAM_NON_BLOCKING, 0, &s1), QD_SUCCESS);
    uint64_t a = 0, b = 0;
    ASSERT_EQ(s1->mem_alloc(64, &a), QD_SUCCESS);
    ASSERT_EQ(s1->mem_alloc(64, &b), QD_SUCCESS);
    ASSERT_EQ(s1->memset(a, 0x3c, 64), QD_SUCCESS);
    current_context() = g_fake.primary;  // device 0's, as another library (NCCL) may leave it
    EXPECT_EQ(s1->memcpy(b, a, 64), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(b))[7], 0x3c);
    EXPECT_EQ(current_context(), g_fake.primary) << "the caller's context was not restored";
    EXPECT_EQ(s1->memcpy_peer(b, *c1, a, *c0, 64), QD_SUCCESS) << qd::last_error_message();
    EXPECT_EQ(current_context(), g_fake.primary);
    current_context() = nullptr;
    s1->mem_free(a);
    s1->mem_free(b);
    s1.reset();
    for (auto *c : {&c0, &c1}) {
        (*c)->synchronize();
        (*c)->shutdown();
        c->reset();
    }
}

// ---------------------------------------------------------------------------------------------
// Launch attributes (qd_launch_ex): exactly what cuLaunchKernelEx receives, and the refusals
// ---------------------------------------------------------------------------------------------

namespace {
qd::backend::LaunchAttrs every_attr(Event *completion) {
    qd::backend::LaunchAttrs a;
    a.cluster[0] = 2;
    a.cluster[1] = 1;
    a.cluster[2] = 1;
    a.programmatic = true;
    a.has_priority = true;
    a.priority = -1;
    a.completion_event = completion;
    return a;
}
const LaunchDims kFourBlocks = {{4, 1, 1}, {32, 1, 1}, 0};

// A backend context over `t` (the fake's table, changed by the test), for one check.
qd_status check_with(const gpu::DriverTable &t, const qd::backend::LaunchAttrs &a, bool capturing) {
    std::unique_ptr<Driver> d;
    if (gpu::make_gpu_driver(t, qd::backend::DlLibrary(), &d) != QD_SUCCESS)
        return QD_ERROR_INTERNAL;
    std::unique_ptr<Context> ctx;
    if (d->create_context(qd::backend::ContextParams{}, &ctx) != QD_SUCCESS)
        return QD_ERROR_INTERNAL;
    const qd_status st = ctx->check_launch_attrs(a, kFourBlocks, capturing);
    const std::string message = qd::last_error_message();
    ctx->shutdown();
    ctx.reset();
    qd::fail(st == QD_SUCCESS ? QD_ERROR_INTERNAL : st, "%s", message.c_str());
    return st;
}
}  // namespace

TEST_F(GpuBackend, LaunchEx_PassesExactlyTheAttributesToLaunchKernelEx) {
    auto s = stream();
    auto k = kernel("k1");
    std::shared_ptr<Event> e;
    ASSERT_EQ(ctx_->create_event(false, &e), QD_SUCCESS) << qd::last_error_message();
    const auto attrs = every_attr(e.get());
    ASSERT_EQ(ctx_->check_launch_attrs(attrs, kFourBlocks, false), QD_SUCCESS)
        << qd::last_error_message();
    uint64_t a = 7;
    qd_arg args[1] = {{&a, 8}};
    ASSERT_EQ(s->launch_ex(*k, kFourBlocks, attrs, args, 1), QD_SUCCESS)
        << qd::last_error_message();
    ASSERT_EQ(g_fake.launches.size(), 1u);
    const FakeLaunch &l = g_fake.launches[0];
    EXPECT_TRUE(l.ex) << "the launch did not go through launch_kernel_ex";
    EXPECT_EQ(l.params[0], &a);
    ASSERT_EQ(l.attrs.size(), 4u);
    EXPECT_EQ(l.attrs[0].id, 4);  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    EXPECT_EQ(l.attrs[0].value.cluster.x, 2u);
    EXPECT_EQ(l.attrs[0].value.cluster.y, 1u);
    EXPECT_EQ(l.attrs[0].value.cluster.z, 1u);
    EXPECT_EQ(l.attrs[1].id, 6);  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    EXPECT_EQ(l.attrs[1].value.programmatic, 1);
    EXPECT_EQ(l.attrs[2].id, 8);  // CU_LAUNCH_ATTRIBUTE_PRIORITY
    EXPECT_EQ(l.attrs[2].value.priority, -1);
    EXPECT_EQ(l.attrs[3].id, 12);  // CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT
    EXPECT_EQ(l.attrs[3].value.completion_event.event,
              static_cast<gpu::GpuEvent *>(e.get())->native());
    EXPECT_EQ(l.attrs[3].value.completion_event.flags, 0);
    EXPECT_TRUE(e->recorded()) << "the completion event is recorded by the launch";
}

TEST_F(GpuBackend, LaunchEx_OneAttribute_PassesOnlyThatOne) {
    auto s = stream();
    auto k = kernel("k0");
    qd::backend::LaunchAttrs attrs;
    attrs.programmatic = true;
    ASSERT_EQ(s->launch_ex(*k, kOneThread, attrs, nullptr, 0), QD_SUCCESS)
        << qd::last_error_message();
    ASSERT_EQ(g_fake.launches.size(), 1u);
    ASSERT_EQ(g_fake.launches[0].attrs.size(), 1u);
    EXPECT_EQ(g_fake.launches[0].attrs[0].id, 6);
}

TEST_F(GpuBackend, Launch_WithoutAttributes_KeepsLaunchKernel) {
    auto s = stream();
    auto k = kernel("k0");
    ASSERT_EQ(s->launch(*k, kOneThread, nullptr, 0), QD_SUCCESS) << qd::last_error_message();
    ASSERT_EQ(g_fake.launches.size(), 1u);
    EXPECT_FALSE(g_fake.launches[0].ex) << "a launch without attributes took launch_kernel_ex";
}

TEST_F(GpuBackend, CheckLaunchAttrs_ClusterBelowComputeCapability9_NotSupportedNamingIt) {
    g_fake.compute_major = 8;
    qd::backend::LaunchAttrs attrs;
    attrs.cluster[0] = attrs.cluster[1] = attrs.cluster[2] = 1;
    EXPECT_EQ(ctx_->check_launch_attrs(attrs, kFourBlocks, false), QD_ERROR_NOT_SUPPORTED);
    const std::string m = qd::last_error_message();
    EXPECT_NE(m.find("CLUSTER_DIM"), std::string::npos) << m;
    EXPECT_NE(m.find("9.0"), std::string::npos) << m;
    qd::backend::LaunchAttrs pdl;
    pdl.programmatic = true;  // an older device runs it in stream order, as the driver does
    EXPECT_EQ(ctx_->check_launch_attrs(pdl, kFourBlocks, false), QD_SUCCESS)
        << qd::last_error_message();
}

TEST_F(GpuBackend, CheckLaunchAttrs_DriverWithoutLaunchKernelEx_NotSupportedNamingTheVersion) {
    gpu::DriverTable t = fake_table();
    t.launch_kernel_ex = nullptr;
    qd::backend::LaunchAttrs attrs;
    attrs.has_priority = true;
    EXPECT_EQ(check_with(t, attrs, false), QD_ERROR_NOT_SUPPORTED);
    const std::string m = qd::last_error_message();
    EXPECT_NE(m.find("PRIORITY"), std::string::npos) << m;
    EXPECT_NE(m.find("11.8"), std::string::npos) << m;
}

TEST_F(GpuBackend, CheckLaunchAttrs_VendorWithoutLaunchAttributes_NotSupportedNamingTheApi) {
    gpu::DriverTable t = fake_table();
    t.launch_kernel_ex = nullptr;
    t.launch_ex_requires = nullptr;  // as the HIP loader leaves it
    qd::backend::LaunchAttrs attrs;
    attrs.programmatic = true;
    EXPECT_EQ(check_with(t, attrs, false), QD_ERROR_NOT_SUPPORTED);
    const std::string m = qd::last_error_message();
    EXPECT_NE(m.find("PROGRAMMATIC_SERIALIZATION"), std::string::npos) << m;
    EXPECT_NE(m.find("has no launch attributes"), std::string::npos) << m;
}

TEST_F(GpuBackend, CheckLaunchAttrs_ProgrammaticCapturedBelowDriver12_3_NotSupported) {
    qd::backend::LaunchAttrs attrs;
    attrs.programmatic = true;
    g_fake.driver_version = 12020;
    EXPECT_EQ(ctx_->check_launch_attrs(attrs, kFourBlocks, true), QD_ERROR_NOT_SUPPORTED);
    const std::string m = qd::last_error_message();
    EXPECT_NE(m.find("12.3"), std::string::npos) << m;
    EXPECT_EQ(ctx_->check_launch_attrs(attrs, kFourBlocks, false), QD_SUCCESS)
        << qd::last_error_message();
    g_fake.driver_version = 12030;
    EXPECT_EQ(ctx_->check_launch_attrs(attrs, kFourBlocks, true), QD_SUCCESS)
        << qd::last_error_message();
}
