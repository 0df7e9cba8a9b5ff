#include "core/handle_table.h"

#include <new>

#include "common/error.h"
#include "core/fork_handlers.h"

namespace qd::core {

const char *tag_name(Tag tag) {
    switch (tag) {
    case Tag::Context: return "context";
    case Tag::Stream: return "stream";
    case Tag::Event: return "event";
    case Tag::Module: return "module";
    case Tag::Kernel: return "kernel";
    case Tag::Graph: return "graph";
    case Tag::Timeline: return "timeline";
    }
    return "object";
}

HandleTable &HandleTable::create_instance() {
    static HandleTable *table = [] {  // thread-safe once
        auto *t = new HandleTable();
        register_fork_handlers();  // from now on a fork() takes the table's locks first
        return t;
    }();
    instance_.store(table, std::memory_order_release);
    return *table;
}

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

qd_status HandleTable::insert(Tag tag, uint64_t owner, std::shared_ptr<Object> obj, uint64_t *out) {
    uint32_t index;
    qd_status st = allocate_slot(&index);
    if (st != QD_SUCCESS) return st;
    Slot &slot = *slot_at(index);
    SlotLock lock(slot);
    slot.obj = std::move(obj);
    slot.tag = tag;
    slot.state = State::Live;
    const uint64_t h = make(index, slot.generation, tag);
    // owner before live: check() reads live, then owner, then live again.
    slot.owner.store(owner, std::memory_order_relaxed);
    slot.live.store(h, std::memory_order_release);
    *out = h;
    return QD_SUCCESS;
}

qd_status HandleTable::get_object(uint64_t handle, Tag tag, std::shared_ptr<Object> *out) const {
    if (tag_of(handle) == uint8_t(tag)) {
        if (const Slot *slot = slot_at(index_of(handle))) {
            SlotLock lock(*slot);
            if (slot->live.load(std::memory_order_relaxed) == handle) {
                *out = slot->obj;
                return QD_SUCCESS;
            }
        }
    }
    return describe_failure(handle, tag);
}

qd_status HandleTable::remove(uint64_t handle, Tag tag, std::shared_ptr<Object> *removed) {
    std::shared_ptr<Object> dropped;
    if (tag_of(handle) == uint8_t(tag)) {
        if (Slot *slot = slot_at(index_of(handle))) {
            SlotLock lock(*slot);
            if (slot->live.load(std::memory_order_relaxed) == handle &&
                slot->state == State::Live) {
                dropped = std::move(slot->obj);
                release_slot_locked(*slot, index_of(handle));
            }
        }
    }
    if (!dropped) return describe_failure(handle, tag);
    if (removed) *removed = std::move(dropped);
    return QD_SUCCESS;
}

std::vector<std::shared_ptr<Object>> HandleTable::remove_all_owned_by(uint64_t owner) {
    const uint32_t n = high_water_.load(std::memory_order_acquire);
    std::vector<std::shared_ptr<Object>> dropped;
    for (uint32_t i = 0; i < n; ++i) {
        Slot *slot = slot_at(i);
        if (!slot || slot->owner.load(std::memory_order_acquire) != owner) continue;
        SlotLock lock(*slot);
        if (slot->owner.load(std::memory_order_relaxed) != owner) continue;
        if (slot->state == State::Live) {
            dropped.push_back(std::move(slot->obj));
            release_slot_locked(*slot, i);
        } else if (slot->state == State::Armed) {
            // A pool lease: its slot stays reserved for the pool, which unreserves it itself.
            revoke_locked(i);
        }
    }
    return dropped;  // destroyed by the caller, outside every slot lock
}

void HandleTable::lock_for_fork() {
    uint32_t locked = 0;
    for (;;) {
        // Slots handed out while the earlier ones were being locked are locked in the next
        // round; the allocation mutex is held only once no slot is left to lock, since a thread
        // that holds a slot lock may be waiting for it (release_slot_locked).
        const uint32_t n = high_water_.load(std::memory_order_acquire);
        for (; locked < n; ++locked) slot_at(locked)->lock.lock();
        alloc_mutex_.lock();
        if (high_water_.load(std::memory_order_relaxed) == locked) break;
        alloc_mutex_.unlock();
    }
    fork_locked_ = locked;
}

void HandleTable::unlock_after_fork() {
    alloc_mutex_.unlock();
    for (uint32_t i = 0; i < fork_locked_; ++i) slot_at(i)->lock.unlock();
    fork_locked_ = 0;
}

void HandleTable::debug_set_generation(uint64_t handle, uint32_t generation) {
    Slot *slot = slot_at(index_of(handle));
    if (!slot) return;
    SlotLock lock(*slot);
    if (slot->live.load(std::memory_order_relaxed) != handle) return;
    const uint64_t h = make(index_of(handle), generation & kMaxGeneration, slot->tag);
    slot->generation = generation & kMaxGeneration;
    slot->live.store(h, std::memory_order_release);
}

uint64_t HandleTable::debug_retired_count() const {
    return retired_.load(std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

HandleTable::SlotLock::SlotLock(const Slot &s) : slot(s) { slot.lock.lock(); }

HandleTable::SlotLock::~SlotLock() { slot.lock.unlock(); }

qd_status HandleTable::describe_failure(uint64_t handle, Tag tag) const {
    const char *want = tag_name(tag);
    if (handle == 0) return fail(QD_ERROR_INVALID_HANDLE, "a %s is required (got handle 0)", want);
    const uint8_t t = tag_of(handle);
    if (t != uint8_t(tag)) {
        if (t >= uint8_t(Tag::Context) && t <= uint8_t(Tag::Timeline))
            return fail(QD_ERROR_INVALID_HANDLE, "handle 0x%016llx is a %s, not a %s",
                        (unsigned long long)handle, tag_name(Tag(t)), want);
        return fail(QD_ERROR_INVALID_HANDLE, "0x%016llx is not a qd %s handle",
                    (unsigned long long)handle, want);
    }
    const Slot *slot = slot_at(index_of(handle));
    if (!slot || generation_of(handle) == 0 ||
        index_of(handle) >= high_water_.load(std::memory_order_acquire))
        return fail(QD_ERROR_INVALID_HANDLE, "%s handle 0x%016llx was never issued by qd", want,
                    (unsigned long long)handle);
    bool stale;
    {
        SlotLock lock(*slot);  // the failure path; only the wording depends on this read
        stale = generation_of(handle) < slot->generation || slot->state == State::Retired ||
                (generation_of(handle) == slot->generation && slot->state != State::Live &&
                 slot->state != State::Armed);
    }
    if (stale)
        return fail(QD_ERROR_INVALID_HANDLE,
                    "%s handle 0x%016llx is stale: the %s was destroyed or released, or its "
                    "context was destroyed",
                    want, (unsigned long long)handle, want);
    return fail(QD_ERROR_INVALID_HANDLE, "%s handle 0x%016llx was never issued by qd", want,
                (unsigned long long)handle);
}

qd_status HandleTable::allocate_slot(uint32_t *index) {
    std::lock_guard<std::mutex> lock(alloc_mutex_);
    if (!free_.empty()) {
        *index = free_.back();
        free_.pop_back();
        return QD_SUCCESS;
    }
    const uint32_t i = next_index_;
    const uint32_t chunk = i >> kChunkBits;
    if (chunk >= kMaxChunks)
        return fail(QD_ERROR_OUT_OF_MEMORY, "the handle table is full (%u live objects)",
                    kMaxChunks * kChunkSize);
    if (!chunks_[chunk].load(std::memory_order_relaxed)) {
        Slot *base = new (std::nothrow) Slot[kChunkSize];
        if (!base) return fail(QD_ERROR_OUT_OF_MEMORY, "cannot grow the handle table");
        chunks_[chunk].store(base, std::memory_order_release);
    }
    next_index_ = i + 1;
    high_water_.store(next_index_, std::memory_order_release);
    *index = i;
    return QD_SUCCESS;
}

void HandleTable::release_slot_locked(Slot &slot, uint32_t index) {
    if (!end_generation(slot)) return;  // retired: never handed out again
    slot.state = State::Free;
    std::lock_guard<std::mutex> lock(alloc_mutex_);
    free_.push_back(index);
}

}  // namespace qd::core
