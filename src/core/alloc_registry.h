// The allocation registry of one context: every live qd_mem_alloc_async and qd_host_alloc
// block, keyed by start address. It turns a free of an unknown or already-freed address into
// QD_ERROR_INVALID_ADDRESS instead of a double free, lets memcpy/memset check ranges that start
// inside a block, and lets context destroy free what the user leaked.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace qd::core {

class AllocRegistry {
  public:
    enum class Kind : uint8_t { Device, Host };

    void insert(Kind kind, uint64_t address, uint64_t bytes);
    // QD_ERROR_INVALID_ADDRESS (with message) when address is not the start of a live block.
    qd_status remove(Kind kind, uint64_t address);
    // QD_ERROR_INVALID_ADDRESS when [address, address+bytes) starts inside a registered block
    // of either kind but runs past its end. Unregistered ranges are the caller's raw memory.
    qd_status check_range(uint64_t address, uint64_t bytes, const char *what);
    // Empty the registry, returning what was still live.
    std::vector<uint64_t> take_all(Kind kind);

    uint64_t live_allocations() const { return device_count_.load(std::memory_order_relaxed); }
    uint64_t device_bytes() const { return device_bytes_.load(std::memory_order_relaxed); }
    uint64_t host_bytes() const { return host_bytes_.load(std::memory_order_relaxed); }

  private:
    std::map<uint64_t, uint64_t> &map_of(Kind kind) { return kind == Kind::Device ? device_ : host_; }

    std::mutex mutex_;
    std::map<uint64_t, uint64_t> device_;  // address -> bytes
    std::map<uint64_t, uint64_t> host_;
    std::atomic<uint64_t> device_count_{0}, device_bytes_{0}, host_bytes_{0};
};

}  // namespace qd::core
