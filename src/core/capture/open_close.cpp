// Beginning, ending and abandoning the captures of a context (core/capture/capture.h), and
// when a capture is native.
#include <algorithm>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"
#include "core/capture/graph_blocks.h"
#include "core/capture/open_capture.h"
#include "core/observers.h"

namespace qd::core {

bool native_graphs(const Context &ctx) {
    const OpObserver *observer = ctx.observer();
    return !observer || !observer->needs_replay();
}

qd_status CaptureRouter::begin(Stream &stream, uint64_t handle) {
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
    // Natively only while no attached observer needs the operations replayed: the trace and
    // validation must see each one (they would also queue work of their own on the streams).
    if (native_graphs(ctx_)) {
        qd_status st = stream.impl->begin_capture(&c->native);
        if (st != QD_SUCCESS && st != QD_ERROR_NOT_SUPPORTED) return st;
    }
    captures_.reserve(captures_.size() + 1);
    if (open_.load(std::memory_order_relaxed) == 0) ctx_.route_captures(true);
    add_lane(*c, stream.shared_from_this(), handle);
    captures_.push_back(std::move(c));
    open_.fetch_add(1, std::memory_order_acq_rel);
    return QD_SUCCESS;
}

void CaptureRouter::end_locked(Capture &c) {
    for (auto &s : c.lanes) s->capture_lane.store(false, std::memory_order_release);
    for (auto it = lanes_.begin(); it != lanes_.end();)
        it = it->second.capture == &c ? lanes_.erase(it) : std::next(it);
    for (auto it = records_.begin(); it != records_.end();) {
        auto next = std::next(it);
        if (it->second.capture == &c) drop_record(it);
        it = next;
    }
    if (open_.fetch_sub(1, std::memory_order_acq_rel) == 1) ctx_.route_captures(false);
}

qd_status CaptureRouter::end(Stream &stream, std::shared_ptr<const GraphData> *out,
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
        if (c.frames.size() > 1) {
            const CaptureFrame &open = *c.frames.back();
            const uint64_t owner = c.lane_handles[open.owner];
            return fail(QD_ERROR_INVALID_OPERATION,
                        "a conditional is still open in the capture (opened on stream 0x%016llx); "
                        "close it with qd_stream_end_conditional first",
                        (unsigned long long)owner);
        }
        // Every lane must have joined back: its last node is an ancestor of the origin's last.
        CaptureFrame &root = c.root();
        for (size_t l = 1; l < c.lanes.size(); ++l) {
            if (c.lane_frame[l] != &root || joined_back(root, 0, uint32_t(l))) continue;
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
        // Every block allocated inside is freed inside (core/capture/graph_blocks.h); if not,
        // the capture stays open, as for a lane not joined back. Only the root frame allocates
        // (a body refuses qd_mem_alloc_async: CaptureRouter::record_block).
        if (root.data->blocks) {
            st = root.data->blocks->check_all_freed();
            if (st != QD_SUCCESS) return st;
        }
        // The graph's streams: the lanes its own nodes run on (a body's lanes are not).
        uint32_t lanes = 1;
        for (const GraphNode &n : root.data->nodes) lanes = std::max(lanes, n.lane + 1);
        root.data->lanes = lanes;
        // The driver's end: on failure the capture is over all the same (the driver ended it),
        // so it is cleaned up below like a successful one and nothing is returned.
        if (c.native) st = c.native->end(native);
        if (st == QD_SUCCESS) *out = root.data;
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

void CaptureRouter::context_drained() {
    std::vector<std::unique_ptr<Capture>> abandoned;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto &c : captures_)
            for (auto &s : c->lanes) s->capture_lane.store(false, std::memory_order_release);
        for (auto &r : records_)
            if (r.second.user)
                r.second.user->capture_record.store(false, std::memory_order_release);
        lanes_.clear();
        records_.clear();
        abandoned.swap(captures_);
        open_.store(0, std::memory_order_release);
    }
    // Driver captures end before their streams can go.
    for (auto &c : abandoned) c->native.reset();
    // Conditional tasks of replays that never ran (skipped after a device fault).
    std::unordered_map<ConditionalRun *, std::unique_ptr<ConditionalRun>> runs;
    {
        std::lock_guard<std::mutex> lock(runs_mutex_);
        runs.swap(runs_);
    }
    // The pool is cleared already: dropping the held leases only drops references.
}

}  // namespace qd::core
