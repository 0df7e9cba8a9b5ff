#include "core/validation.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "core/capture.h"
#include "core/context.h"
#include "core/observers.h"
#include "common/fork_generation.h"
#include "core/validation_shadow.h"

namespace qd::core {

namespace {

// Freed blocks whose release is held back (see the header): at most this many, and this many
// bytes; a block larger than the byte bound is released at once (and forgotten).
constexpr size_t kQuarantineBlocks = 64;
constexpr uint64_t kQuarantineBytes = uint64_t(256) << 20;
// Accesses one block keeps; past it the oldest reads go first, then the oldest of any kind
// (a hazard with a forgotten access is missed, never invented).
constexpr size_t kMaxAccesses = 256;

uint64_t at(const std::vector<uint64_t> &clock, uint32_t actor) {
    return actor < clock.size() ? clock[actor] : 0;
}

void merge(std::vector<uint64_t> *into, const std::vector<uint64_t> &from) {
    if (into->size() < from.size()) into->resize(from.size(), 0);
    for (size_t i = 0; i < from.size(); ++i) (*into)[i] = std::max((*into)[i], from[i]);
}

const char *kind_label(uint32_t kind) {
    switch (kind) {
    case QD_HAZARD_RACE: return "race";
    case QD_HAZARD_FREE_IN_USE: return "free in use";
    case QD_HAZARD_USE_AFTER_FREE: return "use after free";
    }
    return "hazard";
}

void default_handler(const qd_hazard *hazard, void *) {
    std::fprintf(stderr, "%s\n", hazard->message);
}

}  // namespace

namespace {

// The live domains, by backend. One registry per fork generation: a fork child never takes a
// lock or a domain another thread of the parent held (the older registries stay reachable).
struct DomainRegistry {
    uint64_t generation = 0;
    std::mutex mutex;
    std::map<int, std::weak_ptr<void>> domains;
    DomainRegistry *previous = nullptr;
};

DomainRegistry &domain_registry() {
    static std::atomic<DomainRegistry *> current{nullptr};
    const uint64_t generation = fork_generation();
    DomainRegistry *r = current.load(std::memory_order_acquire);
    while (!r || r->generation != generation) {
        auto *fresh = new DomainRegistry;
        fresh->generation = generation;
        fresh->previous = r;
        if (current.compare_exchange_strong(r, fresh, std::memory_order_acq_rel)) return *fresh;
        delete fresh;
    }
    return *r;
}

}  // namespace

std::shared_ptr<ValidationObserver::Domain> ValidationObserver::Domain::of(qd_backend kind) {
    DomainRegistry &r = domain_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::weak_ptr<void> &slot = r.domains[int(kind)];
    if (auto live = std::static_pointer_cast<Domain>(slot.lock())) return live;
    auto fresh = std::make_shared<Domain>();
    slot = fresh;
    return fresh;
}

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
    return ctx.attach_observer(std::make_unique<ValidationObserver>(
        ctx, (flags & QD_CONTEXT_VALIDATE_FAIL) != 0));
}

// Its row of core/observer_table.h.
qd_status attach_validation_observer(Context &ctx, const qd_context_desc &desc) {
    return ValidationObserver::attach_if_requested(ctx, desc.flags);
}

ValidationObserver::ValidationObserver(Context &ctx, bool fail_calls)
    : ctx_(ctx), fail_calls_(fail_calls), domain_(Domain::of(ctx.kind())),
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

qd_status set_hazard_handler(uint64_t ctx, qd_hazard_fn fn, void *user_data) {
    Context *c = nullptr;
    qd_status st = resolve(ctx, &c);
    if (st != QD_SUCCESS) return st;
    ValidationObserver *v = validation_observer(*c);
    if (!v)
        return fail(QD_ERROR_INVALID_OPERATION,
                    "validation is off for context 0x%016" PRIx64
                    " (create it with QD_CONTEXT_VALIDATE, or set QD_VALIDATE=1)",
                    ctx);
    v->set_handler(fn, user_data);
    return QD_SUCCESS;
}

