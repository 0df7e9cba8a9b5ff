// The submission chokepoint: every operation a stream runs reaches its backend through
// core::submit_*(), and nowhere else. The api layer (qd_launch, qd_launch_host_fn,
// qd_event_record, qd_stream_wait_event, qd_mem_*_async, qd_memcpy/memset_async) and core's own
// composite operations (fork, join and parallel launch, which are records, waits and launches on
// pooled streams) each build one operation record, an Op, and hand it here.
//
// An Op says what runs (kind), where (the core stream, and through it the context), why (origin:
// a direct API call, a part of fork, join or a parallel launch, or a graph's replay), and with
// what: the kernel and its name, the launch dimensions and argument values, the event a record
// or wait names (the dependency), the memory range, the host function.
//
// The route of an Op (submit_observed, core/submit.cpp):
//   1. captured? With a capture router on the context (core/capture/capture.h), it decides
//      whether the graph capture takes the operation, and marks it (op.captured) before any
//      observer sees it;
//   2. the observers' before(), in attach order: each answers pass, refuse (a status) or take
//      (*taken: the observer queues or keeps it itself); a refusal or a take ends the walk;
//   3. the route: a captured operation goes to the capture, which records it or refuses it;
//      any other goes to the backend;
//   4. after(), in reverse order, on every observer whose before() passed, with the status the
//      caller gets, whatever happened later (a later observer refused or took it, the capture
//      refused it, the backend failed).
// Observers (the timeline trace, the validation mode) attach to a context
// (Context::attach_observer, core/observers.h); the capture is not one of them.
//
// Callers use the typed submit_*() functions below: each loads the context's observer pointer
// once and, with none (the common case), calls the backend directly; only otherwise does it
// build the Op and take submit_observed(). The pointer is non-null while an observer is attached
// or a capture is open (Context::route_captures), so with neither the chokepoint costs one
// predictable branch (bench B1 and B7 measure it), and nothing else in src/api or src/core calls
// a backend stream's enqueue methods.
#pragma once

#include <qd/qd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#include "backends/backend.h"
#include "core/context.h"

namespace qd::core {

enum class OpKind : uint8_t {
    Launch,
    HostFn,
    Record,
    Wait,
    MemAlloc,
    MemFree,
    Memcpy,
    Memset,
    Signal,     // qd_timeline_signal: `timeline` becomes `timeline_value` (since 0.3)
    WaitValue,  // qd_timeline_wait: later work waits for `timeline` to reach `timeline_value`
};

// Why an operation was submitted.
enum class OpOrigin : uint8_t {
    Api,             // the API call of the same name
    Fork,            // qd_stream_fork: the parent's record, each child's wait
    Join,            // qd_stream_join: each child's record, the parent's wait
    ParallelLaunch,  // qd_launch_parallel: its fork, its launches, its join
    GraphLaunch,     // qd_graph_launch: the replay of a captured operation (core/capture/)
};

struct Op {
    OpKind kind = OpKind::Launch;
    OpOrigin origin = OpOrigin::Api;
    Stream *stream = nullptr;  // the stream it runs on; stream->ctx is its context

    // Launch: kernel->impl->name() names it; the argument values are the caller's, copied by
    // the backend before the submit_*() call returns.
    Kernel *kernel = nullptr;
    const backend::LaunchDims *dims = nullptr;
    const qd_arg *args = nullptr;
    uint32_t num_args = 0;
    // Launch of qd_launch_ex (or a task's, or its replay): its attributes, never empty; null for
    // a launch without. A COMPLETION_EVENT's core event is completion_event (its backend event
    // attrs->completion_event): the launch records it (qd.h, "Launch attributes").
    const backend::LaunchAttrs *attrs = nullptr;
    Event *completion_event = nullptr;

    // Record and Wait: the event (for a user event also its core object; pooled fork/join
    // events have none).
    backend::Event *event = nullptr;
    Event *user_event = nullptr;

