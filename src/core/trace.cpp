#include "core/trace.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <unistd.h>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "common/backend_table.h"
#include "common/error.h"
#include "core/context.h"
#include "core/objects.h"
#include "core/observers.h"

namespace qd::core {

namespace {

constexpr size_t kDefaultCapacity = 65536;
constexpr size_t kMaxCapacity = size_t{1} << 24;
constexpr uint32_t kHostTrackBase = 100000;  // host threads' track ids, after the streams'
constexpr double kNoNextSlice = std::numeric_limits<double>::infinity();

std::atomic<uint32_t> g_next_id{1};

// Serialises attaching a trace observer to a context (find_or_attach). At namespace scope, with
// a constant initializer and nothing to destroy, so that a fork handler may take it.
std::mutex g_attach_mutex;

// The time every trace's timestamps count from: the first reference taken in the process, so
// two contexts traced into one file share one time base.
std::chrono::steady_clock::time_point epoch() {
    static const auto first = std::chrono::steady_clock::now();
    return first;
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

// JSON string body (no quotes).
std::string escape(const char *s) {
    std::string out;
    for (; *s; ++s) {
        const unsigned char c = static_cast<unsigned char>(*s);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

double us_since_epoch(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - epoch()).count();
}

// The window's capacity: QD_TRACE_CAPACITY, or the default.
qd_status capacity_from_environment(size_t *capacity) {
    *capacity = kDefaultCapacity;
    if (const char *c = ::secure_getenv("QD_TRACE_CAPACITY"); c && *c) {
        char *end = nullptr;
        const unsigned long long v = std::strtoull(c, &end, 10);
        if (*end != '\0' || v == 0 || v > kMaxCapacity)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "QD_TRACE_CAPACITY='%s' is not a number of operations in 1..%zu", c,
                        kMaxCapacity);
        *capacity = static_cast<size_t>(v);
    }
    return QD_SUCCESS;
}

// The latest traced record of every event, in the whole process: a wait finds the record it
// consumed whichever context made it. Each record gets a serial unique in the process, so a file
// joins a wait to its record whichever parts they are in. Keyed by the backend event's address;
// an entry goes when its event's context is destroyed (context_gone), and the entry of a user
// event (whose owner the record names) is not taken for a later event made at the address of a
// destroyed one. Never destroyed, like the table of files.
class Records {
  public:
    static Records &instance() {
        static Records *records = new Records();
        return *records;
    }

    // A traced record (op) of context `context` completed its submit: its serial, now the
    // event's latest.
    uint64_t recorded(const Op &op, uint32_t context) {
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t serial = ++last_serial_;
        Latest &l = latest_[op.event];
        l.serial = serial;
        l.context = context;
        l.owned = op.user_event != nullptr;
        l.user_event.reset();
        if (op.user_event) l.user_event = op.user_event->impl;
        if (latest_.size() >= sweep_at_) sweep();
        return serial;
    }

    // A record of `event` that is not traced (its context's trace is off, or its ring full): a
    // wait on it from now on consumes no traced record.
    void untraced(const backend::Event *event) {
        std::lock_guard<std::mutex> lock(mutex_);
        latest_.erase(event);
    }

    // The serial of the latest traced record of `event`, 0 for none.
    uint64_t latest(const backend::Event *event) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = latest_.find(event);
        if (it == latest_.end()) return 0;
        if (it->second.owned && it->second.user_event.expired()) {  // another event's entry
            latest_.erase(it);
            return 0;
        }
        return it->second.serial;
    }

    // The context `context` was destroyed: its events are gone with it.
    void context_gone(uint32_t context) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = latest_.begin(); it != latest_.end();)
            it = it->second.context == context ? latest_.erase(it) : std::next(it);
    }

  private:
    struct Latest {
        uint64_t serial = 0;
        uint32_t context = 0;  // the trace id of the context that recorded it
        bool owned = false;    // a user event's: user_event tells whether it still lives
        std::weak_ptr<const backend::Event> user_event;
    };

