// Timelines (qd.h, "Timelines"): the calls besides create and destroy (core/lifecycle.h). The
// value rule (a signal's value grows) is checked here, before anything is queued; stream
// signals and waits then go through the chokepoint (core/submit.h: submit_signal,
// submit_wait_value), and the host's calls report what the validation mode needs as HostEvents.
// The api layer resolves the objects and checks the contexts; these do the rest.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "core/context.h"

namespace qd::core {

// qd_timeline_signal and qd_timeline_wait on a usable context (stream and timeline of it).
qd_status signal(Stream &stream, Timeline &timeline, uint64_t value);
qd_status wait_value(Stream &stream, Timeline &timeline, uint64_t value);
// qd_timeline_host_signal, qd_timeline_host_wait, qd_timeline_query.
qd_status host_signal(Timeline &timeline, uint64_t value);
qd_status host_wait(Timeline &timeline, uint64_t value, uint64_t timeout_ns);
qd_status query(Timeline &timeline, uint64_t *value);

}  // namespace qd::core
