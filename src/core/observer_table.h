// The one table of a context's observers (core/observers.h). Context::create attaches the
// observers it asks for by walking this table (attach_observers_at_create below), and a
// context's ObserverSet holds one observer per row, so its capacity is the table's size. A new
// observer is its own file and one row here (DEVELOPERS.md, "Adding an observer", lists the
// files it touches).
//
// X(name, when):
//   name  the observer, lower case: its file core/<name>.* (a test row's: tests/whitebox/); an
//         AtCreate row's file defines
//             qd_status attach_<name>_observer(Context &ctx, const qd_context_desc &desc);
//         which attaches it (Context::attach_observer) when the description or the
//         environment asks for it, and returns QD_SUCCESS when it stays off; any other status
//         (written with fail()) fails the context's creation
//   when  AtCreate: Context::create calls attach_<name>_observer, in table order, before the
//         context's first object (its default stream) exists; FirstUse: the observer's own
//         API call attaches it the first time it is needed, and the row only holds its place.
//         The chain's order is the attach order (core/observers.h).
//
// Rows, and what attaches them:
//   trace       QD_TRACE at creation (core/trace/observer.h); qd_trace_start attaches it
//               later too
//   validation  QD_CONTEXT_VALIDATE or QD_VALIDATE at creation (core/validation/observer.h)
// Graph capture has no row: it is no observer but the router after them (core/capture/).
//
// QD_TEST_OBSERVER_TABLE holds the rows compiled only into a test build of the table
// (core/observer_table.cpp built with QD_TEST_OBSERVERS, tests/whitebox/meson.build): libqd
// never attaches them. They count towards the capacity all the same, so that an ObserverSet
// is the same object in every build.
#pragma once

#include <qd/qd.h>

#include <cstddef>

#define QD_OBSERVER_TABLE(X)                                                                       \
    X(trace, AtCreate)                                                                             \
    X(validation, AtCreate)

#define QD_TEST_OBSERVER_TABLE(X) X(op_counter, AtCreate)

namespace qd::core {

class Context;  // core/context.h

// The attach functions of the AtCreate rows, by name.
#define QD_OBSERVER_DECLARE_AtCreate_(name)                                                        \
    qd_status attach_##name##_observer(Context &ctx, const qd_context_desc &desc);
#define QD_OBSERVER_DECLARE_FirstUse_(name)
#define QD_OBSERVER_DECLARE_(name, when) QD_OBSERVER_DECLARE_##when##_(name)
QD_OBSERVER_TABLE(QD_OBSERVER_DECLARE_)
QD_TEST_OBSERVER_TABLE(QD_OBSERVER_DECLARE_)
#undef QD_OBSERVER_DECLARE_
#undef QD_OBSERVER_DECLARE_FirstUse_
#undef QD_OBSERVER_DECLARE_AtCreate_

// How many observers a context may hold: one per row, test rows included.
#define QD_OBSERVER_COUNT_(name, when) +1
inline constexpr size_t kObserverRowCount =
    0 QD_OBSERVER_TABLE(QD_OBSERVER_COUNT_) QD_TEST_OBSERVER_TABLE(QD_OBSERVER_COUNT_);
#undef QD_OBSERVER_COUNT_

// Context::create: every AtCreate row's attach function, in table order (then the test rows,
// in a test build); the first status other than QD_SUCCESS is returned, its message written.
qd_status attach_observers_at_create(Context &ctx, const qd_context_desc &desc);

}  // namespace qd::core
