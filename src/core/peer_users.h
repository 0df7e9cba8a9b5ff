// The streams of other contexts that may still read or write one context's memory: peer copies
// (qd_memcpy_peer_async) queued on another context's stream that name a block of this one. The
// context's destroy frees its blocks only after that work: it refuses new peer copies into its
// memory, waits for those being queued, then for the streams that queued them, and only then
// sweeps (Context::tear_down). A destroy nested in such a copy's own call on the same thread (a
// hazard handler of the copying stream's context) cannot wait for it: its sweep is deferred to
// the moment that copy's call has queued it, and runs there, after the copy.
//
// Cost: only peer copies between two contexts pay (a mutex and a short list); nothing else
// touches it until the destroy.
#pragma once

#include <qd/qd.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"

namespace qd::core {

class Context;

class PeerUsers {
  public:
    // One peer copy being queued into (or out of) this context's memory, from enter() until it
    // goes out of scope; queued() remembers the stream the copy went on.
    class Entry {
      public:
        Entry() = default;
        ~Entry();
        Entry(const Entry &) = delete;
        Entry &operator=(const Entry &) = delete;
        void queued(const std::shared_ptr<backend::Stream> &stream,
                    const std::shared_ptr<Context> &stream_owner);

      private:
        friend class PeerUsers;
        PeerUsers *users_ = nullptr;
        std::shared_ptr<Context> keep_;  // the context whose memory the copy names
    };

    // QD_SUCCESS and *entry entered, or QD_ERROR_INVALID_HANDLE with the message once the
    // context's destroy has begun (`self`, whose handle names it, is kept alive by the entry).
    qd_status enter(std::shared_ptr<Context> self, uint64_t handle, Entry *entry);

    // For the context's destroy, before it begins: QD_ERROR_INVALID_OPERATION with the message
    // when the calling thread runs a host kernel or callback of a context whose stream has a
    // peer copy of this context's memory queued (the destroy would wait for it: for itself).
    qd_status may_wait(uint64_t handle);

    // For the context's destroy: refuses new entries, waits for the entries of other threads,
    // then (unless this thread is itself inside an entry: then when that entry ends) waits for
    // the streams that queued copies and runs `sweep`.
    void close_then(std::function<void()> sweep);

  private:
    struct User {
        std::weak_ptr<backend::Stream> stream;
        std::weak_ptr<Context> owner;
    };
    void leave(Entry *entry);
    void wait_for_users();
    static uint32_t entered_here(const PeerUsers *users);

    std::mutex mutex_;
    std::condition_variable left_;
    uint32_t active_ = 0;
    bool closed_ = false;
    std::vector<User> users_;
    std::function<void()> deferred_;  // close_then's work, when this thread was inside an entry

    // The entries the calling thread is inside (copies nest through hazard handlers).
    static constexpr unsigned kNest = 16;
    static inline thread_local const PeerUsers *t_entered_[kNest] = {};
    static inline thread_local unsigned t_depth_ = 0;
};

}  // namespace qd::core