    // The entries of destroyed user events go, whenever the table has doubled since the last
    // sweep (so a process that makes and destroys many events keeps a bounded table).
    void sweep() {
        for (auto it = latest_.begin(); it != latest_.end();)
            it = it->second.owned && it->second.user_event.expired() ? latest_.erase(it)
                                                                     : std::next(it);
        sweep_at_ = std::max<size_t>(kFirstSweep, 2 * latest_.size());
    }

    static constexpr size_t kFirstSweep = 1024;
    std::mutex mutex_;
    uint64_t last_serial_ = 0;
    size_t sweep_at_ = kFirstSweep;
    std::unordered_map<const backend::Event *, Latest> latest_;

    friend void qd::core::lock_trace_files_for_fork();
    friend void qd::core::unlock_trace_files_after_fork();
};

// The trace files of this process. A file holds one part per context written into it (the part
// of a context that writes again replaces its earlier one), so every write leaves a complete,
// valid file. Written to a temporary file of a unique name next to the path (mkstemp), then
// renamed over the path, which must be a regular file or absent: a FIFO, a device or any other
// special file is never replaced. A file keeps the parts of at most kKeptDestroyed destroyed
// contexts (the oldest go first, counted in the file), so a process that traces many
// short-lived contexts into one path keeps a bounded file, in memory and on disk.
class TraceFiles {
  public:
    static constexpr size_t kKeptDestroyed = 64;  // qd.h, "Timeline trace", says it

    // Never destroyed: exit() runs static destructors while other threads may still flush or
    // stop a trace (or a later destructor or atexit handler may), so the table must outlive
    // them all. A leaked heap object: the pointer is trivially destructible.
    static TraceFiles &instance() {
        static TraceFiles *files = new TraceFiles();
        return *files;
    }

