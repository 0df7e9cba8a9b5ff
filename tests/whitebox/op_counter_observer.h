// A test observer: counts a context's operations by OpKind and its objects created and
// destroyed by ObjectEvent::Kind. It is the proof that a new observer is its own file and one
// row of src/core/observer_table.h (QD_TEST_OBSERVER_TABLE's op_counter): it touches nothing
// else in src/. Its row is compiled only into the test build of the table
// (tests/whitebox/meson.build), so libqd never attaches it; there it attaches at the creation
// of every context while OpCounterObserver::enabled is set.
//
// The one file of the observer: only the test that reads it includes it (it defines the row's
// attach function).
#pragma once

#include <qd/qd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "core/context.h"
#include "core/object_event.h"
#include "core/observers.h"
#include "core/submit.h"

namespace qd::core {

class OpCounterObserver final : public OpObserver {
  public:
    // Read at each context's creation: attach a counter to it.
    static inline std::atomic<bool> enabled{false};

    static constexpr size_t kOpKinds = size_t(OpKind::WaitValue) + 1;
    static constexpr size_t kObjectKinds = size_t(ObjectEvent::Kind::Timeline) + 1;

    // Every operation the context's streams were given, whatever the backend then said.
    qd_status before(const Op &op, bool *) override {
        ops_[size_t(op.kind)].fetch_add(1, std::memory_order_relaxed);
        return QD_SUCCESS;
    }
    void after(const Op &, qd_status) override {}
    void object_event(const ObjectEvent &event) override {
        auto &counts = event.change == ObjectEvent::Change::Created ? created_ : destroyed_;
        counts[size_t(event.kind)].fetch_add(1, std::memory_order_relaxed);
    }

    uint64_t ops(OpKind kind) const { return ops_[size_t(kind)].load(); }
    uint64_t created(ObjectEvent::Kind kind) const { return created_[size_t(kind)].load(); }
    uint64_t destroyed(ObjectEvent::Kind kind) const { return destroyed_[size_t(kind)].load(); }

    // The counter of a context, or null.
    static const OpCounterObserver *of(const Context &ctx) {
        ObserverSet *set = ctx.observers();
        return set ? set->find<OpCounterObserver>() : nullptr;
    }

  private:
    std::array<std::atomic<uint64_t>, kOpKinds> ops_{};
    std::array<std::atomic<uint64_t>, kObjectKinds> created_{}, destroyed_{};
};

// Its row of src/core/observer_table.h.
qd_status attach_op_counter_observer(Context &ctx, const qd_context_desc &) {
    if (!OpCounterObserver::enabled.load()) return QD_SUCCESS;
    return ctx.attach_observer(std::make_unique<OpCounterObserver>());
}

}  // namespace qd::core
