// The trace's timing events (observer.h, "How times are taken"): the boundaries between a
// window's operations, shared by consecutive operations of a stream, and the pool of timing
// events they are recorded with.
//
// A traced operation is bracketed by two boundaries, each a timing event recorded on its stream.
// The end of one operation is the start of the next one on the same stream when nothing else
// was queued there in between and the stream was still busy (the end not done yet: the next
// operation then starts on the device exactly when it completes), so a busy stream's
// operations share their boundaries: in the steady state an operation costs one event record
// and one event query, and no event creation (its end; its begin is the previous operation's
// end). The begin is recorded afresh when the stream was idle (a shared begin would count the
// idle time as the operation's) or when anything may have come between:
// - another traced operation of the same lane (stream) is between its before() and after()
//   (several threads submitting to one stream), or began since the previous end was taken;
// - an operation was queued on the stream without the observers (Stream::unobserved counts
//   them: the validation mode's held-back frees, the capture router's own calls);
// - an operation was not recorded (nested too deep) or the previous end was not recorded;
// - the stream is borrowed: its native stream also runs the work of whoever lent it.
//
// Events are also reused within a window: when the pool runs dry, the oldest boundaries whose
// work is done are read (their time against the window's reference, as the file's writer would
// read them: TraceTiming::Scan) and their events go back to the pool, so a long window records
// with a working set of events instead of creating one per operation. A boundary not done yet
// stops the scan (and scans back off for a while); it keeps its event, read when the file is
// written. Nothing is recycled while a file is being written from a copy of the window (the
// copy may still read those events).
//
// Nothing here takes a lock. The observer calls begin(), end(), recorded() and invalidate() under
// its own mutex, and record() without it: a boundary is handed out under the lock (with an event
// from the pool when it has one), recorded on the stream outside it (creating the event when the
// pool had none), and given back under the lock again (recorded()).
#pragma once

#include <qd/qd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/trace/chunked.h"

namespace qd::core {

// Timing events kept for reuse: a window's events come back here when the next window starts,
// and a start creates a few ahead (fill), so a short window creates none while it runs.
class TimingEventPool {
  public:
    using EventPtr = std::shared_ptr<backend::Event>;
    static constexpr size_t kMaxKept = 65536;  // events kept beyond this are released

    EventPtr take() {
        if (free_.empty()) return nullptr;
        EventPtr e = std::move(free_.back());
        free_.pop_back();
        return e;
    }
    void give(EventPtr e) {
        if (e && free_.size() < kMaxKept) free_.push_back(std::move(e));
    }
    size_t size() const { return free_.size(); }
    // Creates events until the pool holds `n` (at most kMaxKept); stops at the first failure.
    qd_status fill(backend::Context &ctx, size_t n);

  private:
    std::vector<EventPtr> free_;
};

class TraceTiming {
  public:
    using EventPtr = std::shared_ptr<backend::Event>;
    static constexpr size_t kNone = SIZE_MAX;

    struct Boundary {
        EventPtr event;         // null once read (or when no event could be created)
        bool done = false;      // recorded() ran: no longer being recorded
        bool recorded = false;  // the event's record on the stream succeeded
        bool read = false;      // its time was read (ms) by a scan and its event recycled
        bool timed = false;     // read: the time could be read
        float ms = 0;           // read and timed: milliseconds after the window's reference
    };
    // The oldest boundaries not read yet, read outside the lock (read_scan).
    static constexpr size_t kScan = 64;
    struct Scan {
        size_t first = 0, n = 0;  // boundaries [first, first + n)
        EventPtr events[kScan];   // null: nothing to read (not recorded)
        float ms[kScan] = {};
        bool timed[kScan] = {};
        size_t read = 0;  // how many of them read_scan read (up to the first not done)
    };
    // A boundary handed out to be recorded outside the lock: index kNone when there is none.
    struct Pending {
        size_t index = kNone;
        EventPtr event;      // from the pool; null: record() creates one
        uint32_t lane = 0;   // the stream's lane (the trace's track, from 1)
        uint64_t epoch = 0;  // the lane's epoch when handed out (an end only)
        uint64_t unobserved = 0;
        bool end = false;
    };

