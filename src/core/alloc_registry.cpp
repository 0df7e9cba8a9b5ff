#include "core/alloc_registry.h"

#include "common/error.h"

namespace qd::core {

void AllocRegistry::insert(Kind kind, uint64_t address, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_of(kind).emplace(address, bytes);
    if (kind == Kind::Device) {
        device_count_.fetch_add(1, std::memory_order_relaxed);
        device_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    } else {
        host_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    }
}

qd_status AllocRegistry::remove(Kind kind, uint64_t address) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto &map = map_of(kind);
    auto it = map.find(address);
    if (it == map.end())
        return fail(QD_ERROR_INVALID_ADDRESS,
                    "0x%llx is not a live %s allocation of this context (never allocated here, "
                    "already freed, or from another context)",
                    (unsigned long long)address,
                    kind == Kind::Device ? "qd_mem_alloc_async" : "qd_host_alloc");
    const uint64_t bytes = it->second;
    map.erase(it);
    if (kind == Kind::Device) {
        device_count_.fetch_sub(1, std::memory_order_relaxed);
        device_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    } else {
        host_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    }
    return QD_SUCCESS;
}

qd_status AllocRegistry::check_range(uint64_t address, uint64_t bytes, const char *what) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto *map : {&device_, &host_}) {
        auto it = map->upper_bound(address);
        if (it == map->begin()) continue;
        --it;
        const uint64_t start = it->first, size = it->second;
        if (address - start < size && bytes > size - (address - start))
            return fail(QD_ERROR_INVALID_ADDRESS,
                        "%s range [0x%llx, +%llu) runs past the end of the %llu-byte allocation "
                        "at 0x%llx",
                        what, (unsigned long long)address, (unsigned long long)bytes,
                        (unsigned long long)size, (unsigned long long)start);
    }
    return QD_SUCCESS;
}

std::vector<uint64_t> AllocRegistry::take_all(Kind kind) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint64_t> out;
    for (auto &kv : map_of(kind)) out.push_back(kv.first);
    map_of(kind).clear();
    if (kind == Kind::Device) {
        device_count_.store(0, std::memory_order_relaxed);
        device_bytes_.store(0, std::memory_order_relaxed);
    } else {
        host_bytes_.store(0, std::memory_order_relaxed);
    }
    return out;
}

}  // namespace qd::core
