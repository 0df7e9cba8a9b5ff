// The contract of src/backends/backend.h, written once and run over every backend layer that can
// run here: the CPU backend's driver, and the shared GPU layer over the fake driver of
// tests/support/fake_gpu_driver.h (twice: with host-visible memory, and with made-up device
// addresses as a real GPU has). A new backend (HIP) adds one Harness below and inherits every test.
//
// Only what backend.h documents is asserted. Where backends legitimately differ, a capability
// flag of the Harness says so, the test checks what every backend shares, and then skips the
// rest visibly with the Harness's reason: nothing is skipped silently. No test depends on timing:
// work is held back by a latch the test opens (hold/release), never by a delay.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "common/error.h"

#ifdef QDT_HAVE_FAKE_GPU
#include "backends/common/dl_library.h"
#include "backends/gpu/gpu_backend.h"
#include "fake_gpu_driver.h"
#endif

#ifndef QD_TEST_CPU_MODULE_PATH
#define QD_TEST_CPU_MODULE_PATH ""
#endif

namespace {

using qd::backend::Context;
using qd::backend::ContextParams;
using qd::backend::Driver;
using qd::backend::Event;
using qd::backend::Kernel;
using qd::backend::LaunchDims;
using qd::backend::Module;
using qd::backend::Stream;

const LaunchDims kOneBlock = {{1, 1, 1}, {1, 1, 1}, 0};

std::string message() { return qd::last_error_message(); }

// ---------------------------------------------------------------------------------------------
// The harness of one backend: how to get its driver, hold a stream back, and get a kernel, and
// the capabilities in which backends legitimately differ.
// ---------------------------------------------------------------------------------------------

struct Capabilities {
    // Device memory is host-visible: the test may fill and check it through memcpy to and from
    // host buffers. Otherwise copies and sets are only checked for their statuses.
    bool host_visible_memory = false;
    // Streams have native handles (native_handle() != 0, get_native_handle succeeds).
    bool native_streams = false;
    // Context::kernel_from_host_fn makes kernels (backend.h: "CPU only").
    bool host_fn_kernels = false;
    // A host_fn queued behind held work waits for it.
    bool host_fn_waits_for_earlier_work = false;
    // Stream::wait on an event recorded behind held work holds the waiting stream back.
    bool wait_holds_back_later_work = false;
    // Why each of the last two may be false (printed by the skip).
    std::string ordering_note;
};

class Harness {
  public:
    virtual ~Harness() = default;
    virtual qd_backend kind() const = 0;
    virtual const Capabilities &caps() const = 0;
    virtual Driver &driver() = 0;
    // Keep `stream` busy (work that has not completed) until release(): no timing involved.
    virtual void hold(Context &ctx, Stream &stream) = 0;
    // Let every held piece of work complete.
    virtual void release() = 0;
    // A kernel with no parameters whose launches launches() counts.
    virtual qd_status counting_kernel(Context &ctx, std::shared_ptr<Kernel> *out) = 0;
    virtual std::string counting_kernel_name() const = 0;
    virtual uint64_t launches() const = 0;
    // A module that holds the parameterless kernel module_kernel_name().
    virtual qd_status load_module(Context &ctx, std::shared_ptr<Module> *out) = 0;
    virtual const char *module_kernel_name() const = 0;
    // After the context is gone: the harness's own leak checks (native objects left behind).
    virtual void check_after_teardown() {}
};

// --- CPU ---------------------------------------------------------------------------------------

// A latch a host_fn blocks on until release(); it gives up after 30 s and says so, so a backend
// that waits where it must not fails the test instead of hanging it (the runner's per-test
// timeout is the second line).
struct Latch {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    bool gave_up = false;
    static void wait_cb(void *p) {
        auto *l = static_cast<Latch *>(p);
        std::unique_lock<std::mutex> lock(l->mutex);
        if (!l->cv.wait_for(lock, std::chrono::seconds(30), [&] { return l->open; }))
            l->gave_up = true;
    }
    void release() {
        std::lock_guard<std::mutex> lock(mutex);
        open = true;
        cv.notify_all();
    }
};

std::atomic<uint64_t> g_cpu_launches{0};
int32_t counting_host_kernel(const qd_host_kernel_info *, void *const *) {
    g_cpu_launches.fetch_add(1);
    return 0;
}

std::string cpu_module_path() {
    const char *env = getenv("QD_TEST_CPU_MODULE");
    return env && *env ? env : QD_TEST_CPU_MODULE_PATH;
}

class CpuHarness : public Harness {
  public:
    CpuHarness() {
        caps_.host_visible_memory = true;
        caps_.native_streams = false;
        caps_.host_fn_kernels = true;
        caps_.host_fn_waits_for_earlier_work = true;
        caps_.wait_holds_back_later_work = true;
    }
    ~CpuHarness() override {
        release();  // never leave a worker blocked
    }
    qd_backend kind() const override { return QD_BACKEND_CPU; }
    const Capabilities &caps() const override { return caps_; }
    Driver &driver() override {
        // One per process, never destroyed (backend.h, Driver).
        static std::unique_ptr<Driver> driver = [] {
            std::unique_ptr<Driver> d;
            qd_status st = qd::backend::make_cpu_driver(&d);
            if (st != QD_SUCCESS) ADD_FAILURE() << "make_cpu_driver: " << message();
            return d;
        }();
        return *driver;
    }
    void hold(Context &, Stream &stream) override {
        latches_.push_back(std::make_unique<Latch>());
        EXPECT_EQ(stream.host_fn(&Latch::wait_cb, latches_.back().get()), QD_SUCCESS) << message();
    }
    void release() override {
        for (auto &l : latches_) l->release();
    }
    qd_status counting_kernel(Context &ctx, std::shared_ptr<Kernel> *out) override {
        return ctx.kernel_from_host_fn(&counting_host_kernel, "conformance_count", out);
    }
    std::string counting_kernel_name() const override { return "conformance_count"; }
    uint64_t launches() const override { return g_cpu_launches.load(); }
    qd_status load_module(Context &ctx, std::shared_ptr<Module> *out) override {
        const std::string path = cpu_module_path();
        return ctx.load_module(path.c_str(), path.size(), out);
    }
    const char *module_kernel_name() const override { return "qd_test_noop"; }
    void check_after_teardown() override {
        for (auto &l : latches_) EXPECT_FALSE(l->gave_up) << "a held host_fn waited 30 s";
    }

