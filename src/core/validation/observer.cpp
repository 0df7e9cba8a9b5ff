// The validation observer's entry points (observer.h): attaching, the chokepoint's before()
// and after(), the host events, a context drained, and checking one operation (check_op).
#include "core/validation/observer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "core/context.h"
#include "core/observers.h"
#include "core/validation/state.h"

namespace qd::core {

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

qd_status ValidationObserver::attach_if_requested(Context &ctx, uint32_t flags) {
    if (const char *v = ::secure_getenv("QD_VALIDATE"); v && *v) {
        if (std::strcmp(v, "1") == 0)
            flags |= QD_CONTEXT_VALIDATE;
        else if (std::strcmp(v, "error") == 0)
            flags |= QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL;
        else if (std::strcmp(v, "0") != 0)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "QD_VALIDATE='%s' is not one of \"0\", \"1\" or \"error\"", v);
    }
    if (!(flags & QD_CONTEXT_VALIDATE)) return QD_SUCCESS;
    return ctx.attach_observer(
        std::make_unique<ValidationObserver>(ctx, (flags & QD_CONTEXT_VALIDATE_FAIL) != 0));
}

// Its row of core/observer_table.h.
qd_status attach_validation_observer(Context &ctx, const qd_context_desc &desc) {
    return ValidationObserver::attach_if_requested(ctx, desc.flags);
}

ValidationObserver::ValidationObserver(Context &ctx, bool fail_calls)
    : ctx_(ctx),
      fail_calls_(fail_calls),
      domain_(Domain::of(ctx.kind())),
      handler_(&default_handler) {}

ValidationObserver::~ValidationObserver() {
    // A context that was drained has left already; one whose creation failed leaves here (it
    // queued nothing that still runs, and its held blocks, if any, went with its allocations).
    std::lock_guard<std::mutex> lock(domain_->mutex);
    leave(nullptr);
}

ValidationObserver *validation_observer(const Context &ctx) {
    if (!ctx.observer()) return nullptr;
    ObserverSet *set = ctx.observers();
    return set ? set->find<ValidationObserver>() : nullptr;
}

qd_status ValidationObserver::before(const Op &op, bool *consumed) {
    if (op.batch) return QD_SUCCESS;  // checked and committed whole by check_batch()
    switch (op.kind) {
    case OpKind::HostFn: return QD_SUCCESS;  // no tracked access
    case OpKind::MemAlloc:
        // The caller's blocks: allocated(); a graph's: each replay makes it live again.
        if (!op.graph_block) return QD_SUCCESS;
        return check_op(op, consumed);
    default: return check_op(op, consumed);
    }
}

void ValidationObserver::after(const Op &, qd_status) {}

void ValidationObserver::context_drained(Context &ctx) {
    // Every stream is drained: the held blocks are released at once, and the streams they
    // kept (each holds its context) are let go.
    std::deque<Held> held;
    {
        std::lock_guard<std::mutex> lock(domain_->mutex);
        drained_ = true;
        leave(&held);
    }
    for (Held &h : held) {
        if (h.host)
            ctx.impl().host_free(reinterpret_cast<void *>(h.address));
        else
            ctx.impl().mem_free_now(h.address);
    }
}

void ValidationObserver::host_event(const HostEvent &event) {
    switch (event.kind) {
    case HostEvent::Kind::SynchronizedContext: host_synchronized_all(); break;
    case HostEvent::Kind::SynchronizedStream: host_synchronized(*event.stream); break;
    case HostEvent::Kind::SynchronizedEvent: host_synchronized(*event.event); break;
    case HostEvent::Kind::Allocated: allocated(event.stream, event.address, event.bytes); break;
    case HostEvent::Kind::PoolExhausted: break;
    case HostEvent::Kind::TimelineSignalled: host_signalled(*event.timeline, event.value); break;
    case HostEvent::Kind::TimelineReached: host_reached(*event.timeline, event.value); break;
    }
}

