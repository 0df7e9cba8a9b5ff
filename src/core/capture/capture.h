// Graph capture (qd.h, "Graphs"): a router on the submission path (core/submit.h), not an
// observer. The context's CaptureRouter is made at its first qd_stream_begin_capture.
//
// Capturing is state of the objects: a stream that begins a capture, or joins one by waiting on
// an event whose latest record is a node of it (fork, parallel launch, or a user's wait), is a
// lane of the capture until it ends (Stream::capturing()), and an event recorded on a lane is
// recorded in the capture (Event::recorded_in_capture()) until the capture ends or a record
// outside it replaces that record. Both are one atomic load.
//
// The route of one operation (core/submit.cpp): while a capture is open, the context's observer
// pointer is never null (Context::route_captures), so every submit takes the observed path. There captures() decides
// whether the operation goes to the capture, and marks it (op.captured) before any observer
// sees it (a multi-part call's parts are marked all at once, mark_batch(), before
// check_batch()); then the observers' before(); then either record() (the capture takes it, or
// refuses it with a status: a free of a block it did not allocate, a copy between contexts, a
// wait on a record made outside the capture) or the backend; then after() on every observer
// that passed. qd_mem_alloc_async on a lane makes a block the graph owns
// (core/capture/graph_blocks.h).
// A recorded operation becomes a node of the capture's graph (core/capture/graph.h) and never
// reaches the backend. Replay (Graph::launch) re-submits the nodes through the chokepoint as
// one batch, lane 0 on the launch stream and the other lanes on pooled streams, with pooled
// events for the cross-lane edges, in the captured order (a topological order of the graph),
// so branches run concurrently exactly as the captured calls would have, every part as
// OpOrigin::GraphLaunch.
//
// Leases (fork, parallel launch) released while their stream is a lane stay with the capture
// until it ends, so no other holder can submit to a capturing stream.
//
// Native driver graphs: when the backend captures natively (backend::Stream::begin_capture:
// CUDA and HIP with the graph entry points) and no attached observer needs replayed operations
// (OpObserver::needs_replay(): the trace and the validation mode do), the capture also begins
// a driver capture on its origin, and record() passes the operations of its streams to the
// driver (which records them) while the router keeps the same bookkeeping and nodes (lanes,
// joins, refused calls, held leases; the nodes for update's shape check, and to re-issue them
// when an observer that needs replay is attached later). Records and waits use pooled proxy
// events (a user event is never recorded by a capture, on any backend); host functions go to
// the native capture, which gives their payloads to the graph. The end instantiates the driver
// graph, and a replay is one driver launch while no attached observer needs replay. Otherwise
// (the CPU backend, a driver without graphs, such an observer attached) the nodes alone serve:
// a replay re-issues the recorded operations.
//
// Child graphs (child_graph.cpp): a qd_graph_launch on a capturing stream re-issues the graph's
// nodes there, so the capture records them (inlined, never a driver child-graph node); what
// cannot be recorded so is refused first.
//
// Conditionals (core/capture/conditional.h): each lane records into a frame, the capture's
// graph or the body of a conditional open on it; a replay that re-issues operations queues
// each conditional node as one host task that decides and runs a body inline (the CPU
// backend). A native capture also hands each conditional to the driver after the router's own
// checks (backend::Capture::begin_conditional, next_branch, end_conditional: a conditional
// node whose bodies the driver records), and a graph with conditionals is always launched
// whole there.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/capture/graph.h"
#include "core/context.h"
#include "core/submit.h"

namespace qd::core {

struct CaptureFrame;    // core/capture/open_capture.h
struct ConditionalRun;  // core/capture/conditional.h

class CaptureRouter {
  public:
    explicit CaptureRouter(Context &ctx);
    ~CaptureRouter();
    CaptureRouter(const CaptureRouter &) = delete;
    CaptureRouter &operator=(const CaptureRouter &) = delete;