    // Whether path can be written the way write() writes it (a temporary file created next to
    // it; path itself a regular file or absent).
    qd_status check_writable(const std::string &path) {
        std::lock_guard<std::mutex> lock(mutex_);
        qd_status st = refuse_special(path);
        if (st != QD_SUCCESS) return st;
        std::string tmp;
        FILE *f = open_temporary(path, &tmp);
        if (!f)
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' cannot be written: %s",
                        path.c_str(), std::strerror(errno));
        std::fclose(f);
        std::remove(tmp.c_str());
        return QD_SUCCESS;
    }

    // Writes the part of context `id` into path's file. `destroyed`: the context's last part
    // (its destroy), after which the part may be dropped to keep the bound.
    qd_status write(const std::string &path, uint32_t id, TracePart part, bool destroyed) {
        std::lock_guard<std::mutex> lock(mutex_);
        File &file = files_[path];
        file.parts[id] = std::move(part);
        if (destroyed) forget_destroyed(file, id);
        return write_file(path, file);
    }

    // The context `id` was destroyed without writing again (its trace was stopped before):
    // its part in every file counts towards the bound. The files are rewritten only when a
    // part is dropped.
    void context_destroyed(uint32_t id) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto &f : files_) {
            if (!f.second.parts.count(id)) continue;
            const uint64_t before = f.second.dropped;
            forget_destroyed(f.second, id);
            if (f.second.dropped != before && write_file(f.first, f.second) != QD_SUCCESS)
                std::fprintf(stderr, "qd: trace: %s\n", last_error_message());
        }
    }

  private:
    struct File {
        std::map<uint32_t, TracePart> parts;    // by context id
        std::deque<uint32_t> destroyed;         // ids of destroyed contexts, oldest first
        uint64_t dropped = 0;                   // destroyed contexts' parts dropped
    };

    // Marks id's part destroyed (once) and drops the oldest destroyed parts beyond the bound.
    void forget_destroyed(File &file, uint32_t id) {
        for (uint32_t d : file.destroyed)
            if (d == id) return;
        file.destroyed.push_back(id);
        while (file.destroyed.size() > kKeptDestroyed) {
            file.parts.erase(file.destroyed.front());
            file.destroyed.pop_front();
            ++file.dropped;
        }
    }

    static qd_status refuse_special(const std::string &path) {
        struct stat st;
        if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return QD_SUCCESS;
        if (S_ISDIR(st.st_mode))
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' is a directory",
                        path.c_str());
        const char *what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "a special file";
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "trace path '%s' is %s, not a regular file; it is never replaced",
                    path.c_str(), what);
    }

    // A new file of a unique name next to path (so two processes, or two starts, never share
    // it), with the permissions of the file it will replace, else those of a new file.
    static FILE *open_temporary(const std::string &path, std::string *tmp) {
        std::string name = path + ".tmp-XXXXXX";
        const int fd = ::mkstemp(name.data());
        if (fd < 0) return nullptr;
        struct stat st;
        const mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777)
                                                           : (0666 & ~process_umask());
        (void)::fchmod(fd, mode);
        FILE *f = ::fdopen(fd, "w");
        if (!f) {
            const int err = errno;
            ::close(fd);
            ::unlink(name.c_str());
            errno = err;
            return nullptr;
        }
        *tmp = std::move(name);
        return f;
    }

    // The umask, read without changing it (umask() would, for every thread): Linux says it in
    // /proc/self/status; 022 when it cannot be read.
    static mode_t process_umask() {
        mode_t mask = 022;
        if (FILE *f = std::fopen("/proc/self/status", "r")) {
            char line[256];
            unsigned int m = 0;
            while (std::fgets(line, sizeof line, f))
                if (std::sscanf(line, "Umask: %o", &m) == 1) {
                    mask = static_cast<mode_t>(m);
                    break;
                }
            std::fclose(f);
        }
        return mask;
    }

    qd_status write_file(const std::string &path, const File &file) {
        qd_status st = refuse_special(path);
        if (st != QD_SUCCESS) return st;
        std::string tmp;
        FILE *f = open_temporary(path, &tmp);
        if (!f)
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' cannot be written: %s",
                        path.c_str(), std::strerror(errno));
        std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
        bool first = true;
        if (file.dropped) {
            std::fprintf(f,
                         "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{\"name\":"
                         "\"qd trace file\"}},\n"
                         "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_labels\",\"args\":{"
                         "\"labels\":\"parts of %" PRIu64
                         " destroyed contexts dropped (a file keeps the last %zu)\"}}",
                         file.dropped, kKeptDestroyed);
            first = false;
        }
        for (const auto &p : file.parts) {
            if (p.second.events.empty()) continue;
            if (!first) std::fputs(",\n", f);
            first = false;
            std::fputs(p.second.events.c_str(), f);
        }
        write_arrows(f, file, &first);
        std::fputs("\n]}\n", f);
        const bool closed = std::fclose(f) == 0;
        // Checked again just before the rename: a special file made at path since the start is
        // not replaced either.
        if (closed) st = refuse_special(path);
        if (!closed || st != QD_SUCCESS || std::rename(tmp.c_str(), path.c_str()) != 0) {
            const int err = errno;
            std::remove(tmp.c_str());
            if (st != QD_SUCCESS) return st;
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' cannot be written: %s",
                        path.c_str(), std::strerror(err));
        }
        return QD_SUCCESS;
    }

    // One arrow per wait whose record is in the file (either part may be any context's),
    // numbered from 1 in the file. It starts inside the record's slice and ends where the wait
    // was satisfied (the end of its slice), or just before the waiting stream's next slice when
    // that starts at the same time, so that the end binds to that slice; an end that the two
    // contexts' time bases would put before the start is moved to the start.
    static void write_arrows(FILE *f, const File &file, bool *first) {
        std::unordered_map<uint64_t, const TracePart::Record *> records;
        for (const auto &p : file.parts)
            for (const TracePart::Record &r : p.second.records) records[r.serial] = &r;
        constexpr double kTick = 0.001;  // the file's resolution: 1 ns
        uint64_t id = 0;
        for (const auto &p : file.parts) {
            for (const TracePart::Wait &w : p.second.waits) {
                auto it = records.find(w.serial);
                if (it == records.end()) continue;
                const TracePart::Record &r = *it->second;
                double end = w.end;
                if (w.next <= end && w.next - kTick >= w.begin) end = w.next - kTick;
                const double start = (r.begin + std::min(r.end, std::max(end, r.begin))) / 2;
                end = std::max(end, start);
                ++id;
                std::fprintf(f,
                             "%s{\"ph\":\"s\",\"id\":%" PRIu64 ",\"pid\":%u,\"tid\":%u,"
                             "\"ts\":%.3f,\"name\":\"%s\",\"cat\":\"dependency\"},\n"
                             "{\"ph\":\"f\",\"id\":%" PRIu64 ",\"pid\":%u,\"tid\":%u,"
                             "\"ts\":%.3f,\"name\":\"%s\",\"cat\":\"dependency\"}",
                             *first ? "" : ",\n", id, r.pid, r.tid, start, r.name, id, w.pid,
                             w.tid, end, r.name);
                *first = false;
            }
        }
    }

    std::mutex mutex_;
    std::map<std::string, File> files_;

    friend void qd::core::lock_trace_files_for_fork();
    friend void qd::core::unlock_trace_files_after_fork();
};

