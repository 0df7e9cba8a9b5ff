// The timeline trace: an observer of the submission chokepoint (core/submit.h) that records
// every operation a context's streams run, and writes them as a Chrome trace event file that
// Perfetto and chrome://tracing open (`qd trace view` draws it without either).
//
// Turned on per context by qd_trace_start(ctx, path) and off by qd_trace_stop(ctx), which writes
// the file; qd_trace_flush(ctx) writes what the window holds so far (qd.h, "Timeline trace",
// says what each call promises). With no code change, the environment variable QD_TRACE=path.json
// (read with secure_getenv when a context is created) is a start at every context's creation and
// a stop at its destroy. Several contexts traced into one path share the file: each writes its
// own part (one process per context, one track per stream, one per host thread that enqueued
// work), and a context that writes again replaces its part. Off by default; never started, no
// observer is attached and the chokepoint's branch is not taken. Once started, the observer stays
// attached for the context's life (core/observers.h); stopped, it costs a submit the observer
// walk, one atomic load in before(), and in after() a look at the top of this thread's
// in-flight stack and the trace's mutex (it must complete an operation begun before a stop).
//
// How times are taken: two boundaries, timing events of the context's own backend, bracket
// every traced operation on its stream (recorded just before and just after it), so a slice is
// the time the operation ran on the CPU backend's worker or on the device, not the time it was
// queued. The end of one operation is the begin of the next on the same stream when the stream
// is still busy (that end not done: one event query) and nothing else was queued there in
// between, and the events come from a pool (timing.h says when a boundary is shared and when it
// is recorded afresh). The events are read when the file is written (stop, flush, destroy) or,
// to recycle them, once done; never on the launch path of an operation that has a pooled event.
// A reference event recorded and synchronized when the window starts puts every stream on the
// host's steady clock. Cost when on: on a busy stream one event record and one event query per
// operation (on the CPU backend one queued marker, on a GPU one event record), on an idle one
// two records, and no event creation (the pool, refilled from the boundaries already done, each
// read once: timing.h); the mutex (never held across a backend call) taken four times, and the
// host clock read twice (bench/RESULTS.md measures it); an event record or wait also takes the
// process-wide mutex of the table of records (below). Stopped, a record takes it too (its
// event's entry goes).
//
// Memory is bounded: a window keeps at most QD_TRACE_CAPACITY operations (default 65536); the
// ring drops the newest (operations past the capacity are not recorded), and the file says how
// many were dropped. The table of records below keeps one entry per event recorded while traced:
// a context's entries go at its destroy, a destroyed user event's when the table has doubled.
//
// Arrows (flow events) across contexts. Every traced record gets a serial number unique in the
// process, and a process-wide table keeps the latest traced record of each event; a wait, in
// whichever context, takes the serial of the record it consumed. A context's part of a file
// holds its events and the two ends of its arrows (TracePart): its timed records and its timed
// waits, with their serials. The file (the process-wide table of trace files, where the parts
// of all contexts meet) joins them each time it is written: one arrow per wait whose record is
// in the file, numbered in the file, so a record in one context and the wait in another are
// joined whichever context writes last, and an arrow stays while both parts do (a destroyed
// context's part stays in the file). An arrow starts inside the record's slice ("s", bound to
// the enclosing slice) and ends where the wait was satisfied, the end of the wait's slice ("f"
// with no "bp": bound to the next slice that starts at or after it, the waiting stream's next
// work; 1 ns before that slice when it starts at the same time), never before its start.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/submit.h"
#include "core/trace/chunked.h"
#include "core/trace/snapshot.h"
#include "core/trace/timing.h"

namespace qd::core {

class TraceObserver final : public OpObserver {
  public:
    // QD_TRACE at context creation: a start into that path. QD_SUCCESS when it is not set.
    static qd_status attach_if_requested(Context &ctx);
    // The C API (qd.h, "Timeline trace"); the context is resolved and usable (start) or
    // resolved and not forked (stop, flush).
    static qd_status start(Context &ctx, const char *path);
    static qd_status stop(Context &ctx);
    static qd_status flush(Context &ctx);

    explicit TraceObserver(Context &ctx);
    ~TraceObserver() override;

    qd_status before(const Op &op, bool *consumed) override;
    void after(const Op &op, qd_status status) override;
    // A replay is traced operation by operation (a captured one is not traced).
    bool needs_replay() const override { return true; }
    void context_drained(Context &ctx) override;
    // PoolExhausted: a marker on the calling thread's track.
    void host_event(const HostEvent &event) override;

  private:
    using Clock = std::chrono::steady_clock;

