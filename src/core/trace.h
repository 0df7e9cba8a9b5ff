// The timeline trace: an observer of the submission chokepoint (core/submit.h) that records
// every operation a context's streams run, and writes them as a Chrome trace event file that
// Perfetto and chrome://tracing open (`qd trace view` draws it without either).
//
// Turned on with no code change by the environment variable QD_TRACE=path.json (read with
// secure_getenv when a context is created): every context created afterwards is traced, and
// each context's timeline is written into that one file when the context is destroyed (one
// process per context, one track per stream, one per host thread that enqueued work). Off by
// default; off, nothing of this runs (no observer is attached, the chokepoint's branch is not
// taken).
//
// How times are taken: two timing events of the context's own backend bracket every traced
// operation on its stream (recorded just before and just after it), so a slice is the time the
// operation ran on the CPU backend's worker or on the device, not the time it was queued. The
// events are read after the context has drained its streams (at destroy), never on the launch
// path; a reference event recorded and synchronized when tracing starts puts every stream on
// the host's steady clock. Cost when on: two event records per operation (on the CPU backend
// two queued markers, on a GPU two event records), a mutex, and the host clock read twice.
//
// Memory is bounded: the trace keeps at most QD_TRACE_CAPACITY operations per context (default
// 65536); later ones are not recorded, and the file says how many were dropped.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/submit.h"

namespace qd::core {

class TraceObserver final : public OpObserver {
  public:
    // Attaches a trace to ctx when QD_TRACE names a file. QD_SUCCESS when tracing is off.
    static qd_status attach_if_requested(Context &ctx);

    TraceObserver(Context &ctx, std::string path, size_t capacity);
    ~TraceObserver() override;

    qd_status before(const Op &op, bool *consumed) override;
    void after(const Op &op, qd_status status) override;
    void context_drained(Context &ctx) override;

  private:
    using Clock = std::chrono::steady_clock;

    struct Slot {
        OpKind kind = OpKind::Launch;
        OpOrigin origin = OpOrigin::Api;
        uint32_t track = 0;  // the stream's track (named when first seen: tracks_)
        char name[64] = {0};  // the kernel's name (copied: the kernel may be gone by the flush)
        uint64_t bytes = 0;
        const backend::Event *event = nullptr;  // Record/Wait: the event, to draw its arrow
        std::shared_ptr<backend::Event> begin, end;
        Clock::time_point host_begin, host_end;
        uint32_t thread = 0;
        qd_status status = QD_SUCCESS;
        bool begun = false, ended = false;
        bool completed = false;  // after() ran: false for an operation another observer took
                                 // over (graph capture: the replay is traced, not the capture)
        int64_t flow_from = -1;  // Wait: the slot of the record it consumed
    };

    qd_status start(Context &ctx);  // the reference event
    uint32_t thread_index();        // under mutex_
    uint32_t track_of(const Stream &stream);  // under mutex_
    std::string render(Context &ctx);

    Context &ctx_;
    const std::string path_;
    const size_t capacity_;
    uint32_t id_ = 0;  // this context's process id in the file

    std::mutex mutex_;
    std::vector<Slot> slots_;
    uint64_t dropped_ = 0;
    std::unordered_map<const Op *, size_t> in_flight_;  // before() -> after() of one submit
    std::unordered_map<const backend::Event *, size_t> last_record_;
    std::unordered_map<std::string, uint32_t> threads_;
    // A stream's track, found by address; the weak reference tells a new stream at a freed
    // stream's address from the old one.
    struct Track {
        std::weak_ptr<const Stream> stream;
        uint32_t tid;
    };
    std::unordered_map<const Stream *, Track> track_of_;
    std::vector<std::string> track_names_;  // [tid - 1]
    uint32_t owned_ = 0;
    std::shared_ptr<backend::Event> reference_;
    Clock::time_point reference_time_;
    bool flushed_ = false;
};

// The file every traced context writes its part into (process-wide; each destroy rewrites the
// file with every part so far, so it is complete and valid JSON after every context destroy).
void trace_write_part(const std::string &path, std::string part);

}  // namespace qd::core