qd_status already_on(const std::string &path) {
    return fail(QD_ERROR_INVALID_OPERATION,
                "the context is already being traced (into '%s'); qd_trace_stop it first",
                path.c_str());
}

TraceObserver *attached_trace(Context &ctx) {
    ObserverSet *set = ctx.observers();
    return set ? set->find<TraceObserver>() : nullptr;
}

}  // namespace

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

qd_status TraceObserver::start(Context &ctx, const char *path) {
    TraceObserver *trace = attached_trace(ctx);
    if (trace) {
        std::lock_guard<std::mutex> control(trace->control_);
        if (trace->on_.load(std::memory_order_acquire)) return already_on(trace->window_->path);
    }
    size_t capacity = 0;
    qd_status st = capacity_from_environment(&capacity);
    if (st == QD_SUCCESS) st = TraceFiles::instance().check_writable(path);
    if (st == QD_SUCCESS) st = find_or_attach(ctx, &trace);
    if (st != QD_SUCCESS) return st;
    return trace->begin_window(path, capacity);
}

qd_status TraceObserver::stop(Context &ctx) {
    TraceObserver *trace = attached_trace(ctx);
    if (!trace || !trace->on_.load(std::memory_order_acquire))
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the context is not being traced (qd_trace_start starts a trace)");
    return trace->end_window(true, false);
}

