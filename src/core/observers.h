// The observers attached to a context, behind the submission chokepoint's one observer pointer
// (core/submit.h): one per row of core/observer_table.h (the timeline trace, the validation
// mode), which says when each attaches; none adds a hook of its own. Graph capture is no
// observer: it routes operations after the observers saw them (core/capture/capture.h).
// Besides the operations and HostEvents, every observer hears of the context's objects being
// created and destroyed (object_event, core/object_event.h).
//
// An observer stays attached for the rest of its context's life (it turns itself on and off
// with its own state), so a submit racing on another thread never meets a freed observer; the
// context destroys its observers after its streams are drained and its backend shut down.
// With none attached the context's observer pointer is null and a submit costs one branch.
#pragma once

#include <qd/qd.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "core/object_event.h"
#include "core/observer_table.h"
#include "core/submit.h"

namespace qd::core {

class ObserverSet final : public OpObserver {
  public:
    // One observer per row of core/observer_table.h.
    static constexpr size_t kMaxObservers = kObserverRowCount;

    // Attaches `observer` for the context's life; QD_ERROR_OUT_OF_MEMORY (with a message) when
    // kMaxObservers are attached already. Thread-safe.
    qd_status add(std::unique_ptr<OpObserver> observer);

    // The attached observer of type T, or null (for the API calls that drive one).
    template <class T>
    T *find() const {
        for (size_t i = 0; i < count(); ++i)
            if (auto *t = dynamic_cast<T *>(slots_[i].get())) return t;
        return nullptr;
    }

    // How many observers are attached.
    size_t size() const { return count(); }

    // In attach order; the first that refuses or consumes the operation ends the walk (later
    // observers never see it), and the observers before it get after() at once, in reverse
    // order, with its status (QD_SUCCESS for a take). When every one passed, after() runs later
    // in reverse order, on every observer: so each observer whose before() passed gets exactly
    // one after() (core/submit.h).
    qd_status before(const Op &op, bool *consumed) override;
    void after(const Op &op, qd_status status) override;
    // Does any attached observer need replayed operations?
    bool needs_replay() const override;
    // In attach order; the first that refuses the batch ends the walk.
    qd_status check_batch(const Op *ops, size_t n) override;
    // Every observer, in attach order.
    void context_drained(Context &ctx) override;
    void host_event(const HostEvent &event) override;
    void object_event(const ObjectEvent &event) override;
    // In attach order until one takes the block or refuses the free.
    qd_status host_freeing(uint64_t address, bool *taken) override;

  private:
    size_t count() const { return count_.load(std::memory_order_acquire); }

    std::mutex add_mutex_;
    std::array<std::unique_ptr<OpObserver>, kMaxObservers> slots_;
    std::atomic<size_t> count_{0};  // slots [0, count_) are set and never change again
};

}  // namespace qd::core