  private:
    Capabilities caps_;
    std::vector<std::unique_ptr<Latch>> latches_;  // outlive the callbacks (freed after drain)
};

// --- The GPU layer over the fake driver ---------------------------------------------------------

#ifdef QDT_HAVE_FAKE_GPU
namespace fake = qdt::fake_gpu;

class FakeGpuHarness : public Harness {
  public:
    explicit FakeGpuHarness(bool backed_memory) {
        fake::g_fake.reset();
        fake::current_context() = nullptr;
        fake::context_stack().clear();
        fake::g_fake.backed_memory = backed_memory;
        caps_.host_visible_memory = backed_memory;
        caps_.native_streams = true;
        caps_.host_fn_kernels = false;
        caps_.host_fn_waits_for_earlier_work = false;
        caps_.wait_holds_back_later_work = false;
        caps_.ordering_note =
            "the fake GPU driver runs host functions at enqueue and orders nothing across "
            "streams (tests/support/fake_gpu_driver.h); the real drivers do, and tests/semantic "
            "checks it on them";
        qd_status st = qd::backend::gpu::make_gpu_driver(fake::fake_table(),
                                                         qd::backend::DlLibrary(), &driver_);
        if (st != QD_SUCCESS) ADD_FAILURE() << "make_gpu_driver(fake): " << message();
    }
    qd_backend kind() const override { return QD_BACKEND_CUDA; }  // the fake table's kind
    const Capabilities &caps() const override { return caps_; }
    Driver &driver() override { return *driver_; }
    void hold(Context &, Stream &stream) override { fake::hold(stream.native_handle()); }
    void release() override { fake::complete_all_work(); }
    qd_status counting_kernel(Context &ctx, std::shared_ptr<Kernel> *out) override {
        std::shared_ptr<Module> m;
        qd_status st = load_module(ctx, &m);
        if (st != QD_SUCCESS) return st;
        return m->get_kernel("k0", out);  // the kernel keeps its module alive
    }
    std::string counting_kernel_name() const override { return "k0"; }
    uint64_t launches() const override {
        std::lock_guard<std::mutex> lock(fake::g_fake.mutex);
        return fake::g_fake.launches.size();
    }
    qd_status load_module(Context &ctx, std::shared_ptr<Module> *out) override {
        const char image[] = "// fake ptx";
        return ctx.load_module(image, sizeof image, out);
    }
    const char *module_kernel_name() const override { return "k0"; }
    void check_after_teardown() override {
        driver_.reset();
        std::lock_guard<std::mutex> lock(fake::g_fake.mutex);
        EXPECT_EQ(fake::g_fake.retains, 0) << "the primary context was not released";
        EXPECT_TRUE(fake::g_fake.streams.empty()) << "native streams leaked";
        EXPECT_TRUE(fake::g_fake.events.empty()) << "native events leaked";
        EXPECT_TRUE(fake::g_fake.modules.empty()) << "modules leaked";
        EXPECT_TRUE(fake::g_fake.device_blocks.empty()) << "device memory leaked";
        EXPECT_TRUE(fake::g_fake.host_blocks.empty()) << "host memory leaked";
    }
    ~FakeGpuHarness() override { fake::g_fake.reset(); }

