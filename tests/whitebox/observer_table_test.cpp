// The observer table (src/core/observer_table.h) and the object hook (src/core/object_event.h):
// Context::create attaches the rows that ask for it, a context holds one observer per row, and
// observers hear of objects created and destroyed, in order with the operations on them.
//
// Built with the test build of the table (QD_TEST_OBSERVERS), which adds the op_counter row
// (op_counter_observer.h): the observer that proves a new observer is one file and one row.
#include <gtest/gtest.h>
#include <qd/qd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/object_event.h"
#include "core/observer_table.h"
#include "core/observers.h"
#include "core/submit.h"
#include "core/validation/observer.h"
#include "op_counter_observer.h"

namespace {

using qd::core::ObjectEvent;
using qd::core::Op;
using qd::core::OpCounterObserver;
using qd::core::OpKind;
using Kind = ObjectEvent::Kind;

int32_t nop_kernel(const qd_host_kernel_info *, void *const *) { return 0; }
void nop_fn(void *) {}

qd::core::Context *core_of(qd_context ctx) {
    qd::core::Context *c = nullptr;
    EXPECT_EQ(qd::core::resolve(ctx, &c), QD_SUCCESS);
    return c;
}

qd_context make_context(uint32_t flags = 0, bool counter = false) {
    OpCounterObserver::enabled = counter;
    qd_context_desc d = QD_CONTEXT_DESC_INIT;
    d.backend = QD_BACKEND_CPU;
    d.flags = flags;
    qd_context ctx = 0;
    EXPECT_EQ(qd_context_create(&d, &ctx), QD_SUCCESS);
    OpCounterObserver::enabled = false;
    return ctx;
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

TEST(ObserverTable, ACapacityOfOneObserverPerRow_TestRowsIncluded) {
    EXPECT_EQ(qd::core::kObserverRowCount, 3u);  // trace, validation, op_counter
    EXPECT_EQ(qd::core::ObserverSet::kMaxObservers, qd::core::kObserverRowCount);
}

TEST(ObserverTable, Create_AttachesTheAtCreateRowsThatAreAskedFor_AndNoOther) {
    qd_context plain = make_context();
    EXPECT_EQ(core_of(plain)->observer(), nullptr);
    EXPECT_EQ(qd_context_destroy(plain), QD_SUCCESS);

    qd_context validating = make_context(QD_CONTEXT_VALIDATE);
    qd::core::Context *c = core_of(validating);
    ASSERT_NE(c->observers(), nullptr);
    EXPECT_EQ(c->observers()->size(), 1u);
    EXPECT_NE(c->observers()->find<qd::core::ValidationObserver>(), nullptr);
    EXPECT_EQ(OpCounterObserver::of(*c), nullptr);
    EXPECT_EQ(qd_context_destroy(validating), QD_SUCCESS);

    qd_context both = make_context(QD_CONTEXT_VALIDATE, true);
    c = core_of(both);
    ASSERT_NE(c->observers(), nullptr);
    EXPECT_EQ(c->observers()->size(), 2u);
    EXPECT_NE(c->observers()->find<qd::core::ValidationObserver>(), nullptr);
    EXPECT_NE(OpCounterObserver::of(*c), nullptr);
    EXPECT_EQ(qd_context_destroy(both), QD_SUCCESS);
}

// ---------------------------------------------------------------------------------------------
// The op counter: a new observer from one file and one row
// ---------------------------------------------------------------------------------------------

TEST(OpCounter, CountsEveryOperationByKind_AndEveryObjectCreatedAndDestroyed) {
    qd_context ctx = make_context(0, true);
    const OpCounterObserver *n = OpCounterObserver::of(*core_of(ctx));
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->created(Kind::Stream), 1u) << "the default stream, made after the attach";

    qd_stream def = 0, s = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &def), QD_SUCCESS);
    ASSERT_EQ(qd_stream_create(ctx, nullptr, &s), QD_SUCCESS);
    qd_event e1 = 0, e2 = 0;
    ASSERT_EQ(qd_event_create(ctx, 0, &e1), QD_SUCCESS);
    ASSERT_EQ(qd_event_create(ctx, 0, &e2), QD_SUCCESS);
    qd_kernel k = 0;
    ASSERT_EQ(qd_kernel_from_host_fn(ctx, nop_kernel, "nop", &k), QD_SUCCESS);

    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(qd_launch(s, k, &cfg, nullptr, 0), QD_SUCCESS);
    ASSERT_EQ(qd_launch_host_fn(s, nop_fn, nullptr), QD_SUCCESS);
    ASSERT_EQ(qd_event_record(s, e1), QD_SUCCESS);
    ASSERT_EQ(qd_stream_wait_event(def, e1), QD_SUCCESS);
    uint64_t a = 0, b = 0;
    ASSERT_EQ(qd_mem_alloc_async(def, 64, &a), QD_SUCCESS);
    ASSERT_EQ(qd_mem_alloc_async(def, 64, &b), QD_SUCCESS);
    ASSERT_EQ(qd_memset_async(def, a, 1, 64), QD_SUCCESS);
    ASSERT_EQ(qd_memcpy_async(def, b, a, 64), QD_SUCCESS);
    ASSERT_EQ(qd_mem_free_async(def, a), QD_SUCCESS);
    ASSERT_EQ(qd_mem_free_async(def, b), QD_SUCCESS);
    void *h = nullptr;
    ASSERT_EQ(qd_host_alloc(ctx, 32, &h), QD_SUCCESS);
    ASSERT_EQ(qd_context_synchronize(ctx), QD_SUCCESS);
    ASSERT_EQ(qd_host_free(ctx, h), QD_SUCCESS);

    ASSERT_EQ(qd_stream_destroy(s), QD_SUCCESS);
    ASSERT_EQ(qd_event_destroy(e1), QD_SUCCESS);
    ASSERT_EQ(qd_kernel_destroy(k), QD_SUCCESS);
    // Refused and failed calls count nothing.
    EXPECT_EQ(qd_stream_destroy(s), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_stream_destroy(def), QD_ERROR_INVALID_OPERATION);
    EXPECT_EQ(qd_event_destroy(e1), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_mem_free_async(def, a), QD_ERROR_INVALID_ADDRESS);
    EXPECT_EQ(qd_launch(s, k, &cfg, nullptr, 0), QD_ERROR_INVALID_HANDLE);

    EXPECT_EQ(n->ops(OpKind::Launch), 3u);
    EXPECT_EQ(n->ops(OpKind::HostFn), 1u);
    EXPECT_EQ(n->ops(OpKind::Record), 1u);
    EXPECT_EQ(n->ops(OpKind::Wait), 1u);
    EXPECT_EQ(n->ops(OpKind::MemAlloc), 2u);
    EXPECT_EQ(n->ops(OpKind::MemFree), 2u);
    EXPECT_EQ(n->ops(OpKind::Memcpy), 1u);
    EXPECT_EQ(n->ops(OpKind::Memset), 1u);
    EXPECT_EQ(n->created(Kind::Stream), 2u);
    EXPECT_EQ(n->destroyed(Kind::Stream), 1u);
    EXPECT_EQ(n->created(Kind::Event), 2u);
    EXPECT_EQ(n->destroyed(Kind::Event), 1u);
    EXPECT_EQ(n->created(Kind::Kernel), 1u);
    EXPECT_EQ(n->destroyed(Kind::Kernel), 1u);
    EXPECT_EQ(n->created(Kind::DeviceBlock), 2u);
    EXPECT_EQ(n->destroyed(Kind::DeviceBlock), 2u);
    EXPECT_EQ(n->created(Kind::HostBlock), 1u);
    EXPECT_EQ(n->destroyed(Kind::HostBlock), 1u);
    EXPECT_EQ(n->created(Kind::Module) + n->destroyed(Kind::Module), 0u);
    EXPECT_EQ(n->created(Kind::Graph) + n->destroyed(Kind::Graph), 0u);
    EXPECT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}