qd_status TraceObserver::flush(Context &ctx) {
    TraceObserver *trace = attached_trace(ctx);
    if (!trace)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the context was never traced (qd_trace_start starts a trace)");
    std::lock_guard<std::mutex> control(trace->control_);
    {
        std::lock_guard<std::mutex> lock(trace->mutex_);
        if (!trace->window_)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the context was never traced (qd_trace_start starts a trace)");
    }
    return trace->write_snapshot(false);
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
    std::shared_ptr<backend::Stream> stream;
    qd_status st = ctx_.impl().create_stream(QD_STREAM_NON_BLOCKING, 0, &stream);
    if (st == QD_SUCCESS) st = ctx_.impl().create_event(true, &w->reference);
    if (st == QD_SUCCESS) st = stream->record(*w->reference);
    if (st == QD_SUCCESS) st = w->reference->synchronize();
    if (st != QD_SUCCESS)
        return fail(st, "the trace's reference event failed: %s", last_error_message());
    (void)epoch();
    w->reference_time = Clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    window_ = std::move(w);
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
    }
    for (Slot &s : copy.slots)
        if (s.completed && s.ended) (void)s.end->synchronize();  // a lost context: not timed
    TracePart part = render(copy);
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
    if (!on_.load(std::memory_order_acquire)) return QD_SUCCESS;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!on_.load(std::memory_order_relaxed)) return QD_SUCCESS;
    Window &w = *window_;
    if (w.slots.size() + w.exhausted.size() >= w.capacity) {  // full: the newest are dropped, and counted
        ++w.dropped;
        return QD_SUCCESS;
    }
    Slot &s = w.slots.emplace_back();
    s.kind = op.kind;
    s.origin = op.origin;
    s.track = track_of(w, *op.stream);
    if (op.kind == OpKind::Launch && op.kernel)
        std::snprintf(s.name, sizeof s.name, "%s", op.kernel->impl->name());
    s.bytes = op.bytes;
    s.thread = thread_of(w);
    s.host_begin = Clock::now();
    if (ctx_.impl().create_event(true, &s.begin) == QD_SUCCESS)
        s.begun = op.stream->impl->record(*s.begin) == QD_SUCCESS;
    // Keyed by the submit's Op (the same object reaches after()); an entry whose after() never
    // comes (a captured operation) is replaced by the next submit at that address.
    w.in_flight[&op] = w.slots.size() - 1;
    return QD_SUCCESS;
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
    std::lock_guard<std::mutex> lock(mutex_);
    if (!window_) return;
    Window &w = *window_;
    auto it = w.in_flight.find(&op);
    if (it == w.in_flight.end()) {  // not recorded (the ring was full, or off)
        if (op.kind == OpKind::Record && status == QD_SUCCESS)
            Records::instance().untraced(op.event);
        return;
    }
    const size_t index = it->second;
    Slot &s = w.slots[index];
    w.in_flight.erase(it);
    s.status = status;
    s.completed = true;
    s.host_end = Clock::now();
    if (s.begun && ctx_.impl().create_event(true, &s.end) == QD_SUCCESS)
        s.ended = op.stream->impl->record(*s.end) == QD_SUCCESS;
    if (status != QD_SUCCESS) return;
    if (op.kind == OpKind::Record)
        s.serial = Records::instance().recorded(op, id_);
    else if (op.kind == OpKind::Wait)
        s.serial = Records::instance().latest(op.event);
}

// A context destroyed while traced: its stop (the streams are drained; nobody can see a status,
// so a file that cannot be written is said on stderr).
void TraceObserver::context_drained(Context &ctx) {
    (void)ctx;
    if (end_window(false, true) != QD_SUCCESS)
        std::fprintf(stderr, "qd: trace: %s\n", last_error_message());
    Records::instance().context_gone(id_);
}

