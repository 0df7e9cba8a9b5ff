// The trace observer (observer.h): attaching, the window of one start .. stop, what each
// submit records, and the window's snapshot for the renderer (render.h).
#include "core/trace/observer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/backend_table.h"
#include "common/error.h"
#include "core/context.h"
#include "core/objects.h"
#include "core/observers.h"
#include "core/trace/files.h"
#include "core/trace/records.h"
#include "core/trace/render.h"

namespace qd::core {

namespace {

// This thread's traced submits between before() and after(), innermost last. A submit's
// before() and after() run on its thread within one call (core/submit.h), so they pair as a
// stack; the Op's address confirms the pair (an operation that before() did not record, the
// trace being off or its window full, has no entry). A fixed array, trivially destroyed: a
// submit made while the process exits, after this thread's thread_locals were destroyed,
// finds it intact. Submits nested deeper (a submit from inside a backend call) are counted as
// dropped.
struct InFlight {
    const Op *op;
    uint64_t window;  // Window::id
    size_t slot;
};
constexpr uint32_t kMaxNested = 16;
thread_local InFlight t_in_flight[kMaxNested];
thread_local uint32_t t_depth = 0;
std::atomic<uint64_t> g_window_ids{0};

std::atomic<uint32_t> g_next_id{1};

// Timing events a start creates ahead (TimingEventPool::fill), so that a window of up to this
// many operations creates none while it runs (each operation takes one, plus one per stream).
constexpr size_t kEventsAhead = 1024;

// Serialises attaching a trace observer to a context (find_or_attach). At namespace scope, with
// a constant initializer and nothing to destroy, so that a fork handler may take it.
std::mutex g_attach_mutex;

// The time every trace's timestamps count from: the first reference taken in the process, so
// two contexts traced into one file share one time base.
std::chrono::steady_clock::time_point epoch() {
    static const auto first = std::chrono::steady_clock::now();
    return first;
}

// A launch's attributes as the members of its slice's args (qd.h, "Launch attributes").
std::string attrs_json(const backend::LaunchAttrs &a) {
    std::string out;
    const auto add = [&](const std::string &member) { out += (out.empty() ? "" : ",") + member; };
    if (a.has_cluster())
        add("\"cluster\":[" + std::to_string(a.cluster[0]) + "," + std::to_string(a.cluster[1]) +
            "," + std::to_string(a.cluster[2]) + "]");
    if (a.programmatic) add("\"programmatic\":true");
    if (a.has_priority) add("\"priority\":" + std::to_string(a.priority));
    if (a.completion_event) add("\"completion_event\":true");
    return out;
}

const char *op_name(OpKind kind) {
    switch (kind) {
    case OpKind::Launch: return "launch";
    case OpKind::HostFn: return "host callback";
    case OpKind::Record: return "event record";
    case OpKind::Wait: return "event wait";
    case OpKind::MemAlloc: return "alloc";
    case OpKind::MemFree: return "free";
    case OpKind::Memcpy: return "memcpy";
    case OpKind::Memset: return "memset";
    case OpKind::Signal: return "timeline signal";
    case OpKind::WaitValue: return "timeline wait";
    }
    return "operation";
}

const char *origin_name(OpOrigin origin) {
    switch (origin) {
    case OpOrigin::Api: return "api";
    case OpOrigin::Fork: return "fork";
    case OpOrigin::Join: return "join";
    case OpOrigin::ParallelLaunch: return "parallel launch";
    case OpOrigin::GraphLaunch: return "graph replay";
    }
    return "other";
}

double us_since_epoch(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - epoch()).count();
}

}  // namespace

void (*g_trace_start_hook)() = nullptr;

qd_status TraceObserver::already_on(const std::string &path) {
    return fail(QD_ERROR_INVALID_OPERATION,
                "the context is already being traced (into '%s'); qd_trace_stop it first",
                path.c_str());
}

TraceObserver *TraceObserver::attached_trace(Context &ctx) {
    ObserverSet *set = ctx.observers();
    return set ? set->find<TraceObserver>() : nullptr;
}

