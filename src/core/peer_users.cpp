#include "core/peer_users.h"

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

uint32_t PeerUsers::entered_here(const PeerUsers *users) {
    uint32_t n = 0;
    for (unsigned i = 0; i < t_depth_ && i < kNest; ++i) n += t_entered_[i] == users;
    return n;
}

qd_status PeerUsers::enter(std::shared_ptr<Context> self, uint64_t handle, Entry *entry) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (closed_)
            return fail(QD_ERROR_INVALID_HANDLE, "context 0x%016llx was destroyed during the call",
                        (unsigned long long)handle);
        ++active_;
    }
    if (t_depth_ < kNest) t_entered_[t_depth_] = this;
    ++t_depth_;
    entry->users_ = this;
    entry->keep_ = std::move(self);
    return QD_SUCCESS;
}

void PeerUsers::Entry::queued(const std::shared_ptr<backend::Stream> &stream,
                              const std::shared_ptr<Context> &stream_owner) {
    if (!users_) return;
    std::lock_guard<std::mutex> lock(users_->mutex_);
    std::vector<User> &users = users_->users_;
    bool known = false;
    for (auto it = users.begin(); it != users.end();) {
        if (it->stream.expired()) {
            it = users.erase(it);  // its work is done: nothing holds the stream any more
            continue;
        }
        known |= it->stream.lock() == stream;
        ++it;
    }
    if (!known) users.push_back(User{stream, stream_owner});
}

PeerUsers::Entry::~Entry() {
    if (users_) users_->leave(this);
}

void PeerUsers::leave(Entry *entry) {
    --t_depth_;
    std::function<void()> deferred;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        --active_;
        if (closed_ && deferred_ && entered_here(this) == 0) deferred.swap(deferred_);
    }
    left_.notify_all();
    if (deferred) deferred();  // the destroy nested in this copy's call: after the copy
    entry->users_ = nullptr;
}

qd_status PeerUsers::may_wait(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const User &u : users_) {
        if (u.stream.expired()) continue;
        std::shared_ptr<Context> owner = u.owner.lock();
        if (owner && owner->impl().in_callback())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "context 0x%016llx is destroyed from a host kernel or callback of context "
                        "0x%016llx, whose stream has a peer copy of its memory queued; the destroy "
                        "would wait for that copy, and so for itself",
                        (unsigned long long)handle, (unsigned long long)owner->handle());
    }
    return QD_SUCCESS;
}

void PeerUsers::close_then(std::function<void()> sweep) {
    std::unique_lock<std::mutex> lock(mutex_);
    closed_ = true;
    const uint32_t mine = entered_here(this);
    left_.wait(lock, [&] { return active_ == mine; });
    if (mine > 0) {
        deferred_ = [this, sweep = std::move(sweep)] {
            wait_for_users();
            sweep();
        };
        return;
    }
    lock.unlock();
    wait_for_users();
    sweep();
}

void PeerUsers::wait_for_users() {
    std::vector<User> users;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        users.swap(users_);
    }
    for (const User &u : users) {
        std::shared_ptr<backend::Stream> stream = u.stream.lock();
        if (!stream) continue;  // nothing holds it: its work is done
        // From a host kernel or callback of that stream's own context the wait would wait for
        // itself; qd_context_destroy refuses that case before it begins (Context::destroy).
        std::shared_ptr<Context> owner = u.owner.lock();
        if (owner && owner->impl().in_callback()) continue;
        (void)stream->synchronize();
    }
}

}  // namespace qd::core
