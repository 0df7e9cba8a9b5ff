// The trace's windows and the submits that race them (src/core/trace/observer.h): a window, with
// every slot and boundary it handed out, lives while a submit may still touch it. Deterministic:
// a traced submit is held inside the record of one of its boundaries (outside the trace's lock)
// by a stream that wraps the CPU backend's, and a start is held where it tops up its pool of
// timing events (core::g_trace_start_hook), with latches, never with sleeps. Links libqd's
// entry points and core statically (both seams are internal).
#include <gtest/gtest.h>
#include <qd/qd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "backends/backend.h"
#include "core/context.h"
#include "core/trace/observer.h"

namespace {

namespace backend = qd::backend;

// A one-shot latch (C++17 has no std::latch).
class Latch {
  public:
    void open() {
        std::lock_guard<std::mutex> lock(mutex_);
        open_ = true;
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return open_; });
    }

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool open_ = false;
};

// The CPU backend's stream, with one seam: once armed, its next record() opens `held` and waits
// for `go` before it records. The trace records its boundaries outside its lock, so a submit
// held there has a boundary handed out by its window and not yet given back.
class HoldingStream final : public backend::Stream {
  public:
    explicit HoldingStream(std::shared_ptr<backend::Stream> inner) : inner_(std::move(inner)) {}

    qd_status record(backend::Event &event) override {
        if (armed.exchange(false)) {
            held.open();
            go.wait();
        }
        return inner_->record(event);
    }
    qd_status launch(backend::Kernel &kernel, const backend::LaunchDims &dims, const qd_arg *args,
                     uint32_t num_args) override {
        return inner_->launch(kernel, dims, args, num_args);
    }
    qd_status wait(backend::Event &event) override { return inner_->wait(event); }
    qd_status synchronize() override { return inner_->synchronize(); }
    qd_status query() override { return inner_->query(); }
    qd_status mem_alloc(uint64_t bytes, uint64_t *address) override {
        return inner_->mem_alloc(bytes, address);
    }
    qd_status mem_free(uint64_t address) override { return inner_->mem_free(address); }
    qd_status memcpy(uint64_t dst, uint64_t src, uint64_t bytes) override {
        return inner_->memcpy(dst, src, bytes);
    }
    qd_status memset(uint64_t dst, uint8_t value, uint64_t bytes) override {
        return inner_->memset(dst, value, bytes);
    }
    qd_status host_fn(qd_host_fn fn, void *user_data) override {
        return inner_->host_fn(fn, user_data);
    }
    qd_status memcpy_peer(uint64_t dst, backend::Context &dst_ctx, uint64_t src,
                          backend::Context &src_ctx, uint64_t bytes) override {
        return inner_->memcpy_peer(dst, dst_ctx, src, src_ctx, bytes);
    }
    int32_t priority() const override { return inner_->priority(); }
    uint64_t native_handle() const override { return inner_->native_handle(); }
    qd_status get_native_handle(uint64_t *out) const override {
        return inner_->get_native_handle(out);
    }
    qd_status begin_capture(std::unique_ptr<backend::Capture> *out) override {
        return inner_->begin_capture(out);
    }
    void forget() override { inner_->forget(); }

    std::atomic<bool> armed{false};
    Latch held, go;

  private:
    std::shared_ptr<backend::Stream> inner_;
};

