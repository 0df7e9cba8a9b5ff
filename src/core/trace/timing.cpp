// The trace's shared boundaries and its pool of timing events (timing.h).
#include "core/trace/timing.h"

#include <utility>

namespace qd::core {

qd_status TimingEventPool::fill(backend::Context &ctx, size_t n) {
    if (n > kMaxKept) n = kMaxKept;
    while (free_.size() < n) {
        EventPtr e;
        const qd_status st = ctx.create_event(true, &e);
        if (st != QD_SUCCESS) return st;
        free_.push_back(std::move(e));
    }
    return QD_SUCCESS;
}

TraceTiming::Lane &TraceTiming::lane(uint32_t id) {
    if (lanes_.size() < id) lanes_.resize(id);
    return lanes_[id - 1];
}

size_t TraceTiming::add(TimingEventPool &pool, Pending *p) {
    p->index = boundaries_.size();
    boundaries_.emplace_back();
    p->event = pool.take();
    return p->index;
}

size_t TraceTiming::begin(uint32_t id, bool shareable, uint64_t unobserved, TimingEventPool &pool,
                          Pending *p, EventPtr *shared) {
    Lane &l = lane(id);
    size_t index;
    if (shareable && l.last_end != kNone && l.in_flight == 0 && l.unobserved == unobserved) {
        index = l.last_end;
        *shared = boundaries_[index].event;
    } else {
        index = add(pool, p);
        p->lane = id;
    }
    l.last_end = kNone;
    ++l.epoch;
    ++l.in_flight;
    return index;
}

size_t TraceTiming::fresh(uint32_t id, TimingEventPool &pool, Pending *p) {
    const size_t index = add(pool, p);
    p->lane = id;
    return index;
}

size_t TraceTiming::end(uint32_t id, uint64_t unobserved, TimingEventPool &pool, Pending *p) {
    Lane &l = lane(id);
    if (l.in_flight > 0) --l.in_flight;
    const size_t index = add(pool, p);
    p->lane = id;
    p->epoch = l.epoch;
    p->unobserved = unobserved;
    p->end = true;
    return index;
}

void TraceTiming::invalidate(uint32_t id) {
    Lane &l = lane(id);
    l.last_end = kNone;
    ++l.epoch;
}

bool TraceTiming::record(backend::Context &ctx, backend::Stream &stream, Pending &p) {
    if (!p.event && ctx.create_event(true, &p.event) != QD_SUCCESS) return false;
    return stream.record(*p.event) == QD_SUCCESS;
}

void TraceTiming::recorded(Pending &&p, bool ok) {
    Boundary &b = boundaries_[p.index];
    b.event = std::move(p.event);
    b.done = true;
    b.recorded = ok;
    if (!p.end) return;
    Lane &l = lane(p.lane);
    if (ok && l.in_flight == 0 && l.epoch == p.epoch) {
        l.last_end = p.index;
        l.unobserved = p.unobserved;
    }
}

bool TraceTiming::take_scan(Scan *scan) {
    if (backoff_ > 0) {
        --backoff_;
        return false;
    }
    scan->first = scan_;
    scan->n = 0;
    scan->read = 0;
    for (size_t i = scan_; i < boundaries_.size() && scan->n < kScan; ++i) {
        const Boundary &b = boundaries_[i];
        if (!b.done) break;  // still being recorded: the scan goes no further
        scan->events[scan->n++] = b.recorded ? b.event : nullptr;
    }
    return scan->n > 0;
}

void TraceTiming::read_scan(backend::Context &ctx, backend::Event &reference, Scan &scan) {
    for (size_t i = 0; i < scan.n; ++i) {
        scan.timed[i] = false;
        if (scan.events[i]) {
            const qd_status st = ctx.elapsed_ms(reference, *scan.events[i], &scan.ms[i]);
            if (st == QD_NOT_READY) break;  // not done: neither is what follows on its stream
            scan.timed[i] = st == QD_SUCCESS;
        }
        scan.read = i + 1;
    }
}

void TraceTiming::scanned(Scan &&scan, bool recycle, TimingEventPool &pool) {
    if (scan.first != scan_) return;  // another scan read them meanwhile
    for (size_t i = 0; i < scan.read; ++i) {
        Boundary &b = boundaries_[scan.first + i];
        b.read = true;
        b.timed = b.recorded && scan.timed[i];
        b.ms = scan.ms[i];
        if (recycle) pool.give(std::move(b.event));
    }
    scan_ = scan.first + scan.read;
    if (scan.read < scan.n) backoff_ = kScan;  // the oldest is not done: create for a while
}

void TraceTiming::give_back(TimingEventPool &pool) && {
    for (Boundary &b : boundaries_) pool.give(std::move(b.event));
    boundaries_.clear();
    lanes_.clear();
    scan_ = 0;
    backoff_ = 0;
}

}  // namespace qd::core
