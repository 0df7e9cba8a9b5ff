// The process-wide handle table: the one global mutable structure qd has besides the loaded
// drivers.
//
// A handle is 64 bits: slot index (high 32) | generation (24) | type tag (low 8). The tag is
// never 0, so no handle is 0. Freed slots come back with generation + 1, so a stale handle can
// never name a new object (no ABA); a slot whose generation would wrap is retired for good.
// Slots live in chunks that are never freed, so a lookup is an index computation plus a
// compare, with no hashing and no address-keyed maps (native addresses get reused; generations
// do not).
//
// Concurrency: each slot has a tiny spin lock held only to copy or swap its shared_ptr. The
// lock-free check() answers "is this handle live, and who owns it" without touching the object,
// which is what the active-stream calls need to stay in the nanosecond range.
//
// This file is the plain handle storage: insert, resolve (get, check, is_live), remove. The
// other protocol on the same slots, the pools' leases (a slot reserved for one object for life
// and re-armed per lease: reserve, arm, disarm, unreserve), is core/lease_slots.h; HandleTable
// inherits it, so both are called on the one table.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/spin_lock.h"
#include "core/lease_slots.h"

namespace qd::core {

enum class Tag : uint8_t {
    Context = 1,
    Stream = 2,
    Event = 3,
    Module = 4,
    Kernel = 5,
    Graph = 6,
    Timeline = 7,  // since 0.3
};

const char *tag_name(Tag tag);

// Everything a handle can name derives from Object.
struct Object {
    virtual ~Object() = default;
};

class HandleTable : public LeaseSlots {
  public:
    static constexpr uint32_t kChunkBits = 12;
    static constexpr uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr uint32_t kMaxChunks = 1024;  // 4 Mi live slots
    static constexpr uint32_t kGenerationBits = 24;
    static constexpr uint32_t kMaxGeneration = (1u << kGenerationBits) - 1;

    // Never destroyed: handles may be checked by other threads (or finalizers of bindings)
    // while the process exits. Inline, with check() and slot_at(), because every qd call
    // starts here.
    static HandleTable &instance() {
        HandleTable *t = instance_.load(std::memory_order_acquire);
        return t ? *t : create_instance();
    }

    // A new live handle for obj, owned by `owner` (the context handle; 0 for contexts).
    qd_status insert(Tag tag, uint64_t owner, std::shared_ptr<Object> obj, uint64_t *out);

    // Resolve a handle to its object. Fails with QD_ERROR_INVALID_HANDLE and a message naming
    // what is wrong (0, wrong type, never issued, stale).
    template <class T>
    qd_status get(uint64_t handle, Tag tag, std::shared_ptr<T> *out) const {
        std::shared_ptr<Object> obj;
        qd_status st = get_object(handle, tag, &obj);
        if (st == QD_SUCCESS) *out = std::static_pointer_cast<T>(std::move(obj));
        return st;
    }

    // Lock-free: is the handle live? On success *owner is its owner (0 for contexts).
    // Writes no error message on failure unless `report` is true.
    qd_status check(uint64_t handle, Tag tag, uint64_t *owner, bool report = true) const {
        if (tag_of(handle) == uint8_t(tag)) {
            if (const Slot *slot = slot_at(index_of(handle))) {
                if (slot->live.load(std::memory_order_acquire) == handle) {
                    const uint64_t o = slot->owner.load(std::memory_order_acquire);
                    if (slot->live.load(std::memory_order_acquire) == handle) {
                        *owner = o;
                        return QD_SUCCESS;
                    }
                }
            }
        }
        return report ? describe_failure(handle, tag) : QD_ERROR_INVALID_HANDLE;
    }

    // Lock-free, and cheaper than check() when the owner is not needed: is the handle live?
    bool is_live(uint64_t handle, Tag tag) const {
        if (tag_of(handle) != uint8_t(tag)) return false;
        const Slot *slot = slot_at(index_of(handle));
        return slot && slot->live.load(std::memory_order_acquire) == handle;
    }

    // The word that holds a handle's slot's live handle (nullptr for a handle of another tag or
    // a slot never allocated), for a caller that checks one handle again and again: `*word ==
    // handle` then says what is_live() says, in one load. Slots are never freed (chunks live
    // for the process), so the pointer stays valid after the handle dies.
    const std::atomic<uint64_t> *live_word(uint64_t handle, Tag tag) const {
        if (tag_of(handle) != uint8_t(tag)) return nullptr;
        const Slot *slot = slot_at(index_of(handle));
        return slot ? &slot->live : nullptr;
    }

    // Make a handle dead. The object is handed back in *removed (if given), so its destructor
    // runs outside the slot lock.
    qd_status remove(uint64_t handle, Tag tag, std::shared_ptr<Object> *removed = nullptr);

