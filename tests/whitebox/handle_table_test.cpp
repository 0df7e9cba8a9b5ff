// White-box tests of the handle table: slot reuse (ABA), generation wrap and retirement, the
// lock-free check, and pool slots re-armed per lease. Linked against the internal library.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/handle_table.h"

using qd::core::HandleTable;
using qd::core::Object;
using qd::core::Tag;

namespace {

struct Probe : Object {
    explicit Probe(int v) : value(v) {}
    int value;
    std::atomic<uint64_t> issued_as{0};  // the handle it was inserted under
};

}  // namespace

TEST(HandleTable, InsertedHandle_IsNonZeroAndResolvesToItsObject) {
    auto &t = HandleTable::instance();
    uint64_t h = 0;
    ASSERT_EQ(t.insert(Tag::Event, 7, std::make_shared<Probe>(42), &h), QD_SUCCESS);
    EXPECT_NE(h, 0u);
    std::shared_ptr<Probe> p;
    ASSERT_EQ(t.get(h, Tag::Event, &p), QD_SUCCESS);
    EXPECT_EQ(p->value, 42);
    uint64_t owner = 0;
    ASSERT_EQ(t.check(h, Tag::Event, &owner), QD_SUCCESS);
    EXPECT_EQ(owner, 7u);
    EXPECT_EQ(t.remove(h, Tag::Event), QD_SUCCESS);
}