void lock_trace_files_for_fork() {
    g_attach_mutex.lock();
    TraceFiles::instance().mutex_.lock();
    Records::instance().mutex_.lock();
}

void unlock_trace_files_after_fork() {
    Records::instance().mutex_.unlock();
    TraceFiles::instance().mutex_.unlock();
    g_attach_mutex.unlock();
}

qd_status TraceObserver::attach_if_requested(Context &ctx) {
    const char *path = ::secure_getenv("QD_TRACE");
    if (!path || !*path) return QD_SUCCESS;
    const qd_status st = start(ctx, path);
    if (st != QD_SUCCESS) return fail(st, "QD_TRACE='%s': %s", path, last_error_message());
    return QD_SUCCESS;
}

// Its row of core/observer_table.h.
qd_status attach_trace_observer(Context &ctx, const qd_context_desc &) {
    return TraceObserver::attach_if_requested(ctx);
}

qd_status TraceObserver::find_or_attach(Context &ctx, TraceObserver **out) {
    std::lock_guard<std::mutex> lock(g_attach_mutex);
    if ((*out = attached_trace(ctx))) return QD_SUCCESS;
    qd_status st = ctx.attach_observer(std::make_unique<TraceObserver>(ctx));
    if (st != QD_SUCCESS) return st;
    *out = attached_trace(ctx);
    return *out ? QD_SUCCESS : fail(QD_ERROR_INTERNAL, "the trace observer was not attached");
}

TraceObserver::TraceObserver(Context &ctx) : ctx_(ctx), id_(g_next_id.fetch_add(1)) {}

TraceObserver::~TraceObserver() = default;

// The reference event: recorded on a stream of its own and waited for, then the host clock is
// read. Every traced event's time is the reference's plus their elapsed time.
qd_status TraceObserver::begin_window(std::string path, size_t capacity) {
    std::lock_guard<std::mutex> control(control_);
    if (on_.load(std::memory_order_acquire))  // a start that raced with this one won
        return already_on(window_->path);
    auto w = std::make_unique<Window>();
    w->path = std::move(path);
    w->capacity = capacity;
    w->id = g_window_ids.fetch_add(1, std::memory_order_relaxed) + 1;
    std::shared_ptr<backend::Stream> stream;
    qd_status st = ctx_.impl().create_stream(QD_STREAM_NON_BLOCKING, 0, &stream);
    if (st == QD_SUCCESS) st = ctx_.impl().create_event(true, &w->reference);
    if (st == QD_SUCCESS) st = stream->record(*w->reference);
    if (st == QD_SUCCESS) st = w->reference->synchronize();
    if (st != QD_SUCCESS)
        return fail(st, "the trace's reference event failed: %s", last_error_message());
    (void)epoch();
    w->reference_time = Clock::now();
    // The new window takes the last one's place in one step under mutex_ (off until the pool
    // is topped up). A submit reaches a window only there, by its id, so from then on nothing
    // touches the last window: a submit still between its before() and after(), or recording a
    // boundary outside mutex_, finds it gone. Only then are its events given back and its
    // storage freed (its file is written: stop and flush hold control_); giving them back
    // while it was still in place let such a submit index boundaries that were gone.
    std::unique_ptr<Window> last;
    size_t have = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        last = std::exchange(window_, std::move(w));
        if (last) std::move(last->timing).give_back(pool_);
        have = pool_.size();
    }
    last.reset();
    if (g_trace_start_hook) g_trace_start_hook();
    TimingEventPool ahead;
    const size_t want = std::min(capacity + 1, kEventsAhead);
    if (have < want) (void)ahead.fill(ctx_.impl(), want - have);  // short: created as needed
    std::lock_guard<std::mutex> lock(mutex_);
    while (auto e = ahead.take()) pool_.give(std::move(e));
    on_.store(true, std::memory_order_release);
    return QD_SUCCESS;
}

