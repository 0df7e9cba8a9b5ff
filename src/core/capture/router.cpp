// The route of one operation through an open capture (core/capture/capture.h): which
// operations the capture takes, and how it records them.
#include <unordered_set>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"
#include "core/capture/graph_blocks.h"
#include "core/capture/open_capture.h"

namespace qd::core {

CaptureRouter::CaptureRouter(Context &ctx) : ctx_(ctx) {}
CaptureRouter::~CaptureRouter() = default;

bool CaptureRouter::captures(const Op &op) const {
    if (op.stream->capturing()) return true;
    if (op.kind != OpKind::Wait || open_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return records_.count(op.event) != 0;
}

void CaptureRouter::mark_batch(Op *ops, size_t n) const {
    if (open_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    std::unordered_set<const Stream *> streams;          // lanes, joined in this batch too
    std::unordered_set<const backend::Event *> inside;   // recorded inside, in this batch
    std::unordered_set<const backend::Event *> outside;  // recorded outside, in this batch
    for (size_t i = 0; i < n; ++i) {
        Op &op = ops[i];
        if (streams.count(op.stream) || lanes_.count(op.stream)) {
            streams.insert(op.stream);
            op.captured = true;
            if (op.kind == OpKind::Record) {
                inside.insert(op.event);
                outside.erase(op.event);
            }
            continue;
        }
        if (op.kind == OpKind::Record) {
            inside.erase(op.event);
            outside.insert(op.event);
        } else if (op.kind == OpKind::Wait &&
                   (inside.count(op.event) ||
                    (!outside.count(op.event) && records_.count(op.event)))) {
            streams.insert(op.stream);
            op.captured = true;
        }
    }
}

void CaptureRouter::passing(const Op &op) {
    if (op.kind != OpKind::Record || open_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = records_.find(op.event);
    if (it != records_.end()) drop_record(it);
}

void CaptureRouter::drop_record(
    std::unordered_map<const backend::Event *, RecordRef>::iterator it) {
    if (it->second.user) it->second.user->capture_record.store(false, std::memory_order_release);
    records_.erase(it);
}

uint32_t CaptureRouter::add_lane(Capture &c, const std::shared_ptr<Stream> &stream, uint64_t handle,
                                 CaptureFrame *frame) {
    c.lanes.push_back(stream);
    c.lane_handles.push_back(handle);
    c.lane_frame.push_back(frame ? frame : &c.root());
    const uint32_t lane = uint32_t(c.lanes.size() - 1);
    lanes_[stream.get()] = LaneRef{&c, lane};
    stream->capture_lane.store(true, std::memory_order_release);
    return lane;
}

qd_status CaptureRouter::record_node(Capture &c, uint32_t lane, const Op &op) {
    std::shared_ptr<Kernel> kernel;
    if (op.kind == OpKind::Launch) {
        auto &k = c.kernels[op.kernel->impl.get()];
        if (!k) {
            k = std::make_shared<Kernel>(op.kernel->ctx, op.kernel->impl);
            // The validation mode's parameter declarations, as they were at capture.
            for (size_t i = 0; i < k->param_access.size(); ++i)
                k->param_access[i].store(op.kernel->param_access[i].load(std::memory_order_relaxed),
                                         std::memory_order_relaxed);
        }
        kernel = k;
    }
    const int32_t dep = op.kind == OpKind::Wait ? records_.find(op.event)->second.node : -1;
    CaptureFrame &f = *c.lane_frame[lane];
    const int32_t index = int32_t(f.data->nodes.size());
    f.data->nodes.push_back(node_of(op, lane, std::move(kernel), dep));
    // Kernel nodes (qd_graph_kernel_node_count) are the root frame's launches only: a launch
    // inside a conditional's body is not one.
    if (op.kind == OpKind::Launch && &f == &c.root()) f.data->launches.push_back(uint32_t(index));
    f.prev.push_back(f.tail(lane));
    f.set_tail(lane, index);
    if (op.kind == OpKind::Record) {
        RecordRef ref{&c, &f, index, nullptr, nullptr};
        if (op.user_event) {
            ref.keep = op.user_event->impl;
            ref.user = op.user_event->shared_from_this();
            ref.user->capture_record.store(true, std::memory_order_release);
        }
        auto old = records_.find(op.event);
        if (old != records_.end() && old->second.user && !ref.user)
            old->second.user->capture_record.store(false, std::memory_order_release);
        records_[op.event] = std::move(ref);
    }
    return QD_SUCCESS;
}

qd_status CaptureRouter::submit_native(Capture &c, uint32_t lane, const Op &op) {
    qd_status st = QD_SUCCESS;
    std::shared_ptr<backend::Event> proxy;
    const bool in_body = c.lane_frame[lane] != &c.root();
    if (op.kind == OpKind::HostFn && in_body)
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "qd_launch_host_fn on a stream that records into a conditional's body of a "
                    "driver graph: the driver allows no host functions inside conditional "
                    "bodies; nothing was queued and the capture goes on");
    if (op.kind == OpKind::HostFn) {
        st = c.native->host_fn(*op.stream->impl, op.fn, op.user_data);
    } else {
        // Records and waits name a pooled proxy, never the caller's event: a record inside a
        // capture is a dependency inside the graph only (qd.h), and the driver refuses most
        // calls on an event last recorded in a capture.
        Op driver = op;
        if (op.kind == OpKind::Record) {
            c.proxies.reserve(c.proxies.size() + 1);
            st = ctx_.event_pool().get(&proxy);
            driver.event = proxy.get();
        } else if (op.kind == OpKind::Wait) {
            driver.event = records_.at(op.event).proxy;
        }
        if (st == QD_SUCCESS) st = submit_unobserved(driver);
        if (st == QD_SUCCESS && proxy) c.proxies.push_back(proxy);
        // The driver's node of this launch, for qd_graph_set_kernel_args: the graph's own
        // launches only, as GraphData::launches (a launch inside a body is no kernel node).
        if (st == QD_SUCCESS && op.kind == OpKind::Launch && !in_body)
            c.native->launched(*op.stream->impl);
    }
    if (st != QD_SUCCESS) {
        if (proxy) ctx_.event_pool().put(std::move(proxy));
        return st;
    }
    st = record_node(c, lane, op);
    if (st == QD_SUCCESS && proxy) records_[op.event].proxy = proxy.get();
    return st;
}

qd_status CaptureRouter::record_block(Capture &c, uint32_t lane, const Op &op) {
    if (!op.graph_block) {
        if (op.kind == OpKind::MemAlloc)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "qd_mem_alloc_async: the stream began capturing during the call; "
                        "nothing was allocated");
        return fail(QD_ERROR_INVALID_OPERATION,
                    "qd_mem_free_async on a capturing stream of a block allocated outside the "
                    "capture: a graph frees only the blocks it allocates (free it before the "
                    "capture begins or after it ends)");
    }
    // Only the root frame allocates: a block made or freed inside a conditional's body would
    // exist on some replays and not on others. Refused before anything is made or recorded.
    if (c.lane_frame[lane] != &c.root())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s on a stream that records into a conditional's body: a graph allocates "
                    "and frees its blocks outside its conditionals (allocate before "
                    "qd_stream_begin_conditional, free after qd_stream_end_conditional)",
                    op.kind == OpKind::MemAlloc ? "qd_mem_alloc_async" : "qd_mem_free_async");
    GraphData &data = *c.root().data;
    std::shared_ptr<GraphBlocks> &blocks = data.blocks;
    const uint64_t handle = c.lane_handles[lane];
    qd_status st = QD_SUCCESS;
    if (op.kind == OpKind::MemAlloc) {
        if (!blocks) blocks = std::make_shared<GraphBlocks>(ctx_.shared_from_this(), !!c.native);
        uint64_t a = 0;
        if (c.native) {
            // The driver capture makes it a graph memory node and returns its address.
            st = c.native->can_allocate();
            if (st != QD_SUCCESS) return st;
            Op driver = op;
            driver.graph_block = false;
            driver.address = &a;
            st = submit_unobserved(driver);
            if (st == QD_SUCCESS) st = blocks->adopt_driver_block(handle, a, op.bytes);
        } else {
            st = blocks->allocate(*op.stream, handle, op.bytes, &a);
        }
        if (st != QD_SUCCESS) return st;
        const int32_t index = int32_t(data.nodes.size());
        st = record_node(c, lane, op);
        if (st != QD_SUCCESS) return st;
        data.nodes[index].dst = a;
        blocks->find(a)->node = index;
        *op.address = a;
        return QD_SUCCESS;
    }
    GraphBlocks::Block *b = blocks ? blocks->find(op.dst) : nullptr;
    if (!b)
        return fail(QD_ERROR_INVALID_ADDRESS,
                    "0x%llx is a block another graph or capture owns: only a qd_mem_free_async "
                    "inside the capture that allocated it frees it",
                    (unsigned long long)op.dst);
    if (b->freed)
        return fail(QD_ERROR_INVALID_ADDRESS, "0x%llx was already freed inside this capture",
                    (unsigned long long)op.dst);
    if (c.native) {
        Op driver = op;
        driver.graph_block = false;
        st = submit_unobserved(driver);
        if (st != QD_SUCCESS) return st;
    }
    const int32_t index = int32_t(data.nodes.size());
    st = record_node(c, lane, op);
    if (st != QD_SUCCESS) return st;
    data.nodes[index].dep = b->node;  // a free names its block by the node that made it
    b->freed = true;
    return QD_SUCCESS;
}

qd_status CaptureRouter::record(const Op &op) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto lane = lanes_.find(op.stream);
    if (lane == lanes_.end()) {
        // Not a lane yet: a wait on an event recorded in a capture joins that capture (as the
        // children of a fork do).
        auto rec = op.kind == OpKind::Wait ? records_.find(op.event) : records_.end();
        if (rec == records_.end())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the capture this operation was submitted into ended while it was "
                        "submitted (qd_stream_end_capture on another thread); nothing was "
                        "queued");
        Capture &c = *rec->second.capture;
        // Natively the wait itself makes the stream join the driver capture.
        if (c.native) {
            Op driver = op;
            driver.event = rec->second.proxy;
            qd_status st = submit_unobserved(driver);
            if (st != QD_SUCCESS) return st;
        }
        const uint32_t l = add_lane(c, op.stream->shared_from_this(), 0, rec->second.frame);
        return record_node(c, l, op);
    }
    Capture &c = *lane->second.capture;
    switch (op.kind) {
    case OpKind::HostFn:
        if (op.status_fn)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "qd_launch_host_status_fn on a capturing stream: a graph's host node "
                        "runs once per replay, and a replay a loss drops could not call it; "
                        "nothing was queued, the capture goes on (use qd_launch_host_fn)");
        break;
    case OpKind::Launch:
        if (op.completion_event)
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "COMPLETION_EVENT on a capturing stream: a graph's kernel node records "
                        "no event of the caller's (record one after the launch instead); nothing "
                        "was queued");
        break;
    case OpKind::Memcpy:
        if (op.dst_ctx)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "qd_memcpy_peer_async on a capturing stream: copies between "
                        "contexts are not captured (use qd_memcpy_async inside a capture)");
        break;
    case OpKind::MemAlloc:
    case OpKind::MemFree: return record_block(c, lane->second.lane, op);
    case OpKind::Signal:
    case OpKind::WaitValue:
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s on a capturing stream: a capture does not take timeline operations "
                    "(qd.h, \"Timelines\"); nothing was queued, the capture goes on",
                    op.kind == OpKind::Signal ? "qd_timeline_signal" : "qd_timeline_wait");
    case OpKind::Wait: {
        auto rec = records_.find(op.event);
        if (rec == records_.end()) {
            if (op.event->recorded())
                return fail(QD_ERROR_INVALID_OPERATION,
                            "the stream is capturing and the event was last recorded "
                            "outside the capture; a capture can only wait on records made "
                            "inside it");
            return QD_SUCCESS;  // never recorded: a no-op, as outside a capture
        }
        if (rec->second.capture != &c)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the event was recorded in another capture (of stream 0x%016llx)",
                        (unsigned long long)rec->second.capture->origin_handle);
        if (rec->second.frame != c.lane_frame[lane->second.lane])
            return fail(QD_ERROR_INVALID_OPERATION,
                        "%s; a body depends only on work inside it (the conditional itself "
                        "follows the work before it)",
                        !c.lane_frame[lane->second.lane]->cond
                            ? "the event was recorded inside a conditional's body and the "
                              "stream is outside it"
                        : rec->second.frame->cond
                            ? "the event was recorded inside another conditional's body"
                            : "the event was recorded outside the conditional's body the "
                              "stream is in");
        break;
    }
    default: break;
    }
    return c.native ? submit_native(c, lane->second.lane, op)
                    : record_node(c, lane->second.lane, op);
}

}  // namespace qd::core