    // Memory: Memcpy dst/src/bytes, Memset dst/value/bytes, MemFree dst, MemAlloc bytes and
    // the address it returns through `address`.
    uint64_t dst = 0;
    uint64_t src = 0;
    uint64_t bytes = 0;
    uint8_t value = 0;
    uint64_t *address = nullptr;
    // Memcpy of qd_memcpy_peer_async: the contexts dst and src belong to (both set; one of
    // them is the stream's). Null for every other copy.
    Context *dst_ctx = nullptr;
    Context *src_ctx = nullptr;

    // Signal and WaitValue: the timeline and the value (qd.h, "Timelines").
    Timeline *timeline = nullptr;
    uint64_t timeline_value = 0;

    // HostFn: fn(user_data), or (qd_launch_host_status_fn) status_fn(stream handle, status,
    // user_data), which runs once whatever happens to the context, so the capture refuses it.
    qd_host_fn fn = nullptr;
    void *user_data = nullptr;
    qd_host_status_fn status_fn = nullptr;
    uint64_t handle = 0;

    // A part of a multi-part call (submit_batch below) whose whole list every observer's
    // check_batch() passed: an observer that judged the part there does not judge it again.
    bool batch = false;
    // The graph capture takes this operation (step 1 of the route above): it is recorded into
    // a graph, not run, so it orders and touches nothing until a replay submits it again.
    bool captured = false;
    // MemAlloc or MemFree of a block a graph owns (core/capture/graph_blocks.h; dst is the
    // block, bytes its size): inside a capture the router makes or frees it; in a replay
    // (OpOrigin::GraphLaunch) it is an ordering point on the block that the observers see and
    // the backend never does. Anywhere else (a free outside the graph, a capture that ended
    // during the call) the backend step refuses it.
    bool graph_block = false;
};

static_assert(std::is_trivially_destructible_v<Op>, "OpBatch never destroys its parts");

// What the host did with a context that is not a submission but that observers need to see:
// waits that ordered the host after stream work (the validation mode's clocks), blocks made
// (the validation mode's shadow memory), a stream pool found empty (the trace's marker).
// core/object_ops.cpp and the pool report them through notify_host() below, after the call
// succeeded (or, for PoolExhausted, failed for that reason), on the calling thread, with no
// qd lock held.
struct HostEvent {
    enum class Kind : uint8_t {
        SynchronizedContext,  // qd_context_synchronize: every stream's work so far completed
        SynchronizedStream,   // qd_stream_synchronize, or qd_stream_query found it idle: stream
        SynchronizedEvent,    // qd_event_synchronize, or qd_event_query found it done: event
        Allocated,            // a block was made and registered: address, bytes; stream is
                              // qd_mem_alloc_async's, null for qd_host_alloc
        PoolExhausted,        // qd_stream_acquire, qd_stream_fork or qd_launch_parallel found
                              // too few free streams in the pool: bytes = the streams asked for
        TimelineReached,      // qd_timeline_host_wait, or qd_timeline_query, found timeline's
                              // counter at value or above (since 0.3)
        TimelineSignalled,    // qd_timeline_host_signal: the host made timeline's counter value
    };
    Kind kind;
    const Stream *stream = nullptr;
    const backend::Event *event = nullptr;
    uint64_t address = 0;
    uint64_t bytes = 0;
    const Timeline *timeline = nullptr;
    uint64_t value = 0;
};

struct ObjectEvent;  // core/object_event.h

// Sees every Op submitted on the streams of one context, its HostEvents and its ObjectEvents.
class OpObserver {
  public:
    virtual ~OpObserver() = default;
    // Before the operation is routed (op.captured says where it goes). QD_SUCCESS with
    // *consumed left false passes it on; any other status refuses it: the status is returned to
    // the caller and nothing is queued; QD_SUCCESS with *consumed set takes it over (the
    // observer queues or keeps it itself, and the caller gets QD_SUCCESS).
    virtual qd_status before(const Op &op, bool *consumed) = 0;
    // Called exactly once for every before() that passed, on the same thread, after the rest of
    // the route, with the status the caller gets: the backend's or the capture's, a later
    // observer's refusal, or QD_SUCCESS when a later observer took the operation. Not called
    // for an operation this observer refused or took.
    virtual void after(const Op &op, qd_status status) = 0;
    // Does this observer need the operations of a graph's replay one by one? Native driver
    // graphs (core/capture/capture.h) are used only while no attached observer does.
    virtual bool needs_replay() const { return false; }
    // Before any part of a multi-part call (submit_batch below) reaches before(): the whole
    // list, in submission order. QD_SUCCESS lets the parts go on, each then through before()
    // and after() with op.batch set; any other status (written with fail()) is returned to the
    // caller with no part queued. An observer that keeps state for what it passes here commits
    // it here, as though every part ran, so it must be the only kind of observer that refuses
    // here: the validation mode (core/validation/observer.h). The parts the capture takes are marked
    // (op.captured) before this call; the capture itself refuses no batch, since a multi-part
    // call is checked whole before it is built (core/fork_join.cpp).
    virtual qd_status check_batch(const Op *ops, size_t n) {
        (void)ops;
        (void)n;
        return QD_SUCCESS;
    }
    // The context's destroy has drained every stream (its work ran or, for a lost context, was
    // skipped) and no operation will be submitted again; the backend is still up. An observer
    // finishes here what needs the work done (a trace flushes).
    virtual void context_drained(Context &ctx) { (void)ctx; }
    // A HostEvent of this context (see above).
    virtual void host_event(const HostEvent &event) { (void)event; }
    // An object of this context was created or destroyed (core/object_event.h).
    virtual void object_event(const ObjectEvent &event) { (void)event; }
    // qd_host_free of a registered block, before the backend frees it. QD_SUCCESS lets the
    // free go on; an observer may instead keep the block (*taken = true: it frees it later,
    // with the backend's host_free) or refuse the call with a status (written with fail()).
    virtual qd_status host_freeing(uint64_t address, bool *taken) {
        (void)address;
        (void)taken;
        return QD_SUCCESS;
    }
};

// Reports a HostEvent to ctx's observers: with none attached, one load and one branch.
inline void notify_host(const Context &ctx, const HostEvent &event) {
    if (__builtin_expect(ctx.observer() != nullptr, 0)) ctx.observer()->host_event(event);
}

// The route above, for an Op built by a caller that found `observer` on the context.
qd_status submit_observed(OpObserver &observer, Op &op);
// The backend call of an Op, past every observer: only for an observer that queues an
// operation it took over earlier (the validation mode's held-back frees, core/validation/observer.h).
// Counted in the stream's Stream::unobserved, so that the trace never takes two operations with
// one of these between them as adjacent (core/trace/timing.h).
qd_status submit_unobserved(const Op &op);

// A multi-part call (fork, join, parallel launch, a graph's replay): the whole list of its
// operations, built with everything resolved and acquired, queued all or nothing. A batch holds
// no MemAlloc or MemFree (none of these calls makes or releases memory) but a replay's ordering
// points on its graph's blocks (Op::graph_block), which never reach the backend. With no
// observer attached, one branch, then each part's backend call. With observers, two phases:
// the capture marks the parts it will take (op.captured), every observer's check_batch() sees
// the whole list, and a refusal returns its status with
// nothing queued; then each part goes through before(), the backend and after() as one
// submit_*() call would, marked op.batch. A part that fails in the second phase (the backend,
// the capture, or an observer's before(): not a refusal of the call, since parts before it are
// queued)
// ends the walk, except that the parts from `finally_from` on are submitted all the same (a
// join, so that the stream a call returns to never runs ahead of what was queued); the
// first failure's status is returned. *queued (optional) is how many parts were queued: 0
// after a refusal.
qd_status submit_batch(Context &ctx, Op *ops, size_t n, size_t finally_from = SIZE_MAX,
                       size_t *queued = nullptr);

// The parts of one multi-part call, built in order; the first kInline live on the stack, so a
// fork or join of a few streams allocates nothing for them.
class OpBatch {
  public:
    explicit OpBatch(size_t capacity) {
        if (capacity > kInline) {
            heap_.reset(new Op[capacity]);
            ops_ = heap_.get();
        } else {
            ops_ = std::launder(reinterpret_cast<Op *>(storage_));
        }
    }
    OpBatch(const OpBatch &) = delete;
    OpBatch &operator=(const OpBatch &) = delete;

