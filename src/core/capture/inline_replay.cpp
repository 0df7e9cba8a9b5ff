// A conditional decided and run on the host (core/capture/conditional.h): the host task a
// replay queues for each conditional node where no driver graph runs it (the CPU backend).
//
// Why it cannot deadlock: the task runs on the worker that runs its stream, in that stream's
// order (after the nodes before it, before the work after it), and everything it does happens
// right there: it reads the condition word, and runs the chosen body's operations one after
// another through backend::Context::run_inline, in their captured order. That order is a
// topological order of the body (each operation was recorded after what it depends on), so a
// record or wait between the body's streams is already satisfied and is skipped. It never
// queues work, never waits on an event, a stream or another worker, and so never holds a
// worker while needing another one.
#include <string>

#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"

namespace qd::core {

uint32_t body_count(qd_conditional_kind kind, uint32_t num_cases) {
    switch (kind) {
    case QD_CONDITIONAL_IF_ELSE: return 2;
    case QD_CONDITIONAL_SWITCH: return num_cases;
    default: return 1;
    }
}

namespace {

bool run_op(const GraphNode &n, backend::Context &impl) {
    backend::InlineOp op;
    switch (n.kind) {
    case OpKind::Launch:
        op.kind = backend::InlineOp::Kind::Launch;
        op.kernel = n.kernel->impl.get();
        op.dims = &n.dims;
        op.args = n.args.data();
        op.num_args = uint32_t(n.args.size());
        break;
    case OpKind::Memcpy: op.kind = backend::InlineOp::Kind::Memcpy; break;
    case OpKind::Memset: op.kind = backend::InlineOp::Kind::Memset; break;
    case OpKind::HostFn:
        op.kind = backend::InlineOp::Kind::HostFn;
        op.fn = n.fn;
        op.user_data = n.user_data;
        break;
    default: return true;  // Record, Wait: satisfied by the captured order
    }
    op.dst = n.dst;
    op.src = n.src;
    op.bytes = n.bytes;
    op.value = n.value;
    if (impl.run_inline(op) == QD_SUCCESS) return true;
    impl.lost_state().mark_lost(std::string("a conditional's body: ") + last_error_message());
    return false;
}

bool run_body(const GraphData &body, Context &ctx) {
    backend::Context &impl = ctx.impl();
    for (const GraphNode &n : body.nodes) {
        if (impl.lost_state().lost()) return false;
        if (n.cond) {
            run_conditional_inline(*n.cond, ctx);
        } else if (!run_op(n, impl)) {
            return false;
        }
    }
    return !impl.lost_state().lost();
}

// The condition word's value now (every operation before it has run on this thread).
bool read_word(const Conditional &cond, backend::Context &impl, uint32_t *value) {
    backend::InlineOp op;
    op.kind = backend::InlineOp::Kind::Memcpy;
    op.dst = uint64_t(uintptr_t(value));
    op.src = cond.condition;
    op.bytes = sizeof *value;
    if (impl.run_inline(op) == QD_SUCCESS) return !impl.lost_state().lost();
    impl.lost_state().mark_lost(std::string("a conditional's condition word: ") +
                                last_error_message());
    return false;
}

}  // namespace

void run_conditional_inline(const Conditional &cond, Context &ctx) {
    backend::Context &impl = ctx.impl();
    uint32_t value = 0;
    if (!read_word(cond, impl, &value)) return;
    switch (cond.kind) {
    case QD_CONDITIONAL_IF:
        if (value != 0) run_body(*cond.bodies[0], ctx);
        break;
    case QD_CONDITIONAL_IF_ELSE: run_body(*cond.bodies[value != 0 ? 0 : 1], ctx); break;
    case QD_CONDITIONAL_WHILE:
        while (value != 0)
            if (!run_body(*cond.bodies[0], ctx) || !read_word(cond, impl, &value)) break;
        break;
    case QD_CONDITIONAL_SWITCH:
        if (value < cond.bodies.size()) run_body(*cond.bodies[value], ctx);
        break;
    }
}

void run_conditional(void *p) {
    auto *run = static_cast<ConditionalRun *>(p);
    Context &ctx = *run->ctx;
    try {
        run_conditional_inline(*run->cond, ctx);
    } catch (...) {
        ctx.impl().lost_state().mark_lost("a conditional's body: out of host memory");
    }
    if (CaptureRouter *router = ctx.capture()) router->forget_run(run);
}

}  // namespace qd::core
