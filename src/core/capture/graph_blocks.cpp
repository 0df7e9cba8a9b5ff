// The blocks a graph owns (core/capture/graph_blocks.h): made at capture, ordered by the
// replays, released once after the last of them.
#include "core/capture/graph_blocks.h"

#include "common/error.h"
#include "core/submit.h"

namespace qd::core {

qd_status GraphBlocks::allocate(Stream &stream, uint64_t handle, uint64_t bytes,
                                uint64_t *address) {
    Context &ctx = *ctx_;
    blocks_.reserve(blocks_.size() + 1);
    waits_.reserve(waits_.size() + 1);
    std::shared_ptr<backend::Event> allocated;
    qd_status st = ctx.event_pool().get(&allocated);
    if (st != QD_SUCCESS) return st;
    Op op;
    op.kind = OpKind::MemAlloc;
    op.stream = &stream;
    op.bytes = bytes;
    uint64_t a = 0;
    op.address = &a;
    st = submit_unobserved(op);  // the capture's own: the observers see the captured call
    if (st != QD_SUCCESS) return st;
    Op record;
    record.kind = OpKind::Record;
    record.stream = &stream;
    record.event = allocated.get();
    st = submit_unobserved(record);
    if (st != QD_SUCCESS) {
        ctx.impl().mem_free_now(a);  // nothing queued after the allocation uses it
        return st;
    }
    // A destroy that swept already frees it here (its drain is over) and refuses the call.
    st = ctx.register_allocation(AllocRegistry::Kind::Graph, a, bytes);
    if (st != QD_SUCCESS) return st;
    blocks_.push_back(Block{a, bytes, handle, false, -1});
    waits_.push_back(std::move(allocated));
    last_ = stream.shared_from_this();
    *address = a;
    return QD_SUCCESS;
}

qd_status GraphBlocks::adopt_driver_block(uint64_t handle, uint64_t address, uint64_t bytes) {
    blocks_.reserve(blocks_.size() + 1);
    qd_status st = ctx_->register_allocation(AllocRegistry::Kind::GraphDriver, address, bytes);
    if (st != QD_SUCCESS) return st;
    blocks_.push_back(Block{address, bytes, handle, false, -1});
    return QD_SUCCESS;
}

GraphBlocks::Block *GraphBlocks::find(uint64_t address) {
    for (Block &b : blocks_)
        if (b.address == address) return &b;
    return nullptr;
}

qd_status GraphBlocks::check_all_freed() const {
    for (const Block &b : blocks_) {
        if (b.freed) continue;
        if (b.stream)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "the %llu-byte block 0x%llx allocated inside the capture (on stream "
                        "0x%016llx) is not freed inside it: a graph frees every block it "
                        "allocates; qd_mem_free_async it on a stream of the capture, then end "
                        "the capture again",
                        (unsigned long long)b.bytes, (unsigned long long)b.address,
                        (unsigned long long)b.stream);
        return fail(QD_ERROR_INVALID_OPERATION,
                    "the %llu-byte block 0x%llx allocated inside the capture is not freed inside "
                    "it: a graph frees every block it allocates; qd_mem_free_async it on a "
                    "stream of the capture, then end the capture again",
                    (unsigned long long)b.bytes, (unsigned long long)b.address);
    }
    return QD_SUCCESS;
}

void GraphBlocks::replayed(const std::shared_ptr<Stream> &stream,
                           std::shared_ptr<backend::Event> done) {
    // The replay's waits are queued: the events may be recorded again (core/event_pool.h).
    for (auto &e : waits_) ctx_->event_pool().put(std::move(e));
    waits_.clear();
    waits_.push_back(std::move(done));
    last_ = stream;
}

GraphBlocks::~GraphBlocks() { release(); }

void GraphBlocks::release() {
    Context &ctx = *ctx_;
    // In the child of a fork the blocks are the parent's (Conventions, "Fork"): left alone.
    if (ctx.forked()) return;
    std::vector<const Block *> mine;
    for (const Block &b : blocks_) {
        if (native_) {
            (void)ctx.allocs().remove(AllocRegistry::Kind::GraphDriver, b.address);
            continue;
        }
        // A destroy that began frees what the registry holds after its drain (its sweep).
        if (ctx.destroying()) continue;
        if (ctx.allocs().remove(AllocRegistry::Kind::Graph, b.address) == QD_SUCCESS)
            mine.push_back(&b);
    }
    if (mine.empty()) return;
    // After the last replay (or the allocations), on its stream.
    qd_status st = QD_SUCCESS;
    for (auto &e : waits_) {
        Op wait;
        wait.kind = OpKind::Wait;
        wait.stream = last_.get();
        wait.event = e.get();
        if (st == QD_SUCCESS) st = submit_unobserved(wait);
    }
    for (const Block *b : mine) {
        Op free;
        free.kind = OpKind::MemFree;
        free.stream = last_.get();
        free.dst = b->address;
        if (st == QD_SUCCESS && submit_unobserved(free) == QD_SUCCESS) continue;
        // Not queued (a context lost or shutting down): back to the registry, whose sweep at
        // the context's destroy frees it after the drain (or which frees it now, drained).
        (void)ctx.register_allocation(AllocRegistry::Kind::Graph, b->address, b->bytes);
    }
}

}  // namespace qd::core
