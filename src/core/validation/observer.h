// The validation mode (qd.h, "Validation"): an observer of the submission chokepoint
// (core/submit.h) that checks every operation of a context's streams for unsynchronised
// cross-stream access and unsafe frees, as a happens-before race detector does.
//
// Attached when the context is created with QD_CONTEXT_VALIDATE or QD_VALIDATE=1 in the
// environment; otherwise nothing of this runs (no observer, the chokepoint's branch is not
// taken). The calls that are not stream operations but order work or make and release memory
// (synchronize and query of streams, events and the context; qd_mem_alloc_async's block,
// qd_host_alloc, qd_host_free) reach it as every observer's HostEvents and host_freeing
// (core/submit.h); qd_context_set_hazard_handler and the stats find it through
// validation_observer(ctx).
//
// The model. Every stream is an actor with a vector clock, and so is the host (actor 0). Each
// operation queued on a stream ticks that stream's own entry; a record copies the stream's
// clock into the event, a wait merges the event's clock into the waiting stream; the host
// merges a stream's (or an event's, or every stream's) clock when it synchronizes with it, and
// whatever the host knows is merged into a stream before its next operation (work queued after
// a synchronize is ordered after what it waited for). An access (actor, epoch) is ordered
// before a later access on a stream whose clock holds at least that epoch for that actor.
//
// Memory. Every block of the context (qd_mem_alloc_async, qd_host_alloc) keeps its accesses
// not yet superseded: a write keeps no earlier access of the bytes it covers (each earlier one
// was ordered before it, or was reported), a read keeps no earlier read of the same stream
// over the same bytes. A block a graph owns (core/capture/graph_blocks.h) lives from each
// replay's alloc to its free (Op::graph_block): the alloc makes it live again, the free marks
// it freed and is not held back (the graph keeps the block). Other freed blocks are
// quarantined: the real release of the last kQuarantine freed blocks is held back (a
// stream-ordered free queued later on the same stream, or the host free done later), so while
// a block is remembered as freed no allocator can hand its addresses out again, and a use of
// them is a use after free, never the program's own memory.
//
// One domain per backend. Every validating context of a backend (in one fork generation) shares
// one Domain: the actors (every stream of every such context, and the one host), the clocks of
// recorded events and the blocks. So an event recorded on one context's stream and waited on
// another's orders them, a host synchronize of any context orders the host, and a block is
// checked wherever it is touched (a peer copy, a copy on another context's stream, a free while
// another context uses it). The domain lives while any validating context does (each observer
// holds it); a context's streams, events, blocks and held-back frees leave it on one path,
// leave(), from the context's context_drained (and, for a context whose creation failed, from
// the observer's destructor): its streams' work is done then, so the host is ordered after it.
// A context that does not validate is outside the domain: its operations are not seen, and a
// wait on one of its events orders the waiting stream after everything queued so far in the
// domain (qd.h, "Validation": a hazard may be missed, none is invented). Each context keeps its
// own handler, count and quarantine; a report goes to the context whose call found it.
#pragma once

#include <qd/qd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/submit.h"

namespace qd::core {

class ValidationObserver final : public OpObserver {
  public:
    // Attaches the validation mode to ctx when `flags` (qd_context_desc.flags, checked) or the
    // environment variable QD_VALIDATE asks for it. QD_SUCCESS when it stays off;
    // QD_ERROR_INVALID_ARGUMENT (with message) for a QD_VALIDATE value it does not know.
    static qd_status attach_if_requested(Context &ctx, uint32_t flags);

    ValidationObserver(Context &ctx, bool fail_calls);
    ~ValidationObserver() override;

    qd_status before(const Op &op, bool *consumed) override;
    void after(const Op &op, qd_status status) override;
    // A replay is checked operation by operation (a captured one orders and touches nothing).
    bool needs_replay() const override { return true; }
    void context_drained(Context &ctx) override;
    // A multi-part call (batch.cpp): checks and commits every part in order
    // under one lock, so a later part sees the clocks of the earlier ones; in fail mode a part
    // that would be refused rolls back everything the batch changed, and the call is refused
    // whole (QD_ERROR_HAZARD, its reports delivered once). before() skips the batch's parts.
    qd_status check_batch(const Op *ops, size_t n) override;

    // The host events it needs (core/submit.h): waits move the host's clock, Allocated makes
    // the block's shadow; each goes to the function of the same meaning below.
    void host_event(const HostEvent &event) override;
    // The host waited for the stream, the event's latest record, or every stream.
    void host_synchronized(const Stream &stream);
    void host_synchronized(const backend::Event &event);
    void host_synchronized_all();
    // Timelines (timelines.cpp): a signal records the clock of its stream (or the host's) for
    // its value; a wait (or the host finding a value reached) merges the clock of the first
    // signal that reaches the value.
    void host_signalled(const Timeline &timeline, uint64_t value);
    void host_reached(const Timeline &timeline, uint64_t value);
    // A block was made and registered: by qd_mem_alloc_async on `stream` (a write of the whole
    // block there: other streams must be ordered after it), or by qd_host_alloc (stream null).
    void allocated(const Stream *stream, uint64_t address, uint64_t bytes);
    // qd_host_free of a registered block: checks it, and unless it is refused (QD_ERROR_HAZARD
    // in fail mode, written) takes the block into quarantine (*taken: the caller must not free
    // it; the validation mode does, later).
    qd_status host_freeing(uint64_t address, bool *taken) override;

