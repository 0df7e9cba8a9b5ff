#include "core/capture.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "core/fork_join.h"
#include "core/lifecycle.h"
#include "core/observers.h"

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// An open capture
// ---------------------------------------------------------------------------------------------

struct CaptureObserver::Capture {
    uint64_t origin_handle = 0;
    std::vector<std::shared_ptr<Stream>> lanes;  // [0] is the origin
    std::vector<uint64_t> lane_handles;          // 0 when unknown (qd_launch_parallel's)
    std::vector<int32_t> tails;                  // last node of each lane, -1 when none
    std::vector<int32_t> prev;                   // per node: the previous node of its lane
    std::vector<std::shared_ptr<Stream>> held;   // leases given back during the capture
    std::shared_ptr<GraphData> data = std::make_shared<GraphData>();
    std::unordered_map<const backend::Kernel *, std::shared_ptr<Kernel>> kernels;
    // Native capture: the pooled events recorded in it (back to the pool at the end), and the
    // driver capture. Declared last, destroyed first: an abandoned driver capture ends while
    // its streams are still alive.
    std::vector<std::shared_ptr<backend::Event>> proxies;
    std::unique_ptr<backend::Capture> native;

    uint32_t add_lane(std::shared_ptr<Stream> s, uint64_t handle) {
        lanes.push_back(std::move(s));
        lane_handles.push_back(handle);
        tails.push_back(-1);
        data->lanes = uint32_t(lanes.size());
        return uint32_t(lanes.size() - 1);
    }
};

CaptureObserver::CaptureObserver(Context &ctx) : ctx_(ctx) {}
CaptureObserver::~CaptureObserver() = default;

namespace {
const char *op_name(OpKind kind) {
    switch (kind) {
        case OpKind::MemAlloc: return "qd_mem_alloc_async";
        case OpKind::MemFree: return "qd_mem_free_async";
        default: return "the operation";
    }
}
}  // namespace

qd_status CaptureObserver::record_node(Capture &c, uint32_t lane, const Op &op) {
    GraphNode n;
    n.kind = op.kind;
    n.lane = lane;
    switch (op.kind) {
        case OpKind::Launch: {
            auto &k = c.kernels[op.kernel->impl.get()];
            if (!k) {
                k = std::make_shared<Kernel>(op.kernel->ctx, op.kernel->impl);
                // The validation mode's parameter declarations, as they were at capture.
                for (size_t i = 0; i < k->param_access.size(); ++i)
                    k->param_access[i].store(op.kernel->param_access[i].load(std::memory_order_relaxed),
                                             std::memory_order_relaxed);
            }
            n.kernel = k;
            n.dims = *op.dims;
            uint64_t total = 0;
            for (uint32_t i = 0; i < op.num_args; ++i) total += op.args[i].size;
            n.arg_bytes.resize(total);
            n.args.resize(op.num_args);
            uint64_t at = 0;
            for (uint32_t i = 0; i < op.num_args; ++i) {
                std::memcpy(n.arg_bytes.data() + at, op.args[i].data, op.args[i].size);
                n.args[i].size = op.args[i].size;
                at += op.args[i].size;
            }
            at = 0;
            for (uint32_t i = 0; i < op.num_args; ++i) {
                n.args[i].data = n.arg_bytes.data() + at;
                at += op.args[i].size;
            }
            break;
        }
        case OpKind::HostFn:
            n.fn = op.fn;
            n.user_data = op.user_data;
            break;
        case OpKind::Memcpy:
            n.dst = op.dst;
            n.src = op.src;
            n.bytes = op.bytes;
            break;
        case OpKind::Memset:
            n.dst = op.dst;
            n.value = op.value;
            n.bytes = op.bytes;
            break;
        case OpKind::Record: break;
        case OpKind::Wait: {
            auto it = records_.find(op.event);
            n.dep = it->second.node;
            break;
        }
        case OpKind::MemAlloc:
        case OpKind::MemFree: return QD_ERROR_INTERNAL;
    }
    const int32_t index = int32_t(c.data->nodes.size());
    c.data->nodes.push_back(std::move(n));
    c.prev.push_back(c.tails[lane]);
    c.tails[lane] = index;
    if (op.kind == OpKind::Record) {
        RecordRef ref{&c, index, nullptr};
        if (op.user_event) ref.keep = op.user_event->impl;
        records_[op.event] = std::move(ref);
    }
    return QD_SUCCESS;
}

