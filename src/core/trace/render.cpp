// The trace's JSON renderer (render.h). Includes the snapshot and the standard library only.
#include "core/trace/render.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/trace/snapshot.h"

namespace qd::core {

namespace {

constexpr uint32_t kHostTrackBase = 100000;  // host threads' track ids, after the streams'
constexpr double kNoNextSlice = std::numeric_limits<double>::infinity();

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

}  // namespace

TracePart render_trace(const TraceSnapshot &w) {
    const uint32_t id_ = w.id;
    TracePart part;
    std::string &out = part.events;
    char buf[512];
    auto add = [&](const std::string &event) {
        if (!out.empty()) out += ",\n";
        out += event;
    };

    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_name\",\"args\":{\"name\":\"qd "
                  "context %u (%s)\"}}",
                  id_, id_, w.backend.c_str());
    add(buf);
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_labels\",\"args\":{\"labels\":"
                  "\"operations recorded %zu, dropped %" PRIu64 " (QD_TRACE_CAPACITY %zu)\"}}",
                  id_, w.recorded, w.dropped, w.capacity);
    add(buf);

    for (uint32_t tid = 1; tid <= w.tracks.size(); ++tid) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                      "\"name\":\"%s\"}}",
                      id_, tid, w.tracks[tid - 1].c_str());
        add(buf);
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_sort_index\","
                      "\"args\":{\"sort_index\":%u}}",
                      id_, tid, tid);
        add(buf);
    }
    for (const uint32_t thread : w.threads) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{"
                      "\"name\":\"host thread %u (enqueue)\"}}",
                      id_, kHostTrackBase + thread, thread + 1);
        add(buf);
    }

    // The waits of each track whose next slice has not been seen yet (index in part.waits).
    std::unordered_map<uint32_t, std::vector<size_t>> waiting;
    for (const TraceSnapshot::Slice &s : w.slices) {
        const uint32_t tid = s.track;
        const std::string name = !s.name.empty() ? escape(s.name.c_str()) : s.kind;
        // The host-side enqueue, on the thread's track.
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"name\":"
                      "\"enqueue %s\",\"cat\":\"enqueue\"}",
                      id_, kHostTrackBase + s.thread, s.host_begin, s.host_duration, name.c_str());
        add(buf);
        if (!s.timed) continue;
        double b = s.begin, e = s.end;
        if (e < b) e = b;
        std::string args = std::string("\"origin\":\"") + s.origin + "\"";
        if (s.sized) args += ",\"bytes\":" + std::to_string(s.bytes);
        if (s.status) args += std::string(",\"status\":\"") + s.status + "\"";
        if (!s.attrs.empty()) args += "," + s.attrs;
        std::snprintf(
            buf, sizeof buf,
            "{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"%s\","
            "\"cat\":\"%s\",\"args\":{%s}}",
            id_, tid, b, e - b, name.c_str(), s.kind, args.c_str());
        add(buf);
        if (s.device_lost) {
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
        if (s.record && s.serial) part.records.push_back({s.serial, id_, tid, b, e, s.origin});
        if (s.wait && s.serial) {
            waiting[tid].push_back(part.waits.size());
            part.waits.push_back({s.serial, id_, tid, b, e, kNoNextSlice});
        }
    }
    for (const auto &x : w.exhausted) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"name\":"
                      "\"stream pool exhausted (%" PRIu64 " wanted)\",\"cat\":\"pool\"}",
                      id_, kHostTrackBase + x.thread, x.when, x.wanted);
        add(buf);
    }
    if (w.lost) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"g\",\"pid\":%u,\"ts\":%.3f,\"name\":\"context lost: "
                      "%s\",\"cat\":\"fault\"}",
                      id_, w.now, escape(w.lost_message.c_str()).c_str());
        add(buf);
    }
    if (w.dropped) {
        std::snprintf(buf, sizeof buf,
                      "{\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"ts\":%.3f,\"name\":\"trace full: "
                      "%" PRIu64 " operations not recorded\",\"cat\":\"overflow\"}",
                      id_, w.now, w.dropped);
        add(buf);
    }
    return part;
}

}  // namespace qd::core