  private:
    Capabilities caps_;
    std::unique_ptr<Driver> driver_;
};
#endif

struct BackendParam {
    const char *name;
    std::function<std::unique_ptr<Harness>()> make;
};

std::vector<BackendParam> backends() {
    std::vector<BackendParam> v;
    v.push_back({"Cpu", [] { return std::unique_ptr<Harness>(new CpuHarness()); }});
#ifdef QDT_HAVE_FAKE_GPU
    v.push_back({"FakeGpu", [] { return std::unique_ptr<Harness>(new FakeGpuHarness(true)); }});
    v.push_back({"FakeGpuOpaqueMemory",
                 [] { return std::unique_ptr<Harness>(new FakeGpuHarness(false)); }});
#endif
    return v;
}

// ---------------------------------------------------------------------------------------------
// Fixture: one context per test, destroyed the way the core destroys it (synchronize, then
// shutdown), and no context may end up lost.
// ---------------------------------------------------------------------------------------------

class Conformance : public ::testing::TestWithParam<BackendParam> {
  protected:
    void SetUp() override {
        h_ = GetParam().make();
        ContextParams params;
        params.worker_threads = 4;
        ASSERT_EQ(h_->driver().create_context(params, &ctx_), QD_SUCCESS) << message();
        ASSERT_NE(ctx_, nullptr);
    }
    void TearDown() override {
        if (h_) h_->release();
        if (ctx_ && shut_down_) ctx_.reset();  // the test shut it down itself (once only)
        if (ctx_) {
            EXPECT_FALSE(ctx_->lost_state().lost()) << ctx_->lost_state().message();
            EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << message();
            ctx_->shutdown();
            ctx_.reset();
        }
        if (h_) h_->check_after_teardown();
        h_.reset();
    }

    const Capabilities &caps() const { return h_->caps(); }
    std::shared_ptr<Stream> stream(int32_t priority = 0, Context *ctx = nullptr) {
        std::shared_ptr<Stream> s;
        EXPECT_EQ((ctx ? ctx : ctx_.get())->create_stream(0, priority, &s), QD_SUCCESS)
            << message();
        return s;
    }
    std::shared_ptr<Event> event(bool timing = false) {
        std::shared_ptr<Event> e;
        EXPECT_EQ(ctx_->create_event(timing, &e), QD_SUCCESS) << message();
        return e;
    }
    std::shared_ptr<Kernel> counting_kernel() {
        std::shared_ptr<Kernel> k;
        EXPECT_EQ(h_->counting_kernel(*ctx_, &k), QD_SUCCESS) << message();
        return k;
    }

