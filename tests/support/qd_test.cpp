#include "qd_test.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace qdt {

// ---------------------------------------------------------------------------------------------
// Scale
// ---------------------------------------------------------------------------------------------

double scale() {
    static const double value = [] {
        const char *env = getenv("QD_TEST_SCALE");
        if (!env || !*env) return 1.0;
        double v = strtod(env, nullptr);
        return (std::isfinite(v) && v > 0) ? v : 1.0;
    }();
    return value;
}

uint64_t scaled(uint64_t n, uint64_t floor) {
    double v = (double)n * scale();
    uint64_t r = v < 1 ? 0 : (uint64_t)v;
    return std::max(r, floor);
}

// ---------------------------------------------------------------------------------------------
// Status assertions
// ---------------------------------------------------------------------------------------------

std::vector<qd_backend> all_backends() {
    std::vector<qd_backend> all;
    for (uint32_t b = QD_BACKEND_CPU; std::strcmp(qd_backend_name((qd_backend)b), "unknown"); ++b)
        all.push_back((qd_backend)b);
    return all;
}

std::string backend_name(qd_backend backend) {
    std::string name = qd_backend_name(backend);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return (char)toupper(c); });
    return name;
}

namespace {
thread_local std::string t_marker;

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return (char)tolower(c); });
    return s;
}
}  // namespace

void plant_marker_message() {
    uint32_t count = 0;
    // An unknown backend value: a failure whose message no call under test can also produce.
    (void)qd_device_count((qd_backend)0x5A5A5A5A, &count);
    t_marker = qd_last_error_message();
    if (t_marker.empty()) t_marker = "\x01<no marker>";
}

bool validation_pass() {
    const char *v = std::getenv("QD_VALIDATE");
    return v && *v && std::strcmp(v, "0") != 0;
}

void declare_slots(qd_kernel kernel, std::initializer_list<uint32_t> slots,
                   std::initializer_list<uint32_t> read_only) {
    for (uint32_t i : slots) {
        EXPECT_QD_OK(qd_kernel_set_param_access(kernel, i, QD_PARAM_PARTITIONED));
    }
    for (uint32_t i : read_only) {
        EXPECT_QD_OK(qd_kernel_set_param_access(kernel, i, QD_PARAM_READ));
    }
}

bool message_is_marker() { return t_marker == qd_last_error_message(); }

::testing::AssertionResult CheckStatus(const char *, const char *, const char *, const char *,
                                       qd_status expected, const char *keywords,
                                       const char *call_text, qd_status actual) {
    if (expected != actual) {
        auto r = ::testing::AssertionFailure();
        r << call_text << "\n  expected " << qd_status_name(expected) << " (" << expected
          << "), got " << qd_status_name(actual) << " (" << actual << ")";
        if (actual < 0) r << "; message: \"" << qd_last_error_message() << "\"";
        return r;
    }
    if (expected >= 0) return ::testing::AssertionSuccess();
    const char *msg = qd_last_error_message();
    if (msg == nullptr)
        return ::testing::AssertionFailure() << call_text << ": qd_last_error_message() is NULL";
    if (*msg == '\0')
        return ::testing::AssertionFailure() << call_text << ": error message is empty";
    if (message_is_marker())
        return ::testing::AssertionFailure()
               << call_text << ": the failing call did not write its own message (still: \"" << msg
               << "\")";
    if (!keywords || !*keywords) return ::testing::AssertionSuccess();
    std::string m = lower(msg);
    std::string all = keywords;
    size_t start = 0;
    while (start <= all.size()) {
        size_t bar = all.find('|', start);
        std::string kw =
            lower(all.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
        if (!kw.empty() && m.find(kw) != std::string::npos) return ::testing::AssertionSuccess();
        if (bar == std::string::npos) break;
        start = bar + 1;
    }
    return ::testing::AssertionFailure()
           << call_text << " -> " << qd_status_name(actual) << ": message \"" << msg
           << "\" mentions none of \"" << keywords << "\"";
}

// ---------------------------------------------------------------------------------------------
// Gate
// ---------------------------------------------------------------------------------------------

struct Gate::State {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    std::chrono::milliseconds auto_open;
    std::atomic<bool> entered{false};
    std::atomic<bool> done{false};
    std::atomic<bool> timed_out{false};
};

Gate::Gate(std::chrono::milliseconds auto_open) : state_(new State) {
    state_->auto_open = auto_open;
}

Gate::~Gate() {
    open();
    if (enqueued_ && !wait_done(std::chrono::milliseconds(30000))) {
        // The callback may still run later (a library that lost it or never runs it): keep the
        // state alive rather than let it touch freed memory.
        ADD_FAILURE() << "a gate callback never returned; leaking its state";
        return;
    }
    delete state_;
}

void Gate::callback(void *user) {
    State *s = static_cast<State *>(user);
    s->entered.store(true);
    {
        std::unique_lock<std::mutex> lock(s->mutex);
        if (!s->cv.wait_for(lock, s->auto_open, [s] { return s->open; })) s->timed_out.store(true);
    }
    s->done.store(true);
}

qd_status Gate::enqueue(qd_stream stream) {
    qd_status st = qd_launch_host_fn(stream, &Gate::callback, state_);
    if (st == QD_SUCCESS) enqueued_ = true;
    return st;
}

void Gate::open() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->open = true;
    state_->cv.notify_all();
}

