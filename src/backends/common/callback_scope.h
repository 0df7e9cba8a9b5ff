// Which callback the calling thread is running, for every backend: the one thread-local beside
// the two that docs/design.md allows (active stream, last error), because nothing else can
// tell, inside a host kernel or host callback, whose callback is running. in_callback() (the
// refusal of blocking calls from a context's own callback) and the GPU layer's refusal of
// driver calls from driver-owned callback threads both rest on it.
#pragma once

namespace qd::backend {

struct CallbackOwner {
    const void *owner = nullptr;  // the backend object whose callback runs (null: none)
    // True on a thread the GPU driver owns (a host callback it runs): the driver forbids calls
    // into itself there. False on a CPU backend worker, where any call is allowed.
    bool driver_thread = false;
};

inline thread_local CallbackOwner t_callback_owner __attribute__((tls_model("initial-exec")));

// The owner of the callback this thread is running; null when none.
inline const void *callback_owner() noexcept { return t_callback_owner.owner; }
// True while this thread runs a callback on a thread the GPU driver owns.
inline bool in_driver_callback() noexcept { return t_callback_owner.driver_thread; }

// Marks the calling thread as running a callback of `owner` for the scope's lifetime, and
// restores what was there (callbacks nest when one context's callback runs another's work).
class CallbackScope {
  public:
    CallbackScope(const void *owner, bool driver_thread) noexcept : previous_(t_callback_owner) {
        t_callback_owner = CallbackOwner{owner, driver_thread};
    }
    ~CallbackScope() { t_callback_owner = previous_; }
    CallbackScope(const CallbackScope &) = delete;
    CallbackScope &operator=(const CallbackScope &) = delete;

  private:
    CallbackOwner previous_;
};

}  // namespace qd::backend