qd_status set_param_access(uint64_t kernel, uint32_t index, uint32_t access) {
    if (index >= QD_MAX_ARGS)
        return fail(QD_ERROR_INVALID_ARGUMENT, "parameter index %u is not below QD_MAX_ARGS (%u)",
                    index, QD_MAX_ARGS);
    if (access > QD_PARAM_PARTITIONED)
        return fail(QD_ERROR_INVALID_ARGUMENT, "access %u is not a qd_param_access value", access);
    Kernel *k = nullptr;
    qd_status st = resolve(kernel, &k);
    if (st != QD_SUCCESS) return st;
    k->param_access[index].store(uint8_t(access), std::memory_order_relaxed);
    return QD_SUCCESS;
}

qd_status ValidationObserver::before(const Op &op, bool *consumed) {
    if (op.batch) return QD_SUCCESS;  // checked and committed whole by check_batch()
    switch (op.kind) {
    case OpKind::HostFn:
    case OpKind::MemAlloc: return QD_SUCCESS;  // no tracked access (alloc: allocated())
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
    }
}

void ValidationObserver::host_synchronized(const Stream &stream) {
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    if (drained_) return;
    const uint32_t a = actor_of(stream);
    merge(&d.host_, d.actors_[a].clock);
    host_learned();
}

void ValidationObserver::host_synchronized(const backend::Event &event) {
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.events_.find(&event);
    if (it == d.events_.end()) return;
    merge(&d.host_, it->second.clock);
    host_learned();
}

