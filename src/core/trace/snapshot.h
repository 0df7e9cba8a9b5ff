// What the trace's renderer (render.h) takes and gives back, as plain values: the observer
// (observer.h) fills a TraceSnapshot from its window, the renderer turns it into a TracePart,
// and the file registry (files.h) joins the parts of one file. Nothing here knows the
// observer, the core or a backend, so the dependency runs observer -> snapshot <- renderer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qd::core {

// One context's window, resolved: every time in microseconds on the file's time base (the
// first trace reference of the process), device times already read from the backend's events.
struct TraceSnapshot {
    struct Slice {                // an operation whose submit completed (after() ran)
        const char *kind = "";    // what it is: "launch", "memcpy", ... (static storage)
        const char *origin = "";  // where it came from: "api", "fork", ... (static storage)
        std::string name;         // a launch's kernel name, empty for other operations
        std::string attrs;        // a launch's attributes as JSON members, empty for none
        uint32_t track = 0;       // its stream's track (tid, from 1)
        uint32_t thread = 0;      // the host thread that enqueued it (from 0)
        double host_begin = 0, host_duration = 0;  // the enqueue, on the host
        bool timed = false;  // both events were read: begin and end hold its slice
        double begin = 0, end = 0;
        bool sized = false;  // a copy, set or alloc: `bytes` is drawn
        uint64_t bytes = 0;
        const char *status = nullptr;       // the failed submit's status name; null: success
        bool device_lost = false;           // the status was QD_ERROR_DEVICE_LOST
        bool record = false, wait = false;  // an event record or wait (an arrow's end)
        uint64_t serial = 0;  // record: its serial; wait: the serial it consumed (0: none)
    };
    struct Exhaustion {  // the stream pool was found empty
        double when = 0;
        uint32_t thread = 0;
        uint64_t wanted = 0;
    };

    uint32_t id = 0;                  // the context's process id in the file
    std::string backend;              // its backend's slug
    size_t recorded = 0;              // operations recorded (completed or not)
    uint64_t dropped = 0;             // operations past the capacity
    size_t capacity = 0;              // QD_TRACE_CAPACITY
    std::vector<std::string> tracks;  // the streams' track names, [tid - 1]
    std::vector<uint32_t> threads;    // the host threads' numbers, in the order drawn
    std::vector<Slice> slices;
    std::vector<Exhaustion> exhausted;
    bool lost = false;  // the context is lost: lost_message says why
    std::string lost_message;
    double now = 0;  // when the snapshot was taken (the markers of lost and dropped)
};

// One context's part of a trace file: its events, rendered, and the ends of its arrows, which
// the file joins (times in microseconds on the file's time base).
struct TracePart {
    struct Record {  // a timed record: its slice
        uint64_t serial;
        uint32_t pid, tid;
        double begin, end;
        const char *name;  // the record's origin: the arrow's name (static storage)
    };
    struct Wait {  // a timed wait that consumed the record `serial`: its slice
        uint64_t serial;
        uint32_t pid, tid;
        double begin, end;
        double next;  // when the next slice on its stream starts (infinity: none in the window)
    };
    std::string events;
    std::vector<Record> records;
    std::vector<Wait> waits;
};

}  // namespace qd::core
