// Shared helpers of the qd test suites: status assertions that also check the error message,
// the QD_TEST_SCALE loop scale, host-callback latches (gates and flags), a thread barrier, and
// the backend-parameterised context fixture.
//
// Everything here uses only the public header, so the same helpers serve every backend.
#pragma once

#include <qd/qd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "test_kernels.h"

namespace qdt {

// ---------------------------------------------------------------------------------------------
// Loop scale
// ---------------------------------------------------------------------------------------------

// QD_TEST_SCALE (a positive float, default 1) multiplies every heavy loop count, so CI can run
// the reliability figures (e.g. 1e6 forged handles per entry point with QD_TEST_SCALE=10) or
// cut them under slow sanitizers (QD_TEST_SCALE=0.1).
double scale();
// n * scale(), at least `floor`.
uint64_t scaled(uint64_t n, uint64_t floor = 1);

// ---------------------------------------------------------------------------------------------
// Status assertions
// ---------------------------------------------------------------------------------------------

// Every backend the library knows, built in or not (qd_backend_name names them, from
// QD_BACKEND_CPU up): what QDT_INSTANTIATE_BACKENDS runs each suite against.
std::vector<qd_backend> all_backends();
// How test names and messages spell a backend: qd_backend_name() in capitals ("CPU", "CUDA").
std::string backend_name(qd_backend backend);

// Writes a distinctive message into this thread's last-error slot, so a later check can tell
// whether the call under test wrote its own message.
void plant_marker_message();
// True when the current message is the planted marker (the call under test wrote nothing).
bool message_is_marker();

// Plants the marker only before calls expected to fail (success never writes the message).
inline void plant_marker_if_error(qd_status expected) {
    if (expected < 0) plant_marker_message();
}

// All ones: the largest handle or address.
constexpr uint64_t kAllOnes = ~(uint64_t)0;

// gtest predicate-formatter behind EXPECT_QD*: the status, and after an expected error the
// message (non-empty, written by this call, mentioning one of the '|'-separated keywords).
::testing::AssertionResult CheckStatus(const char *, const char *, const char *, const char *,
                                       qd_status expected, const char *keywords,
                                       const char *call_text, qd_status actual);

}  // namespace qdt

// EXPECT_QD(expected, call): the call returns `expected`; on an error status the message must be
// non-empty and freshly written by this call. EXPECT_QD_ERR(expected, "kw1|kw2", call) also
// requires the message to mention one of the keywords (case-insensitive), so it is specific to
// the cause. All of them accept `<< extra` like any gtest assertion.
#define QDT_STATUS_CHECK_(assertion, expected, keywords, call)                                     \
    assertion(::qdt::CheckStatus, (qd_status)(expected), keywords, #call,                          \
              (::qdt::plant_marker_if_error((qd_status)(expected)), (qd_status)(call)))

#define EXPECT_QD(expected, call) QDT_STATUS_CHECK_(EXPECT_PRED_FORMAT4, expected, "", call)
#define ASSERT_QD(expected, call) QDT_STATUS_CHECK_(ASSERT_PRED_FORMAT4, expected, "", call)
#define EXPECT_QD_ERR(expected, keywords, call)                                                    \
    QDT_STATUS_CHECK_(EXPECT_PRED_FORMAT4, expected, keywords, call)
#define EXPECT_QD_OK(call) EXPECT_QD(QD_SUCCESS, call)
#define ASSERT_QD_OK(call) ASSERT_QD(QD_SUCCESS, call)

namespace qdt {

// ---------------------------------------------------------------------------------------------
// Latches built from host callbacks
// ---------------------------------------------------------------------------------------------

// A gate queued on a stream with qd_launch_host_fn: the stream blocks in the callback until the
// test calls open(). If the test never opens it (a hang in the code under test), it opens by
// itself after `auto_open` and records that, so a broken library fails the test instead of
// hanging the suite.
class Gate {
  public:
    explicit Gate(std::chrono::milliseconds auto_open = std::chrono::milliseconds(10000));
    ~Gate();
    Gate(const Gate &) = delete;
    Gate &operator=(const Gate &) = delete;

