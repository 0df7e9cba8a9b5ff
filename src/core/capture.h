// Graph capture and replay (qd.h, "Graphs"): an observer behind the submission chokepoint
// (core/submit.h), attached to a context at its first qd_stream_begin_capture.
//
// The observer knows which streams are capturing. Every operation submitted on one of them is
// *consumed*: it becomes a node of the capture's recorded graph (kind, lane, the kernel, the
// copied argument bytes, the launch dimensions, the memory range, the host function, and for a
// wait the record node it depends on) and never reaches the backend. A stream joins a capture
// by waiting on an event whose latest record is a node of it (fork, parallel launch, or a
// user's wait); it is then a lane of the capture until the capture ends. Replay
// (Graph::launch) re-submits the nodes through the chokepoint, lane 0 on the launch stream and
// the other lanes on pooled streams, with pooled events for the cross-lane edges, in the
// captured order (a topological order of the graph), so branches run concurrently exactly as
// the captured calls would have, and the launch stream waits for all of them.
//
// Leases (fork, parallel launch) released while their stream is a lane stay with the capture
// until it ends, so no other holder can submit to a capturing stream.
//
// Native driver graphs: when the backend captures natively (backend::Stream::begin_capture:
// CUDA and HIP with the graph entry points) and the capture observer is the context's only
// observer, the capture also begins a driver capture on its origin, and the operations of
// its streams pass to the driver (submitted here, so that the driver records them) while the
// observer keeps the same bookkeeping and recording: lanes, joins, refused calls, held leases,
// the nodes (for update's shape check, and to re-issue when a trace or validation is attached
// later). Records and waits use pooled proxy events (a user event is never recorded by a
// capture, on any backend); host functions go to the native capture, which gives their
// payloads to the graph. The end instantiates the driver graph, and a replay is one driver
// launch. Otherwise (the CPU backend, a driver without graphs, other observers attached) the
// recording alone serves: a replay re-issues the recorded operations.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/context.h"
#include "core/submit.h"

namespace qd::core {

// One recorded operation.
struct GraphNode {
    OpKind kind = OpKind::Launch;
    uint32_t lane = 0;
    // Wait: the index of the Record node it depends on.
    int32_t dep = -1;
    // Launch.
    std::shared_ptr<Kernel> kernel;
    backend::LaunchDims dims{};
    std::vector<uint8_t> arg_bytes;
    std::vector<qd_arg> args;  // points into arg_bytes (fixed once the node is complete)
    // Memcpy, Memset.
    uint64_t dst = 0, src = 0, bytes = 0;
    uint8_t value = 0;
    // HostFn.
    qd_host_fn fn = nullptr;
    void *user_data = nullptr;
};

// What a capture recorded; immutable once the capture ended (shared by graphs and replays).
struct GraphData {
    uint32_t lanes = 1;
    std::vector<GraphNode> nodes;
};

class Graph : public Object {
  public:
    static constexpr Tag kTag = Tag::Graph;

    Graph(std::shared_ptr<Context> ctx, std::shared_ptr<const GraphData> data,
          std::shared_ptr<backend::Graph> native)
        : ctx(std::move(ctx)), data_(std::move(data)), native_(std::move(native)) {}

    // qd_graph_launch: `stream` is of this graph's context, usable and not capturing.
    qd_status launch(Stream &stream);
    // qd_graph_update: the shapes must match (QD_ERROR_INVALID_OPERATION names the difference).
    qd_status update_from(const Graph &from);

    std::shared_ptr<const GraphData> data() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return data_;
    }
    // The instantiated driver graph, or null (recorded only).
    std::shared_ptr<backend::Graph> native() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return native_;
    }

    std::shared_ptr<Context> ctx;

  private:
    mutable std::mutex mutex_;
    std::shared_ptr<const GraphData> data_;
    std::shared_ptr<backend::Graph> native_;
};