    // Invalidate every live, non-reserved handle owned by `owner`, and disarm its armed (leased)
    // ones (LeaseSlots::revoke_locked). Used by context destroy; the removed objects are handed
    // back to the caller.
    std::vector<std::shared_ptr<Object>> remove_all_owned_by(uint64_t owner);

    // fork() (core/fork_handlers.cpp): every slot lock and the allocation mutex, taken in the
    // prepare handler so that no thread holds one while the process is copied, and released in
    // the parent and in the child. Without them a child would inherit a lock held by a parent
    // thread that does not exist in the child, and wait for it forever. Slot locks are taken
    // first (a thread holding one may take the allocation mutex next, never the reverse), in
    // index order (no thread holds two slot locks).
    void lock_for_fork();
    void unlock_after_fork();

    // --- Test hooks (not exported from libqd; white-box tests link the internal library).
    void debug_set_generation(uint64_t handle, uint32_t generation);
    uint64_t debug_retired_count() const;

    static uint32_t index_of(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
    static uint32_t generation_of(uint64_t h) {
        return static_cast<uint32_t>(h >> 8) & kMaxGeneration;
    }
    static uint8_t tag_of(uint64_t h) { return static_cast<uint8_t>(h & 0xff); }
    static uint64_t make(uint32_t index, uint32_t generation, Tag tag) {
        return (uint64_t(index) << 32) | (uint64_t(generation) << 8) | uint64_t(tag);
    }

  private:
    friend class LeaseSlots;  // the lease protocol works on these slots (core/lease_slots.h)

    // Free and Live: plain handles. Reserved and Armed: a pool lease's slot (lease_slots.h).
    // Retired: its generations are exhausted; never used again.
    enum class State : uint8_t { Free, Live, Reserved, Armed, Retired };

    // A field written by one writer at a time (under the slot lock, or by a pool's serialised
    // arm/disarm) and read by others, e.g. describe_failure's wording: relaxed atomic accesses,
    // which are plain moves on x86, keep those reads free of data races.
    template <class T>
    class Relaxed {
      public:
        Relaxed(T v) : v_(v) {}
        operator T() const { return v_.load(std::memory_order_relaxed); }
        Relaxed &operator=(T v) {
            v_.store(v, std::memory_order_relaxed);
            return *this;
        }
        // Single-writer increment: a load and a store, not a read-modify-write.
        T operator++(int) {
            const T old = *this;
            *this = T(old + 1);
            return old;
        }

      private:
        std::atomic<T> v_;
    };

    struct Slot {
        std::atomic<uint64_t> live{0};  // the live handle, 0 when none
        std::atomic<uint64_t> owner{0};
        mutable SpinLock lock;
        Relaxed<uint32_t> generation{1};  // generation the next handle gets
        Relaxed<State> state{State::Free};
        Tag tag = Tag::Context;
        std::shared_ptr<Object> obj;
    };

    struct SlotLock {
        explicit SlotLock(const Slot &s);
        ~SlotLock();
        const Slot &slot;
    };

    HandleTable() = default;
    static HandleTable &create_instance();  // out of line: the first call's slow path
    static inline std::atomic<HandleTable *> instance_{nullptr};
    // Chunks are constructed whole before they are published, so any slot of a published chunk
    // may be read: one never handed out holds live == 0, which matches no handle.
    Slot *slot_at(uint32_t index) const {
        const uint32_t chunk = index >> kChunkBits;
        if (chunk >= kMaxChunks) return nullptr;
        Slot *base = chunks_[chunk].load(std::memory_order_acquire);
        if (!base) return nullptr;
        return base + (index & (kChunkSize - 1));
    }
    qd_status get_object(uint64_t handle, Tag tag, std::shared_ptr<Object> *out) const;
    qd_status describe_failure(uint64_t handle, Tag tag) const;
    qd_status allocate_slot(uint32_t *index);
    void release_slot_locked(Slot &slot, uint32_t index);  // called with slot lock held
    // Ends the slot's live handle and moves it to its next generation, or, when that would wrap
    // the generation and let an ancient handle come back to life, retires it for good (false).
    // The caller holds the slot lock or, for a lease, serialises the slot (lease_slots.h).
    bool end_generation(Slot &slot) {
        slot.live.store(0, std::memory_order_release);
        if (slot.generation >= kMaxGeneration) {
            slot.state = State::Retired;
            retired_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        slot.generation++;
        return true;
    }

    std::atomic<Slot *> chunks_[kMaxChunks] = {};
    std::mutex alloc_mutex_;  // guards free_, next_index_, chunk creation
    std::vector<uint32_t> free_;
    uint32_t next_index_ = 0;
    std::atomic<uint32_t> high_water_{0};  // slots ever handed out, for scans
    uint32_t fork_locked_ = 0;             // slots lock_for_fork holds (the forking thread's)
    std::atomic<uint64_t> retired_{0};
};

}  // namespace qd::core