void ValidationObserver::allocated(const Stream *stream, uint64_t address, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(domain_->mutex);
    if (drained_) return;
    add_block(address, bytes, stream == nullptr);
    if (!stream) return;
    // The allocation is a write of the whole block on its stream: other streams must be
    // ordered after it (qd.h, qd_mem_alloc_async).
    const uint32_t a = actor_of(*stream);
    const uint64_t epoch = tick(a);
    Op op;
    op.kind = OpKind::MemAlloc;
    op.stream = const_cast<Stream *>(stream);  // named by its handle, as every operation is
    auto info = describe(op, "alloc", a);
    Block *b = block_at(address);
    if (b) commit(*b, 0, b->bytes, true, a, epoch, info, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Checking one operation
// ---------------------------------------------------------------------------------------------

qd_status ValidationObserver::check_op(const Op &op, bool *consumed) {
    // A captured operation is recorded, not run (core/capture/capture.h): it orders and
    // touches nothing until a replay submits it again.
    if (op.captured) return QD_SUCCESS;
    std::vector<Report> reports;
    std::vector<Held> release_now;
    {
        Domain &d = *domain_;
        std::lock_guard<std::mutex> lock(d.mutex);
        if (drained_) return QD_SUCCESS;
        check_locked(op, consumed, reports, release_now);
    }
    const std::string first = reports.empty() ? "" : reports.front().message;
    deliver(reports);
    release(release_now);
    if (!first.empty() && fail_calls_) return fail(QD_ERROR_HAZARD, "%s", first.c_str());
    return QD_SUCCESS;
}

qd_status ValidationObserver::check_locked(const Op &op, bool *consumed,
                                           std::vector<Report> &reports,
                                           std::vector<Held> &release_now) {
    Domain &d = *domain_;
    {
        const uint32_t a = actor_of(*op.stream);
        save_actor(a);
        Actor &actor = d.actors_[a];
        // A record of `event` (with its core object for a user event) at the stream's clock.
        const auto record = [&](backend::Event *event, Event *user_event) {
            refresh(a);
            save_event(event);
            Domain::Recorded &r = d.events_[event];
            r.clock = actor.clock;
            r.user = user_event != nullptr;
            r.by = this;
            if (user_event) r.owner = user_event->impl;
            if (d.events_.size() > d.events_pruned_at_) {
                // Forget the clocks of destroyed user events (pooled events live as long as
                // their context and are few; they leave with it).
                for (auto it = d.events_.begin(); it != d.events_.end();) {
                    if (it->second.user && it->second.owner.expired() && it->first != event)
                        it = d.events_.erase(it);
                    else
                        ++it;
                }
                d.events_pruned_at_ = std::max<size_t>(64, d.events_.size() * 2);
            }
        };
        switch (op.kind) {
        case OpKind::Record: record(op.event, op.user_event); return QD_SUCCESS;
        case OpKind::Launch:
            // A COMPLETION_EVENT (qd.h, "Launch attributes") completes once the launch has
            // started: a record just before the launch, so what waits on it is ordered after
            // the launch's predecessors and not after the launch's own accesses. A PDL launch
            // needs nothing: it is ordered after its predecessor as any launch is.
            if (op.completion_event) record(op.completion_event->impl.get(), op.completion_event);
            break;
        case OpKind::Wait: {
            refresh(a);
            auto it = d.events_.find(op.event);
            if (it != d.events_.end())
                merge(&actor.clock, it->second.clock);
            else if (op.user_event && op.user_event->ctx.get() != &ctx_ &&
                     !validation_observer(*op.user_event->ctx))
                order_after_everything(a);  // outside the domain (qd.h, "Validation")
            return QD_SUCCESS;
        }
        case OpKind::Signal:
            refresh(a);
            signalled(*op.timeline, op.timeline_value, actor.clock);
            return QD_SUCCESS;
        case OpKind::WaitValue:
            refresh(a);
            wait_value(a, *op.timeline, op.timeline_value);
            return QD_SUCCESS;
        case OpKind::MemAlloc: {
            // A replay's alloc of its graph's block (core/capture/graph_blocks.h): the block
            // lives again from here to the replay's free, as a write of the whole block on
            // this stream (replays of one graph are ordered after each other).
            auto it = d.blocks_.find(op.dst);
            if (it == d.blocks_.end() || it->second->bytes != op.bytes || it->second->host)
                add_block(op.dst, op.bytes, false);
            Block *b = block_at(op.dst);
            if (!b) return QD_SUCCESS;
            save_block(*b);
            b->freed = false;
            b->free_op.reset();
            b->accesses.clear();
            const uint64_t epoch = tick(a);
            commit(*b, 0, b->bytes, true, a, epoch, describe(op, "alloc", a), nullptr);
            return QD_SUCCESS;
        }
        default: break;
        }

        // The accesses of this operation: one per block it touches.
        struct Touch {
            Block *block;
            uint64_t lo, hi;
            bool read, write;
            uint64_t arg_offset;  // the lowest offset an argument names (kernels)
            int partitioned;      // 1: only through QD_PARAM_PARTITIONED parameters
        };
        std::vector<Touch> touches;
        // A kernel's arguments into one block make one access (to_end: the extent is unknown,
        // so from the lowest address named to the block's end); a copy's two sides stay two.
        auto touch = [&](uint64_t address, uint64_t bytes, bool write, bool to_end,
                         bool partitioned = false) {
            Block *b = block_at(address);
            if (!b) return;
            const uint64_t lo = address - b->start;
            const uint64_t hi = to_end ? b->bytes : std::min(b->bytes, lo + bytes);
            for (Touch &t : touches)
                if (t.block == b && to_end) {
                    t.lo = std::min(t.lo, lo);
                    t.hi = std::max(t.hi, hi);
                    (write ? t.write : t.read) = true;
                    t.partitioned = t.partitioned && partitioned;
                    return;
                }
            touches.push_back(Touch{b, lo, hi, !write, write, lo, partitioned ? 1 : 0});
        };
        const char *what = "";
        std::string kernel_what;
        switch (op.kind) {
        case OpKind::Launch: {
            kernel_what = std::string("kernel '") + op.kernel->impl->name() + "'";
            what = kernel_what.c_str();
            for (uint32_t i = 0; i < op.num_args; ++i) {
                const uint8_t mode =
                    i < QD_MAX_ARGS ? op.kernel->param_access[i].load(std::memory_order_relaxed)
                                    : uint8_t(QD_PARAM_READ_WRITE);
                if (mode == QD_PARAM_IGNORE) continue;
                const bool parts = mode == QD_PARAM_PARTITIONED;
                const auto *data = static_cast<const uint8_t *>(op.args[i].data);
                for (uint64_t off = 0; data && off + 8 <= op.args[i].size; off += 8) {
                    uint64_t value;
                    std::memcpy(&value, data + off, 8);
                    if (mode != QD_PARAM_WRITE) touch(value, 0, false, true, parts);
                    if (mode != QD_PARAM_READ) touch(value, 0, true, true, parts);
                }
            }
            break;
        }
        case OpKind::Memcpy:
            what = "memcpy";
            touch(op.src, op.bytes, false, false);
            touch(op.dst, op.bytes, true, false);
            break;
        case OpKind::Memset:
            what = "memset";
            touch(op.dst, op.bytes, true, false);
            break;
        case OpKind::MemFree: {
            what = "free";
            auto it = d.blocks_.find(op.dst);
            if (it != d.blocks_.end() && !it->second->freed && !it->second->host)
                touches.push_back(Touch{it->second.get(), 0, it->second->bytes, false, true, 0, 0});
            break;
        }
        default: break;
        }
        if (touches.empty() && op.kind != OpKind::MemFree) return QD_SUCCESS;

        // Ordered after everything the host knows, then one tick of the stream's own clock.
        const uint64_t epoch = tick(a);
        const Clock &clock = actor.clock;
        auto info = describe(op, what, a);
        const bool is_free = op.kind == OpKind::MemFree;
        const void *kernel_key = op.kind == OpKind::Launch ? op.kernel->impl.get() : nullptr;
        for (const Touch &t : touches) {
            if (t.block->freed) {
                Report r;
                r.kind = QD_HAZARD_USE_AFTER_FREE;
                r.stream = info->stream;
                r.allocation = t.block->start;
                r.bytes = t.block->bytes;
                r.offset = t.lo;
                const char *mode = t.write ? (t.read ? " (read-write)" : " (write)") : " (read)";
                r.operation = info->what + mode;
                r.other_operation = t.block->free_op ? t.block->free_op->what : "free";
                r.other_stream = t.block->free_op ? t.block->free_op->stream : 0;
                char buf[160];
                std::snprintf(buf, sizeof buf,
                              "0x%" PRIx64 " (%" PRIu64 " bytes) at offset %" PRIu64, r.allocation,
                              r.bytes, r.offset);
                r.message = "qd: hazard: use after free: " + r.operation + " on " + info->where +
                            " uses allocation " + buf + ", freed by " + r.other_operation + " on " +
                            (t.block->free_op ? t.block->free_op->where : "a stream");
                reports.push_back(std::move(r));
                continue;
            }
            // A write (or read-write) access conflicts with every unordered access, a read
            // with unordered writes.
            check(*t.block, t.lo, t.hi, t.write, a, clock, info,
                  t.partitioned ? kernel_key : nullptr,
                  is_free ? QD_HAZARD_FREE_IN_USE : QD_HAZARD_RACE,
                  is_free   ? ""
                  : t.write ? (t.read ? " (read-write)" : " (write)")
                            : " (read)",
                  &reports);
        }
        if (!reports.empty() && fail_calls_) {
            // Refused: nothing of this operation happened.
        } else {
            for (const Touch &t : touches) {
                if (t.block->freed) continue;
                save_block(*t.block);
                if (is_free) {
                    t.block->freed = true;
                    t.block->free_op = info;
                    t.block->accesses.clear();
                    continue;
                }
                commit(*t.block, t.lo, t.hi, t.write, a, epoch, info,
                       t.partitioned ? kernel_key : nullptr, t.read && t.write);
            }
            // A graph's free (op.graph_block) releases nothing: the graph keeps its block.
            if (is_free && !touches.empty() && !op.graph_block) {
                // Held back: the release is queued on this stream later (quarantine()).
                Held h;
                h.address = op.dst;
                h.bytes = touches.front().block->bytes;
                h.stream = op.stream->shared_from_this();
                quarantine(std::move(h), &release_now);
                *consumed = true;
            }
        }
    }
    return QD_SUCCESS;
}

}  // namespace qd::core