    // A new part (within the capacity given), defaults but for these.
    Op &add(OpKind kind, Stream &stream, OpOrigin origin) {
        Op *op = heap_ ? &ops_[n_] : new (&ops_[n_]) Op();
        ++n_;
        op->kind = kind;
        op->stream = &stream;
        op->origin = origin;
        return *op;
    }
    void record(Stream &s, backend::Event &event, OpOrigin origin) {
        add(OpKind::Record, s, origin).event = &event;
    }
    void wait(Stream &s, backend::Event &event, OpOrigin origin) {
        add(OpKind::Wait, s, origin).event = &event;
    }

    size_t size() const { return n_; }
    qd_status submit(Context &ctx, size_t finally_from = SIZE_MAX, size_t *queued = nullptr) {
        return submit_batch(ctx, ops_, n_, finally_from, queued);
    }

  private:
    static constexpr size_t kInline = 8;
    alignas(Op) unsigned char storage_[kInline * sizeof(Op)];  // Op is trivially destructible
    std::unique_ptr<Op[]> heap_;
    Op *ops_ = nullptr;
    size_t n_ = 0;
};

// The typed entry points: the Op is built only when an observer will see it.
#define QD_SUBMIT_OBSERVED_(on, build)                                                             \
    if (OpObserver *observer_ = (on).ctx->observer(); __builtin_expect(observer_ != nullptr, 0)) { \
        Op op_{};                                                                                  \
        op_.stream = &(on);                                                                        \
        build;                                                                                     \
        return submit_observed(*observer_, op_);                                                   \
    }

inline qd_status submit_launch(Stream &s, Kernel &k, const backend::LaunchDims &dims,
                               const qd_arg *args, uint32_t num_args,
                               OpOrigin origin = OpOrigin::Api) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::Launch, op_.origin = origin, op_.kernel = &k,
                            op_.dims = &dims, op_.args = args, op_.num_args = num_args))
    return s.impl->launch(*k.impl, dims, args, num_args);
}

