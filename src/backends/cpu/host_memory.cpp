#include "backends/cpu/host_memory.h"

#include <cstdlib>
#include <limits>

namespace qd::backend::cpu {

void *aligned_host_alloc(uint64_t bytes) noexcept {
    constexpr uint64_t kAlign = 64;
    // No host has more than 2^56 bytes of user address space (x86-64 with 5-level paging;
    // others have less). Larger requests fail here, without asking the allocator, which under
    // the sanitizers aborts on absurd sizes instead of returning null.
    constexpr uint64_t kMaxBytes = uint64_t{1} << 56;
    if (bytes == 0 || bytes > kMaxBytes) return nullptr;
    if (bytes > std::numeric_limits<size_t>::max() - (kAlign - 1)) return nullptr;  // 32-bit hosts
    // aligned_alloc wants a size that is a multiple of the alignment.
    const size_t rounded = static_cast<size_t>((bytes + kAlign - 1) & ~(kAlign - 1));
    return std::aligned_alloc(kAlign, rounded);
}

}  // namespace qd::backend::cpu
