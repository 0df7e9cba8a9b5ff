#include "core/alloc_registry.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <shared_mutex>

#include "common/error.h"

namespace qd::core {

namespace {
// Every registry of the process. Contexts are few and come and go rarely; check_range reads the
// list under a shared lock. Never destroyed, so a context leaked at exit can still unlist itself.
struct RegistryList {
    std::shared_mutex mutex;
    std::vector<AllocRegistry *> all;
};
RegistryList &registries() {
    static RegistryList *list = new RegistryList();
    return *list;
}
}  // namespace

AllocRegistry::AllocRegistry() {
    RegistryList &list = registries();
    std::unique_lock<std::shared_mutex> lock(list.mutex);
    list.all.push_back(this);
}

AllocRegistry::~AllocRegistry() {
    RegistryList &list = registries();
    std::unique_lock<std::shared_mutex> lock(list.mutex);
    // Absent in the child of a fork for a registry inherited from the parent.
    auto it = std::find(list.all.begin(), list.all.end(), this);
    if (it != list.all.end()) list.all.erase(it);
}

void AllocRegistry::lock_list_for_fork() { registries().mutex.lock(); }

void AllocRegistry::unlock_list_after_fork(bool child) {
    RegistryList &list = registries();
    if (!child) {
        list.mutex.unlock();
        return;
    }
    list.all.clear();
    // Made anew rather than unlocked: an unlock hands a reader-writer lock over to the writers
    // queued on it, which in the child are threads of the parent that do not exist here.
    new (&list.mutex) std::shared_mutex();
}

bool AllocRegistry::insert(Kind kind, uint64_t address, uint64_t bytes,
                           const std::atomic<bool> &closed) {
    Map::node_type node;
    Guard g(lock_);
    if (closed.load(std::memory_order_acquire)) return false;
    if (!spare_.empty()) {
        node = std::move(spare_.back());
        spare_.pop_back();
        node.key() = address;
        node.mapped() = bytes;
        map_of(kind).insert(std::move(node));
    } else {
        map_of(kind).emplace(address, bytes);  // may throw bad_alloc: nothing changed then
    }
    if (kind == Kind::Device) {
        bump(device_count_, 1);
        bump(device_bytes_, int64_t(bytes));
    } else if (kind == Kind::Host) {
        bump(host_bytes_, int64_t(bytes));
    }
    return true;
}

qd_status AllocRegistry::remove(Kind kind, uint64_t address, uint64_t *removed_bytes) {
    Map::node_type dropped;  // freed after the lock, when the spare list is full
    Guard g(lock_);
    auto &map = map_of(kind);
    auto it = map.find(address);
    if (it == map.end())
        return fail(QD_ERROR_INVALID_ADDRESS,
                    "0x%llx is not a live %s allocation of this context (never allocated here, "
                    "already freed, or from another context)",
                    (unsigned long long)address,
                    kind == Kind::Host ? "qd_host_alloc" : "qd_mem_alloc_async");
    const uint64_t bytes = it->second;
    if (removed_bytes) *removed_bytes = bytes;
    if (spare_.capacity() == 0) spare_.reserve(kSpareNodes);  // may throw: nothing changed yet
    if (spare_.size() < kSpareNodes)
        spare_.push_back(map.extract(it));  // no allocation: capacity is reserved
    else
        dropped = map.extract(it);
    if (kind == Kind::Device) {
        bump(device_count_, -1);
        bump(device_bytes_, -int64_t(bytes));
    } else if (kind == Kind::Host) {
        bump(host_bytes_, -int64_t(bytes));
    }
    return QD_SUCCESS;
}

bool AllocRegistry::graph_block(uint64_t address) {
    Guard g(lock_);
    return map_of(Kind::Graph).count(address) != 0 || map_of(Kind::GraphDriver).count(address) != 0;
}

bool AllocRegistry::find(uint64_t address, Block *inside, Block *ends_at) {
    Guard g(lock_);
    for (auto &map : maps_) {
        auto it = map.upper_bound(address);
        if (it == map.begin()) continue;
        --it;  // the block with the largest start <= address
        const uint64_t offset = address - it->first;
        const bool host = &map == &map_of(Kind::Host);
        if (offset < it->second) {
            *inside = Block{it->first, it->second, host};
            return true;
        }
        if (offset == it->second) *ends_at = Block{it->first, it->second, host};
    }
    return false;
}

qd_status AllocRegistry::check_range(uint64_t address, uint64_t bytes, const char *what) {
    // Live blocks never overlap, so at most one registry holds one containing address; a block
    // of another registry may still end where it starts (adjacent blocks of a shared pool).
    Block inside, ends_at;
    bool found = false;
    {
        RegistryList &list = registries();
        std::shared_lock<std::shared_mutex> lock(list.mutex);
        for (AllocRegistry *r : list.all)
            if ((found = r->find(address, &inside, &ends_at))) break;
    }
    if (found) {
        if (bytes <= inside.size - (address - inside.start)) return QD_SUCCESS;
        return fail(QD_ERROR_INVALID_ADDRESS,
                    "%s range [0x%llx, +%llu) runs past the end of the %llu-byte allocation at "
                    "0x%llx",
                    what, (unsigned long long)address, (unsigned long long)bytes,
                    (unsigned long long)inside.size, (unsigned long long)inside.start);
    }
    if (ends_at.size != 0)
        return fail(QD_ERROR_INVALID_ADDRESS,
                    "%s 0x%llx is the end of the %llu-byte allocation at 0x%llx (one past its "
                    "last byte), not memory of its own",
                    what, (unsigned long long)address, (unsigned long long)ends_at.size,
                    (unsigned long long)ends_at.start);
    return QD_SUCCESS;
}

qd_status AllocRegistry::check_inside(uint64_t address, uint64_t bytes, const char *what,
                                      uint64_t owner, bool *host) {
    Block inside, ends_at;
    if (!find(address, &inside, &ends_at))
        return fail(QD_ERROR_INVALID_ADDRESS,
                    "%s 0x%llx is not inside a live allocation of context 0x%016llx "
                    "(qd_mem_alloc_async or qd_host_alloc of that context)",
                    what, (unsigned long long)address, (unsigned long long)owner);
    *host = inside.host;
    if (bytes <= inside.size - (address - inside.start)) return QD_SUCCESS;
    return fail(QD_ERROR_INVALID_ADDRESS,
                "%s range [0x%llx, +%llu) runs past the end of the %llu-byte allocation at 0x%llx "
                "of context 0x%016llx",
                what, (unsigned long long)address, (unsigned long long)bytes,
                (unsigned long long)inside.size, (unsigned long long)inside.start,
                (unsigned long long)owner);
}

std::vector<uint64_t> AllocRegistry::take_all(Kind kind) {
    Guard g(lock_);
    std::vector<uint64_t> out;
    for (auto &kv : map_of(kind)) out.push_back(kv.first);
    map_of(kind).clear();
    if (kind == Kind::Device) {
        device_count_.store(0, std::memory_order_relaxed);
        device_bytes_.store(0, std::memory_order_relaxed);
    } else if (kind == Kind::Host) {
        host_bytes_.store(0, std::memory_order_relaxed);
    }
    return out;
}

}  // namespace qd::core
