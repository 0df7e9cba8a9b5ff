// `qd trace view trace.json -o trace.html`: one self-contained HTML page (inline SVG drawn by an
// inline script; no network, nothing external) that shows a QD_TRACE file as lanes, one per
// stream and per enqueuing host thread, with the slices, the arrows from each event record to
// the waits that consumed it, zoom (wheel), pan (drag) and a hover box naming each slice.
#pragma once

namespace qd_tool {

// argv after "trace": "view", the input, "-o", the output. Returns the process exit code.
int run_trace(int argc, char **argv);

}  // namespace qd_tool
