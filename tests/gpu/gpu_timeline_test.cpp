// Timelines on the shared GPU layer (src/backends/gpu/timeline.h) over the fake driver table
// (tests/support/fake_gpu_driver.h): a signal is one stream_write_value64 of its value into the
// timeline's word, a wait one stream_wait_value64 ("at least") unless the value is reached, the
// host reads and writes the word itself, a driver without the entries refuses to make a
// timeline naming the version it needs, and closing the timeline releases a wait that no
// queued signal reaches (so a context's drain never hangs on it).
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <string>
#include <thread>

#include "backends/gpu/driver_table.h"
#include "backends/gpu/gpu_backend.h"
#include "common/error.h"
#include "fake_gpu_driver.h"

namespace {

using namespace qdt::fake_gpu;
using qd::backend::Context;
using qd::backend::Driver;
using qd::backend::Stream;
using qd::backend::Timeline;

class GpuTimeline : public ::testing::Test {
  protected:
    void make(const gpu::DriverTable &table) {
        g_fake.reset();
        current_context() = nullptr;
        context_stack().clear();
        ASSERT_EQ(gpu::make_gpu_driver(table, qd::backend::DlLibrary(), &driver_), QD_SUCCESS)
            << qd::last_error_message();
        qd::backend::ContextParams params;
        ASSERT_EQ(driver_->create_context(params, &ctx_), QD_SUCCESS) << qd::last_error_message();
    }
    void SetUp() override { make(fake_table()); }
    void TearDown() override {
        if (ctx_) {
            ctx_->synchronize();
            ctx_->shutdown();
            ctx_.reset();
        }
        std::lock_guard<std::mutex> lock(g_fake.mutex);
        EXPECT_EQ(g_fake.retains, 0) << "the primary context was not released";
        EXPECT_TRUE(g_fake.streams.empty()) << g_fake.streams.size() << " native streams leaked";
    }

    std::shared_ptr<Stream> stream() {
        std::shared_ptr<Stream> s;
        EXPECT_EQ(ctx_->create_stream(QD_STREAM_NON_BLOCKING, 0, &s), QD_SUCCESS)
            << qd::last_error_message();
        return s;
    }
    std::shared_ptr<Timeline> timeline(uint64_t initial = 0) {
        std::shared_ptr<Timeline> t;
        EXPECT_EQ(ctx_->create_timeline(initial, &t), QD_SUCCESS) << qd::last_error_message();
        return t;
    }

    std::unique_ptr<Driver> driver_;
    std::unique_ptr<Context> ctx_;
};

TEST_F(GpuTimeline, Create_WordIsPinnedHostMemoryAtTheInitialValue) {
    const size_t blocks = g_fake.host_blocks.size();
    std::shared_ptr<Timeline> t = timeline(12);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->value(), 12u);
    EXPECT_EQ(g_fake.host_blocks.size(), blocks + 1);
    t.reset();
    EXPECT_EQ(g_fake.host_blocks.size(), blocks) << "the word was not freed with the timeline";
}

TEST_F(GpuTimeline, WordAStreamUsed_OutlivesTheTimeline_FreedWithTheContext) {
    const size_t blocks = g_fake.host_blocks.size();
    std::shared_ptr<Timeline> t = timeline();
    std::shared_ptr<Stream> s = stream();
    ASSERT_EQ(s->wait_value(*t, 1), QD_SUCCESS);  // the device may poll the word from now on
    t->close();
    t.reset();
    EXPECT_EQ(g_fake.host_blocks.size(), blocks + 1) << "freed while a queued wait may read it";
    s.reset();
    ctx_->synchronize();
    ctx_->shutdown();
    ctx_.reset();
    EXPECT_EQ(g_fake.host_blocks.size(), blocks) << "not freed with the context";
}

TEST_F(GpuTimeline, Signal_IsOneWriteValueOfTheValueIntoTheWord) {
    std::shared_ptr<Timeline> t = timeline();
    std::shared_ptr<Stream> s = stream();
    ASSERT_EQ(s->signal(*t, 7), QD_SUCCESS) << qd::last_error_message();
    ASSERT_EQ(g_fake.value_writes.size(), 1u);
    EXPECT_EQ(g_fake.value_writes[0].value, 7u);
    EXPECT_EQ(g_fake.value_writes[0].flags, fake_table().write_value_default);
    EXPECT_EQ(t->value(), 7u) << "the host reads the word the driver wrote";
}

