#include "core/trace.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

namespace {

constexpr size_t kDefaultCapacity = 65536;
constexpr size_t kMaxCapacity = size_t{1} << 24;
constexpr uint32_t kHostTrackBase = 100000;  // host threads' track ids, after the streams'

std::atomic<uint32_t> g_next_id{1};

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

const char *backend_label(qd_backend kind) {
    switch (kind) {
    case QD_BACKEND_CUDA: return "cuda";
    case QD_BACKEND_HIP: return "hip";
    default: return "cpu";
    }
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

}  // namespace

qd_status TraceObserver::attach_if_requested(Context &ctx) {
    const char *path = ::secure_getenv("QD_TRACE");
    if (!path || !*path) return QD_SUCCESS;
    size_t capacity = kDefaultCapacity;
    if (const char *c = ::secure_getenv("QD_TRACE_CAPACITY"); c && *c) {
        char *end = nullptr;
        const unsigned long long v = std::strtoull(c, &end, 10);
        if (*end != '\0' || v == 0 || v > kMaxCapacity)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "QD_TRACE_CAPACITY='%s' is not a number of operations in 1..%zu", c,
                        kMaxCapacity);
        capacity = static_cast<size_t>(v);
    }
    auto trace = std::make_unique<TraceObserver>(ctx, path, capacity);
    if (qd_status st = trace->start(ctx); st != QD_SUCCESS) return st;
    return ctx.attach_observer(std::move(trace));
}

TraceObserver::TraceObserver(Context &ctx, std::string path, size_t capacity)
    : ctx_(ctx), path_(std::move(path)), capacity_(capacity), id_(g_next_id.fetch_add(1)) {
    slots_.reserve(capacity_ < 4096 ? capacity_ : 4096);
}

TraceObserver::~TraceObserver() = default;

// The reference event: recorded on a stream of its own and waited for, then the host clock is
// read. Every traced event's time is the reference's plus their elapsed time.
qd_status TraceObserver::start(Context &ctx) {
    std::shared_ptr<backend::Stream> stream;
    qd_status st = ctx.impl().create_stream(QD_STREAM_NON_BLOCKING, 0, &stream);
    if (st == QD_SUCCESS) st = ctx.impl().create_event(true, &reference_);
    if (st == QD_SUCCESS) st = stream->record(*reference_);
    if (st == QD_SUCCESS) st = reference_->synchronize();
    if (st != QD_SUCCESS)
        return fail(st, "QD_TRACE: the trace's reference event failed: %s", last_error_message());
    (void)epoch();
    reference_time_ = Clock::now();
    return QD_SUCCESS;
}

uint32_t TraceObserver::thread_index() {
    std::ostringstream id;
    id << std::this_thread::get_id();
    auto [it, inserted] = threads_.emplace(id.str(), static_cast<uint32_t>(threads_.size()));
    (void)inserted;
    return it->second;
}

uint32_t TraceObserver::track_of(const Stream &stream) {
    auto it = track_of_.find(&stream);
    if (it != track_of_.end() && !it->second.stream.expired()) return it->second.tid;
    const uint32_t tid = static_cast<uint32_t>(track_names_.size()) + 1;
    std::string name;
    switch (stream.kind) {
    case StreamKind::Default: name = "default stream"; break;
    case StreamKind::Owned: name = "stream " + std::to_string(++owned_) + " (owned)"; break;
    case StreamKind::Leased:
        name = "pool stream (leased, slot " + std::to_string(stream.pool_slot) + ")";
        break;
    case StreamKind::Borrowed: name = "stream " + std::to_string(++owned_) + " (imported)"; break;
    }
    track_names_.push_back(std::move(name));
    track_of_[&stream] = Track{stream.weak_from_this(), tid};
    return tid;
}

qd_status TraceObserver::before(const Op &op, bool *consumed) {
    (void)consumed;
    std::lock_guard<std::mutex> lock(mutex_);
    if (flushed_) return QD_SUCCESS;
    if (slots_.size() >= capacity_) {
        ++dropped_;
        return QD_SUCCESS;
    }
    Slot &s = slots_.emplace_back();
    s.kind = op.kind;
    s.origin = op.origin;
    s.track = track_of(*op.stream);
    if (op.kind == OpKind::Launch && op.kernel)
        std::snprintf(s.name, sizeof s.name, "%s", op.kernel->impl->name());
    s.bytes = op.bytes;
    s.event = op.event;
    s.thread = thread_index();
    s.host_begin = Clock::now();
    if (ctx_.impl().create_event(true, &s.begin) == QD_SUCCESS)
        s.begun = op.stream->impl->record(*s.begin) == QD_SUCCESS;
    // Keyed by the submit's Op (the same object reaches after()); an entry whose after() never
    // comes (a captured operation) is replaced by the next submit at that address.
    in_flight_[&op] = slots_.size() - 1;
    return QD_SUCCESS;
}