qd_status CaptureObserver::submit_native(Capture &c, uint32_t lane, const Op &op) {
    backend::Stream &s = *op.stream->impl;
    qd_status st = QD_SUCCESS;
    std::shared_ptr<backend::Event> proxy;
    switch (op.kind) {
        case OpKind::Launch: st = s.launch(*op.kernel->impl, *op.dims, op.args, op.num_args); break;
        case OpKind::Memcpy: st = s.memcpy(op.dst, op.src, op.bytes); break;
        case OpKind::Memset: st = s.memset(op.dst, op.value, op.bytes); break;
        case OpKind::HostFn: st = c.native->host_fn(s, op.fn, op.user_data); break;
        case OpKind::Record:
            // A pooled proxy, never the caller's event: a record inside a capture is a
            // dependency inside the graph only (qd.h), and the driver refuses most calls on an
            // event last recorded in a capture.
            c.proxies.reserve(c.proxies.size() + 1);
            st = ctx_.event_pool().get(&proxy);
            if (st == QD_SUCCESS) st = s.record(*proxy);
            if (st == QD_SUCCESS) c.proxies.push_back(proxy);
            break;
        case OpKind::Wait: st = s.wait(*records_.at(op.event).proxy); break;
        case OpKind::MemAlloc:
        case OpKind::MemFree: return QD_ERROR_INTERNAL;
    }
    if (st != QD_SUCCESS) {
        if (proxy) ctx_.event_pool().put(std::move(proxy));
        return st;
    }
    st = record_node(c, lane, op);
    if (st == QD_SUCCESS && proxy) records_[op.event].proxy = proxy.get();
    return st;
}

qd_status CaptureObserver::before(const Op &op, bool *consumed) {
    if (open_.load(std::memory_order_acquire) == 0) return QD_SUCCESS;
    std::lock_guard<std::mutex> lock(mutex_);
    auto lane = lanes_.find(op.stream);
    if (lane == lanes_.end()) {
        // Not capturing: a wait on an event recorded in a capture joins that capture (as the
        // children of a fork do); a record outside every capture replaces the event's latest.
        if (op.kind == OpKind::Record) {
            records_.erase(op.event);
            return QD_SUCCESS;
        }
        if (op.kind != OpKind::Wait) return QD_SUCCESS;
        auto rec = records_.find(op.event);
        if (rec == records_.end()) return QD_SUCCESS;
        Capture &c = *rec->second.capture;
        // Natively the wait itself makes the stream join the driver capture.
        if (c.native) {
            qd_status st = op.stream->impl->wait(*rec->second.proxy);
            if (st != QD_SUCCESS) return st;
        }
        const uint32_t l = c.add_lane(op.stream->shared_from_this(), 0);
        lanes_[op.stream] = LaneRef{&c, l};
        qd_status st = record_node(c, l, op);
        if (st == QD_SUCCESS) *consumed = true;
        return st;
    }
    Capture &c = *lane->second.capture;
    switch (op.kind) {
        case OpKind::Memcpy:
            if (op.dst_ctx)
                return fail(QD_ERROR_INVALID_OPERATION,
                            "qd_memcpy_peer_async on a capturing stream: copies between "
                            "contexts are not captured (use qd_memcpy_async inside a capture)");
            break;
        case OpKind::MemAlloc:
        case OpKind::MemFree:
            return fail(QD_ERROR_INVALID_OPERATION,
                        "%s on a capturing stream: stream-ordered allocation is not captured "
                        "(allocate before the capture begins and free after it ends)",
                        op_name(op.kind));
        case OpKind::Wait: {
            auto rec = records_.find(op.event);
            if (rec == records_.end()) {
                if (op.event->recorded())
                    return fail(QD_ERROR_INVALID_OPERATION,
                                "the stream is capturing and the event was last recorded "
                                "outside the capture; a capture can only wait on records made "
                                "inside it");
                *consumed = true;  // never recorded: a no-op, as outside a capture
                return QD_SUCCESS;
            }
            if (rec->second.capture != &c)
                return fail(QD_ERROR_INVALID_OPERATION,
                            "the event was recorded in another capture (of stream 0x%016llx)",
                            (unsigned long long)rec->second.capture->origin_handle);
            break;
        }
        default: break;
    }
    qd_status st = c.native ? submit_native(c, lane->second.lane, op)
                            : record_node(c, lane->second.lane, op);
    if (st == QD_SUCCESS) *consumed = true;
    return st;
}

