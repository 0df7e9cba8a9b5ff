// A per-thread cache of resolved handles, so the launch path does no atomic read-modify-write
// to find its stream and kernel.
//
// A hit costs one load: each entry keeps a pointer to its handle's slot's live word
// (HandleTable::live_word; slots are never freed), and if that word still holds the handle, the
// cached object is the object of that handle, because a handle value is never reissued.
// The cache holds a strong reference, so the raw pointer it returns stays valid. Entries pushed
// out by a miss go to a graveyard that is emptied when the next outermost API call on this
// thread begins, never in the middle of one, so every pointer a call obtained stays valid until
// that call returns.
//
// Calls nest: a hazard handler, a module's constructor or destructor, or a host callback run
// inline may call qd while an outer qd call on the same thread is in progress. CallScope counts
// the thread's depth (one non-atomic increment and decrement of a thread-local per call); only
// the outermost call empties the graveyard, so what an outer call resolved stays alive while the
// calls nested in it destroy objects (their own context included), and is released when the
// outermost call returns.
//
// Cost of the design: a destroyed object may live on (its handle is dead) until this thread
// makes a few more qd calls or exits; on a GPU its native stream or event is released then.
// qd_context_destroy releases the calling thread's entries at once (release_dead_now), or, when
// it is nested in another qd call, as that outermost call returns; other threads' entries of
// that context go at their next calls. Destroy calls already return before
// queued work completes, so nothing observable depends on the exact moment memory is freed.
//
// The thread's cache is reached through a plain pointer in initial-exec TLS: one load from the
// thread pointer, with no __tls_get_addr call and no guard, on every qd call. The cache itself
// is made on the thread's first call (create()), which also registers its deletion at thread
// exit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/handle_table.h"

namespace qd::core {

class ResolveCache {
  public:
    static constexpr unsigned kWays = 8;  // hits_'s initializer names each way

    static ResolveCache &local() {
        ResolveCache *c = t_cache_;
        return c ? *c : create();
    }

    // Brackets each API call (api/guard.h). The outermost call on the thread frees, as it
    // begins, what earlier calls pushed out; a nested call frees nothing, and a release that a
    // nested call asked for (release_dead_now) happens as the outermost call returns.
    class CallScope {
      public:
        // Inline in every entry point, as the end: with nothing pending, each reads and writes
        // the thread's depth and reads its pending bits (thread-local, one cache line), and
        // touches the cache itself not at all; the work is out of line.
        __attribute__((always_inline)) CallScope() noexcept {
            if (t_depth_++ == 0 && __builtin_expect(t_pending_ & kBury, 0)) {
                if (ResolveCache *c = t_cache_) c->bury();
            }
        }
        __attribute__((always_inline)) ~CallScope() {
            if (--t_depth_ == 0 && __builtin_expect(t_pending_ & kRelease, 0)) {
                if (ResolveCache *c = t_cache_) c->release_dead_now();
            }
        }
        CallScope(const CallScope &) = delete;
        CallScope &operator=(const CallScope &) = delete;
    };

    // True while the calling thread is inside a qd call that another qd call on this thread
    // is running (a hazard handler, a module constructor, an inline callback).
    static bool nested() { return t_depth_ > 1; }

    Object *find(uint64_t handle, Tag tag) {
        for (unsigned i = 0; i < kWays; ++i) {
            if (handles_[i] != handle) continue;
            // A live handle of another type: the miss path writes the message.
            if (HandleTable::tag_of(handle) != uint8_t(tag)) return nullptr;
            if (hits_[i].word->load(std::memory_order_acquire) == handle) return hits_[i].object;
            evict(i);  // the handle died: let its object go at the next call
            return nullptr;
        }
        return nullptr;
    }

    // Drop this thread's entry for a handle that was just destroyed, so the object goes at the
    // next call rather than when the entry would age out.
    void forget(uint64_t handle) {
        for (unsigned i = 0; i < kWays; ++i)
            if (handles_[i] == handle) evict(i);
    }

