// core::number_groups, the numbering of qd_launch_parallel's groups: right, and never a search
// over every group per task (the comparisons are counted, so a quadratic numbering fails here
// without any timing: 1e5 distinct groups once took seconds to enqueue).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/task_groups.h"

namespace {

using qd::core::number_groups;

// The numbering qd_launch_parallel promises, by a plain search (the reference).
std::vector<uint32_t> expected_numbers(const std::vector<uint32_t> &group_of) {
    std::vector<uint32_t> seen, out;
    for (uint32_t g : group_of) {
        uint32_t i = 0;
        while (i < seen.size() && seen[i] != g) ++i;
        if (i == seen.size()) seen.push_back(g);
        out.push_back(i);
    }
    return out;
}

// At most c * n * log2(n) comparisons: what a sort makes; a search over every group per task
// makes about n * n / 2.
uint64_t n_log_n_bound(size_t n) {
    return uint64_t(8.0 * double(n) * std::log2(double(n) + 2.0)) + 64;
}

TEST(TaskGroups, FewGroups_NumberedInOrderOfFirstAppearance_LinearComparisons) {
    const std::vector<uint32_t> group_of = {7, 3, 7, 0xffffffffu, 3, 0, 0, 7};
    std::vector<uint32_t> number;
    uint64_t comparisons = 0;
    EXPECT_EQ(number_groups(group_of, &number, &comparisons), 4u);
    EXPECT_EQ(number, (std::vector<uint32_t>{0, 1, 0, 2, 1, 3, 3, 0}));
    EXPECT_LE(comparisons, qd::core::kLinearGroups * group_of.size());
}

TEST(TaskGroups, NoTasks_NoGroups) {
    std::vector<uint32_t> number{1, 2};
    EXPECT_EQ(number_groups({}, &number), 0u);
    EXPECT_TRUE(number.empty());
}

TEST(TaskGroups, JustAboveTheLinearLimit_SameNumbersAsTheSearch) {
    std::vector<uint32_t> group_of;
    for (uint32_t i = 0; i < 4 * qd::core::kLinearGroups; ++i)
        group_of.push_back((i * 5) % (qd::core::kLinearGroups + 1) + 100);
    std::vector<uint32_t> number;
    EXPECT_EQ(number_groups(group_of, &number), qd::core::kLinearGroups + 1);
    EXPECT_EQ(number, expected_numbers(group_of));
}

TEST(TaskGroups, HundredThousandDistinctGroups_NLogNComparisons) {
    const uint32_t n = 100000;
    std::vector<uint32_t> group_of(n);
    for (uint32_t i = 0; i < n; ++i) group_of[i] = (n - i) * 2654435761u;  // distinct, unsorted
    std::vector<uint32_t> number;
    uint64_t comparisons = 0;
    ASSERT_EQ(number_groups(group_of, &number, &comparisons), n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(number[i], i) << "task " << i;
    EXPECT_LE(comparisons, n_log_n_bound(n)) << "a search over every group per task";
}

TEST(TaskGroups, ManyTasksOfManyInterleavedGroups_SameNumbersAsTheSearch_NLogN) {
    const uint32_t n = 30000, groups = 2000;
    std::vector<uint32_t> group_of(n);
    for (uint32_t i = 0; i < n; ++i) group_of[i] = ((i * 7919u) % groups) ^ 0x5a5a5a5au;
    std::vector<uint32_t> number;
    uint64_t comparisons = 0;
    ASSERT_EQ(number_groups(group_of, &number, &comparisons), groups);
    EXPECT_EQ(number, expected_numbers(group_of));
    EXPECT_LE(comparisons, n_log_n_bound(n));
}

}  // namespace