bool Gate::entered() const { return state_->entered.load(); }
bool Gate::done() const { return state_->done.load(); }
bool Gate::timed_out() const { return state_->timed_out.load(); }

static bool poll_until(const std::atomic<bool> &flag, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!flag.load()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
}

bool Gate::wait_done(std::chrono::milliseconds limit) const {
    return poll_until(state_->done, limit);
}
bool Gate::wait_entered(std::chrono::milliseconds limit) const {
    return poll_until(state_->entered, limit);
}

DeviceGate::DeviceGate(qd_context ctx, qd_kernel wait_flag, std::chrono::milliseconds auto_open)
    : ctx_(ctx), kernel_(wait_flag), auto_open_(auto_open) {
    void *p = nullptr;
    qd_status st = qd_host_alloc(ctx_, 2 * sizeof(uint32_t), &p);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    if (st != QD_SUCCESS) return;
    words_ = static_cast<uint32_t *>(p);
    __atomic_store_n(&words_[0], 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&words_[1], 0u, __ATOMIC_RELEASE);
}

DeviceGate::~DeviceGate() {
    if (!words_) return;
    open();
    if (enqueued_) {
        auto deadline = std::chrono::steady_clock::now() + auto_open_ + std::chrono::seconds(20);
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) {
                ADD_FAILURE() << "a device gate kernel never finished; leaking its memory";
                return;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }
    // The kernel wrote its verdict, but the host is ordered after it only by a synchronize:
    // the event recorded right behind it (the validation mode reports a free that is not).
    if (finished_) {
        (void)qd_event_synchronize(finished_);
        (void)qd_event_destroy(finished_);
    }
    (void)qd_host_free(ctx_, words_);
}

qd_status DeviceGate::enqueue(qd_stream stream) {
    if (!words_) return QD_ERROR_OUT_OF_MEMORY;
    uint64_t timeout_us = static_cast<uint64_t>(auto_open_.count()) * 1000;
    qd_status st = launch_wait_flag(stream, kernel_, (uint64_t)(uintptr_t)words_, timeout_us);
    if (st != QD_SUCCESS) return st;
    enqueued_ = true;
    if (!finished_ && qd_event_create(ctx_, 0, &finished_) != QD_SUCCESS) finished_ = 0;
    if (finished_ && qd_event_record(stream, finished_) != QD_SUCCESS) {
        (void)qd_event_destroy(finished_);
        finished_ = 0;
    }
    return st;
}

void DeviceGate::open() {
    if (words_) __atomic_store_n(&words_[0], 1u, __ATOMIC_RELEASE);
}

bool DeviceGate::done() const {
    return words_ && __atomic_load_n(&words_[1], __ATOMIC_ACQUIRE) != 0;
}

bool DeviceGate::timed_out() const {
    return words_ && __atomic_load_n(&words_[1], __ATOMIC_ACQUIRE) == 2;
}

bool Flag::wait(std::chrono::milliseconds limit) const {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!is_set()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
}

