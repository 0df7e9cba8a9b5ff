// Host allocations of the CPU backend: device memory (qd_mem_alloc_async) and "pinned" host
// memory (qd_host_alloc) are both plain host memory here.
#pragma once

#include <cstdint>

namespace qd::backend::cpu {

// Cache-line (64-byte) aligned so that blocks never share a line, as device allocations never
// do; release with std::free. Null when the memory is exhausted or bytes is beyond what the
// host can address.
void *aligned_host_alloc(uint64_t bytes) noexcept;

}  // namespace qd::backend::cpu