void ValidationObserver::host_synchronized_all() {
    // Every stream of this context (the host is ordered after their work; what they waited
    // for on other contexts comes along through their clocks).
    Domain &d = *domain_;
    std::lock_guard<std::mutex> lock(d.mutex);
    for (size_t i = 1; i < d.actors_.size(); ++i)
        if (d.actors_[i].owner == this) merge(&d.host_, d.actors_[i].clock);
    host_learned();
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

qd_status ValidationObserver::host_freeing(uint64_t address, bool *taken) {
    *taken = false;
    std::vector<Report> reports;
    std::vector<Held> release_now;
    {
        Domain &d = *domain_;
        std::lock_guard<std::mutex> lock(d.mutex);
        if (drained_) return QD_SUCCESS;
        auto it = d.blocks_.find(address);
        if (it == d.blocks_.end() || it->second->freed || !it->second->host ||
            it->second->owner != this)
            return QD_SUCCESS;
        Block &b = *it->second;
        Op op;
        op.kind = OpKind::MemFree;
        auto info = describe(op, "qd_host_free", 0);
        check(b, 0, b.bytes, true, 0, d.host_, info, nullptr, QD_HAZARD_FREE_IN_USE, "",
              &reports);
        if (reports.empty() || !fail_calls_) {
            b.freed = true;
            b.free_op = info;
            b.accesses.clear();
            Held h;
            h.address = address;
            h.bytes = b.bytes;
            h.host = true;
            quarantine(std::move(h), &release_now);
            *taken = true;
        }
    }
    const std::string first = reports.empty() ? "" : reports.front().message;
    deliver(reports);
    release(release_now);
    if (!first.empty() && fail_calls_) return fail(QD_ERROR_HAZARD, "%s", first.c_str());
    return QD_SUCCESS;
}

void ValidationObserver::set_handler(qd_hazard_fn fn, void *user_data) {
    std::lock_guard<std::mutex> lock(domain_->mutex);
    handler_ = fn ? fn : &default_handler;
    handler_data_ = fn ? user_data : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Checking one operation
// ---------------------------------------------------------------------------------------------

qd_status ValidationObserver::check_op(const Op &op, bool *consumed) {
    // A capturing stream's operations are recorded, not run (core/capture.h): they order and
    // touch nothing until a replay submits them again. A wait on a record made inside a
    // capture joins the stream to it.
    if (CaptureObserver *capture = capture_observer(ctx_)) {
        if (capture->capturing(*op.stream)) return QD_SUCCESS;
        if (op.kind == OpKind::Wait && op.event && capture->recorded_in_capture(*op.event))
            return QD_SUCCESS;
    }
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
        switch (op.kind) {
        case OpKind::Record: {
            refresh(a);
            save_event(op.event);
            Domain::Recorded &r = d.events_[op.event];
            r.clock = actor.clock;
            r.user = op.user_event != nullptr;
            r.by = this;
            if (op.user_event) r.owner = op.user_event->impl;
            if (d.events_.size() > d.events_pruned_at_) {
                // Forget the clocks of destroyed user events (pooled events live as long as
                // their context and are few; they leave with it).
                for (auto it = d.events_.begin(); it != d.events_.end();) {
                    if (it->second.user && it->second.owner.expired() && it->first != op.event)
                        it = d.events_.erase(it);
                    else
                        ++it;
                }
                d.events_pruned_at_ = std::max<size_t>(64, d.events_.size() * 2);
            }
            return QD_SUCCESS;
        }
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
                const uint8_t mode = i < QD_MAX_ARGS
                                         ? op.kernel->param_access[i].load(std::memory_order_relaxed)
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
                std::snprintf(buf, sizeof buf, "0x%" PRIx64 " (%" PRIu64 " bytes) at offset %" PRIu64,
                              r.allocation, r.bytes, r.offset);
                r.message = "qd: hazard: use after free: " + r.operation + " on " + info->where +
                            " uses allocation " + buf + ", freed by " + r.other_operation +
                            " on " + (t.block->free_op ? t.block->free_op->where : "a stream");
                reports.push_back(std::move(r));
                continue;
            }
            // A write (or read-write) access conflicts with every unordered access, a read
            // with unordered writes.
            check(*t.block, t.lo, t.hi, t.write, a, clock, info,
                  t.partitioned ? kernel_key : nullptr,
                  is_free ? QD_HAZARD_FREE_IN_USE : QD_HAZARD_RACE,
                  is_free ? "" : t.write ? (t.read ? " (read-write)" : " (write)") : " (read)",
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
            if (is_free && !touches.empty()) {
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

void ValidationObserver::check(Block &block, uint64_t lo, uint64_t hi, bool write,
                               uint32_t actor, const Clock &clock,
                               const std::shared_ptr<const OpInfo> &op,
                               const void *partitioned_by, uint32_t kind, const char *mode,
                               std::vector<Report> *out) {
    const Access *conflict = nullptr;
    for (const Access &prev : block.accesses) {
        if (partitioned_by && prev.partitioned_by == partitioned_by) continue;  // its own parts
        if (prev.hi <= lo || hi <= prev.lo) continue;      // no byte in common
        if (!write && !prev.write) continue;                // two reads
        if (prev.actor == actor && actor != 0) continue;    // one stream: in order
        if (at(clock, prev.actor) >= prev.epoch) continue;  // ordered before this one
        // Name a write over a read when both conflict: it is the likelier culprit.
        if (!conflict || (prev.write && !conflict->write)) conflict = &prev;
    }
    if (!conflict) return;
    Report r;
    r.kind = kind;
    r.stream = op->stream;
    r.other_stream = conflict->op->stream;
    r.allocation = block.start;
    r.bytes = block.bytes;
    r.offset = std::max(lo, conflict->lo);
    const bool is_free = kind == QD_HAZARD_FREE_IN_USE;
    r.operation = op->what + mode;
    r.other_operation =
        conflict->op->what +
        (conflict->write ? (conflict->read ? " (read-write)" : " (write)") : " (read)");
    char where[160];
    std::snprintf(where, sizeof where, "allocation 0x%" PRIx64 " (%" PRIu64 " bytes) at offset %" PRIu64,
                  r.allocation, r.bytes, r.offset);
    if (is_free) {
        r.message = std::string("qd: hazard: free in use: ") + r.operation + " on " + op->where +
                    " of " + where + " is not ordered after " + r.other_operation + " on " +
                    conflict->op->where + " (record an event after it and wait on it before the "
                    "free)";
    } else {
        r.message = std::string("qd: hazard: ") + kind_label(kind) + ": " + r.operation + " on " +
                    op->where + " and " + r.other_operation + " on " + conflict->op->where +
                    " touch " + where + " with no ordering between them (record an event after "
                    "the first and wait on it before the second)";
    }
    out->push_back(std::move(r));
}

void ValidationObserver::commit(Block &block, uint64_t lo, uint64_t hi, bool write,
                                uint32_t actor, uint64_t epoch,
                                const std::shared_ptr<const OpInfo> &op,
                                const void *partitioned_by, bool read) {
    auto &acc = block.accesses;
    // Superseded: a write supersedes every access within its bytes, a read the same stream's
    // earlier reads within its bytes; a partitioned write only its own stream's (the other
    // parts are still being written).
    acc.erase(std::remove_if(acc.begin(), acc.end(),
                             [&](const Access &p) {
                                 const bool within = lo <= p.lo && p.hi <= hi;
                                 if (!within) return false;
                                 if (partitioned_by && p.partitioned_by == partitioned_by)
                                     return p.actor == actor;
                                 return write || (!p.write && p.actor == actor);
                             }),
              acc.end());
    if (acc.size() >= kMaxAccesses) {
        auto read = std::find_if(acc.begin(), acc.end(), [](const Access &p) { return !p.write; });
        acc.erase(read != acc.end() ? read : acc.begin());
    }
    acc.push_back(Access{lo, hi, actor, epoch, write, read && write, op, partitioned_by});
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

uint32_t ValidationObserver::actor_of(const Stream &stream) {
    Domain &d = *domain_;
    auto it = d.actor_index_.find(&stream);
    if (it != d.actor_index_.end()) {
        Actor &a = d.actors_[it->second];
        if (!a.stream.expired()) return it->second;
        // A new stream at a freed stream's address: the old one's index is reused. Its own
        // entry keeps counting up, so the new stream's operations are never taken for the old
        // one's; the new stream starts from what the host knows.
        const uint64_t own = at(a.clock, it->second);
        a.stream = stream.weak_from_this();
        a.owner = this;
        a.clock = d.host_;
        if (a.clock.size() <= it->second) a.clock.resize(it->second + 1, 0);
        a.clock[it->second] = std::max(a.clock[it->second], own);
        a.host_seen = d.host_version_;
        return it->second;
    }
    const uint32_t index = uint32_t(d.actors_.size());
    Actor a;
    a.stream = stream.weak_from_this();
    a.owner = this;
    a.clock = d.host_;
    a.clock.resize(std::max<size_t>(a.clock.size(), index + 1), 0);
    a.host_seen = d.host_version_;
    d.actors_.push_back(std::move(a));
    d.actor_index_[&stream] = index;
    return index;
}

void ValidationObserver::refresh(uint32_t actor) {
    Domain &d = *domain_;
    Actor &a = d.actors_[actor];
    if (a.host_seen == d.host_version_) return;
    merge(&a.clock, d.host_);
    a.host_seen = d.host_version_;
}

uint64_t ValidationObserver::tick(uint32_t actor) {
    refresh(actor);
    Actor &a = domain_->actors_[actor];
    if (a.clock.size() <= actor) a.clock.resize(actor + 1, 0);
    return ++a.clock[actor];
}

void ValidationObserver::host_learned() { ++domain_->host_version_; }

void ValidationObserver::order_after_everything(uint32_t actor) {
    Domain &d = *domain_;
    Clock &clock = d.actors_[actor].clock;
    merge(&clock, d.host_);
    if (clock.size() < d.actors_.size()) clock.resize(d.actors_.size(), 0);
    for (size_t i = 1; i < d.actors_.size(); ++i)
        clock[i] = std::max(clock[i], at(d.actors_[i].clock, uint32_t(i)));
}

void ValidationObserver::leave(std::deque<Held> *held) {
    if (left_) return;
    left_ = true;
    Domain &d = *domain_;
    if (held) held->swap(held_);
    held_.clear();
    held_bytes_ = 0;
    // Its streams' work is done (the destroy drained them): the host is ordered after it, and
    // the streams are no longer actors anyone finds.
    for (auto it = d.actor_index_.begin(); it != d.actor_index_.end();) {
        if (d.actors_[it->second].owner == this)
            it = d.actor_index_.erase(it);
        else
            ++it;
    }
    for (size_t i = 1; i < d.actors_.size(); ++i) {
        Actor &a = d.actors_[i];
        if (a.owner != this) continue;
        if (d.host_.size() <= i) d.host_.resize(i + 1, 0);
        d.host_[i] = std::max(d.host_[i], at(a.clock, uint32_t(i)));
        a.owner = nullptr;
        a.stream.reset();
    }
    host_learned();
    for (auto it = d.events_.begin(); it != d.events_.end();) {
        if (it->second.by == this)
            it = d.events_.erase(it);
        else
            ++it;
    }
    for (auto it = d.blocks_.begin(); it != d.blocks_.end();) {
        if (it->second->owner == this)
            it = d.blocks_.erase(it);
        else
            ++it;
    }
}

std::shared_ptr<const ValidationObserver::OpInfo> ValidationObserver::describe(const Op &op,
                                                                               const char *what,
                                                                               uint32_t actor) {
    auto info = std::make_shared<OpInfo>();
    info->what = what;
    char buf[96];
    if (actor == 0) {
        info->where = "the host";
    } else if (const uint64_t h = op.stream ? op.stream->handle.load(std::memory_order_relaxed) : 0) {
        info->stream = h;
        std::snprintf(buf, sizeof buf, "stream 0x%016" PRIx64, h);
        info->where = buf;
    } else if (op.stream && op.origin == OpOrigin::GraphLaunch) {
        info->where = "a pooled stream of a graph replay";
    } else if (op.stream && op.origin == OpOrigin::ParallelLaunch) {
        info->where = "a pooled stream of qd_launch_parallel";
    } else {
        std::snprintf(buf, sizeof buf, "a pooled stream (slot %u)", op.stream ? op.stream->pool_slot : 0);
        info->where = buf;
    }
    return info;
}

ValidationObserver::Block *ValidationObserver::block_at(uint64_t address) {
    auto &blocks_ = domain_->blocks_;
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) return nullptr;
    --it;
    Block *b = it->second.get();
    return address - b->start < b->bytes ? b : nullptr;
}

void ValidationObserver::add_block(uint64_t address, uint64_t bytes, bool host) {
    // Blocks remembered as freed that the new one overlaps are gone for good (their release
    // happened: qd handed the addresses out again).
    auto &blocks_ = domain_->blocks_;
    auto it = blocks_.upper_bound(address);
    if (it != blocks_.begin()) --it;
    while (it != blocks_.end() && it->first < address + bytes) {
        Block &b = *it->second;
        if (b.start + b.bytes > address) it = blocks_.erase(it);
        else ++it;
    }
    auto b = std::make_unique<Block>();
    b->start = address;
    b->bytes = bytes;
    b->host = host;
    b->owner = this;
    blocks_[address] = std::move(b);
}

void ValidationObserver::quarantine(Held held, std::vector<Held> *release_now) {
    held_bytes_ += held.bytes;
    held_.push_back(std::move(held));
    while (held_.size() > kQuarantineBlocks || held_bytes_ > kQuarantineBytes) {
        Held h = std::move(held_.front());
        held_.pop_front();
        held_bytes_ -= h.bytes;
        domain_->blocks_.erase(h.address);  // released now: its addresses may come back from anyone
        release_now->push_back(std::move(h));
    }
}

void ValidationObserver::deliver(std::vector<Report> &reports) {
    if (reports.empty()) return;
    qd_hazard_fn fn;
    void *data;
    {
        std::lock_guard<std::mutex> lock(domain_->mutex);
        fn = handler_;
        data = handler_data_;
    }
    for (const Report &r : reports) {
        reported_.fetch_add(1, std::memory_order_relaxed);
        qd_hazard h;
        std::memset(&h, 0, sizeof h);
        h.struct_size = sizeof h;
        h.kind = r.kind;
        h.context = ctx_.handle();
        h.stream = r.stream;
        h.other_stream = r.other_stream;
        h.allocation = r.allocation;
        h.allocation_bytes = r.bytes;
        h.offset = r.offset;
        h.operation = r.operation.c_str();
        h.other_operation = r.other_operation.c_str();
        h.message = r.message.c_str();
        fn(&h, data);
    }
}

void ValidationObserver::release(std::vector<Held> &held) {
    for (Held &h : held) {
        if (h.host) {
            ctx_.impl().host_free(reinterpret_cast<void *>(h.address));
            continue;
        }
        // A stream-ordered free queued now on the block's stream runs after everything queued
        // there before the program's free; it bypasses the observers (they saw the free).
        Op op;
        op.kind = OpKind::MemFree;
        op.stream = h.stream.get();
        op.dst = h.address;
        if (submit_unobserved(op) != QD_SUCCESS) ctx_.impl().mem_free_now(h.address);
    }
}

}  // namespace qd::core