    qd_status enqueue(qd_stream stream);
    void open();
    bool entered() const;    // the callback started
    bool done() const;       // the callback returned
    bool timed_out() const;  // opened by itself, not by open()
    // Block until the callback has returned (bounded by `limit`); true if it did.
    bool wait_done(std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) const;
    // Block until the callback has started (bounded); true if it did.
    bool wait_entered(std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) const;

  private:
    struct State;
    static void callback(void *user);
    State *state_;  // leaked on purpose if the callback is still pending at destruction
    bool enqueued_ = false;
};

// A gate made of device work: the wait_flag test kernel polls a word of pinned host memory until
// the test calls open(). Unlike Gate it needs no host callback, so it holds a stream back the same
// way on every backend: on CUDA an event record queued behind a host function that has not
// returned is deferred by the driver, but one queued behind a running kernel is not. If the test
// never opens it, the kernel gives up after `auto_open` and says so (timed_out()), so a broken
// library fails the test instead of hanging it.
//
// Get every kernel a test needs before enqueueing the gate (qd.h, qd_kernel_get: a GPU code load
// may wait for work in flight).
class DeviceGate {
  public:
    DeviceGate(qd_context ctx, qd_kernel wait_flag,
               std::chrono::milliseconds auto_open = std::chrono::milliseconds(10000));
    // Opens the gate and waits (bounded) for the kernel to finish before freeing the words.
    ~DeviceGate();
    DeviceGate(const DeviceGate &) = delete;
    DeviceGate &operator=(const DeviceGate &) = delete;

    qd_status enqueue(qd_stream stream);
    void open();
    bool done() const;       // the kernel finished
    bool timed_out() const;  // it finished because nobody opened it

  private:
    qd_context ctx_;
    qd_kernel kernel_;
    std::chrono::milliseconds auto_open_;
    uint32_t *words_ = nullptr;  // [0] open flag (host writes), [1] verdict (kernel writes)
    qd_event finished_ = 0;      // recorded right after the kernel: the free is ordered after it
    bool enqueued_ = false;
};

// For a test whose streams each run one kernel on their own slots of one allocation (a slot per
// task, group or child). The validation mode counts a pointer argument as an access from its
// address to the end of its block, so such launches would look like races to it: this declares
// the kernel's parameters `slots` QD_PARAM_PARTITIONED (its launches are not checked against
// each other for them) and `read_only` QD_PARAM_READ, before the launches are queued. Every
// other operation on those blocks is still checked (tests/README.md, "The validation pass").
void declare_slots(qd_kernel kernel, std::initializer_list<uint32_t> slots,
                   std::initializer_list<uint32_t> read_only = {});

// A flag a host callback sets: proves that everything queued before it on a stream has run.
struct Flag {
    std::atomic<int> value{0};
    static void set_cb(void *user) { static_cast<Flag *>(user)->value.store(1); }
    qd_status enqueue(qd_stream stream) { return qd_launch_host_fn(stream, &Flag::set_cb, this); }
    bool is_set() const { return value.load() != 0; }
    // Poll until set (bounded); true if it was set.
    bool wait(std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) const;
};

// Polls qd_stream_query until the stream is idle (bounded); true if it became idle. Unlike a
// Flag, this needs no host callback, so it also works while another stream's callback blocks
// (CUDA runs the host functions of all streams on one thread).
bool wait_idle(qd_stream stream,
               std::chrono::milliseconds limit = std::chrono::milliseconds(20000));

// A host callback that does nothing (safe to pass with any user_data).
inline void noop_host_fn(void *) {}

// A host callback that sleeps: a delay that works on every backend.
qd_status enqueue_sleep_us(qd_stream stream, uint32_t microseconds);

// A reusable barrier for lock-step threads (C++17 has no std::barrier).
class Barrier {
  public:
    explicit Barrier(unsigned count) : count_(count) {}
    void arrive_and_wait();

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    unsigned count_;
    unsigned waiting_ = 0;
    uint64_t generation_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------------------------

// Availability of a backend: true with count > 0, else false and `why` says why (the library's
// message), for a visible GTEST_SKIP.
bool backend_available(qd_backend backend, std::string *why);

qd_context_desc make_desc(qd_backend backend, uint32_t stream_pool_size = 0,
                          uint32_t cpu_worker_threads = 0);

qd_context_stats get_stats(qd_context ctx);

// The base fixture of backend-parameterised tests. SetUp skips (visibly) when the backend has no
// device; otherwise it creates ctx_ (pool of 8 streams, 4 CPU workers), its default stream and
// the kernel provider (null when the backend has none: kernel tests then skip).
class BackendTest : public ::testing::TestWithParam<qd_backend> {
  protected:
    void SetUp() override;
    void TearDown() override;