    void set_handler(qd_hazard_fn fn, void *user_data);
    uint64_t reported() const { return reported_.load(std::memory_order_relaxed); }

  private:
    using Clock = std::vector<uint64_t>;  // by actor
    struct OpInfo;
    struct Access;
    struct Block;
    struct Report;
    struct Domain;
    struct Actor {
        std::weak_ptr<const Stream> stream;
        Clock clock;
        uint64_t host_seen = 0;  // the host_version_ last merged into clock
        // The context whose stream it is (null: the host, or a stream whose context left);
        // compared, never followed.
        const ValidationObserver *owner = nullptr;
    };
    struct Held {  // a freed block whose release is held back
        uint64_t address = 0;
        uint64_t bytes = 0;
        std::shared_ptr<Stream> stream;  // device blocks: the stream to release it on
        bool host = false;
    };

    // A clock's entry for an actor (0 past its end), and the entrywise maximum (state.h).
    static uint64_t at(const Clock &clock, uint32_t actor);
    static void merge(Clock *into, const Clock &from);
    // The handler until set_handler() names one: the message on stderr (report.cpp).
    static void default_handler(const qd_hazard *hazard, void *);

    // All under the domain's mutex.
    uint32_t actor_of(const Stream &stream);
    void refresh(uint32_t actor);   // merge what the host learned since
    uint64_t tick(uint32_t actor);  // refresh, then the next epoch of the actor's own entry
    void host_learned();
    std::shared_ptr<const OpInfo> describe(const Op &op, const char *what, uint32_t actor);
    // Checks one access of the operation (actor, clock) to [lo, hi) of `block`; appends at
    // most one report. `kind` is QD_HAZARD_RACE, or QD_HAZARD_FREE_IN_USE for a free.
    void check(Block &block, uint64_t lo, uint64_t hi, bool write, uint32_t actor,
               const Clock &clock, const std::shared_ptr<const OpInfo> &op,
               const void *partitioned_by, uint32_t kind, const char *mode,
               std::vector<Report> *out);
    // partitioned_by: the kernel of a QD_PARAM_PARTITIONED access (else null); read: a write
    // that also reads (a read-write kernel parameter), so reports call it "read-write".
    void commit(Block &block, uint64_t lo, uint64_t hi, bool write, uint32_t actor, uint64_t epoch,
                const std::shared_ptr<const OpInfo> &op, const void *partitioned_by,
                bool read = false);
    Block *block_at(uint64_t address);
    void add_block(uint64_t address, uint64_t bytes, bool host);
    void quarantine(Held held, std::vector<Held> *release);
    // A wait on an event of a context outside the domain: after everything queued so far.
    void order_after_everything(uint32_t actor);
    // A stream's signal (Op::Signal) and wait (Op::WaitValue), under the mutex (timelines.cpp).
    void signalled(const Timeline &timeline, uint64_t value, const Clock &clock);
    void wait_value(uint32_t actor, const Timeline &timeline, uint64_t value);
    // The clock of the first signal of `timeline` that reaches `value`, or null.
    const Clock *signal_reaching(const Timeline &timeline, uint64_t value);
    // This context's streams, events and blocks leave the domain (see above); its held blocks
    // move to *held (null: dropped, the context is gone).
    void leave(std::deque<Held> *held);
    // Outside the domain's mutex: hand the reports to the handler; releases held blocks.
    void deliver(std::vector<Report> &reports);
    void release(std::vector<Held> &held);

    qd_status check_op(const Op &op, bool *consumed);
    // check_op's work under the domain's mutex: checks the operation and, unless it is refused
    // (fail mode, reports appended), commits it; frees to release now go to release_now.
    qd_status check_locked(const Op &op, bool *consumed, std::vector<Report> &reports,
                           std::vector<Held> &release_now);

    // What a batch changed, to roll it back (batch.cpp): each actor, event and
    // block as it was before the batch first touched it. Set while check_batch holds the
    // domain's mutex; the save_*() hooks below note a state before it changes (no-ops
    // otherwise).
    struct Undo;
    Undo *undo_ = nullptr;
    void save_actor(uint32_t actor);
    void save_event(const backend::Event *event);
    void save_block(Block &block);
    void roll_back(Undo &undo);

    Context &ctx_;
    const bool fail_calls_;
    std::atomic<uint64_t> reported_{0};
    const std::shared_ptr<Domain> domain_;

    // This context's own state, under the domain's mutex.
    qd_hazard_fn handler_ = nullptr;
    void *handler_data_ = nullptr;
    std::deque<Held> held_;
    uint64_t held_bytes_ = 0;
    bool drained_ = false;
    bool left_ = false;
};

// The context's validation observer, or null when validation is off.
ValidationObserver *validation_observer(const Context &ctx);

}  // namespace qd::core
