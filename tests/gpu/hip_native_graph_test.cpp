// Which path a HIP graph replay takes, on a real HIP runtime (on an NVIDIA machine: the test
// runtime of tests/hip_runtime on LD_LIBRARY_PATH). The public API cannot tell a native replay
// (one hipGraphLaunch) from a re-issued one (one driver call per recorded operation), so this
// binary links libqd statically and reads the HIP driver's native counters
// (gpu::native_counters: graphs_instantiated counts the executable graphs qd instantiated):
//   - with no observer attached, a capture and its replay are a native graph: the counter goes
//     up by one at the first replay and not again at the next (what GraphTest/HIP runs);
//   - with the validation mode attached, the replay re-issues its operations: no graph is
//     instantiated, and the data is the same;
//   - a host function inside a native capture: with a runtime that lacks hipLaunchHostFunc
//     (Debian's libamdhip64.so.5, and the test runtime's default build) it is
//     QD_ERROR_NOT_SUPPORTED, nothing is queued and the capture goes on (qd.h, "Graphs"); with
//     one that has it (the test runtime's host-func/ build) it is captured and runs once per
//     replay.
// Without a HIP device every test skips and says why.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/gpu/gpu_backend.h"

namespace gpu = qd::backend::gpu;

namespace {

// The HIP runtime qd loaded, by the soname it was found under (hip_driver.cpp's order).
void *loaded_hip_runtime() {
    for (const char *soname :
         {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"})
        if (void *lib = dlopen(soname, RTLD_NOW | RTLD_NOLOAD)) return lib;
    return nullptr;
}

class HipNativeGraph : public ::testing::Test {
  protected:
    void SetUp() override {
        uint32_t devices = 0;
        if (qd_device_count(QD_BACKEND_HIP, &devices) != QD_SUCCESS || devices == 0)
            GTEST_SKIP() << "HIP unavailable: " << qd_last_error_message();
        qd::backend::Driver *driver = nullptr;
        ASSERT_EQ(qd::backend::get_driver(QD_BACKEND_HIP, &driver), QD_SUCCESS);
        counters_ = gpu::native_counters(driver);
        ASSERT_NE(counters_, nullptr);
    }
    void TearDown() override {
        if (ctx_) {
            EXPECT_EQ(qd_context_destroy(ctx_), QD_SUCCESS) << qd_last_error_message();
        }
    }

    void make_context(uint32_t flags) {
        qd_context_desc desc = QD_CONTEXT_DESC_INIT;
        desc.backend = QD_BACKEND_HIP;
        desc.flags = flags;
        ASSERT_EQ(qd_context_create(&desc, &ctx_), QD_SUCCESS) << qd_last_error_message();
        ASSERT_EQ(qd_stream_create(ctx_, nullptr, &stream_), QD_SUCCESS);
        ASSERT_EQ(qd_mem_alloc_async(stream_, kBytes, &device_), QD_SUCCESS)
            << qd_last_error_message();
        ASSERT_EQ(qd_host_alloc(ctx_, kBytes, &host_), QD_SUCCESS);
        ASSERT_EQ(qd_stream_synchronize(stream_), QD_SUCCESS);
    }

    // A memset of the device buffer and its copy into pinned host memory.
    qd_graph capture_set_and_copy(uint8_t value) {
        qd_graph g = 0;
        EXPECT_EQ(qd_stream_begin_capture(stream_), QD_SUCCESS) << qd_last_error_message();
        EXPECT_EQ(qd_memset_async(stream_, device_, value, kBytes), QD_SUCCESS);
        EXPECT_EQ(qd_memcpy_async(stream_, reinterpret_cast<uintptr_t>(host_), device_, kBytes),
                  QD_SUCCESS);
        EXPECT_EQ(qd_stream_end_capture(stream_, &g), QD_SUCCESS) << qd_last_error_message();
        return g;
    }

    size_t host_bytes_not(uint8_t value) const {
        size_t n = 0;
        for (size_t i = 0; i < kBytes; ++i) n += static_cast<const uint8_t *>(host_)[i] != value;
        return n;
    }

    uint64_t instantiated() const {
        return counters_->graphs_instantiated.load(std::memory_order_relaxed);
    }

    static constexpr uint64_t kBytes = 4096;
    const gpu::NativeCounters *counters_ = nullptr;
    qd_context ctx_ = 0;
    qd_stream stream_ = 0;
    uint64_t device_ = 0;
    void *host_ = nullptr;
};

// QD_VALIDATE attaches the validation mode to every context, which takes the re-issue path.
#define SKIP_IF_VALIDATE_ENV()                                                                     \
    do {                                                                                           \
        const char *validate_ = std::getenv("QD_VALIDATE");                                        \
        if (validate_ && *validate_ && std::strcmp(validate_, "0") != 0)                           \
            GTEST_SKIP() << "QD_VALIDATE attaches the validation mode to every context";           \
    } while (0)

TEST_F(HipNativeGraph, WithNoObserver_AReplayIsOneNativeGraph) {
    SKIP_IF_VALIDATE_ENV();
    make_context(0);
    std::memset(host_, 0, kBytes);
    const uint64_t before = instantiated();
    qd_graph g = capture_set_and_copy(0x5A);
    ASSERT_NE(g, 0u);
    EXPECT_EQ(host_bytes_not(0), 0u) << "captured work ran during the capture";
    EXPECT_EQ(instantiated(), before) << "instantiated before its first replay";
    ASSERT_EQ(qd_graph_launch(g, stream_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_stream_synchronize(stream_), QD_SUCCESS);
    EXPECT_EQ(host_bytes_not(0x5A), 0u);
    EXPECT_EQ(instantiated(), before + 1) << "the replay did not take the native graph path";
    std::memset(host_, 0, kBytes);
    ASSERT_EQ(qd_graph_launch(g, stream_), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(stream_), QD_SUCCESS);
    EXPECT_EQ(host_bytes_not(0x5A), 0u);
    EXPECT_EQ(instantiated(), before + 1) << "a second replay instantiated again";

    // An update (hipGraphExecUpdate through qd's adapter) gives the replay the new value.
    qd_graph fresh = capture_set_and_copy(0x3C);
    ASSERT_EQ(qd_graph_update(g, fresh), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_graph_launch(g, stream_), QD_SUCCESS);
    ASSERT_EQ(qd_stream_synchronize(stream_), QD_SUCCESS);
    EXPECT_EQ(host_bytes_not(0x3C), 0u);
    EXPECT_EQ(instantiated(), before + 1) << "an update instantiated a new graph";
    EXPECT_EQ(qd_graph_destroy(fresh), QD_SUCCESS);
    EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
}

TEST_F(HipNativeGraph, WithValidationAttached_AReplayReissuesItsOperations) {
    make_context(QD_CONTEXT_VALIDATE);
    std::memset(host_, 0, kBytes);
    const uint64_t before = instantiated();
    qd_graph g = capture_set_and_copy(0x77);
    ASSERT_NE(g, 0u);
    ASSERT_EQ(qd_graph_launch(g, stream_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_stream_synchronize(stream_), QD_SUCCESS);
    EXPECT_EQ(host_bytes_not(0x77), 0u);
    EXPECT_EQ(instantiated(), before) << "a validating context's replay used a native graph";
    EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
}

void count_call(void *user) { static_cast<std::atomic<int> *>(user)->fetch_add(1); }

TEST_F(HipNativeGraph, HostFunctionInANativeCapture_AsTheRuntimeAllows) {
    SKIP_IF_VALIDATE_ENV();
    make_context(0);
    void *runtime = loaded_hip_runtime();
    ASSERT_NE(runtime, nullptr) << "qd has a HIP device but no libamdhip64 is loaded";
    const bool has_launch_host_func = dlsym(runtime, "hipLaunchHostFunc") != nullptr;
    std::atomic<int> calls{0};
    std::memset(host_, 0, kBytes);
    qd_graph g = 0;
    ASSERT_EQ(qd_stream_begin_capture(stream_), QD_SUCCESS) << qd_last_error_message();
    ASSERT_EQ(qd_memset_async(stream_, device_, 0x21, kBytes), QD_SUCCESS);
    const qd_status st = qd_launch_host_fn(stream_, &count_call, &calls);
    const std::string message = st == QD_SUCCESS ? "" : qd_last_error_message();
    ASSERT_EQ(qd_memcpy_async(stream_, reinterpret_cast<uintptr_t>(host_), device_, kBytes),
              QD_SUCCESS);
    ASSERT_EQ(qd_stream_end_capture(stream_, &g), QD_SUCCESS) << qd_last_error_message();
    if (has_launch_host_func) {
        EXPECT_EQ(st, QD_SUCCESS) << message;
    } else {
        EXPECT_EQ(st, QD_ERROR_NOT_SUPPORTED);
        EXPECT_NE(message.find("hipStreamAddCallback"), std::string::npos) << message;
    }
    EXPECT_EQ(calls.load(), 0) << "a captured host function ran during the capture";
    for (int i = 1; i <= 3; ++i) {
        ASSERT_EQ(qd_graph_launch(g, stream_), QD_SUCCESS) << qd_last_error_message();
        ASSERT_EQ(qd_stream_synchronize(stream_), QD_SUCCESS);
        EXPECT_EQ(host_bytes_not(0x21), 0u) << "replay " << i;
        EXPECT_EQ(calls.load(), has_launch_host_func ? i : 0) << "replay " << i;
    }
    EXPECT_EQ(qd_graph_destroy(g), QD_SUCCESS);
    std::printf("the loaded HIP runtime %s hipLaunchHostFunc\n",
                has_launch_host_func ? "exports" : "does not export");
}

}  // namespace
