// White-box tests of SM partitions in the GPU layer (src/backends/gpu/split.cpp) over the fake
// driver (tests/support/fake_gpu_driver.h): the green-context calls a split makes, the split
// rule, all or none, and a driver without green contexts.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "common/error.h"
#include "fake_gpu_driver.h"

namespace {

using namespace qdt::fake_gpu;
using qd::backend::Context;
using qd::backend::Driver;
using qd::backend::Stream;

class GpuSplit : public ::testing::Test {
  protected:
    void SetUp() override {
        g_fake.reset();
        current_context() = nullptr;
        context_stack().clear();
    }
    // The driver over `table` (the fake's unless a test changed its copy) and a context on
    // device 0's primary context.
    void start(const gpu::DriverTable &table = fake_table()) {
        ASSERT_EQ(gpu::make_gpu_driver(table, qd::backend::DlLibrary(), &driver_), QD_SUCCESS)
            << qd::last_error_message();
        qd::backend::ContextParams params;
        ASSERT_EQ(driver_->create_context(params, &ctx_), QD_SUCCESS) << qd::last_error_message();
    }
    void TearDown() override {
        parts_.clear();
        if (ctx_) {
            ctx_->shutdown();
            ctx_.reset();
        }
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_EQ(g_fake.retains, 0) << "a primary context or green context was not released";
        EXPECT_TRUE(g_fake.greens.empty()) << g_fake.greens.size() << " green contexts leaked";
        EXPECT_TRUE(g_fake.streams.empty()) << g_fake.streams.size() << " native streams leaked";
    }
    qd_status split(std::vector<uint32_t> counts) {
        return ctx_->split(counts.data(), uint32_t(counts.size()), &parts_);
    }
    std::vector<std::string> calls() {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        return g_fake.partition_calls;
    }
    std::string message() { return qd::last_error_message(); }