    // The route of one operation (router.cpp), in the order submit_observed takes them:
    // Does the capture take `op` (its stream is capturing, or it is a wait on a record made in
    // an open capture, which joins its stream)? The answer becomes op.captured.
    bool captures(const Op &op) const;
    // The same for every part of a multi-part call, in order (a part's wait on a record made
    // by an earlier captured part joins its stream for the parts after it): sets op.captured.
    void mark_batch(Op *ops, size_t n) const;
    // A captured operation: recorded as a node (on a native capture also passed to the
    // driver), or refused with a written status; the backend never sees it.
    qd_status record(const Op &op);
    // An operation routed to the backend: a record outside every capture replaces the event's
    // latest record.
    void passing(const Op &op);

    // Opening and ending captures (open_close.cpp).
    qd_status begin(Stream &stream, uint64_t handle);
    // *native: the instantiated driver graph of a native capture, else null.
    qd_status end(Stream &stream, std::shared_ptr<const GraphData> *out,
                  std::shared_ptr<backend::Graph> *native);
    // The context's destroy drained its streams: every open capture is abandoned.
    void context_drained();

    // The lanes of a capture (lanes.cpp). Leases given back while their stream is a lane stay
    // with the capture (it returns them to the pool when it ends). True when the capture took
    // `stream` (a lease already disarmed or handle-less); false when the stream is not
    // capturing.
    bool keep_lease(const std::shared_ptr<Stream> &stream);
    // qd_launch_parallel inside a capture: leases the capture holds already and may reuse as
    // new lanes (they joined back), up to `want`; appended to *out.
    void reuse_leases(const Stream &parent, uint32_t want,
                      std::vector<std::shared_ptr<Stream>> *out);
    // A stream's handle for messages (the handle it had when it joined, if known).
    void note_handle(const Stream &stream, uint64_t handle);
    // qd_stream_join, before any part is queued: QD_ERROR_INVALID_OPERATION (written) when a
    // child's record could not be waited on by the parent as record() would see the parts in
    // order (the parent, capturing or joining a child's capture, would wait on a record made
    // outside its capture or in another one), so a join is refused whole, never half queued.
    qd_status check_join(const Stream &parent, uint64_t parent_handle, Stream *const *children,
                         const uint64_t *handles, uint32_t n) const;

    // A graph launched on `stream`, a lane of a capture (child_graph.cpp): QD_SUCCESS when its
    // nodes can be recorded into it (Graph::launch then re-issues them there), else the written
    // refusal. Also QD_SUCCESS when the stream's capture ended meanwhile.
    qd_status check_child(const Stream &stream, const GraphData &child) const;

    // Conditionals (conditionals.cpp; qd.h, "Conditionals"): open one on a capturing stream,
    // go to its next body, close it, and its native handle. Refused, nothing changes.
    qd_status begin_conditional(Stream &stream, uint64_t handle, const qd_conditional_desc &desc);
    qd_status next_branch(Stream &stream, uint64_t handle);
    qd_status end_conditional(Stream &stream, uint64_t handle);
    qd_status conditional_handle(Stream &stream, uint64_t handle, uint64_t *out);

    // A replay's conditional tasks (core/capture/conditional.h): kept until the task ran
    // (forget_run, called by the task) or the context drained (a task skipped after a device
    // fault, or dropped by the shutdown, never runs).
    void keep_run(std::unique_ptr<ConditionalRun> run);
    void forget_run(ConditionalRun *run);

  private:
    struct Capture;  // core/capture/open_capture.h
    struct LaneRef {
        Capture *capture;
        uint32_t lane;
    };
    struct RecordRef {
        Capture *capture;
        CaptureFrame *frame;  // the frame (graph or body) its node is in
        int32_t node;
        std::shared_ptr<backend::Event> keep;  // a user event stays alive while referenced
        std::shared_ptr<Event> user;           // its core object (recorded_in_capture)
        backend::Event *proxy = nullptr;       // native capture: what the driver recorded
    };