    // The begin of an operation on `lane`: the lane's last end when it may be shared (see
    // above: `shareable` is false for a borrowed stream; `unobserved` is the stream's count of
    // unobserved submissions now), else a new boundary to record (*p). Marks the lane busy
    // until end().
    // *shared (when sharing) is the shared boundary's event: the caller queries it outside the
    // lock, and begins afresh (fresh()) unless it was not done and is still that boundary's
    // (still_shared()).
    size_t begin(uint32_t lane, bool shareable, uint64_t unobserved, TimingEventPool &pool,
                 Pending *p, EventPtr *shared);
    // A begin recorded afresh for an operation that begin() made share: a new boundary to record.
    size_t fresh(uint32_t lane, TimingEventPool &pool, Pending *p);
    // The boundary still holds `event` (no scan read it and recycled the event meanwhile).
    bool still_shared(size_t index, const backend::Event *event) const {
        return index < boundaries_.size() && !boundaries_[index].read &&
               boundaries_[index].event.get() == event;
    }
    // The end of an operation that begin() began on `lane`: always a new boundary to record.
    // `unobserved` is the stream's count read before the end is recorded.
    size_t end(uint32_t lane, uint64_t unobserved, TimingEventPool &pool, Pending *p);
    // Something was queued on the lane's stream that no boundary brackets: its last end is no
    // begin for the next operation.
    void invalidate(uint32_t lane);
    // Outside the lock: creates the event if the pool had none, and records it on the stream.
    // False when either failed (the boundary stays unrecorded: its slices are not timed).
    static bool record(backend::Context &ctx, backend::Stream &stream, Pending &p);
    // Under the lock, after record(): the boundary gets its event; an end becomes its lane's
    // last end when nothing else began on the lane since end() handed it out.
    void recorded(Pending &&p, bool ok);

    // Under the lock, when the pool is empty: the next boundaries to read. False when there is
    // none, or scans back off (the oldest was not done at the last scan).
    bool take_scan(Scan *scan);
    // Outside the lock: reads their times against `reference`, until the first not done.
    static void read_scan(backend::Context &ctx, backend::Event &reference, Scan &scan);
    // Under the lock: stores the times read; their events go to the pool when `recycle` (no
    // copy of the window is being read), else stay.
    void scanned(Scan &&scan, bool recycle, TimingEventPool &pool);

    const Boundary *boundary(size_t index) const {
        return index < boundaries_.size() ? &boundaries_[index] : nullptr;
    }
    size_t size() const { return boundaries_.size(); }
    // Every event of this window to the pool, and its boundaries and lanes cleared: only for a
    // window that is over (its file written) and that no submit can reach any more, since the
    // indices handed out (Pending, Scan) name boundaries that are then gone (the observer
    // replaces the window first: observer.cpp, begin_window).
    void give_back(TimingEventPool &pool) &&;

  private:
    struct Lane {
        size_t last_end = kNone;  // the boundary after the lane's last operation, when shareable
        uint64_t unobserved = 0;  // the stream's count of unobserved submissions at that end
        uint64_t epoch = 0;       // bumped by every begin() and invalidate()
        uint32_t in_flight = 0;   // operations between begin() and end()
    };
    Lane &lane(uint32_t id);
    size_t add(TimingEventPool &pool, Pending *p);

    Chunked<Boundary> boundaries_;  // grows without moving what it holds
    std::vector<Lane> lanes_;       // [lane - 1]
    size_t scan_ = 0;               // the oldest boundary no scan has read
    size_t backoff_ = 0;            // scans to skip (the last found the oldest not done)
};

}  // namespace qd::core