class CaptureObserver final : public OpObserver {
  public:
    explicit CaptureObserver(Context &ctx);
    ~CaptureObserver() override;

    qd_status before(const Op &op, bool *consumed) override;
    void after(const Op &, qd_status) override {}
    void context_drained(Context &ctx) override;

    qd_status begin(Stream &stream, uint64_t handle);
    // *native: the instantiated driver graph of a native capture, else null.
    qd_status end(Stream &stream, std::shared_ptr<const GraphData> *out,
                  std::shared_ptr<backend::Graph> *native);

    // Is the stream a lane of an open capture?
    bool capturing(const Stream &stream) const;
    // Was the event's latest record made inside an open capture?
    bool recorded_in_capture(const backend::Event &event) const;

    // Leases given back while their stream is a lane of a capture stay with the capture (it
    // returns them to the pool when it ends). True when the capture took `stream` (a lease
    // already disarmed or handle-less); false when the stream is not capturing.
    bool keep_lease(const std::shared_ptr<Stream> &stream);
    // qd_launch_parallel inside a capture: leases the capture holds already and may reuse as
    // new lanes (they joined back), up to `want`; appended to *out.
    void reuse_leases(const Stream &parent, uint32_t want, std::vector<std::shared_ptr<Stream>> *out);

    // A stream's handle for messages (the handle it had when it joined, if known).
    void note_handle(const Stream &stream, uint64_t handle);

    // qd_stream_join, before any part is queued: QD_ERROR_INVALID_OPERATION (written) when a
    // child's record could not be waited on by the parent as before() would see the parts in
    // order (the parent, capturing or joining a child's capture, would wait on a record made
    // outside its capture or in another one), so a join is refused whole, never half queued.
    qd_status check_join(const Stream &parent, uint64_t parent_handle, Stream *const *children,
                         const uint64_t *handles, uint32_t n) const;

  private:
    struct Capture;
    struct LaneRef {
        Capture *capture;
        uint32_t lane;
    };
    struct RecordRef {
        Capture *capture;
        int32_t node;
        std::shared_ptr<backend::Event> keep;  // a user event stays alive while referenced
        backend::Event *proxy = nullptr;       // native capture: what the driver recorded
    };

    // With mutex_ held.
    qd_status record_node(Capture &c, uint32_t lane, const Op &op);
    // A native capture: submits op to the driver (which records it), then records the node.
    qd_status submit_native(Capture &c, uint32_t lane, const Op &op);
    void end_locked(Capture &c);

    Context &ctx_;
    mutable std::mutex mutex_;
    std::atomic<uint32_t> open_{0};  // open captures; 0: before() returns at once
    std::vector<std::unique_ptr<Capture>> captures_;
    std::unordered_map<const Stream *, LaneRef> lanes_;
    std::unordered_map<const backend::Event *, RecordRef> records_;
};

// The context's capture observer, or null when no capture was ever begun on it.
CaptureObserver *capture_observer(const Context &ctx);
// The capture observer, attached at the first call (qd_stream_begin_capture).
qd_status ensure_capture_observer(Context &ctx, CaptureObserver **out);

// QD_ERROR_INVALID_OPERATION (with the message, naming `what`) when the stream is capturing:
// for the calls qd.h refuses on a capturing stream. One load when no capture was ever begun.
qd_status refuse_if_capturing(const Stream &stream, uint64_t handle, const char *what);
// The same for an event recorded inside an open capture (qd_event_query, _synchronize).
qd_status refuse_if_captured_event(const Event &event, uint64_t handle, const char *what);

// The C API's graph calls (src/api/api_graph.cpp validates and guards).
qd_status begin_capture(uint64_t stream);
qd_status end_capture(uint64_t stream, uint64_t *graph);
qd_status graph_launch(uint64_t graph, uint64_t stream);
qd_status graph_update(uint64_t graph, uint64_t from);
qd_status graph_destroy(uint64_t graph);

}  // namespace qd::core