qd_status CaptureObserver::begin(Stream &stream, uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    // A capture begun once the context's destroy has begun would outlive its drain
    // (context_drained ends the captures), and its lanes would keep the context alive.
    if (ctx_.check_not_destroyed() != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
    auto it = lanes_.find(&stream);
    if (it != lanes_.end()) {
        if (it->second.lane == 0)
            return fail(QD_ERROR_INVALID_OPERATION, "stream 0x%016llx is already capturing",
                        (unsigned long long)handle);
        return fail(QD_ERROR_INVALID_OPERATION,
                    "stream 0x%016llx is capturing: it joined the capture of stream 0x%016llx",
                    (unsigned long long)handle,
                    (unsigned long long)it->second.capture->origin_handle);
    }
    auto c = std::make_unique<Capture>();
    c->origin_handle = handle;
    // Natively only while no other observer is attached: the trace and validation must see
    // each operation (they would also queue work of their own on the capturing streams).
    ObserverSet *set = ctx_.observers();
    if (set && set->size() == 1) {
        qd_status st = stream.impl->begin_capture(&c->native);
        if (st != QD_SUCCESS && st != QD_ERROR_NOT_SUPPORTED) return st;
    }
    c->add_lane(stream.shared_from_this(), handle);
    lanes_[&stream] = LaneRef{c.get(), 0};
    captures_.push_back(std::move(c));
    open_.fetch_add(1, std::memory_order_acq_rel);
    return QD_SUCCESS;
}

void CaptureObserver::end_locked(Capture &c) {
    for (auto it = lanes_.begin(); it != lanes_.end();)
        it = it->second.capture == &c ? lanes_.erase(it) : std::next(it);
    for (auto it = records_.begin(); it != records_.end();)
        it = it->second.capture == &c ? records_.erase(it) : std::next(it);
    open_.fetch_sub(1, std::memory_order_acq_rel);
}

qd_status CaptureObserver::end(Stream &stream, std::shared_ptr<const GraphData> *out,
                               std::shared_ptr<backend::Graph> *native) {
    std::vector<std::shared_ptr<Stream>> held;
    std::unique_ptr<Capture> done;
    qd_status st = QD_SUCCESS;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = lanes_.find(&stream);
        if (it == lanes_.end())
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the stream is not capturing (qd_stream_begin_capture starts a capture)");
        Capture &c = *it->second.capture;
        if (it->second.lane != 0)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the stream joined the capture of stream 0x%016llx but is not its "
                        "origin; end the capture on its origin",
                        (unsigned long long)c.origin_handle);
        // Every lane must have joined back: its last node is an ancestor of the origin's last.
        const auto &nodes = c.data->nodes;
        std::vector<char> ancestor(nodes.size(), 0);
        std::vector<int32_t> todo;
        if (c.tails[0] >= 0) todo.push_back(c.tails[0]);
        while (!todo.empty()) {
            const int32_t n = todo.back();
            todo.pop_back();
            if (n < 0 || ancestor[n]) continue;
            ancestor[n] = 1;
            todo.push_back(c.prev[n]);
            if (nodes[n].kind == OpKind::Wait) todo.push_back(nodes[n].dep);
        }
        for (size_t l = 1; l < c.lanes.size(); ++l) {
            const int32_t t = c.tails[l];
            if (t < 0 || ancestor[t]) continue;
            if (c.lane_handles[l])
                return fail(QD_ERROR_INVALID_OPERATION,
                            "stream 0x%016llx joined the capture and has not joined back to its "
                            "origin 0x%016llx (qd_stream_join it, or record an event on it and "
                            "wait on it from the origin)",
                            (unsigned long long)c.lane_handles[l],
                            (unsigned long long)c.origin_handle);
            return fail(QD_ERROR_INVALID_OPERATION,
                        "a stream joined the capture (its lane %zu) and has not joined back to "
                        "its origin 0x%016llx",
                        l, (unsigned long long)c.origin_handle);
        }
        // The driver's end: on failure the capture is over all the same (the driver ended it),
        // so it is cleaned up below like a successful one and nothing is returned.
        if (c.native) st = c.native->end(native);
        if (st == QD_SUCCESS) *out = c.data;
        held.swap(c.held);
        end_locked(c);
        auto pos = std::find_if(captures_.begin(), captures_.end(),
                                [&](const std::unique_ptr<Capture> &p) { return p.get() == &c; });
        done = std::move(*pos);
        captures_.erase(pos);
    }
    if (!held.empty()) ctx_.stream_pool().release_internal(held);
    for (auto &e : done->proxies) ctx_.event_pool().put(std::move(e));
    return st;
}