std::string read_file(const std::string &path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

size_t count(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The memset slices of `bytes` bytes in a trace file.
size_t memsets(const std::string &text, uint64_t bytes) {
    return count(text, "\"cat\":\"memset\",\"args\":{\"origin\":\"api\",\"bytes\":" +
                           std::to_string(bytes) + "}");
}

// What the start hook does: let the held submit go, and wait until its call has returned.
HoldingStream *g_holding = nullptr;
Latch *g_submitted = nullptr;
void release_the_held_submit() {
    g_holding->go.open();
    g_submitted->wait();
}

class TraceWindowTest : public ::testing::Test {
  protected:
    void SetUp() override {
        qd_context_desc d = QD_CONTEXT_DESC_INIT;
        d.backend = QD_BACKEND_CPU;
        ASSERT_EQ(qd_context_create(&d, &ctx_), QD_SUCCESS) << qd_last_error_message();
        ASSERT_EQ(qd_stream_create(ctx_, nullptr, &s_), QD_SUCCESS);
        qd::core::Stream *core = nullptr;
        ASSERT_EQ(qd::core::resolve(s_, &core), QD_SUCCESS);
        auto holding = std::make_shared<HoldingStream>(core->impl);
        holding_ = holding.get();
        core->impl = std::move(holding);  // before any other thread uses the stream
        ASSERT_EQ(qd_mem_alloc_async(s_, 256, &buf_), QD_SUCCESS);
        ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
        char name[] = "/tmp/qd_trace_window_XXXXXX";
        const int fd = mkstemp(name);
        ASSERT_GE(fd, 0);
        close(fd);
        path_ = name;
    }
    void TearDown() override {
        qd::core::g_trace_start_hook = nullptr;
        if (ctx_) {
            EXPECT_EQ(qd_mem_free_async(s_, buf_), QD_SUCCESS);
            EXPECT_EQ(qd_context_destroy(ctx_), QD_SUCCESS);
        }
        if (!path_.empty()) std::remove(path_.c_str());
    }
    qd_status memset_n(uint64_t bytes) { return qd_memset_async(s_, buf_, 0x5a, bytes); }

    qd_context ctx_ = 0;
    qd_stream s_ = 0;
    uint64_t buf_ = 0;
    HoldingStream *holding_ = nullptr;
    std::string path_;
};

// A submit recording a boundary of its window (outside the trace's lock) while a stop and a start
// replace that window: the start gives the last window's events back to its pool and frees its
// boundaries, with the held submit let go in the middle of it. The submit must find its window
// gone (its index names a boundary that no longer exists) rather than record into it: the call
// succeeds, its operation is in neither window's file, and the new window records its own
// operations only. Before the fix, the start gave the events back while the last window was
// still in place, and the held submit indexed its boundaries past their end.
TEST_F(TraceWindowTest, SubmitHeldInABoundaryRecord_WhileAStartReplacesItsWindow_FindsItGone) {
    ASSERT_EQ(qd_trace_start(ctx_, path_.c_str()), QD_SUCCESS) << qd_last_error_message();
    for (int i = 0; i < 3; ++i) ASSERT_EQ(memset_n(11), QD_SUCCESS);  // boundaries 0 .. 5 or so
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);

    Latch submitted;
    qd_status held_status = QD_ERROR_INTERNAL;
    holding_->armed = true;
    std::thread submitter([&] {
        held_status = memset_n(22);
        submitted.open();
    });
    holding_->held.wait();  // its boundary handed out by the first window, not recorded yet
    ASSERT_EQ(qd_trace_stop(ctx_), QD_SUCCESS) << qd_last_error_message();
    const std::string first = read_file(path_);
    g_holding = holding_;
    g_submitted = &submitted;
    qd::core::g_trace_start_hook = &release_the_held_submit;
    const qd_status started = qd_trace_start(ctx_, path_.c_str());
    qd::core::g_trace_start_hook = nullptr;
    submitter.join();
    ASSERT_EQ(started, QD_SUCCESS) << qd_last_error_message();
    EXPECT_EQ(held_status, QD_SUCCESS);

    for (int i = 0; i < 2; ++i) ASSERT_EQ(memset_n(33), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(s_), QD_SUCCESS);
    ASSERT_EQ(qd_trace_stop(ctx_), QD_SUCCESS) << qd_last_error_message();
    const std::string second = read_file(path_);
    EXPECT_EQ(memsets(first, 11), 3u) << first;
    EXPECT_EQ(memsets(first, 22), 0u) << "completed after its window's file was written";
    EXPECT_EQ(memsets(second, 22), 0u) << "its before() ran in the last window, not this one";
    EXPECT_EQ(memsets(second, 11), 0u);
    EXPECT_EQ(memsets(second, 33), 2u) << second;
    EXPECT_EQ(second.compare(second.size() - 4, 4, "\n]}\n"), 0) << "the file is complete";
}

}  // namespace