TEST(HandleTable, WrongTag_IsRejectedEvenForALiveSlot) {
    auto &t = HandleTable::instance();
    uint64_t h = 0;
    ASSERT_EQ(t.insert(Tag::Event, 1, std::make_shared<Probe>(1), &h), QD_SUCCESS);
    std::shared_ptr<Probe> p;
    EXPECT_EQ(t.get(h, Tag::Stream, &p), QD_ERROR_INVALID_HANDLE);
    const uint64_t forged = (h & ~uint64_t(0xff)) | uint64_t(Tag::Stream);
    EXPECT_EQ(t.get(forged, Tag::Stream, &p), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(t.remove(h, Tag::Event), QD_SUCCESS);
}

TEST(HandleTable, RecycledSlot_RejectsEveryStaleHandle) {
    auto &t = HandleTable::instance();
    std::vector<uint64_t> stale;
    uint64_t h = 0;
    for (int i = 0; i < 10000; ++i) {
        ASSERT_EQ(t.insert(Tag::Event, 1, std::make_shared<Probe>(i), &h), QD_SUCCESS);
        stale.push_back(h);
        ASSERT_EQ(t.remove(h, Tag::Event), QD_SUCCESS);
    }
    // LIFO reuse means these all share one slot: only the generation tells them apart.
    EXPECT_EQ(HandleTable::index_of(stale.front()), HandleTable::index_of(stale.back()));
    uint64_t live = 0;
    ASSERT_EQ(t.insert(Tag::Event, 1, std::make_shared<Probe>(-1), &live), QD_SUCCESS);
    std::shared_ptr<Probe> p;
    for (uint64_t s : stale) {
        ASSERT_EQ(t.get(s, Tag::Event, &p), QD_ERROR_INVALID_HANDLE);
        ASSERT_EQ(t.remove(s, Tag::Event), QD_ERROR_INVALID_HANDLE);
    }
    ASSERT_EQ(t.get(live, Tag::Event, &p), QD_SUCCESS);
    EXPECT_EQ(p->value, -1);
    EXPECT_EQ(t.remove(live, Tag::Event), QD_SUCCESS);
}

TEST(HandleTable, SlotWhoseGenerationWouldWrap_IsRetiredNotReused) {
    auto &t = HandleTable::instance();
    uint64_t h = 0;
    ASSERT_EQ(t.insert(Tag::Event, 1, std::make_shared<Probe>(0), &h), QD_SUCCESS);
    t.debug_set_generation(h, HandleTable::kMaxGeneration);
    // The handle now carries the last generation; fetch it again through the slot.
    const uint64_t last =
        HandleTable::make(HandleTable::index_of(h), HandleTable::kMaxGeneration, Tag::Event);
    std::shared_ptr<Probe> p;
    ASSERT_EQ(t.get(last, Tag::Event, &p), QD_SUCCESS);
    const uint64_t retired_before = t.debug_retired_count();
    ASSERT_EQ(t.remove(last, Tag::Event), QD_SUCCESS);
    EXPECT_EQ(t.debug_retired_count(), retired_before + 1);
    // No new handle may land in the retired slot.
    for (int i = 0; i < 100; ++i) {
        uint64_t n = 0;
        ASSERT_EQ(t.insert(Tag::Event, 1, std::make_shared<Probe>(i), &n), QD_SUCCESS);
        EXPECT_NE(HandleTable::index_of(n), HandleTable::index_of(last));
        ASSERT_EQ(t.remove(n, Tag::Event), QD_SUCCESS);
    }
    EXPECT_EQ(t.get(last, Tag::Event, &p), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(t.get(h, Tag::Event, &p), QD_ERROR_INVALID_HANDLE);
}

TEST(HandleTable, ReservedSlot_GetsAFreshHandleForEveryArm) {
    auto &t = HandleTable::instance();
    uint32_t index = 0;
    ASSERT_EQ(t.reserve(Tag::Stream, 9, std::make_shared<Probe>(5), &index), QD_SUCCESS);
    std::vector<uint64_t> leases;
    for (int i = 0; i < 1000; ++i) {
        uint64_t h = 0;
        ASSERT_TRUE(t.arm(index, &h));
        for (uint64_t old : leases) ASSERT_NE(old, h);
        std::shared_ptr<Probe> p;
        ASSERT_EQ(t.get(h, Tag::Stream, &p), QD_SUCCESS);
        ASSERT_EQ(t.disarm(h, Tag::Stream), QD_SUCCESS);
        ASSERT_EQ(t.disarm(h, Tag::Stream), QD_ERROR_INVALID_HANDLE);  // double release
        ASSERT_EQ(t.get(h, Tag::Stream, &p), QD_ERROR_INVALID_HANDLE);
        if (leases.size() < 64) leases.push_back(h);
    }
    t.unreserve(index);
}

TEST(HandleTable, ReservedSlotAtLastGeneration_RetiresOnDisarmAndArmReportsIt) {
    auto &t = HandleTable::instance();
    uint32_t index = 0;
    ASSERT_EQ(t.reserve(Tag::Stream, 9, std::make_shared<Probe>(5), &index), QD_SUCCESS);
    uint64_t h = 0;
    ASSERT_TRUE(t.arm(index, &h));
    t.debug_set_generation(h, HandleTable::kMaxGeneration);
    const uint64_t last = HandleTable::make(index, HandleTable::kMaxGeneration, Tag::Stream);
    ASSERT_EQ(t.disarm(last, Tag::Stream), QD_SUCCESS);
    uint64_t again = 0;
    EXPECT_FALSE(t.arm(index, &again));
    std::shared_ptr<Probe> p;
    EXPECT_EQ(t.get(last, Tag::Stream, &p), QD_ERROR_INVALID_HANDLE);
}

TEST(HandleTable, RemoveAllOwnedBy_InvalidatesOnlyThatOwnersHandles) {
    auto &t = HandleTable::instance();
    uint64_t a = 0, b = 0, c = 0;
    ASSERT_EQ(t.insert(Tag::Event, 1001, std::make_shared<Probe>(1), &a), QD_SUCCESS);
    ASSERT_EQ(t.insert(Tag::Kernel, 1001, std::make_shared<Probe>(2), &b), QD_SUCCESS);
    ASSERT_EQ(t.insert(Tag::Event, 1002, std::make_shared<Probe>(3), &c), QD_SUCCESS);
    t.remove_all_owned_by(1001);
    uint64_t owner;
    EXPECT_EQ(t.check(a, Tag::Event, &owner), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(t.check(b, Tag::Kernel, &owner), QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(t.check(c, Tag::Event, &owner), QD_SUCCESS);
    EXPECT_EQ(t.remove(c, Tag::Event), QD_SUCCESS);
}

TEST(HandleTable, ConcurrentLookupsAndRecycling_NeverResolveAStaleHandle) {
    auto &t = HandleTable::instance();
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> published{0};
    std::atomic<uint64_t> wrong{0};
    std::thread writer([&] {
        for (int i = 0; i < 20000; ++i) {
            uint64_t h = 0;
            auto obj = std::make_shared<Probe>(i);
            t.insert(Tag::Module, 3, obj, &h);
            obj->issued_as.store(h);
            published.store(h);
            t.remove(h, Tag::Module);
        }
        stop = true;
    });
    std::vector<std::thread> readers;
    for (int r = 0; r < 3; ++r)
        readers.emplace_back([&] {
            while (!stop) {
                const uint64_t h = published.load();
                if (!h) continue;
                std::shared_ptr<Probe> p;
                // A resolved object must be the one that handle was issued for, never the
                // object of a later generation in the same slot.
                if (t.get(h, Tag::Module, &p) == QD_SUCCESS && p->issued_as.load() != h) wrong++;
            }
        });
    writer.join();
    for (auto &r : readers) r.join();
    EXPECT_EQ(wrong.load(), 0u);
}