bool CaptureObserver::capturing(const Stream &stream) const {
    if (open_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return lanes_.count(&stream) != 0;
}

bool CaptureObserver::recorded_in_capture(const backend::Event &event) const {
    if (open_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return records_.count(&event) != 0;
}

bool CaptureObserver::keep_lease(const std::shared_ptr<Stream> &stream) {
    if (open_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(stream.get());
    if (it == lanes_.end()) return false;
    it->second.capture->held.push_back(stream);
    it->second.capture->lane_handles[it->second.lane] = 0;  // the handle is stale now
    return true;
}

void CaptureObserver::reuse_leases(const Stream &parent, uint32_t want,
                                   std::vector<std::shared_ptr<Stream>> *out) {
    if (open_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&parent);
    if (it == lanes_.end()) return;
    auto &held = it->second.capture->held;
    while (want > 0 && !held.empty()) {
        out->push_back(std::move(held.back()));
        held.pop_back();
        --want;
    }
}

void CaptureObserver::note_handle(const Stream &stream, uint64_t handle) {
    if (open_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it != lanes_.end()) it->second.capture->lane_handles[it->second.lane] = handle;
}

qd_status CaptureObserver::check_join(const Stream &parent, uint64_t parent_handle,
                                      Stream *const *children, const uint64_t *handles,
                                      uint32_t n) const {
    if (open_.load(std::memory_order_acquire) == 0) return QD_SUCCESS;
    std::lock_guard<std::mutex> lock(mutex_);
    auto capture_of = [&](const Stream &s) -> const Capture * {
        auto it = lanes_.find(&s);
        return it == lanes_.end() ? nullptr : it->second.capture;
    };
    const Capture *into = capture_of(parent);  // the parent joins a child's capture by waiting
    for (uint32_t i = 0; i < n; ++i) {
        const Capture *from = capture_of(*children[i]);
        if (!into) {
            into = from;
            continue;
        }
        if (from == into) continue;
        if (!from)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "children[%u] (0x%016llx) is not part of the capture that stream "
                        "0x%016llx is in; a capturing stream can only wait on work of its own "
                        "capture",
                        i, (unsigned long long)handles[i], (unsigned long long)parent_handle);
        return fail(QD_ERROR_INVALID_OPERATION,
                    "children[%u] (0x%016llx) is in another capture (of stream 0x%016llx) than "
                    "stream 0x%016llx",
                    i, (unsigned long long)handles[i],
                    (unsigned long long)from->origin_handle, (unsigned long long)parent_handle);
    }
    return QD_SUCCESS;
}

void CaptureObserver::context_drained(Context &) {
    std::vector<std::unique_ptr<Capture>> abandoned;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        lanes_.clear();
        records_.clear();
        abandoned.swap(captures_);
        open_.store(0, std::memory_order_release);
    }
    // Driver captures end before their streams can go.
    for (auto &c : abandoned) c->native.reset();
    // The pool is cleared already: dropping the held leases only drops references.
}

// ---------------------------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------------------------

qd_status Graph::launch(Stream &stream) {
    const std::shared_ptr<const GraphData> data = this->data();
    const auto &nodes = data->nodes;
    if (nodes.empty()) return QD_SUCCESS;
    Context &c = *stream.ctx;
    if (std::shared_ptr<backend::Graph> native = this->native()) {
        ObserverSet *set = c.observers();
        if (set && set->size() == 1) return submit_graph_launch(stream, *native);
    }
    std::vector<std::shared_ptr<Stream>> leases;
    if (data->lanes > 1) {
        qd_status st = c.stream_pool().acquire_internal(data->lanes - 1, &leases);
        // No free stream: every lane runs on `stream`, in the captured (topological) order.
        if (st != QD_SUCCESS && st != QD_ERROR_POOL_EXHAUSTED) return st;
    }
    std::vector<Stream *> on(data->lanes);
    on[0] = &stream;
    for (uint32_t l = 1; l < data->lanes; ++l)
        on[l] = leases.empty() ? &stream : leases[(l - 1) % leases.size()].get();
    // A record needs an event only when a wait on another stream depends on it.
    std::vector<char> needed(nodes.size(), 0);
    for (const GraphNode &n : nodes)
        if (n.kind == OpKind::Wait && on[n.lane] != on[nodes[n.dep].lane]) needed[n.dep] = 1;
    // Every event first, then one batch of every node, all or nothing (core/submit.h).
    std::vector<std::shared_ptr<backend::Event>> events(nodes.size());
    EventPool &pool = c.event_pool();
    qd_status st = QD_SUCCESS;
    for (size_t i = 0; st == QD_SUCCESS && i < nodes.size(); ++i)
        if (needed[i]) st = pool.get(&events[i]);
    OpBatch ops(nodes.size());
    for (size_t i = 0; st == QD_SUCCESS && i < nodes.size(); ++i) {
        const GraphNode &n = nodes[i];
        Stream &s = *on[n.lane];
        switch (n.kind) {
            case OpKind::Launch: {
                Op &op = ops.add(OpKind::Launch, s, OpOrigin::GraphLaunch);
                op.kernel = n.kernel.get();
                op.dims = &n.dims;
                op.args = n.args.data();
                op.num_args = uint32_t(n.args.size());
                break;
            }
            case OpKind::HostFn: {
                Op &op = ops.add(OpKind::HostFn, s, OpOrigin::Api);
                op.fn = n.fn;
                op.user_data = n.user_data;
                break;
            }
            case OpKind::Memcpy: {
                Op &op = ops.add(OpKind::Memcpy, s, OpOrigin::Api);
                op.dst = n.dst;
                op.src = n.src;
                op.bytes = n.bytes;
                break;
            }
            case OpKind::Memset: {
                Op &op = ops.add(OpKind::Memset, s, OpOrigin::Api);
                op.dst = n.dst;
                op.value = n.value;
                op.bytes = n.bytes;
                break;
            }
            case OpKind::Record:
                if (needed[i]) ops.record(s, *events[i], OpOrigin::GraphLaunch);
                break;
            case OpKind::Wait:
                if (on[n.lane] == on[nodes[n.dep].lane]) break;  // in order on one stream
                ops.wait(s, *events[n.dep], OpOrigin::GraphLaunch);
                break;
            case OpKind::MemAlloc:
            case OpKind::MemFree: st = fail(QD_ERROR_INTERNAL, "a graph holds no allocation"); break;
        }
    }
    size_t queued = 0;
    if (st == QD_SUCCESS) st = ops.submit(c, SIZE_MAX, &queued);
    if (st != QD_SUCCESS && queued > 0) {
        // A part failed in the backend after others were queued: the launch stream must not
        // run ahead of what was queued, so every branch joins it.
        const std::string reason = last_error_message();
        for (auto &l : leases) {
            Stream *target = &stream;
            link_streams(c, *l, &target, 1, OpOrigin::GraphLaunch);
        }
        fail(st, "%s", reason.c_str());
    }
    for (auto &e : events)
        if (e) pool.put(std::move(e));
    if (!leases.empty()) c.stream_pool().release_internal(leases);
    return st;
}

qd_status Graph::update_from(const Graph &from) {
    const std::shared_ptr<const GraphData> mine = data(), theirs = from.data();
    if (mine->lanes != theirs->lanes)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the graphs differ in shape: %u streams here, %u in the other graph",
                    mine->lanes, theirs->lanes);
    if (mine->nodes.size() != theirs->nodes.size())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the graphs differ in shape: %zu operations here, %zu in the other graph",
                    mine->nodes.size(), theirs->nodes.size());
    for (size_t i = 0; i < mine->nodes.size(); ++i) {
        const GraphNode &a = mine->nodes[i], &b = theirs->nodes[i];
        if (a.kind != b.kind || a.lane != b.lane || a.dep != b.dep)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the graphs differ in shape at operation %zu (its kind, stream or "
                        "dependency)",
                        i);
    }
    const std::shared_ptr<backend::Graph> native = this->native(), from_native = from.native();
    if (native && from_native) {
        qd_status st = native->update(*from_native);
        if (st != QD_SUCCESS) return st;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    data_ = theirs;
    // Values from a recording-only graph: later replays re-issue them.
    if (!from_native) native_.reset();
    return QD_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Finding the observer, and the checks of blocking calls
// ---------------------------------------------------------------------------------------------

CaptureObserver *capture_observer(const Context &ctx) {
    if (!ctx.observer()) return nullptr;
    ObserverSet *set = ctx.observers();
    return set ? set->find<CaptureObserver>() : nullptr;
}

qd_status ensure_capture_observer(Context &ctx, CaptureObserver **out) {
    static std::mutex attach_mutex;
    std::lock_guard<std::mutex> lock(attach_mutex);
    if ((*out = capture_observer(ctx))) return QD_SUCCESS;
    qd_status st = ctx.attach_observer(std::make_unique<CaptureObserver>(ctx));
    if (st != QD_SUCCESS) return st;
    *out = capture_observer(ctx);
    return *out ? QD_SUCCESS : fail(QD_ERROR_INTERNAL, "the capture observer was not attached");
}

qd_status refuse_if_capturing(const Stream &stream, uint64_t handle, const char *what) {
    CaptureObserver *obs = capture_observer(*stream.ctx);
    if (obs && obs->capturing(stream))
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s: stream 0x%016llx is capturing (qd_stream_begin_capture); end the "
                    "capture first",
                    what, (unsigned long long)handle);
    return QD_SUCCESS;
}

