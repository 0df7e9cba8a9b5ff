// The trace's JSON renderer: one context's snapshot as its part of a Chrome trace event file.
// It knows only the snapshot (snapshot.h), never the observer.
#pragma once

#include "core/trace/snapshot.h"

namespace qd::core {

// The events of the snapshot (metadata, slices, markers) and the ends of its arrows.
TracePart render_trace(const TraceSnapshot &w);

}  // namespace qd::core
