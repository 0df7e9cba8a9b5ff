// The walk over core/observer_table.h that Context::create makes. Built into qd_internal from
// the library's rows alone; a test build compiles this file again with QD_TEST_OBSERVERS, which
// adds the test rows (tests/whitebox/meson.build).
#include "core/observer_table.h"

namespace qd::core {

namespace {

using AttachFn = qd_status (*)(Context &, const qd_context_desc &);

#define QD_OBSERVER_ATTACH_AtCreate_(name) &attach_##name##_observer,
#define QD_OBSERVER_ATTACH_FirstUse_(name)
#define QD_OBSERVER_ATTACH_(name, when) QD_OBSERVER_ATTACH_##when##_(name)
constexpr AttachFn kAtCreate[] = {QD_OBSERVER_TABLE(QD_OBSERVER_ATTACH_)
#ifdef QD_TEST_OBSERVERS
                                      QD_TEST_OBSERVER_TABLE(QD_OBSERVER_ATTACH_)
#endif
};
#undef QD_OBSERVER_ATTACH_
#undef QD_OBSERVER_ATTACH_FirstUse_
#undef QD_OBSERVER_ATTACH_AtCreate_

}  // namespace

qd_status attach_observers_at_create(Context &ctx, const qd_context_desc &desc) {
    for (AttachFn attach : kAtCreate) {
        const qd_status st = attach(ctx, desc);
        if (st != QD_SUCCESS) return st;
    }
    return QD_SUCCESS;
}

}  // namespace qd::core