// A launch with attributes (qd_launch_ex; attrs never empty, checked by check_launch_attrs).
inline qd_status submit_launch_ex(Stream &s, Kernel &k, const backend::LaunchDims &dims,
                                  const backend::LaunchAttrs &attrs, Event *completion_event,
                                  const qd_arg *args, uint32_t num_args,
                                  OpOrigin origin = OpOrigin::Api) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::Launch, op_.origin = origin, op_.kernel = &k,
                            op_.dims = &dims, op_.args = args, op_.num_args = num_args,
                            op_.attrs = &attrs, op_.completion_event = completion_event))
    return s.impl->launch_ex(*k.impl, dims, attrs, args, num_args);
}

inline qd_status submit_host_fn(Stream &s, qd_host_fn fn, void *user_data) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::HostFn, op_.fn = fn, op_.user_data = user_data))
    return s.impl->host_fn(fn, user_data);
}

inline qd_status submit_host_status_fn(Stream &s, uint64_t handle, qd_host_status_fn fn,
                                       void *user_data) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::HostFn, op_.status_fn = fn, op_.handle = handle,
                            op_.user_data = user_data))
    return s.impl->host_status_fn(fn, handle, user_data);
}

inline qd_status submit_record(Stream &s, backend::Event &event, Event *user_event,
                               OpOrigin origin = OpOrigin::Api) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::Record, op_.origin = origin, op_.event = &event,
                            op_.user_event = user_event))
    return s.impl->record(event);
}

inline qd_status submit_wait(Stream &s, backend::Event &event, Event *user_event,
                             OpOrigin origin = OpOrigin::Api) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::Wait, op_.origin = origin, op_.event = &event,
                            op_.user_event = user_event))
    return s.impl->wait(event);
}

