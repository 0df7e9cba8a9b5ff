#include "core/task_groups.h"

#include <algorithm>
#include <numeric>

namespace qd::core {

namespace {
// Every task's index, sorted by (group, index): each group is one run, and a run's first
// index is where the group first appears. The runs, sorted by that index, are the numbers.
uint32_t number_by_sorting(const std::vector<uint32_t> &group_of, std::vector<uint32_t> *number,
                           uint64_t &comparisons) {
    const uint32_t n = uint32_t(group_of.size());
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        ++comparisons;
        return group_of[a] != group_of[b] ? group_of[a] < group_of[b] : a < b;
    });
    struct Run {
        uint32_t first;       // the task where the group first appears
        uint32_t begin, end;  // its tasks: order[begin..end)
    };
    std::vector<Run> runs;
    for (uint32_t begin = 0; begin < n;) {
        uint32_t end = begin + 1;
        while (end < n && (++comparisons, group_of[order[end]] == group_of[order[begin]])) ++end;
        runs.push_back({order[begin], begin, end});
        begin = end;
    }
    std::sort(runs.begin(), runs.end(), [&](const Run &a, const Run &b) {
        ++comparisons;
        return a.first < b.first;
    });
    for (uint32_t r = 0; r < runs.size(); ++r)
        for (uint32_t i = runs[r].begin; i < runs[r].end; ++i) (*number)[order[i]] = r;
    return uint32_t(runs.size());
}
}  // namespace

uint32_t number_groups(const std::vector<uint32_t> &group_of, std::vector<uint32_t> *number,
                       uint64_t *comparisons) {
    uint64_t count = 0;
    number->resize(group_of.size());
    // The usual case: a few groups, found by a search over at most kLinearGroups of them.
    uint32_t seen[kLinearGroups];
    uint32_t groups = 0;
    bool few = true;
    for (size_t i = 0; few && i < group_of.size(); ++i) {
        uint32_t g = 0;
        while (g < groups && (++count, seen[g] != group_of[i])) ++g;
        if (g == groups) {
            if (groups == kLinearGroups) {
                few = false;
                break;
            }
            seen[groups++] = group_of[i];
        }
        (*number)[i] = g;
    }
    if (!few) groups = number_by_sorting(group_of, number, count);
    if (comparisons) *comparisons = count;
    return groups;
}

}  // namespace qd::core