    // Drops this thread's entries whose handles are dead. qd_context_destroy calls it once the
    // context is torn down, so the children this thread resolved (and the native objects they
    // hold) are released before it returns, not at a later call; nested in another qd call on
    // this thread, the release waits for that outermost call to return (CallScope). Only for
    // the end of an API call: it frees objects whose pointers the call may have used.
    __attribute__((noinline)) void release_dead_now() {
        for (unsigned i = 0; i < kWays; ++i)
            if (handles_[i] && hits_[i].word->load(std::memory_order_acquire) != handles_[i])
                evict(i);
        if (t_depth_ > 1) {
            t_pending_ |= kRelease;
            return;
        }
        t_pending_ &= uint8_t(~kRelease);
        bury();
    }

    Object *insert(uint64_t handle, std::shared_ptr<Object> obj) {
        const unsigned i = next_++ % kWays;
        evict(i);
        const std::atomic<uint64_t> *word =
            HandleTable::instance().live_word(handle, Tag(HandleTable::tag_of(handle)));
        if (!word) {  // cannot happen for a handle just resolved; keep it to the call's end
            graveyard_.push_back(std::move(obj));
            t_pending_ |= kBury;
            return graveyard_.back().get();
        }
        handles_[i] = handle;
        hits_[i] = Hit{word, obj.get()};
        owners_[i] = std::move(obj);
        return hits_[i].object;
    }

    // In the child of a fork (core/fork_handlers.h): the calling thread's cache holds references
    // to inherited objects, whose release could take locks that the parent's other threads held
    // at the fork. The cache is left behind, never freed; the thread's next call makes a new one.
    static void abandon_after_fork() { t_cache_ = nullptr; }

  private:
    // First use on this thread: the cache, and its deletion at thread exit.
    static ResolveCache &create();
    static inline thread_local ResolveCache *t_cache_ __attribute__((tls_model("initial-exec"))) =
        nullptr;
    // How many qd calls the thread is inside (CallScope).
    static inline thread_local unsigned t_depth_ __attribute__((tls_model("initial-exec"))) = 0;
    // Work for the outermost call's scope: kBury (the graveyard holds objects: free them as the
    // next outermost call begins), kRelease (a nested release_dead_now: release as the outermost
    // call returns). Thread-local beside t_depth_, so a call with nothing pending reads no line
    // of the cache.
    static constexpr uint8_t kBury = 1, kRelease = 2;
    static inline thread_local uint8_t t_pending_ __attribute__((tls_model("initial-exec"))) = 0;
    friend struct ResolveCacheReaper;

    // Out of line, so the clearing loop stays out of every entry point's prologue. Releasing an
    // object may run code that calls qd on this thread (the last reference to a module runs
    // its destructor): those calls count as nested, and what they push out waits for the next
    // outermost call, so the vector being cleared is never touched meanwhile.
    __attribute__((noinline)) void bury() {
        ++t_depth_;
        t_pending_ &= uint8_t(~kBury);  // what the releases below push out sets it again
        std::vector<std::shared_ptr<Object>> dead;
        dead.swap(graveyard_);
        dead.clear();
        if (graveyard_.empty()) graveyard_.swap(dead);  // keeps the capacity
        --t_depth_;
    }

    void evict(unsigned i) {
        handles_[i] = 0;
        hits_[i] = Hit{&kNoWord, nullptr};
        if (owners_[i]) {
            graveyard_.push_back(std::move(owners_[i]));
            t_pending_ |= kBury;
        }
    }

    // What an empty entry's word points at: UINT64_MAX, which is no handle (no tag is 0xff),
    // so an empty entry that a handle of 0 finds is never a hit.
    static inline const std::atomic<uint64_t> kNoWord{UINT64_MAX};

    // What a hit reads: the handles scanned (one cache line), then the way's word and object
    // (16 bytes, four ways to a line). The owning references are apart, touched only by
    // insert and evict.
    struct Hit {
        const std::atomic<uint64_t> *word;
        Object *object;
    };
    alignas(64) uint64_t handles_[kWays] = {};
    Hit hits_[kWays] = {{&kNoWord, nullptr}, {&kNoWord, nullptr}, {&kNoWord, nullptr},
                        {&kNoWord, nullptr}, {&kNoWord, nullptr}, {&kNoWord, nullptr},
                        {&kNoWord, nullptr}, {&kNoWord, nullptr}};
    std::shared_ptr<Object> owners_[kWays];
    unsigned next_ = 0;
    std::vector<std::shared_ptr<Object>> graveyard_;
};

}  // namespace qd::core