TEST(OpCounter, AGraphFromACapture_IsCreatedOnceAndDestroyedOnce) {
    qd_context ctx = make_context(0, true);
    const OpCounterObserver *n = OpCounterObserver::of(*core_of(ctx));
    ASSERT_NE(n, nullptr);
    qd_stream s = 0;
    ASSERT_EQ(qd_context_default_stream(ctx, &s), QD_SUCCESS);
    ASSERT_EQ(qd_stream_begin_capture(s), QD_SUCCESS);
    ASSERT_EQ(qd_launch_host_fn(s, nop_fn, nullptr), QD_SUCCESS);
    qd_graph g = 0;
    ASSERT_EQ(qd_stream_end_capture(s, &g), QD_SUCCESS);
    EXPECT_EQ(n->created(Kind::Graph), 1u);
    ASSERT_EQ(qd_graph_destroy(g), QD_SUCCESS);
    EXPECT_EQ(qd_graph_destroy(g), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(n->destroyed(Kind::Graph), 1u);
    EXPECT_EQ(qd_context_destroy(ctx), QD_SUCCESS);
}

// ---------------------------------------------------------------------------------------------
// The hook's order, through the chokepoint's test seam
// ---------------------------------------------------------------------------------------------

// Logs object events and operations in the order they come, naming objects by address.
class Log : public qd::core::OpObserver {
  public:
    qd_status before(const Op &op, bool *) override {
        const qd::core::Object *on = op.user_event;
        lines.push_back("op " + std::to_string(int(op.kind)) + " " +
                        name(static_cast<const qd::core::Object *>(op.stream)) +
                        (on ? " " + name(on) : ""));
        return QD_SUCCESS;
    }
    void after(const Op &, qd_status) override {}
    void object_event(const ObjectEvent &e) override {
        ++calls;
        const bool created = e.change == ObjectEvent::Change::Created;
        lines.push_back(std::string(created ? "created " : "destroyed ") +
                        std::to_string(int(e.kind)) + " " +
                        (e.object ? name(e.object) : std::to_string(e.address)));
        handles.push_back(e.handle);
    }
    // Objects by the address the Op and the event give (a Stream, an Event).
    std::string name(const void *p) { return std::to_string(reinterpret_cast<uintptr_t>(p)); }
    std::vector<std::string> lines;
    std::vector<uint64_t> handles;
    int calls = 0;
};

class ObjectEvents : public ::testing::Test {
  protected:
    void SetUp() override {
        ctx_ = make_context();
        core_ = core_of(ctx_);
        ASSERT_EQ(core_->observer(), nullptr);
        core_->set_observer_for_test(&log_);
    }
    void TearDown() override {
        core_->set_observer_for_test(nullptr);
        EXPECT_EQ(qd_context_destroy(ctx_), QD_SUCCESS);
    }
    template <class T>
    std::string name_of(uint64_t handle) {
        T *obj = nullptr;
        EXPECT_EQ(qd::core::resolve(handle, &obj), QD_SUCCESS);
        return log_.name(static_cast<const qd::core::Object *>(obj));
    }
    qd_context ctx_ = 0;
    qd::core::Context *core_ = nullptr;
    Log log_;
};

TEST_F(ObjectEvents, CreatedIsSeenBeforeTheFirstOp_DestroyedAfterTheLastOpWasSubmitted) {
    qd_stream s = 0;
    qd_event e = 0;
    ASSERT_EQ(qd_stream_create(ctx_, nullptr, &s), QD_SUCCESS);
    ASSERT_EQ(qd_event_create(ctx_, 0, &e), QD_SUCCESS);
    const std::string sn = name_of<qd::core::Stream>(s);
    const std::string en = name_of<qd::core::Event>(e);
    ASSERT_EQ(qd_launch_host_fn(s, nop_fn, nullptr), QD_SUCCESS);
    ASSERT_EQ(qd_event_record(s, e), QD_SUCCESS);
    ASSERT_EQ(qd_stream_destroy(s), QD_SUCCESS);
    ASSERT_EQ(qd_stream_wait_event(core_->default_stream(), e), QD_SUCCESS);
    ASSERT_EQ(qd_event_destroy(e), QD_SUCCESS);
    const std::string dn = name_of<qd::core::Stream>(core_->default_stream());
    const std::string host_fn = std::to_string(int(OpKind::HostFn));
    const std::string record = std::to_string(int(OpKind::Record));
    const std::string wait = std::to_string(int(OpKind::Wait));
    const std::string stream = std::to_string(int(Kind::Stream));
    const std::string event = std::to_string(int(Kind::Event));
    EXPECT_EQ(log_.lines, (std::vector<std::string>{
                              "created " + stream + " " + sn,
                              "created " + event + " " + en,
                              "op " + host_fn + " " + sn,
                              "op " + record + " " + sn + " " + en,
                              "destroyed " + stream + " " + sn,
                              "op " + wait + " " + dn + " " + en,
                              "destroyed " + event + " " + en,
                          }));
    EXPECT_EQ(log_.handles, (std::vector<uint64_t>{s, e, s, e}));
}

TEST_F(ObjectEvents, AModuleUnload_DestroysItsKernelsFirst_ThenTheModule) {
    const char *path = std::getenv("QD_TEST_CPU_MODULE");  // tests/whitebox/meson.build
    if (!path || !*path) GTEST_SKIP() << "QD_TEST_CPU_MODULE is not set (run it through meson)";
    qd_module m = 0;
    qd_kernel k1 = 0, k2 = 0;
    ASSERT_EQ(qd_module_load(ctx_, path, std::strlen(path), &m), QD_SUCCESS);
    ASSERT_EQ(qd_kernel_get(m, "qd_test_noop", &k1), QD_SUCCESS);
    ASSERT_EQ(qd_kernel_get(m, "qd_test_noop", &k2), QD_SUCCESS);
    const std::string mn = name_of<qd::core::Module>(m);
    const std::string n1 = name_of<qd::core::Kernel>(k1);
    const std::string n2 = name_of<qd::core::Kernel>(k2);
    ASSERT_EQ(qd_module_unload(m), QD_SUCCESS);
    EXPECT_EQ(qd_module_unload(m), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_kernel_destroy(k1), QD_ERROR_INVALID_HANDLE);
    const std::string module = std::to_string(int(Kind::Module));
    const std::string kernel = std::to_string(int(Kind::Kernel));
    EXPECT_EQ(log_.lines, (std::vector<std::string>{
                              "created " + module + " " + mn,
                              "created " + kernel + " " + n1,
                              "created " + kernel + " " + n2,
                              "destroyed " + kernel + " " + n1,
                              "destroyed " + kernel + " " + n2,
                              "destroyed " + module + " " + mn,
                          }));
    EXPECT_EQ(log_.handles, (std::vector<uint64_t>{m, k1, k2, k1, k2, m}));
}

TEST_F(ObjectEvents, ABlockIsCreatedAfterItsAlloc_AndDestroyedAfterItsFreeWasSubmitted) {
    const uint64_t def = core_->default_stream();
    const std::string dn = name_of<qd::core::Stream>(def);
    uint64_t a = 0;
    ASSERT_EQ(qd_mem_alloc_async(def, 64, &a), QD_SUCCESS);
    ASSERT_EQ(qd_memset_async(def, a, 0, 64), QD_SUCCESS);
    ASSERT_EQ(qd_mem_free_async(def, a), QD_SUCCESS);
    void *h = nullptr;
    ASSERT_EQ(qd_host_alloc(ctx_, 16, &h), QD_SUCCESS);
    ASSERT_EQ(qd_host_free(ctx_, h), QD_SUCCESS);
    const std::string block = std::to_string(int(Kind::DeviceBlock));
    const std::string host = std::to_string(int(Kind::HostBlock));
    const std::string hn = std::to_string(reinterpret_cast<uint64_t>(h));
    EXPECT_EQ(log_.lines, (std::vector<std::string>{
                              "op " + std::to_string(int(OpKind::MemAlloc)) + " " + dn,
                              "created " + block + " " + std::to_string(a),
                              "op " + std::to_string(int(OpKind::Memset)) + " " + dn,
                              "op " + std::to_string(int(OpKind::MemFree)) + " " + dn,
                              "destroyed " + block + " " + std::to_string(a),
                              "created " + host + " " + hn,
                              "destroyed " + host + " " + hn,
                          }));
}

TEST_F(ObjectEvents, ADestroyThatFails_BadHandleDoubleDestroyOrRefused_ReportsNothing) {
    qd_stream s = 0, lease = 0;
    qd_event e = 0;
    qd_kernel k = 0;
    ASSERT_EQ(qd_stream_create(ctx_, nullptr, &s), QD_SUCCESS);
    ASSERT_EQ(qd_event_create(ctx_, 0, &e), QD_SUCCESS);
    ASSERT_EQ(qd_kernel_from_host_fn(ctx_, nop_kernel, "nop", &k), QD_SUCCESS);
    ASSERT_EQ(qd_stream_destroy(s), QD_SUCCESS);
    ASSERT_EQ(qd_event_destroy(e), QD_SUCCESS);
    ASSERT_EQ(qd_kernel_destroy(k), QD_SUCCESS);
    ASSERT_EQ(log_.calls, 6);
    EXPECT_EQ(qd_stream_destroy(s), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_event_destroy(e), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_kernel_destroy(k), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_stream_destroy(0), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_event_destroy(0x1234), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_module_unload(0), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_graph_destroy(0), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(qd_event_destroy(ctx_), QD_ERROR_INVALID_HANDLE);  // a handle of another kind
    EXPECT_EQ(qd_stream_destroy(core_->default_stream()), QD_ERROR_INVALID_OPERATION);
    ASSERT_EQ(qd_stream_acquire(ctx_, &lease), QD_SUCCESS);
    EXPECT_EQ(qd_stream_destroy(lease), QD_ERROR_INVALID_OPERATION);
    ASSERT_EQ(qd_stream_release(lease), QD_SUCCESS);  // a pool lease is not an object event
    EXPECT_EQ(qd_mem_free_async(core_->default_stream(), 64), QD_ERROR_INVALID_ADDRESS);
    int local = 0;
    EXPECT_NE(qd_host_free(ctx_, &local), QD_SUCCESS);
    EXPECT_EQ(log_.calls, 6);
}

TEST_F(ObjectEvents, NoObserverAttached_TheHookIsNeverCalled) {
    core_->set_observer_for_test(nullptr);
    qd_stream s = 0;
    qd_event e = 0;
    ASSERT_EQ(qd_stream_create(ctx_, nullptr, &s), QD_SUCCESS);
    ASSERT_EQ(qd_event_create(ctx_, 0, &e), QD_SUCCESS);
    uint64_t a = 0;
    ASSERT_EQ(qd_mem_alloc_async(s, 64, &a), QD_SUCCESS);
    ASSERT_EQ(qd_mem_free_async(s, a), QD_SUCCESS);
    ASSERT_EQ(qd_stream_destroy(s), QD_SUCCESS);
    ASSERT_EQ(qd_event_destroy(e), QD_SUCCESS);
    EXPECT_EQ(log_.calls, 0);
    core_->set_observer_for_test(&log_);
    ASSERT_EQ(qd_event_create(ctx_, 0, &e), QD_SUCCESS);  // the same path, observed
    ASSERT_EQ(qd_event_destroy(e), QD_SUCCESS);
    EXPECT_EQ(log_.calls, 2);
}

}  // namespace