    // With mutex_ held.
    qd_status record_node(Capture &c, uint32_t lane, const Op &op);
    // A native capture: submits op to the driver (which records it), then records the node.
    qd_status submit_native(Capture &c, uint32_t lane, const Op &op);
    // qd_mem_alloc_async and qd_mem_free_async of the capture's blocks
    // (core/capture/graph_blocks.h): made, or freed in the root frame's graph; any other free,
    // and either inside a conditional's body, is refused.
    qd_status record_block(Capture &c, uint32_t lane, const Op &op);
    // `frame`: where its operations go (null: the capture's graph).
    uint32_t add_lane(Capture &c, const std::shared_ptr<Stream> &stream, uint64_t handle,
                      CaptureFrame *frame = nullptr);
    void drop_record(std::unordered_map<const backend::Event *, RecordRef>::iterator it);
    void end_locked(Capture &c);
    // Conditionals (conditionals.cpp), with mutex_ held: the innermost body open on `lane`, if
    // the lane opened it (else the written refusal, naming `what`); whether every other lane in
    // it joined back; closing it (its lanes leave the capture, its records are dropped).
    qd_status owned_body(Capture &c, uint32_t lane, uint64_t handle, const char *what,
                         CaptureFrame **out);
    qd_status check_body_joined(Capture &c, CaptureFrame &body, uint64_t handle);
    void close_body(Capture &c, CaptureFrame &body);

    Context &ctx_;
    mutable std::mutex mutex_;
    std::atomic<uint32_t> open_{0};  // open captures; 0: nothing to look up
    std::vector<std::unique_ptr<Capture>> captures_;
    std::unordered_map<const Stream *, LaneRef> lanes_;
    std::unordered_map<const backend::Event *, RecordRef> records_;
    std::mutex runs_mutex_;
    std::unordered_map<ConditionalRun *, std::unique_ptr<ConditionalRun>> runs_;
};

// Are native driver graphs used on ctx now: no attached observer needs replayed operations
// (OpObserver::needs_replay)? Asked when a capture begins and at each qd_graph_launch.
bool native_graphs(const Context &ctx);

// QD_ERROR_INVALID_OPERATION (with the message, naming `what`) when the stream is capturing:
// for the calls qd.h refuses on a capturing stream. One load.
qd_status refuse_if_capturing(const Stream &stream, uint64_t handle, const char *what);
// The same for an event recorded inside an open capture (qd_event_query, _synchronize).
qd_status refuse_if_captured_event(const Event &event, uint64_t handle, const char *what);

// The C API's graph calls (src/api/api_graph.cpp validates and guards; graph_calls.cpp).
// Each takes the objects api/ resolved (usable, of one context) and, for messages, the stream's
// handle; graph_destroy takes the handle it removes.
qd_status begin_capture(Stream &s, uint64_t stream);
qd_status end_capture(Stream &s, uint64_t stream, uint64_t *graph);
qd_status graph_launch(Graph &g, Stream &s, uint64_t stream);
qd_status graph_update(Graph &g, const Graph &from);
qd_status graph_destroy(uint64_t graph);
// graph_upload.cpp: refused while s captures.
qd_status graph_upload(Graph &g, Stream &s, uint64_t stream);
// graph_dot.cpp: path non-empty and flags checked by api/.
qd_status graph_debug_dot(const Graph &g, const char *path, uint32_t flags);
// qd_stream_begin_conditional, _next_branch, _end_conditional, qd_conditional_handle (desc is
// checked by api/: struct_size, kind, num_cases).
qd_status begin_conditional(Stream &s, uint64_t stream, const qd_conditional_desc &desc);
qd_status next_branch(Stream &s, uint64_t stream);
qd_status end_conditional(Stream &s, uint64_t stream);
qd_status conditional_handle(Stream &s, uint64_t stream, uint64_t *handle);
// graph_rebind.cpp: args already checked as qd_launch checks them.
qd_status graph_kernel_node_count(const Graph &g, uint32_t *count);
qd_status graph_set_kernel_args(Graph &g, uint32_t node, const qd_arg *args, uint32_t num_args);

}  // namespace qd::core