qd_status TraceObserver::end_window(bool report, bool destroyed) {
    std::lock_guard<std::mutex> control(control_);
    bool was_on;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        was_on = on_.load(std::memory_order_acquire);
        on_.store(false, std::memory_order_release);
    }
    if (was_on) return write_snapshot(destroyed);
    // Stopped before: the part written then (if any) was the context's last one.
    if (destroyed) TraceFiles::instance().context_destroyed(id_);
    if (!report) return QD_SUCCESS;
    return fail(QD_ERROR_INVALID_OPERATION,
                "the context is not being traced (qd_trace_start starts a trace)");
}

// Under control_. The operations whose submit has returned are in the copy; their end events
// are waited for (the work they bracket was queued before this call), then the file is written.
qd_status TraceObserver::write_snapshot(bool destroyed) {
    Window copy;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        copy = *window_;
        reading_ = true;  // no event of the copy is recycled until its times are read
    }
    struct Done {
        TraceObserver &self;
        ~Done() {
            std::lock_guard<std::mutex> lock(self.mutex_);
            self.reading_ = false;
        }
    };
    TraceSnapshot snap;
    {
        Done done{*this};
        for (Slot &s : copy.slots) {
            const TraceTiming::Boundary *end = copy.timing.boundary(s.end);
            if (s.completed && end && end->recorded && end->event)
                (void)end->event->synchronize();  // a lost context: not timed
        }
        snap = snapshot_of(copy);
    }
    TracePart part = render_trace(std::move(snap));
    return TraceFiles::instance().write(copy.path, id_, std::move(part), destroyed);
}

uint32_t TraceObserver::track_of(Window &w, const Stream &stream) {
    auto it = w.track_of.find(&stream);
    if (it != w.track_of.end() && !it->second.stream.expired()) return it->second.tid;
    const uint32_t tid = static_cast<uint32_t>(w.track_names.size()) + 1;
    std::string name;
    switch (stream.kind) {
    case StreamKind::Default: name = "default stream"; break;
    case StreamKind::Owned: name = "stream " + std::to_string(++w.owned) + " (owned)"; break;
    case StreamKind::Leased:
        name = "pool stream (leased, slot " + std::to_string(stream.pool_slot) + ")";
        break;
    case StreamKind::Borrowed: name = "stream " + std::to_string(++w.owned) + " (imported)"; break;
    }
    w.track_names.push_back(std::move(name));
    w.track_of[&stream] = Window::Track{stream.weak_from_this(), tid};
    return tid;
}

qd_status TraceObserver::before(const Op &op, bool *consumed) {
    (void)consumed;
    if (op.captured) return QD_SUCCESS;  // recorded into a graph: its replay is traced
    if (!on_.load(std::memory_order_acquire)) return QD_SUCCESS;
    TraceTiming::Pending begin;
    std::shared_ptr<backend::Event> shared;  // the previous end, when begin() shares it
    uint64_t window = 0;
    size_t slot = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!on_.load(std::memory_order_relaxed)) return QD_SUCCESS;
        Window &w = *window_;
        // Full (the newest are dropped, and counted; a full window stays full, so no boundary
        // is taken again), or nested too deep on this thread (its stream's last boundary is no
        // begin for the next operation: this one comes between).
        if (w.slots.size() + w.exhausted.size() >= w.capacity || t_depth == kMaxNested) {
            if (t_depth == kMaxNested) w.timing.invalidate(track_of(w, *op.stream));
            ++w.dropped;
            return QD_SUCCESS;
        }
        Slot &s = w.slots.emplace_back();
        s.kind = op.kind;
        s.origin = op.origin;
        s.track = track_of(w, *op.stream);
        if (op.kind == OpKind::Launch && op.kernel)
            std::snprintf(s.name, sizeof s.name, "%s", op.kernel->impl->name());
        if (op.kind == OpKind::Launch && op.attrs) s.attrs = *op.attrs;
        s.bytes = op.bytes;
        s.thread = thread_of(w);
        s.host_begin = Clock::now();
        s.begin = w.timing.begin(s.track, op.stream->kind != StreamKind::Borrowed,
                                 op.stream->unobserved.load(std::memory_order_relaxed), pool_,
                                 &begin, &shared);
        window = w.id;
        slot = w.slots.size() - 1;
        t_in_flight[t_depth++] = {&op, w.id, slot};
    }
    // A shared begin is exact only while the stream is busy: the operation then starts when the
    // previous one's end completes. An end already done (an idle stream) would count the idle
    // time as this operation's: its begin is recorded afresh.
    if (begin.index == TraceTiming::kNone) {
        const bool busy = shared && shared->query() == QD_NOT_READY;
        std::lock_guard<std::mutex> lock(mutex_);
        if (window_ && window_->id == window) {
            Window &w = *window_;
            Slot &s = w.slots[slot];
            if (!busy || !w.timing.still_shared(s.begin, shared.get()))
                s.begin = w.timing.fresh(s.track, pool_, &begin);
        }
    }
    if (begin.index != TraceTiming::kNone)
        record_boundary(*op.stream->impl, window, std::move(begin), TraceTiming::kNone);
    return QD_SUCCESS;
}