    struct Slot {
        OpKind kind = OpKind::Launch;
        OpOrigin origin = OpOrigin::Api;
        uint32_t track = 0;   // the stream's track (named when first seen: Window::track_names)
        char name[64] = {0};  // the kernel's name (copied: the kernel may be gone by the flush)
        // A launch's attributes (qd_launch_ex); completion_event is only tested for null (the
        // event may be gone by the flush).
        backend::LaunchAttrs attrs{};
        uint64_t bytes = 0;
        size_t begin = TraceTiming::kNone, end = TraceTiming::kNone;  // Window::timing's
        Clock::time_point host_begin, host_end;
        uint32_t thread = 0;
        qd_status status = QD_SUCCESS;
        bool completed = false;  // after() ran and its end is recorded: false while in flight
        // Record: its serial (process-wide); Wait: the serial of the record it consumed, 0 for
        // none traced (the event was never recorded, or its record is not traced)
        uint64_t serial = 0;
    };

    // What one start .. stop records. Copied for a flush, so the events are waited for and the
    // file is rendered without holding the lock that submits take.
    struct Window {
        std::string path;
        size_t capacity = 0;
        Chunked<Slot> slots;  // grows without moving what it holds (a vector's regrowth
                              // copied every slot: most of the cost of tracing on)
        uint64_t dropped = 0;
        uint64_t id = 0;  // process-wide, never reused: pairs a submit's after() with its window
        std::unordered_map<std::thread::id, uint32_t> threads;
        // A stream's track, found by address; the weak reference tells a new stream at a freed
        // stream's address from the old one.
        struct Track {
            std::weak_ptr<const Stream> stream;
            uint32_t tid;
        };
        std::unordered_map<const Stream *, Track> track_of;
        std::vector<std::string> track_names;  // [tid - 1]
        // Stream pool exhaustions (HostEvent::PoolExhausted): when, on which host thread, how
        // many streams the failed call asked for. Count against the capacity, as operations do.
        struct Exhaustion {
            Clock::time_point when;
            uint32_t thread;
            uint64_t wanted;
        };
        std::vector<Exhaustion> exhausted;
        uint32_t owned = 0;
        std::shared_ptr<backend::Event> reference;
        Clock::time_point reference_time;
        TraceTiming timing;  // the boundaries of the slots
    };

    static qd_status find_or_attach(Context &ctx, TraceObserver **out);
    qd_status begin_window(std::string path, size_t capacity);  // blocks on the reference event
    // Off, then write; report: failures as a status; destroyed: the context's last write (the
    // file may then drop the oldest destroyed contexts' parts).
    qd_status end_window(bool report, bool destroyed);
    // Copy the window, wait for its events, write the file.
    qd_status write_snapshot(bool destroyed);
    static uint32_t track_of(Window &w, const Stream &stream);
    static uint32_t thread_of(Window &w);  // this host thread's number in the window
    // Outside mutex_: records a boundary handed out by Window::timing, then gives it back to
    // the window it came from (or its event to the pool, when that window is gone); an end
    // completes its slot (`completes`; TraceTiming::kNone for a begin).
    void record_boundary(backend::Stream &stream, uint64_t window, TraceTiming::Pending &&p,
                         size_t completes);
    void reuse_done_events(uint64_t window, std::shared_ptr<backend::Event> *out);
    // The window as the renderer (render.h) takes it: device times read, names resolved.
    TraceSnapshot snapshot_of(const Window &w);
    // "already being traced" (written); the context's trace observer, or null.
    static qd_status already_on(const std::string &path);
    static TraceObserver *attached_trace(Context &ctx);

    Context &ctx_;
    const uint32_t id_;  // this context's process id in the file
    std::atomic<bool> on_{false};
    std::mutex control_;  // one start, stop or flush at a time (they block outside mutex_)
    std::mutex mutex_;    // window_ (submits take it while on)
    // The current window, or after a stop the last one. A submit finds its window here only
    // (under mutex_, by Window::id), so a window replaced by a start is out of every submit's
    // reach: only then are its events given back and its slots and boundaries freed.
    std::unique_ptr<Window> window_;
    TimingEventPool pool_;  // under mutex_; filled by a start (outside mutex_)
    bool reading_ = false;  // under mutex_: a file is being written from a copy
};

// A test seam: when set, a start calls it once its new window has taken the last one's place,
// while it tops up the pool of timing events outside mutex_ (submits on other threads run then,
// and those still in the last window find it gone). Only code linked with qd_internal can set
// it (the symbol is hidden, as gpu::g_table_hook's is): tests/whitebox/trace_window_test.cpp
// holds a start there. A start pays one load for it; a submit nothing.
extern void (*g_trace_start_hook)();

// fork() (core/fork_handlers.h): the table of trace files and the table of records are locked
// in the prepare handler and unlocked in the parent and the child, so a child never inherits
// them locked by another thread.
void lock_trace_files_for_fork();
void unlock_trace_files_after_fork();

}  // namespace qd::core