TEST_F(GpuTimeline, Wait_IsOneWaitValueGeq_NoneWhenTheValueIsReached) {
    std::shared_ptr<Timeline> t = timeline(3);
    std::shared_ptr<Stream> s = stream();
    ASSERT_EQ(s->wait_value(*t, 2), QD_SUCCESS);
    ASSERT_EQ(s->wait_value(*t, 3), QD_SUCCESS);
    EXPECT_TRUE(g_fake.value_waits.empty()) << "a wait for a value reached reached the driver";
    ASSERT_EQ(s->wait_value(*t, 9), QD_SUCCESS) << qd::last_error_message();
    ASSERT_EQ(g_fake.value_waits.size(), 1u);
    EXPECT_EQ(g_fake.value_waits[0].value, 9u);
    EXPECT_EQ(g_fake.value_waits[0].flags, fake_table().wait_value_geq);
    t->close();  // nothing signals 9: the word is raised so the stream is not left waiting
    EXPECT_GE(t->value(), 9u);
}

TEST_F(GpuTimeline, Close_KeepsTheWordWhenAQueuedSignalReachesEveryWait) {
    std::shared_ptr<Timeline> t = timeline();
    std::shared_ptr<Stream> a = stream(), b = stream();
    ASSERT_EQ(b->wait_value(*t, 4), QD_SUCCESS);
    ASSERT_EQ(a->signal(*t, 5), QD_SUCCESS);
    ASSERT_EQ(t->host_signal(6), QD_SUCCESS);
    const uint64_t before = t->value();
    t->close();
    EXPECT_EQ(t->value(), before);
}

TEST_F(GpuTimeline, HostSignalAndWait_WriteAndReadTheWord) {
    std::shared_ptr<Timeline> t = timeline();
    EXPECT_EQ(t->host_wait(1, 0), QD_NOT_READY);
    EXPECT_EQ(t->host_wait(1, 2000000), QD_NOT_READY);  // 2 ms
    std::atomic<qd_status> got{QD_ERROR_INTERNAL};
    std::thread waiter([&] { got = t->host_wait(2, UINT64_MAX); });
    ASSERT_EQ(t->host_signal(2), QD_SUCCESS);
    waiter.join();
    EXPECT_EQ(got.load(), QD_SUCCESS);
    EXPECT_EQ(t->value(), 2u);
}

TEST_F(GpuTimeline, HostWait_ClosedDuringTheWait_IsInvalidHandle) {
    std::shared_ptr<Timeline> t = timeline();
    std::atomic<qd_status> got{QD_ERROR_INTERNAL};
    std::thread waiter([&] { got = t->host_wait(5, UINT64_MAX); });
    t->close();
    waiter.join();
    EXPECT_EQ(got.load(), QD_ERROR_INVALID_HANDLE);
}

TEST_F(GpuTimeline, DriverFailure_MapsToAStatusNamingTheCall) {
    std::shared_ptr<Timeline> t = timeline();
    std::shared_ptr<Stream> s = stream();
    g_fake.fail_code = kInvalidValue;
    g_fake.fail_at = g_fake.calls + 1;
    const qd_status st = s->signal(*t, 1);
    EXPECT_NE(st, QD_SUCCESS);
    std::string msg = qd::last_error_message();
    for (char &c : msg) c = char(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_NE(msg.find("value64"), std::string::npos) << msg;
}

TEST_F(GpuTimeline, WithoutTheEntries_CreateIsNotSupportedNamingTheVersion) {
    gpu::DriverTable t = fake_table();
    t.stream_wait_value64 = nullptr;
    t.symbol[static_cast<size_t>(gpu::Fn::stream_wait_value64)] = "cuStreamWaitValue64_v2";
    ctx_->synchronize();
    ctx_->shutdown();
    ctx_.reset();
    driver_.reset();
    make(t);
    std::shared_ptr<Timeline> tl;
    EXPECT_EQ(ctx_->create_timeline(0, &tl), QD_ERROR_NOT_SUPPORTED);
    const std::string msg = qd::last_error_message();
    EXPECT_NE(msg.find("cuStreamWaitValue64_v2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("11.7"), std::string::npos) << msg;
    EXPECT_FALSE(tl);
}

}  // namespace