void TraceObserver::record_boundary(backend::Stream &stream, uint64_t window,
                                    TraceTiming::Pending &&p, size_t completes) {
    if (!p.event) reuse_done_events(window, &p.event);
    const bool ok = TraceTiming::record(ctx_.impl(), stream, p);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!window_ || window_->id != window) {
        pool_.give(std::move(p.event));  // a new window started meanwhile
        return;
    }
    window_->timing.recorded(std::move(p), ok);
    // Completed once its end is in the window: a flush never sees it without its end.
    if (completes != TraceTiming::kNone) window_->slots[completes].completed = true;
}

uint32_t TraceObserver::thread_of(Window &w) {
    const std::thread::id me = std::this_thread::get_id();
    auto t = w.threads.find(me);
    if (t == w.threads.end())
        t = w.threads.emplace(me, static_cast<uint32_t>(w.threads.size())).first;
    return t->second;
}

void TraceObserver::host_event(const HostEvent &event) {
    if (event.kind != HostEvent::Kind::PoolExhausted || !on_.load(std::memory_order_acquire))
        return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!on_.load(std::memory_order_relaxed)) return;
    Window &w = *window_;
    if (w.slots.size() + w.exhausted.size() >= w.capacity) {  // full: dropped, and counted
        ++w.dropped;
        return;
    }
    w.exhausted.push_back({Clock::now(), thread_of(w), event.bytes});
}

// Also after a stop: an operation whose before() was in the window is completed in it.
void TraceObserver::after(const Op &op, qd_status status) {
    if (op.captured) return;
    InFlight mine{nullptr, 0, 0};
    if (t_depth > 0 && t_in_flight[t_depth - 1].op == &op) mine = t_in_flight[--t_depth];
    TraceTiming::Pending end;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!window_) return;
        Window &w = *window_;
        if (!mine.op || mine.window != w.id) {  // not recorded (the ring was full, or off)
            if (op.kind == OpKind::Record && status == QD_SUCCESS)
                Records::instance().untraced(op.event);
            // It was queued on a stream this window may know: no boundary brackets it.
            auto it = w.track_of.find(op.stream);
            if (it != w.track_of.end() && !it->second.stream.expired())
                w.timing.invalidate(it->second.tid);
            return;
        }
        Slot &s = w.slots[mine.slot];
        s.status = status;
        s.host_end = Clock::now();
        s.end = w.timing.end(s.track, op.stream->unobserved.load(std::memory_order_relaxed), pool_,
                             &end);
        if (status == QD_SUCCESS) {
            if (op.kind == OpKind::Record)
                s.serial = Records::instance().recorded(op, id_);
            else if (op.kind == OpKind::Wait)
                s.serial = Records::instance().latest(op.event);
        }
    }
    record_boundary(*op.stream->impl, mine.window, std::move(end), mine.slot);
}