bool wait_idle(qd_stream stream, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        qd_status st = qd_stream_query(stream);
        if (st == QD_SUCCESS) return true;
        if (st != QD_NOT_READY || std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

static void sleep_cb(void *user) {
    std::this_thread::sleep_for(std::chrono::microseconds((uintptr_t)user));
}

qd_status enqueue_sleep_us(qd_stream stream, uint32_t microseconds) {
    return qd_launch_host_fn(stream, &sleep_cb, (void *)(uintptr_t)microseconds);
}

void Barrier::arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t gen = generation_;
    if (++waiting_ == count_) {
        waiting_ = 0;
        ++generation_;
        cv_.notify_all();
        return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
}

// ---------------------------------------------------------------------------------------------
// Contexts
// ---------------------------------------------------------------------------------------------

bool backend_available(qd_backend backend, std::string *why) {
    uint32_t count = 0;
    qd_status st = qd_device_count(backend, &count);
    if (st != QD_SUCCESS) {
        if (why) *why = std::string(qd_status_name(st)) + ": " + qd_last_error_message();
        return false;
    }
    if (count == 0) {
        if (why) *why = "qd_device_count reports 0 devices";
        return false;
    }
    return true;
}

qd_context_desc make_desc(qd_backend backend, uint32_t stream_pool_size,
                          uint32_t cpu_worker_threads) {
    qd_context_desc desc = QD_CONTEXT_DESC_INIT;
    desc.backend = (uint32_t)backend;
    desc.stream_pool_size = stream_pool_size;
    if (backend == QD_BACKEND_CPU || backend == QD_BACKEND_DEFAULT)
        desc.cpu_worker_threads = cpu_worker_threads;
    return desc;
}

qd_context_stats get_stats(qd_context ctx) {
    qd_context_stats stats = QD_CONTEXT_STATS_INIT;
    qd_status st = qd_context_get_stats(ctx, &stats);
    EXPECT_EQ(st, QD_SUCCESS) << "qd_context_get_stats: " << qd_status_name(st) << ": "
                              << qd_last_error_message();
    return stats;
}

std::string param_name(const ::testing::TestParamInfo<qd_backend> &info) {
    return backend_name(info.param);
}

void BackendTest::SetUp() {
    std::string why;
    if (!backend_available(GetParam(), &why)) {
        skipped_ = true;
        GTEST_SKIP() << "no " << backend_name(GetParam()) << " device: " << why;
    }
    qd_context_desc desc = make_desc(GetParam(), 8, 4);
    ASSERT_QD_OK(qd_context_create(&desc, &ctx_));
    ASSERT_QD_OK(qd_context_default_stream(ctx_, &default_stream_));
    std::string kwhy;
    kernels_ = make_test_kernels(GetParam(), ctx_, &kwhy);
    if (!kernels_ && is_cpu()) FAIL() << "CPU test kernels could not be made: " << kwhy;
}

void BackendTest::TearDown() {
    if (skipped_) return;
    if (ctx_) {
        EXPECT_QD_OK(qd_context_synchronize(ctx_));
        for (void *p : host_blocks_) (void)qd_host_free(ctx_, p);
    }
    host_blocks_.clear();
    kernels_.reset();
    for (qd_context c : extra_contexts_) (void)qd_context_destroy(c);
    extra_contexts_.clear();
    if (ctx_) {
        EXPECT_QD_OK(qd_context_destroy(ctx_));
    }
    ctx_ = 0;
}

qd_context BackendTest::other_context() {
    qd_context_desc desc = make_desc(GetParam(), 8, 2);
    qd_context c = 0;
    qd_status st = qd_context_create(&desc, &c);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    if (st == QD_SUCCESS) extra_contexts_.push_back(c);
    return c;
}

qd_stream BackendTest::new_stream(qd_context ctx) {
    qd_stream s = 0;
    qd_status st = qd_stream_create(ctx ? ctx : ctx_, nullptr, &s);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    return s;
}

qd_event BackendTest::new_event(uint32_t flags, qd_context ctx) {
    qd_event e = 0;
    qd_status st = qd_event_create(ctx ? ctx : ctx_, flags, &e);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    return e;
}

uint64_t BackendTest::alloc(qd_stream stream, uint64_t bytes) {
    uint64_t a = 0;
    qd_status st = qd_mem_alloc_async(stream, bytes, &a);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    return a;
}

void *BackendTest::host_alloc(uint64_t bytes) {
    void *p = nullptr;
    qd_status st = qd_host_alloc(ctx_, bytes, &p);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    if (st == QD_SUCCESS) host_blocks_.push_back(p);
    return p;
}

std::vector<uint8_t> BackendTest::read_back(qd_stream stream, uint64_t address, uint64_t bytes) {
    std::vector<uint8_t> out(bytes, 0xEE);
    qd_status st = qd_memcpy_async(stream, (uint64_t)(uintptr_t)out.data(), address, bytes);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    st = qd_stream_synchronize(stream);
    EXPECT_EQ(st, QD_SUCCESS) << qd_last_error_message();
    return out;
}

}  // namespace qdt