    qd_backend backend() const { return GetParam(); }
    bool is_cpu() const { return GetParam() == QD_BACKEND_CPU; }
    // A second context of the same backend (destroyed in TearDown).
    qd_context other_context();
    qd_stream new_stream(qd_context ctx = 0);
    qd_event new_event(uint32_t flags = 0, qd_context ctx = 0);
    // Device memory of `bytes` on stream (ordered on it); freed by the test.
    uint64_t alloc(qd_stream stream, uint64_t bytes);
    // Pinned host memory of ctx_, freed in TearDown.
    void *host_alloc(uint64_t bytes);
    // Copy device memory back through a host buffer and return it (synchronises `stream`).
    std::vector<uint8_t> read_back(qd_stream stream, uint64_t address, uint64_t bytes);
    template <typename T>
    T read_value(qd_stream stream, uint64_t address) {
        std::vector<uint8_t> bytes = read_back(stream, address, sizeof(T));
        T value;
        memcpy(&value, bytes.data(), sizeof(T));
        return value;
    }

    qd_context ctx_ = 0;
    qd_stream default_stream_ = 0;
    std::unique_ptr<TestKernels> kernels_;
    std::vector<qd_context> extra_contexts_;
    std::vector<void *> host_blocks_;
    bool skipped_ = false;
};

std::string param_name(const ::testing::TestParamInfo<qd_backend> &info);

}  // namespace qdt

// Skip (visibly) a test that needs kernels when this backend has no kernel provider yet.
#define QDT_REQUIRE_KERNELS()                                                                      \
    do {                                                                                           \
        if (!kernels_)                                                                             \
            GTEST_SKIP() << "no test-kernel provider for the " << ::qdt::backend_name(backend())   \
                         << " backend yet (see tests/support/README.md)";                          \
    } while (0)

// Declares `qd_module var` and loads the backend's test-kernel image into it as a module of its
// own (load_test_module); skips visibly when a GPU backend has no image here. Unload it in the
// test (or let the context's destroy do it).
#define QDT_LOAD_TEST_MODULE(var)                                                                  \
    qd_module var = 0;                                                                             \
    do {                                                                                           \
        std::string why_;                                                                          \
        const qd_status st_ = ::qdt::load_test_module(backend(), ctx_, &var, &why_);               \
        if (st_ == QD_ERROR_NOT_FOUND && !is_cpu())                                                \
            GTEST_SKIP() << "no test-kernel image for the " << ::qdt::backend_name(backend())      \
                         << " backend: " << why_;                                                  \
        ASSERT_EQ(st_, QD_SUCCESS) << why_;                                                        \
    } while (0)

// Whether this run is the validation pass of tools/test-all (QD_VALIDATE set, and not "0"):
// every context validates, and a hazard fails the test (tests/README.md, "The validation pass").
namespace qdt {
bool validation_pass();
}  // namespace qdt

// For a test (or a fixture's SetUp) that races on purpose, or needs the validation mode off or
// set its own way: it plants hazards to see them reported, or checks what a context without
// validation does. It skips visibly in the validation pass; it has run in the plain ones.
#define QDT_RACES_ON_PURPOSE()                                                                     \
    do {                                                                                           \
        if (::qdt::validation_pass())                                                              \
            GTEST_SKIP() << "races on purpose, or sets validation itself: not in the "             \
                            "validation pass (tests/README.md)";                                   \
    } while (0)

#define QDT_REQUIRE_CPU()                                                                          \
    do {                                                                                           \
        if (!is_cpu()) GTEST_SKIP() << "CPU-backend behaviour";                                    \
    } while (0)

#define QDT_REQUIRE_GPU()                                                                          \
    do {                                                                                           \
        if (is_cpu()) GTEST_SKIP() << "GPU-backend behaviour";                                     \
    } while (0)

#define QDT_INSTANTIATE_BACKENDS(fixture)                                                          \
    INSTANTIATE_TEST_SUITE_P(Backends, fixture, ::testing::ValuesIn(::qdt::all_backends()),        \
                             ::qdt::param_name)