// The pool ran dry: read the oldest boundaries whose work is done (timing.h) and recycle their
// events; *out gets one of them, or stays null (record() then creates one).
void TraceObserver::reuse_done_events(uint64_t window, std::shared_ptr<backend::Event> *out) {
    TraceTiming::Scan scan;
    std::shared_ptr<backend::Event> reference;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!window_ || window_->id != window || !window_->timing.take_scan(&scan)) return;
        reference = window_->reference;
    }
    TraceTiming::read_scan(ctx_.impl(), *reference, scan);
    std::lock_guard<std::mutex> lock(mutex_);
    if (window_ && window_->id == window)
        window_->timing.scanned(std::move(scan), !reading_, pool_);
    *out = pool_.take();
}

// A context destroyed while traced: its stop (the streams are drained; nobody can see a status,
// so a file that cannot be written is said on stderr).
void TraceObserver::context_drained(Context &ctx) {
    (void)ctx;
    if (end_window(false, true) != QD_SUCCESS)
        std::fprintf(stderr, "qd: trace: %s\n", last_error_message());
    Records::instance().context_gone(id_);
}

// The window as the renderer takes it (snapshot.h): its completed operations with their times
// read from their events, the names resolved.
TraceSnapshot TraceObserver::snapshot_of(const Window &w) {
    Context &ctx = ctx_;
    TraceSnapshot snap;
    snap.id = id_;
    snap.backend = backend_slug(ctx.kind());
    snap.recorded = w.slots.size();
    snap.dropped = w.dropped;
    snap.capacity = w.capacity;
    snap.tracks = w.track_names;
    for (const auto &t : w.threads) snap.threads.push_back(t.second);
    const double reference_us = us_since_epoch(w.reference_time);
    // The device (or worker) time of a completed event, on the host's steady clock, rounded to
    // the file's resolution (1 ns), so that a slice's ts + dur is its end exactly, as the
    // arrows' times are.
    // Each boundary read once (consecutive slices of a stream share one): NaN until read,
    // infinity when it cannot be.
    std::vector<double> boundary_us(w.timing.size(), std::nan(""));
    auto device_us = [&](size_t index, double *t) {
        const TraceTiming::Boundary *b = w.timing.boundary(index);
        if (!b || !b->recorded || (b->read ? !b->timed : !b->event)) return false;
        double &cached = boundary_us[index];
        if (std::isnan(cached)) {
            float ms = b->ms;  // read by a scan (timing.h), or read now
            if (!b->read && ctx.impl().elapsed_ms(*w.reference, *b->event, &ms) != QD_SUCCESS)
                cached = INFINITY;
            else
                cached =
                    std::round((reference_us + static_cast<double>(ms) * 1000.0) * 1000.0) / 1000.0;
        }
        if (std::isinf(cached)) return false;
        *t = cached;
        return true;
    };
    for (const Slot &s : w.slots) {
        if (!s.completed) continue;
        TraceSnapshot::Slice &x = snap.slices.emplace_back();
        x.kind = op_name(s.kind);
        x.origin = origin_name(s.origin);
        if (s.kind == OpKind::Launch) x.name = s.name;
        if (s.kind == OpKind::Launch && !s.attrs.empty()) x.attrs = attrs_json(s.attrs);
        x.track = s.track;
        x.thread = s.thread;
        x.host_begin = us_since_epoch(s.host_begin);
        x.host_duration =
            std::chrono::duration<double, std::micro>(s.host_end - s.host_begin).count();
        x.timed = device_us(s.begin, &x.begin) && device_us(s.end, &x.end);
        x.sized =
            s.kind == OpKind::Memcpy || s.kind == OpKind::Memset || s.kind == OpKind::MemAlloc;
        x.bytes = s.bytes;
        if (s.status != QD_SUCCESS) x.status = status_name(s.status);
        x.device_lost = s.status == QD_ERROR_DEVICE_LOST;
        x.record = s.kind == OpKind::Record;
        x.wait = s.kind == OpKind::Wait;
        x.serial = s.serial;
    }
    for (const auto &e : w.exhausted)
        snap.exhausted.push_back({us_since_epoch(e.when), e.thread, e.wanted});
    snap.lost = ctx.impl().lost_state().lost();
    if (snap.lost) snap.lost_message = ctx.impl().lost_state().message();
    snap.now = us_since_epoch(Clock::now());
    return snap;
}

}  // namespace qd::core