TracePart TraceObserver::render(const Window &w) {
    Context &ctx = ctx_;
    TracePart part;
    std::string &out = part.events;
    char buf[512];
    auto add = [&](const std::string &event) {
        if (!out.empty()) out += ",\n";
        out += event;
    };
    const double reference_us = us_since_epoch(w.reference_time);
    // The device (or worker) time of a completed event, on the host's steady clock, rounded to
    // the file's resolution (1 ns), so that a slice's ts + dur is its end exactly, as the
    // arrows' times are.
    auto device_us = [&](backend::Event &e, double *t) {
        float ms = 0;
        if (ctx.impl().elapsed_ms(*w.reference, e, &ms) != QD_SUCCESS) return false;
        *t = std::round((reference_us + static_cast<double>(ms) * 1000.0) * 1000.0) / 1000.0;
        return true;
    };

    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_name\",\"args\":{\"name\":\"qd "
                  "context %u (%s)\"}}",
                  id_, id_, backend_slug(ctx.kind()));
    add(buf);
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_labels\",\"args\":{\"labels\":"
                  "\"operations recorded %zu, dropped %" PRIu64 " (QD_TRACE_CAPACITY %zu)\"}}",
                  id_, w.slots.size(), w.dropped, w.capacity);
    add(buf);

    for (uint32_t tid = 1; tid <= w.track_names.size(); ++tid) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                      "\"name\":\"%s\"}}",
                      id_, tid, w.track_names[tid - 1].c_str());
        add(buf);
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_sort_index\","
                      "\"args\":{\"sort_index\":%u}}",
                      id_, tid, tid);
        add(buf);
    }
    for (const auto &t : w.threads) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                      "\"name\":\"host thread %u (enqueue)\"}}",
                      id_, kHostTrackBase + t.second, t.second + 1);
        add(buf);
    }

    // The waits of each track whose next slice has not been seen yet (index in part.waits).
    std::unordered_map<uint32_t, std::vector<size_t>> waiting;
    for (size_t i = 0; i < w.slots.size(); ++i) {
        const Slot &s = w.slots[i];
        if (!s.completed) continue;
        const uint32_t tid = s.track;
        const std::string name = s.kind == OpKind::Launch && s.name[0] ? escape(s.name)
                                                                        : op_name(s.kind);
        // The host-side enqueue, on the thread's track.
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"name\":"
                      "\"enqueue %s\",\"cat\":\"enqueue\"}",
                      id_, kHostTrackBase + s.thread, us_since_epoch(s.host_begin),
                      std::chrono::duration<double, std::micro>(s.host_end - s.host_begin).count(),
                      name.c_str());
        add(buf);
        double b = 0, e = 0;
        if (!s.begun || !s.ended || !device_us(*s.begin, &b) || !device_us(*s.end, &e)) continue;
        if (e < b) e = b;
        std::string args = std::string("\"origin\":\"") + origin_name(s.origin) + "\"";
        if (s.kind == OpKind::Memcpy || s.kind == OpKind::Memset || s.kind == OpKind::MemAlloc)
            args += ",\"bytes\":" + std::to_string(s.bytes);
        if (s.status != QD_SUCCESS) args += std::string(",\"status\":\"") + status_name(s.status) + "\"";
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"%s\","
                      "\"cat\":\"%s\",\"args\":{%s}}",
                      id_, tid, b, e - b, name.c_str(), op_name(s.kind), args.c_str());
        add(buf);
        if (s.status == QD_ERROR_DEVICE_LOST) {
            std::snprintf(buf, sizeof buf,
                          "{\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"name\":"
                          "\"device lost at %s\",\"cat\":\"fault\"}",
                          id_, tid, b, name.c_str());
            add(buf);
        }
        // This slice is the next one of the waits before it on its stream.
        auto pending = waiting.find(tid);
        if (pending != waiting.end()) {
            for (size_t k : pending->second) part.waits[k].next = b;
            waiting.erase(pending);
        }
        // The ends of the arrows (fork, join, graph replays, parallel launches and user events,
        // in this context or another): the file joins them (TraceFiles::write_arrows).
        if (s.kind == OpKind::Record && s.serial)
            part.records.push_back({s.serial, id_, tid, b, e, origin_name(s.origin)});
        if (s.kind == OpKind::Wait && s.serial) {
            waiting[tid].push_back(part.waits.size());
            part.waits.push_back({s.serial, id_, tid, b, e, kNoNextSlice});
        }
    }
    for (const auto &x : w.exhausted) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"name\":"
                      "\"stream pool exhausted (%" PRIu64 " wanted)\",\"cat\":\"pool\"}",
                      id_, kHostTrackBase + x.thread, us_since_epoch(x.when), x.wanted);
        add(buf);
    }
    if (ctx.impl().lost_state().lost()) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"g\",\"pid\":%u,\"ts\":%.3f,\"name\":\"context lost: "
                      "%s\",\"cat\":\"fault\"}",
                      id_, us_since_epoch(Clock::now()), escape(ctx.impl().lost_state().message().c_str()).c_str());
        add(buf);
    }
    if (w.dropped) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"ts\":%.3f,\"name\":\"trace full: "
                      "%" PRIu64 " operations not recorded\",\"cat\":\"overflow\"}",
                      id_, us_since_epoch(Clock::now()), w.dropped);
        add(buf);
    }
    return part;
}

}  // namespace qd::core