qd_status refuse_if_captured_event(const Event &event, uint64_t handle, const char *what) {
    CaptureObserver *obs = capture_observer(*event.ctx);
    if (obs && obs->recorded_in_capture(*event.impl))
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s: event 0x%016llx was recorded inside a capture that is still open; its "
                    "record is part of the graph, not of the stream",
                    what, (unsigned long long)handle);
    return QD_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// The C API's calls
// ---------------------------------------------------------------------------------------------

qd_status begin_capture(uint64_t stream) {
    Stream *s = nullptr;
    qd_status st = resolve_usable(stream, &s);
    if (st != QD_SUCCESS) return st;
    CaptureObserver *obs = nullptr;
    st = ensure_capture_observer(*s->ctx, &obs);
    if (st != QD_SUCCESS) return st;
    return obs->begin(*s, stream);
}

qd_status end_capture(uint64_t stream, uint64_t *graph) {
    Stream *s = nullptr;
    qd_status st = resolve_usable(stream, &s);
    if (st != QD_SUCCESS) return st;
    CaptureObserver *obs = capture_observer(*s->ctx);
    if (!obs)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "stream 0x%016llx is not capturing (qd_stream_begin_capture starts a "
                    "capture)",
                    (unsigned long long)stream);
    std::shared_ptr<const GraphData> data;
    std::shared_ptr<backend::Graph> native;
    st = obs->end(*s, &data, &native);
    if (st != QD_SUCCESS) {
        // A racing qd_context_destroy drops every capture when it drains (context_drained).
        if (s->ctx->check_not_destroyed() != QD_SUCCESS) return QD_ERROR_INVALID_HANDLE;
        const std::string reason = last_error_message();
        return fail(st, "qd_stream_end_capture of stream 0x%016llx: %s",
                    (unsigned long long)stream, reason.c_str());
    }
    Context &c = *s->ctx;
    auto g = std::make_shared<Graph>(c.shared_from_this(), std::move(data), std::move(native));
    return register_graph(c, std::move(g), graph);  // core/lifecycle.h
}