    std::unique_ptr<Harness> h_;
    std::unique_ptr<Context> ctx_;
    bool shut_down_ = false;
};

std::string param_name(const ::testing::TestParamInfo<BackendParam> &info) {
    return info.param.name;
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

TEST_P(Conformance, Driver_KindDeviceCountAndInfoOfEveryDevice) {
    Driver &d = h_->driver();
    EXPECT_EQ(d.kind(), h_->kind());
    uint32_t count = 0;
    ASSERT_EQ(d.device_count(&count), QD_SUCCESS) << message();
    ASSERT_GE(count, 1u) << "a driver that was made has a device";
    for (uint32_t i = 0; i < count; ++i) {
        qd_device_info info = QD_DEVICE_INFO_INIT;
        ASSERT_EQ(d.device_info(i, &info), QD_SUCCESS) << message();
        EXPECT_EQ(info.backend, static_cast<uint32_t>(h_->kind())) << "device " << i;
        EXPECT_EQ(info.device, i);
        EXPECT_NE(memchr(info.name, '\0', sizeof info.name), nullptr) << "name not terminated";
        EXPECT_GT(strlen(info.name), 0u) << "device " << i << " has no name";
    }
    qd_device_info info = QD_DEVICE_INFO_INIT;
    EXPECT_EQ(d.device_info(count, &info), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_GT(strlen(qd::last_error_message()), 0u) << "a failure writes the message";
}

TEST_P(Conformance, Driver_ContextsAreIndependent) {
    std::unique_ptr<Context> other;
    ASSERT_EQ(h_->driver().create_context({}, &other), QD_SUCCESS) << message();
    auto a = stream();
    auto b = stream(0, other.get());
    h_->hold(*ctx_, *a);
    EXPECT_EQ(b->query(), QD_SUCCESS) << "work held in one context shows in another";
    EXPECT_EQ(other->synchronize(), QD_SUCCESS) << "the other context waited for held work";
    EXPECT_EQ(a->query(), QD_NOT_READY);
    h_->release();
    b.reset();
    other->shutdown();
    other.reset();
    EXPECT_EQ(a->synchronize(), QD_SUCCESS) << message();
}

// ---------------------------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------------------------

TEST_P(Conformance, Stream_PrioritiesAreClampedIntoPriorityRange) {
    int32_t least = 12345, greatest = 12345;
    ctx_->priority_range(&least, &greatest);
    ASSERT_NE(least, 12345);
    ASSERT_LE(greatest, least) << "greater priority is the lower number (as in CUDA)";
    for (int32_t requested : {least, greatest, greatest - 100, least + 100, (least + greatest) / 2,
                              INT32_MIN, INT32_MAX}) {
        auto s = stream(requested);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(s->priority(), std::clamp(requested, greatest, least))
            << "requested " << requested;
    }
}

TEST_P(Conformance, Stream_QueryIsNotReadyWhileWorkIsHeld_SuccessOnceSynchronized) {
    auto s = stream();
    EXPECT_EQ(s->query(), QD_SUCCESS) << "a fresh stream is idle";
    EXPECT_EQ(s->synchronize(), QD_SUCCESS);
    h_->hold(*ctx_, *s);
    EXPECT_EQ(s->query(), QD_NOT_READY);
    EXPECT_EQ(s->query(), QD_NOT_READY) << "query changed the state";
    h_->release();
    EXPECT_EQ(s->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(s->query(), QD_SUCCESS);
}

TEST_P(Conformance, Stream_DroppedWithHeldWork_ReturnsAtOnce_ContextSynchronizeWaitsForIt) {
    auto k = counting_kernel();
    const uint64_t before = h_->launches();
    {
        auto s = stream();
        h_->hold(*ctx_, *s);
        ASSERT_EQ(s->launch(*k, kOneBlock, nullptr, 0), QD_SUCCESS) << message();
    }  // the last reference goes with the work still held: must not wait for it
    h_->release();
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(h_->launches(), before + 1) << "the dropped stream's work did not run";
}

TEST_P(Conformance, Context_SynchronizeWaitsForEveryStream) {
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << "an idle context";
    auto a = stream(), b = stream();
    h_->hold(*ctx_, *a);
    h_->hold(*ctx_, *b);
    EXPECT_EQ(a->query(), QD_NOT_READY);
    EXPECT_EQ(b->query(), QD_NOT_READY);
    h_->release();
    EXPECT_EQ(ctx_->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(a->query(), QD_SUCCESS);
    EXPECT_EQ(b->query(), QD_SUCCESS);
}

TEST_P(Conformance, NativeHandle_PresentOrNotSupported) {
    auto a = stream(), b = stream();
    uint64_t out = 77;
    if (caps().native_streams) {
        EXPECT_NE(a->native_handle(), 0u);
        EXPECT_NE(a->native_handle(), b->native_handle()) << "two streams, one native stream";
        EXPECT_EQ(a->get_native_handle(&out), QD_SUCCESS) << message();
        EXPECT_EQ(out, a->native_handle());
    } else {
        EXPECT_EQ(a->native_handle(), 0u);
        EXPECT_EQ(a->get_native_handle(&out), QD_ERROR_NOT_SUPPORTED);
        EXPECT_GT(strlen(qd::last_error_message()), 0u) << "NOT_SUPPORTED without a reason";
        EXPECT_EQ(out, 77u) << "out written on failure";
    }
}

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

TEST_P(Conformance, Event_TimingFlagIsKept) {
    EXPECT_TRUE(event(true)->timing());
    EXPECT_FALSE(event(false)->timing());
}

TEST_P(Conformance, Event_NeverRecorded_QuerySucceeds_WaitIsANoOp) {
    auto e = event();
    EXPECT_FALSE(e->recorded());
    EXPECT_EQ(e->query(), QD_SUCCESS);
    EXPECT_EQ(e->synchronize(), QD_SUCCESS);
    auto s = stream();
    EXPECT_EQ(s->wait(*e), QD_SUCCESS) << message();
    EXPECT_EQ(s->query(), QD_SUCCESS) << "waiting for a never-recorded event held the stream";
    EXPECT_FALSE(e->recorded()) << "a wait recorded the event";
}

TEST_P(Conformance, Event_RecordBehindHeldWork_NotReadyUntilItCompletes) {
    auto s = stream();
    auto e = event();
    h_->hold(*ctx_, *s);
    ASSERT_EQ(s->record(*e), QD_SUCCESS) << message();
    EXPECT_TRUE(e->recorded());
    EXPECT_EQ(e->query(), QD_NOT_READY);
    h_->release();
    EXPECT_EQ(e->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(e->query(), QD_SUCCESS);
    // Recorded again on an idle stream: the latest record counts.
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    ASSERT_EQ(s->record(*e), QD_SUCCESS);
    EXPECT_EQ(e->synchronize(), QD_SUCCESS);
    EXPECT_EQ(e->query(), QD_SUCCESS);
}

TEST_P(Conformance, ElapsedMs_NotReadyWhileAnEventIsPending_ThenSuccess) {
    auto s = stream();
    auto start = event(true), end = event(true);
    ASSERT_EQ(s->record(*start), QD_SUCCESS);
    ASSERT_EQ(start->synchronize(), QD_SUCCESS);
    h_->hold(*ctx_, *s);
    ASSERT_EQ(s->record(*end), QD_SUCCESS);
    float ms = -1.0f;
    EXPECT_EQ(ctx_->elapsed_ms(*start, *end, &ms), QD_NOT_READY);
    EXPECT_EQ(ms, -1.0f) << "ms written while not ready";
    h_->release();
    ASSERT_EQ(end->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(ctx_->elapsed_ms(*start, *end, &ms), QD_SUCCESS) << message();
    EXPECT_GE(ms, 0.0f);
    float same = -1.0f;
    EXPECT_EQ(ctx_->elapsed_ms(*end, *end, &same), QD_SUCCESS) << message();
    EXPECT_GE(same, 0.0f);
}

TEST_P(Conformance, Wait_EventBehindHeldWork_HoldsTheWaitingStream) {
    auto producer = stream(), consumer = stream();
    auto e = event();
    h_->hold(*ctx_, *producer);
    ASSERT_EQ(producer->record(*e), QD_SUCCESS);
    ASSERT_EQ(consumer->wait(*e), QD_SUCCESS) << message();  // never blocks the host
    auto k = counting_kernel();
    const uint64_t before = h_->launches();
    ASSERT_EQ(consumer->launch(*k, kOneBlock, nullptr, 0), QD_SUCCESS) << message();
    if (caps().wait_holds_back_later_work) {
        EXPECT_EQ(consumer->query(), QD_NOT_READY) << "the wait did not hold the consumer";
        EXPECT_EQ(h_->launches(), before) << "work behind the wait ran before the event";
    }
    h_->release();
    EXPECT_EQ(consumer->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(h_->launches(), before + 1);
    EXPECT_EQ(e->query(), QD_SUCCESS);
    if (!caps().wait_holds_back_later_work)
        GTEST_SKIP() << "not checked on this backend (capability wait_holds_back_later_work): "
                     << caps().ordering_note;
}

// ---------------------------------------------------------------------------------------------
// Host functions and callbacks
// ---------------------------------------------------------------------------------------------

struct Log {
    std::mutex mutex;
    std::vector<int> seen;
};
struct LogItem {
    Log *log;
    int value;
};
void append_cb(void *p) {
    auto *item = static_cast<LogItem *>(p);
    std::lock_guard<std::mutex> lock(item->log->mutex);
    item->log->seen.push_back(item->value);
}

TEST_P(Conformance, HostFn_RunsInStreamOrder) {
    auto s = stream();
    Log log;
    LogItem items[5] = {{&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}, {&log, 5}};
    for (LogItem &item : items) ASSERT_EQ(s->host_fn(&append_cb, &item), QD_SUCCESS) << message();
    ASSERT_EQ(s->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(log.seen, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST_P(Conformance, HostFn_QueuedBehindHeldWork_RunsAfterIt) {
    auto s = stream();
    Log log;
    LogItem item{&log, 1};
    h_->hold(*ctx_, *s);
    ASSERT_EQ(s->host_fn(&append_cb, &item), QD_SUCCESS) << message();  // never blocks
    if (caps().host_fn_waits_for_earlier_work) {
        std::lock_guard<std::mutex> lock(log.mutex);
        EXPECT_TRUE(log.seen.empty()) << "the host_fn ran before the work queued ahead of it";
    }
    h_->release();
    ASSERT_EQ(s->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(log.seen, (std::vector<int>{1}));
    if (!caps().host_fn_waits_for_earlier_work)
        GTEST_SKIP() << "ordering not checked on this backend (capability "
                        "host_fn_waits_for_earlier_work): "
                     << caps().ordering_note;
}

TEST_P(Conformance, InCallback_TrueInsideAHostFn_FalseOutside) {
    auto s = stream();
    struct Probe {
        Context *ctx;
        std::atomic<int> inside{-1};
    } probe{ctx_.get()};
    EXPECT_FALSE(ctx_->in_callback());
    ASSERT_EQ(s->host_fn(
                  [](void *p) {
                      auto *pr = static_cast<Probe *>(p);
                      pr->inside = pr->ctx->in_callback() ? 1 : 0;
                  },
                  &probe),
              QD_SUCCESS)
        << message();
    ASSERT_EQ(s->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(probe.inside.load(), 1) << "in_callback() was false inside the host_fn";
    EXPECT_FALSE(ctx_->in_callback()) << "still true after the host_fn";
    bool other_thread = true;
    std::thread([&] { other_thread = ctx_->in_callback(); }).join();
    EXPECT_FALSE(other_thread);
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

TEST_P(Conformance, Memory_AllocMemsetMemcpyFree_RoundTrip) {
    auto s = stream();
    const uint64_t bytes = 256;
    uint64_t dev = 0;
    ASSERT_EQ(s->mem_alloc(bytes, &dev), QD_SUCCESS) << message();
    ASSERT_NE(dev, 0u);
    uint64_t dev2 = 0;
    ASSERT_EQ(s->mem_alloc(bytes, &dev2), QD_SUCCESS) << message();
    EXPECT_TRUE(dev2 >= dev + bytes || dev2 + bytes <= dev) << "two live allocations overlap";
    std::vector<uint8_t> in(bytes), out(bytes, 0);
    for (uint64_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + 1);
    // Valid for work queued after the alloc on the same stream, at once.
    ASSERT_EQ(s->memset(dev, 0xAB, bytes), QD_SUCCESS) << message();
    ASSERT_EQ(s->memcpy(dev + 16, reinterpret_cast<uintptr_t>(in.data() + 16), 32), QD_SUCCESS)
        << message();
    ASSERT_EQ(s->memcpy(dev2, dev, bytes), QD_SUCCESS) << message();  // device to device
    ASSERT_EQ(s->memcpy(reinterpret_cast<uintptr_t>(out.data()), dev2, bytes), QD_SUCCESS)
        << message();
    ASSERT_EQ(s->mem_free(dev), QD_SUCCESS) << message();
    ASSERT_EQ(s->mem_free(dev2), QD_SUCCESS) << message();
    ASSERT_EQ(s->synchronize(), QD_SUCCESS) << message();
    if (!caps().host_visible_memory)
        GTEST_SKIP() << "contents not checked: this backend's device memory is not host-visible "
                        "(capability host_visible_memory); every status was checked";
    for (uint64_t i = 0; i < bytes; ++i) {
        const uint8_t expected = (i >= 16 && i < 48) ? in[i] : 0xAB;
        ASSERT_EQ(out[i], expected) << "byte " << i;
    }
}

TEST_P(Conformance, Memory_FreeIsStreamOrdered_BehindHeldWork) {
    auto s = stream();
    uint64_t dev = 0;
    ASSERT_EQ(s->mem_alloc(64, &dev), QD_SUCCESS) << message();
    ASSERT_EQ(s->memset(dev, 0, 64), QD_SUCCESS);
    h_->hold(*ctx_, *s);
    ASSERT_EQ(s->mem_free(dev), QD_SUCCESS) << message();  // releases after the held work
    EXPECT_EQ(s->query(), QD_NOT_READY);
    h_->release();
    EXPECT_EQ(s->synchronize(), QD_SUCCESS) << message();
}

TEST_P(Conformance, HostAlloc_WritableUntilFreed) {
    void *p = nullptr;
    ASSERT_EQ(ctx_->host_alloc(4096, &p), QD_SUCCESS) << message();
    ASSERT_NE(p, nullptr);
    memset(p, 0x5A, 4096);
    EXPECT_EQ(static_cast<uint8_t *>(p)[4095], 0x5A);
    auto s = stream();
    uint64_t dev = 0;
    ASSERT_EQ(s->mem_alloc(64, &dev), QD_SUCCESS);
    ASSERT_EQ(s->memset(dev, 0x11, 64), QD_SUCCESS);
    ASSERT_EQ(s->memcpy(reinterpret_cast<uintptr_t>(p), dev, 64), QD_SUCCESS) << message();
    ASSERT_EQ(s->mem_free(dev), QD_SUCCESS);
    ASSERT_EQ(s->synchronize(), QD_SUCCESS);
    if (caps().host_visible_memory) {
        EXPECT_EQ(static_cast<uint8_t *>(p)[63], 0x11);
    }
    EXPECT_EQ(static_cast<uint8_t *>(p)[64], 0x5A) << "a copy wrote past its end";
    ctx_->host_free(p);
}

// ---------------------------------------------------------------------------------------------
// Modules and kernels
// ---------------------------------------------------------------------------------------------

TEST_P(Conformance, Kernel_LaunchesRunInOrderAndAreCounted) {
    auto s = stream();
    auto k = counting_kernel();
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->name(), h_->counting_kernel_name());
    const uint64_t before = h_->launches();
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(s->launch(*k, kOneBlock, nullptr, 0), QD_SUCCESS) << message();
    ASSERT_EQ(s->synchronize(), QD_SUCCESS) << message();
    EXPECT_EQ(h_->launches(), before + 3);
}

TEST_P(Conformance, Module_KernelsByName_UnknownIsNotFound_KernelOutlivesItsModule) {
    std::shared_ptr<Module> m;
    ASSERT_EQ(h_->load_module(*ctx_, &m), QD_SUCCESS) << message();
    std::shared_ptr<Kernel> k, missing;
    EXPECT_EQ(m->get_kernel("conformance_no_such_kernel", &missing), QD_ERROR_NOT_FOUND);
    EXPECT_NE(std::string(qd::last_error_message()).find("conformance_no_such_kernel"),
              std::string::npos)
        << "the message does not name the kernel: " << message();
    EXPECT_EQ(missing, nullptr);
    ASSERT_EQ(m->get_kernel(h_->module_kernel_name(), &k), QD_SUCCESS) << message();
    EXPECT_STREQ(k->name(), h_->module_kernel_name());
    m.reset();  // the kernel keeps the module's code alive
    auto s = stream();
    h_->hold(*ctx_, *s);
    ASSERT_EQ(s->launch(*k, kOneBlock, nullptr, 0), QD_SUCCESS) << message();
    k.reset();  // queued work keeps the kernel alive
    h_->release();
    EXPECT_EQ(s->synchronize(), QD_SUCCESS) << message();
}

TEST_P(Conformance, KernelFromHostFn_CpuOnly_OthersNotSupported) {
    std::shared_ptr<Kernel> k;
    const qd_status st = ctx_->kernel_from_host_fn(&counting_host_kernel, "conformance_fn", &k);
    if (caps().host_fn_kernels) {
        ASSERT_EQ(st, QD_SUCCESS) << message();
        EXPECT_STREQ(k->name(), "conformance_fn");
    } else {
        EXPECT_EQ(st, QD_ERROR_NOT_SUPPORTED);
        EXPECT_EQ(k, nullptr);
    }
}

// ---------------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------------

TEST_P(Conformance, Shutdown_ThenEveryEnqueueAndCreateStreamIsInvalidHandle) {
    auto s = stream();
    auto e = event();
    auto k = counting_kernel();
    ASSERT_EQ(ctx_->synchronize(), QD_SUCCESS);
    ctx_->shutdown();  // as the core's context destroy does: after a synchronize, once
    shut_down_ = true;
    // Host buffers as addresses: a backend that wrongly ran an op would touch valid memory.
    alignas(16) uint8_t buffer[64] = {};
    const uint64_t a = reinterpret_cast<uintptr_t>(buffer);
    std::atomic<int> called{0};
    uint64_t address = 0;
    std::shared_ptr<Stream> late;
    EXPECT_EQ(s->launch(*k, kOneBlock, nullptr, 0), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->record(*e), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->wait(*e), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->host_fn([](void *p) { static_cast<std::atomic<int> *>(p)->store(1); }, &called),
              QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->mem_alloc(64, &address), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->memset(a, 0, 8), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->memcpy(a, a + 32, 8), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(s->mem_free(a), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(ctx_->create_stream(0, 0, &late), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(late, nullptr);
    EXPECT_EQ(called.load(), 0) << "a refused host_fn ran";
    EXPECT_GT(strlen(qd::last_error_message()), 0u);
    // Streams, events and kernels may outlive the shut-down context.
    k.reset();
    e.reset();
    s.reset();
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(backends()), param_name);

}  // namespace
