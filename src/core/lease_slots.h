// The pool lease protocol on the handle table's slots (core/handle_table.h keeps the plain
// handle storage: insert, resolve, remove).
//
// A pool (core/stream_pool.h) reserves one slot for each of its objects, bound to that object
// for the object's whole life, and re-arms it with a fresh generation for each lease, so lease
// and release never touch the table's free list and a handle kept after release is stale,
// never an alias of the next holder's lease:
//
//   reserve()                  a free slot becomes Reserved, holding the object, under no handle
//   arm()      Reserved -> Armed     live under a new handle (the slot's current generation)
//   disarm()   Armed -> Reserved     under the next generation; or Retired when the generations
//                                    are exhausted: the next arm() then fails, drops the object,
//                                    and the caller reserves a new slot
//   unreserve()                the slot goes back to the table (its object is dropped)
//
// Context destroy disarms the context's armed slots itself (HandleTable::remove_all_owned_by,
// through revoke_locked below); the pool then unreserves them.
//
// arm() and disarm() take no slot lock: the caller serialises every arm and disarm of the slot
// (the stream pool, under its own lock) and keeps every other writer out meanwhile (the pool is
// closed, StreamPool::close, before context destroy disarms or unreserves its slots). One locked
// instruction per lease and per release instead of two (B3). Readers stay lock-free: they look
// at the slot's live handle only, and a reserved slot's object never changes (the retired case
// takes the slot lock to drop it).
//
// HandleTable derives from LeaseSlots, so the protocol is called on the table
// (HandleTable::instance().arm(...)); lease_slots.cpp works on the table's slots as its friend.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>

namespace qd::core {

enum class Tag : uint8_t;  // core/handle_table.h
struct Object;             // core/handle_table.h
class HandleTable;

class LeaseSlots {
  public:
    // Reserve a slot for obj, owned by `owner` (its context's handle); *index names it.
    qd_status reserve(Tag tag, uint64_t owner, std::shared_ptr<Object> obj, uint32_t *index);
    // Make the reserved slot live under a new handle. False if its generations are exhausted
    // (the slot is then retired and the object dropped; the caller reserves a new slot) or the
    // slot was given back with unreserve() meanwhile.
    bool arm(uint32_t index, uint64_t *out);
    // Live -> reserved; *obj (optional) is the slot's object, which stays owned by the slot.
    // QD_ERROR_INVALID_HANDLE if the handle is not a live armed (leased) handle.
    qd_status disarm(uint64_t handle, Tag tag, Object **obj = nullptr);
    // Give a reserved slot back (dropping its object).
    void unreserve(uint32_t index);
    // Disarm under the slot lock, without the pool: the child of a fork releasing a lease of an
    // inherited context, whose pool lock a thread of the parent may have held at fork() (a
    // thread that does not exist in the child). The object stays with the slot. Same failures
    // as disarm().
    qd_status revoke(uint64_t handle, Tag tag);

  protected:
    LeaseSlots() = default;
    // For context destroy: the armed slot `index`, whose slot lock the caller holds, goes back
    // to reserved (or retired) as disarm() would; the pool unreserves it itself.
    void revoke_locked(uint32_t index);

  private:
    HandleTable &table();
};

}  // namespace qd::core