// A user event (qd_event_record / qd_stream_wait_event).
inline qd_status submit_record(Stream &s, Event &event) {
    return submit_record(s, *event.impl, &event);
}
inline qd_status submit_wait(Stream &s, Event &event) {
    return submit_wait(s, *event.impl, &event);
}

inline qd_status submit_mem_alloc(Stream &s, uint64_t bytes, uint64_t *address) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::MemAlloc, op_.bytes = bytes, op_.address = address))
    return s.impl->mem_alloc(bytes, address);
}

inline qd_status submit_mem_free(Stream &s, uint64_t address) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::MemFree, op_.dst = address))
    return s.impl->mem_free(address);
}

inline qd_status submit_memcpy(Stream &s, uint64_t dst, uint64_t src, uint64_t bytes) {
    QD_SUBMIT_OBSERVED_(
        s, (op_.kind = OpKind::Memcpy, op_.dst = dst, op_.src = src, op_.bytes = bytes))
    return s.impl->memcpy(dst, src, bytes);
}

// qd_memcpy_peer_async: a Memcpy whose sides belong to the contexts named.
inline qd_status submit_memcpy_peer(Stream &s, uint64_t dst, Context &dst_ctx, uint64_t src,
                                    Context &src_ctx, uint64_t bytes) {
    QD_SUBMIT_OBSERVED_(s, (op_.kind = OpKind::Memcpy, op_.dst = dst, op_.src = src,
                            op_.bytes = bytes, op_.dst_ctx = &dst_ctx, op_.src_ctx = &src_ctx))
    return s.impl->memcpy_peer(dst, dst_ctx.impl(), src, src_ctx.impl(), bytes);
}

inline qd_status submit_memset(Stream &s, uint64_t dst, uint8_t value, uint64_t bytes) {
    QD_SUBMIT_OBSERVED_(
        s, (op_.kind = OpKind::Memset, op_.dst = dst, op_.value = value, op_.bytes = bytes))
    return s.impl->memset(dst, value, bytes);
}

// qd_timeline_signal and qd_timeline_wait (the core checked the value rule: core/timeline.h).
inline qd_status submit_signal(Stream &s, Timeline &timeline, uint64_t value) {
    QD_SUBMIT_OBSERVED_(
        s, (op_.kind = OpKind::Signal, op_.timeline = &timeline, op_.timeline_value = value))
    return s.impl->signal(*timeline.impl, value);
}

inline qd_status submit_wait_value(Stream &s, Timeline &timeline, uint64_t value) {
    QD_SUBMIT_OBSERVED_(
        s, (op_.kind = OpKind::WaitValue, op_.timeline = &timeline, op_.timeline_value = value))
    return s.impl->wait_value(*timeline.impl, value);
}

#undef QD_SUBMIT_OBSERVED_

// qd_mem_alloc_async on a capturing stream, and qd_mem_free_async of a block a graph owns
// (Op::graph_block): always the observed route, where the capture takes them (a capture is
// open, so the context's observer pointer is set); with none, the backend step refuses them.
inline qd_status submit_graph_block(Stream &s, OpKind kind, uint64_t bytes, uint64_t address,
                                    uint64_t *out) {
    Op op{};
    op.kind = kind;
    op.stream = &s;
    op.bytes = bytes;
    op.dst = address;
    op.address = out;
    op.graph_block = true;
    if (OpObserver *observer = s.ctx->observer()) return submit_observed(*observer, op);
    return submit_unobserved(op);
}

// qd_graph_launch of a native driver graph (core/capture/capture.h): the whole graph in one
// operation. Used only while no attached observer needs replayed operations
// (OpObserver::needs_replay); with the trace or validation attached a replay re-issues the
// recorded operations through submit_batch instead, so they see each one.
inline qd_status submit_graph_launch(Stream &s, backend::Graph &graph) {
    return graph.launch(*s.impl);
}

// qd_graph_upload of a native driver graph (core/capture/graph_upload.cpp): ordered on s like a
// launch, and no operation of the graph (it runs none), so no observer sees it.
inline qd_status submit_graph_upload(Stream &s, backend::Graph &graph) {
    return graph.upload(*s.impl);
}

}  // namespace qd::core
