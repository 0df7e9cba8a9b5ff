// Shape checks for launches, shared by qd_launch and qd_launch_parallel so both reject the same
// inputs with the same statuses before anything is queued.
#pragma once

#include <qd/qd.h>

#include "backends/backend.h"

namespace qd::core {
class Event;
class Stream;
}  // namespace qd::core

namespace qd::core {

// config may be NULL (one block of one thread).
qd_status validate_config(const qd_launch_config *config, backend::LaunchDims *out);
qd_status validate_args(const qd_arg *args, uint32_t num_args);

// A launch's attributes (qd_launch_ex, qd_task's attrs) as checked for their own values ("Which
// error wins", class 1): `attrs` has all but the completion event, whose handle is `event`
// given at attrs[event_index] (has_event: a COMPLETION_EVENT was given, its handle maybe 0).
struct CheckedAttrs {
    backend::LaunchAttrs attrs;
    bool has_event = false;
    qd_event event = 0;
    uint32_t event_index = 0;
};
// `prefix` starts each message's name of an attribute ("" for qd_launch_ex's "attrs[1]",
// "tasks[3]." for a task's); dims are the launch's, already valid.
qd_status validate_attrs(const qd_launch_attr *attrs, uint32_t num_attrs,
                         const backend::LaunchDims &dims, const char *prefix, CheckedAttrs *out);
// The COMPLETION_EVENT api/ resolved (`event`, of the stream's context) into attrs.
void set_completion_event(backend::LaunchAttrs &attrs, Event &event);
// Class 5: can `s` honour non-empty `attrs` now? A completion event on a capturing stream is
// refused (a graph node records no event of the caller's), then the backend decides
// (backend::Context::check_launch_attrs). `prefix` as above.
qd_status check_launch_attrs(Stream &s, const backend::LaunchAttrs &attrs,
                             const backend::LaunchDims &dims, const char *prefix);

}  // namespace qd::core