qd_status graph_launch(uint64_t graph, uint64_t stream) {
    Graph *g = nullptr;
    Stream *s = nullptr;
    qd_status st = resolve(graph, &g);
    if (st == QD_SUCCESS) st = resolve(stream, &s);
    if (st != QD_SUCCESS) return st;
    if (g->ctx != s->ctx)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "graph 0x%016llx belongs to another context than stream 0x%016llx",
                    (unsigned long long)graph, (unsigned long long)stream);
    st = s->ctx->usable();
    if (st == QD_SUCCESS) st = refuse_if_capturing(*s, stream, "qd_graph_launch");
    if (st != QD_SUCCESS) return st;
    return g->launch(*s);
}

qd_status graph_update(uint64_t graph, uint64_t from) {
    Graph *g = nullptr;
    Graph *f = nullptr;
    qd_status st = resolve(graph, &g);
    if (st == QD_SUCCESS) st = resolve(from, &f);
    if (st != QD_SUCCESS) return st;
    if (g->ctx != f->ctx)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "graphs 0x%016llx and 0x%016llx belong to different contexts",
                    (unsigned long long)graph, (unsigned long long)from);
    st = g->ctx->usable();
    if (st != QD_SUCCESS) return st;
    if (g == f) return QD_SUCCESS;
    return g->update_from(*f);
}

qd_status graph_destroy(uint64_t graph) { return destroy_graph(graph); }  // core/lifecycle.h

}  // namespace qd::core
