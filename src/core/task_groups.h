// The groups of a qd_launch_parallel, numbered: which lane (pooled stream) each task goes to.
#pragma once

#include <cstdint>
#include <vector>

namespace qd::core {

// Numbers the distinct values of group_of (the tasks' group ids) 0, 1, 2, ... in order of
// first appearance and writes each task's number to (*number)[i]; returns how many distinct
// groups there are. O(n) while there are at most kLinearGroups groups (the usual few), O(n log
// n) beyond: never a search over every group per task, so 1e5 groups cost about as much to
// number as 1e5 tasks of one group. `comparisons` (optional) counts the comparisons of group
// ids made, for the test that keeps it so (tests/whitebox/task_groups_test.cpp).
inline constexpr uint32_t kLinearGroups = 8;
uint32_t number_groups(const std::vector<uint32_t> &group_of, std::vector<uint32_t> *number,
                       uint64_t *comparisons = nullptr);

}  // namespace qd::core