    std::unique_ptr<Driver> driver_;
    std::unique_ptr<Context> ctx_;
    std::vector<std::unique_ptr<Context>> parts_;
};

TEST_F(GpuSplit, PartsOfTwoSizes_OneCutEach_ThenADescriptorAndGreenContextEach) {
    start();
    ASSERT_EQ(split({16, 112}), QD_SUCCESS) << message();
    ASSERT_EQ(parts_.size(), 2u);
    EXPECT_EQ(calls(), (std::vector<std::string>{"split 16", "split 112", "desc 16",
                                                 "green_create 16", "from_green", "desc 112",
                                                 "green_create 112", "from_green"}));
    // A part's streams are made in its green context, so they run on its SMs.
    std::shared_ptr<Stream> s;
    ASSERT_EQ(parts_[0]->create_stream(QD_STREAM_NON_BLOCKING, 0, &s), QD_SUCCESS) << message();
    EXPECT_EQ(calls().back(), "green_stream");
    {
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        const FakeStream *native = fs(reinterpret_cast<gpu::NativeStream>(s->native_handle()));
        EXPECT_NE(native->ctx, g_fake.primary) << "a part's stream is on the primary context";
        EXPECT_EQ(native->flags, 1u) << "green-context streams must be non-blocking";
        EXPECT_EQ(g_fake.retains, 3) << "the parent's retain and one per green context";
    }
    EXPECT_EQ(s->synchronize(), QD_SUCCESS);
    s.reset();
    parts_.clear();
    const std::vector<std::string> after = calls();
    EXPECT_EQ(std::count(after.begin(), after.end(), "green_destroy 16"), 1);
    EXPECT_EQ(std::count(after.begin(), after.end(), "green_destroy 112"), 1);
}

TEST_F(GpuSplit, PartsOfOneSize_OneCutOfNGroups) {
    start();
    ASSERT_EQ(split({16, 16, 16}), QD_SUCCESS) << message();
    ASSERT_EQ(parts_.size(), 3u);
    const std::vector<std::string> made = calls();
    ASSERT_FALSE(made.empty());
    EXPECT_EQ(made[0], "split 16 x3");
    EXPECT_EQ(std::count(made.begin(), made.end(), "green_create 16"), 3);
    EXPECT_EQ(std::count_if(made.begin(), made.end(),
                            [](const std::string &c) { return c.rfind("split", 0) == 0; }),
              1)
        << "parts of one size are cut in one call";
}

TEST_F(GpuSplit, ParentGoesFirst_PartsKeepTheirGreenContexts) {
    start();
    ASSERT_EQ(split({8, 8}), QD_SUCCESS) << message();
    ctx_->shutdown();
    ctx_.reset();
    std::shared_ptr<Stream> s;
    ASSERT_EQ(parts_[1]->create_stream(QD_STREAM_NON_BLOCKING, 0, &s), QD_SUCCESS) << message();
    EXPECT_EQ(parts_[1]->synchronize(), QD_SUCCESS);
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    EXPECT_EQ(g_fake.greens.size(), 2u);
}

TEST_F(GpuSplit, CountNotAMultipleOfTheGranularity_InvalidArgument_NoDriverSplit) {
    start();
    EXPECT_EQ(split({16, 12}), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("not a multiple of 8"), std::string::npos) << message();
    EXPECT_NE(message().find("counts[1]"), std::string::npos) << message();
    EXPECT_TRUE(parts_.empty());
    EXPECT_TRUE(calls().empty()) << "the rule is checked before the driver splits";
}

TEST_F(GpuSplit, CountBelowTheMinimum_InvalidArgument) {
    g_fake.sm_min_partition = 16;
    start();
    EXPECT_EQ(split({8}), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("at least 16"), std::string::npos) << message();
    EXPECT_TRUE(calls().empty());
}

TEST_F(GpuSplit, CountsOverTheDevicesSms_InvalidArgument) {
    start();
    EXPECT_EQ(split({128, 8}), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("add up to 136 SMs"), std::string::npos) << message();
    EXPECT_NE(message().find("132"), std::string::npos) << message();
    EXPECT_TRUE(calls().empty());
}

TEST_F(GpuSplit, OldDriverWithoutTheRuleFields_RuleOfTheArchitecture) {
    g_fake.sm_min_partition = 0;
    g_fake.sm_alignment = 0;
    start();
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_EQ(driver_->device_info(0, &info), QD_SUCCESS) << message();
    EXPECT_EQ(info.split_granularity, 8u) << "compute capability 9.x cuts by 8 SMs";
    EXPECT_EQ(info.split_minimum, 8u);
    EXPECT_EQ(split({12}), QD_ERROR_INVALID_ARGUMENT);
}

TEST_F(GpuSplit, DeviceInfo_ReportsTheRule) {
    g_fake.sm_min_partition = 16;
    start();
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_EQ(driver_->device_info(0, &info), QD_SUCCESS) << message();
    EXPECT_EQ(info.multiprocessors, 132u);
    EXPECT_EQ(info.split_granularity, 8u);
    EXPECT_EQ(info.split_minimum, 16u);
}

TEST_F(GpuSplit, MissingEntry_NotSupportedNamingTheVersion_DeviceInfoSaysNoSplit) {
    gpu::DriverTable table = fake_table();
    table.green_ctx_stream_create = nullptr;
    table.symbol[size_t(gpu::Fn::green_ctx_stream_create)] = "cuGreenCtxStreamCreate";
    start(table);
    EXPECT_EQ(split({8, 8}), QD_ERROR_NOT_SUPPORTED);
    EXPECT_NE(message().find("CUDA 12.4"), std::string::npos) << message();
    EXPECT_NE(message().find("cuGreenCtxStreamCreate"), std::string::npos) << message();
    EXPECT_TRUE(calls().empty());
    qd_device_info info = QD_DEVICE_INFO_INIT;
    ASSERT_EQ(driver_->device_info(0, &info), QD_SUCCESS) << message();
    EXPECT_EQ(info.split_granularity, 0u);
    EXPECT_EQ(info.split_minimum, 0u);
}

TEST_F(GpuSplit, VendorWithoutPartitions_NotSupportedSayingSo) {
    gpu::DriverTable table = fake_table();
    table.device_get_dev_resource = nullptr;
    table.green_ctx_requires = nullptr;  // as HIP's table
    table.api_name = "HIP";
    start(table);
    EXPECT_EQ(split({8}), QD_ERROR_NOT_SUPPORTED);
    EXPECT_NE(message().find("HIP has no SM partitions"), std::string::npos) << message();
}

TEST_F(GpuSplit, DriverCannotGiveTheCount_InvalidArgument_NothingLeft) {
    gpu::DriverTable table = fake_table();
    // The second cut finds no group (as when clusters leave too few SMs together).
    table.dev_sm_resource_split_by_count =
        [](gpu::DevResource *result, unsigned *groups, const gpu::DevResource *input,
           gpu::DevResource *remaining, unsigned flags, unsigned min_count) -> gpu::Result {
        if (min_count == 24) {
            *groups = 0;
            return kOk;
        }
        return fake_table().dev_sm_resource_split_by_count(result, groups, input, remaining, flags,
                                                           min_count);
    };
    start(table);
    EXPECT_EQ(split({16, 24}), QD_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("cannot give part 1 exactly 24 SMs"), std::string::npos) << message();
    EXPECT_TRUE(parts_.empty());
    const std::vector<std::string> made = calls();
    EXPECT_EQ(std::count(made.begin(), made.end(), "green_create 16"), 0)
        << "a green context was made before every cut succeeded";
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    EXPECT_TRUE(g_fake.greens.empty()) << "the first part's green context was left behind";
    EXPECT_EQ(g_fake.retains, 1) << "only the parent's retain is left";
}

// Every driver call of a two-way split failing in turn: each failure is a status with a
// message, and leaves no green context, no extra retain and no part.
TEST_F(GpuSplit, EveryCallFailing_AllOrNone) {
    start();
    for (long n = 1;; ++n) {
        {
            std::lock_guard<std::mutex> lock(g_fake.mutex);
            g_fake.calls = 0;
            g_fake.fail_at = n;
            g_fake.fail_code = kOutOfMemory;
        }
        const qd_status st = split({16, 16});
        if (st == QD_SUCCESS) {
            ASSERT_GT(n, 1) << "no call was counted";
            parts_.clear();
            break;
        }
        EXPECT_FALSE(message().empty());
        EXPECT_TRUE(parts_.empty()) << "call " << n;
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_TRUE(g_fake.greens.empty()) << "call " << n << " left a green context";
        EXPECT_EQ(g_fake.retains, 1) << "call " << n;
        ASSERT_LT(n, 100);
    }
    std::lock_guard<std::mutex> lock(g_fake.mutex);
    g_fake.fail_at = 0;
}

}  // namespace
