// The pool lease protocol (core/lease_slots.h) on HandleTable's slots, as its friend.
#include "core/lease_slots.h"

#include "core/handle_table.h"

namespace qd::core {

// LeaseSlots is only ever the HandleTable's base (its constructor is protected).
HandleTable &LeaseSlots::table() { return static_cast<HandleTable &>(*this); }

qd_status LeaseSlots::reserve(Tag tag, uint64_t owner, std::shared_ptr<Object> obj,
                              uint32_t *index) {
    using Slot = HandleTable::Slot;
    using State = HandleTable::State;
    HandleTable &t = table();
    qd_status st = t.allocate_slot(index);
    if (st != QD_SUCCESS) return st;
    Slot &slot = *t.slot_at(*index);
    HandleTable::SlotLock lock(slot);
    slot.obj = std::move(obj);
    slot.tag = tag;
    slot.state = State::Reserved;
    slot.owner.store(owner, std::memory_order_relaxed);
    return QD_SUCCESS;
}

bool LeaseSlots::arm(uint32_t index, uint64_t *out) {
    using Slot = HandleTable::Slot;
    using State = HandleTable::State;
    Slot &slot = *table().slot_at(index);
    if (slot.state == State::Reserved) {
        const uint64_t h = HandleTable::make(index, slot.generation, slot.tag);
        slot.state = State::Armed;
        slot.live.store(h, std::memory_order_release);
        *out = h;
        return true;
    }
    // Generations exhausted at the last disarm: the slot is retired for good and lets go of the
    // object, under the slot lock that get() copies it under. Any other state means the slot
    // was given back (context destroy) and may already belong to someone else: leave it alone.
    std::shared_ptr<Object> dropped;  // released after the lock
    HandleTable::SlotLock lock(slot);
    if (slot.state == State::Retired) dropped = std::move(slot.obj);
    return false;
}

// Armed -> reserved under a new generation, or retired when the generations are exhausted (the
// pool notices at its next arm and reserves a fresh slot). Serialised by the pool's lock.
qd_status LeaseSlots::disarm(uint64_t handle, Tag tag, Object **obj) {
    using Slot = HandleTable::Slot;
    using State = HandleTable::State;
    HandleTable &t = table();
    if (HandleTable::tag_of(handle) == uint8_t(tag)) {
        Slot *slot = t.slot_at(HandleTable::index_of(handle));
        if (slot && slot->live.load(std::memory_order_relaxed) == handle &&
            slot->state == State::Armed) {
            if (obj) *obj = slot->obj.get();
            if (t.end_generation(*slot)) slot->state = State::Reserved;
            return QD_SUCCESS;
        }
    }
    return t.describe_failure(handle, tag);
}

// The same transition as disarm(), for context destroy, under the slot lock.
void LeaseSlots::revoke_locked(uint32_t index) {
    using Slot = HandleTable::Slot;
    using State = HandleTable::State;
    HandleTable &t = table();
    Slot &slot = *t.slot_at(index);
    if (t.end_generation(slot)) slot.state = State::Reserved;
}

qd_status LeaseSlots::revoke(uint64_t handle, Tag tag) {
    using Slot = HandleTable::Slot;
    using State = HandleTable::State;
    HandleTable &t = table();
    if (HandleTable::tag_of(handle) == uint8_t(tag)) {
        if (Slot *slot = t.slot_at(HandleTable::index_of(handle))) {
            HandleTable::SlotLock lock(*slot);
            if (slot->live.load(std::memory_order_relaxed) == handle &&
                slot->state == State::Armed) {
                revoke_locked(HandleTable::index_of(handle));
                return QD_SUCCESS;
            }
        }
    }
    return t.describe_failure(handle, tag);
}

void LeaseSlots::unreserve(uint32_t index) {
    using Slot = HandleTable::Slot;
    using State = HandleTable::State;
    HandleTable &t = table();
    Slot &slot = *t.slot_at(index);
    std::shared_ptr<Object> dropped;
    HandleTable::SlotLock lock(slot);
    dropped = std::move(slot.obj);
    if (slot.state == State::Retired) return;
    slot.state = State::Live;  // release_slot_locked expects a live or armed slot
    t.release_slot_locked(slot, index);
}

}  // namespace qd::core