void TraceObserver::after(const Op &op, qd_status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_flight_.find(&op);
    if (it == in_flight_.end()) return;  // not recorded (the ring was full)
    Slot &s = slots_[it->second];
    const size_t index = it->second;
    in_flight_.erase(it);
    s.status = status;
    s.completed = true;
    s.host_end = Clock::now();
    if (s.begun && ctx_.impl().create_event(true, &s.end) == QD_SUCCESS)
        s.ended = op.stream->impl->record(*s.end) == QD_SUCCESS;
    if (status != QD_SUCCESS) return;
    if (op.kind == OpKind::Record) {
        last_record_[op.event] = index;
    } else if (op.kind == OpKind::Wait) {
        auto r = last_record_.find(op.event);
        if (r != last_record_.end()) s.flow_from = static_cast<int64_t>(r->second);
    }
}

void TraceObserver::context_drained(Context &ctx) {
    std::string part;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (flushed_) return;
        flushed_ = true;
        part = render(ctx);
    }
    trace_write_part(path_, std::move(part));
}

std::string TraceObserver::render(Context &ctx) {
    std::string out;
    char buf[512];
    auto add = [&](const std::string &event) {
        if (!out.empty()) out += ",\n";
        out += event;
    };
    const double reference_us = us_since_epoch(reference_time_);
    // The device (or worker) time of a completed event, on the host's steady clock.
    auto device_us = [&](backend::Event &e, double *t) {
        float ms = 0;
        if (ctx.impl().elapsed_ms(*reference_, e, &ms) != QD_SUCCESS) return false;
        *t = reference_us + static_cast<double>(ms) * 1000.0;
        return true;
    };

    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_name\",\"args\":{\"name\":\"qd "
                  "context %u (%s)\"}}",
                  id_, id_, backend_label(ctx.kind()));
    add(buf);
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_labels\",\"args\":{\"labels\":"
                  "\"operations recorded %zu, dropped %" PRIu64 " (QD_TRACE_CAPACITY %zu)\"}}",
                  id_, slots_.size(), dropped_, capacity_);
    add(buf);

    for (uint32_t tid = 1; tid <= track_names_.size(); ++tid) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                      "\"name\":\"%s\"}}",
                      id_, tid, track_names_[tid - 1].c_str());
        add(buf);
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_sort_index\","
                      "\"args\":{\"sort_index\":%u}}",
                      id_, tid, tid);
        add(buf);
    }
    for (const auto &t : threads_) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                      "\"name\":\"host thread %u (enqueue)\"}}",
                      id_, kHostTrackBase + t.second, t.second + 1);
        add(buf);
    }

    std::vector<double> begin_us(slots_.size(), 0.0);
    std::vector<bool> timed(slots_.size(), false);
    uint64_t flow = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot &s = slots_[i];
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
        begin_us[i] = b;
        timed[i] = true;
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
        // The arrow from the record a wait consumed to the wait (fork, join and user events).
        if (s.kind == OpKind::Wait && s.flow_from >= 0 && timed[static_cast<size_t>(s.flow_from)]) {
            const size_t r = static_cast<size_t>(s.flow_from);
            ++flow;
            std::snprintf(buf, sizeof buf,
                          "{\"ph\":\"s\",\"id\":%" PRIu64 ",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,"
                          "\"name\":\"%s\",\"cat\":\"dependency\"}",
                          flow, id_, slots_[r].track, begin_us[r],
                          origin_name(slots_[r].origin));
            add(buf);
            std::snprintf(buf, sizeof buf,
                          "{\"ph\":\"f\",\"bp\":\"e\",\"id\":%" PRIu64 ",\"pid\":%u,\"tid\":%u,"
                          "\"ts\":%.3f,\"name\":\"%s\",\"cat\":\"dependency\"}",
                          flow, id_, tid, b, origin_name(slots_[r].origin));
            add(buf);
        }
    }
    if (ctx.impl().lost_state().lost()) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"g\",\"pid\":%u,\"ts\":%.3f,\"name\":\"context lost: "
                      "%s\",\"cat\":\"fault\"}",
                      id_, us_since_epoch(Clock::now()), escape(ctx.impl().lost_state().message().c_str()).c_str());
        add(buf);
    }
    if (dropped_) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"ts\":%.3f,\"name\":\"trace full: "
                      "%" PRIu64 " operations not recorded\",\"cat\":\"overflow\"}",
                      id_, us_since_epoch(Clock::now()), dropped_);
        add(buf);
    }
    return out;
}

void trace_write_part(const std::string &path, std::string part) {
    static std::mutex mutex;
    static std::map<std::string, std::vector<std::string>> parts;
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> &mine = parts[path];
    if (!part.empty()) mine.push_back(std::move(part));
    const std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "qd: QD_TRACE: cannot write '%s': %s\n", tmp.c_str(), std::strerror(errno));
        return;
    }
    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    for (size_t i = 0; i < mine.size(); ++i) {
        if (i) std::fputs(",\n", f);
        std::fputs(mine[i].c_str(), f);
    }
    std::fputs("\n]}\n", f);
    const bool ok = std::fclose(f) == 0;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
        std::fprintf(stderr, "qd: QD_TRACE: cannot write '%s': %s\n", path.c_str(), std::strerror(errno));
}

}  // namespace qd::core
