// The validation mode's side of a multi-part call (core/submit.h, submit_batch): fork, join,
// parallel launch and a graph's replay are checked whole before any part is queued, so in fail
// mode a refused call queues none of its parts and leaves the validation state as it was.
//
// Under one hold of the domain's mutex every part is checked and committed in order, as before() would
// (a later part sees the clocks of the earlier ones: a fork's record, then the lanes' waits),
// with an undo log: the first time the batch changes an actor's clock, an event's clock or a
// block's accesses, the hooks in check_locked() save it. In fail mode the first part with a
// report ends the walk and everything saved is put back; its reports are delivered once and the
// call is refused. Otherwise the commits stay, the reports are delivered (warn mode), and the
// parts' before() skips them (op.batch).
#include <unordered_map>

#include "common/error.h"
#include "core/validation/observer.h"
#include "core/validation/state.h"

namespace qd::core {

struct ValidationObserver::Undo {
    std::unordered_map<uint32_t, Actor> actors;
    // An event's clock before the batch, or none (it had no record yet).
    std::unordered_map<const backend::Event *, std::pair<bool, Domain::Recorded>> events;
    struct SavedBlock {
        std::vector<Access> accesses;
        bool freed;  // a graph's block: a replay's alloc and free change it
        std::shared_ptr<const OpInfo> free_op;
    };
    std::unordered_map<Block *, SavedBlock> blocks;
};

void ValidationObserver::save_actor(uint32_t actor) {
    if (undo_) undo_->actors.emplace(actor, domain_->actors_[actor]);
}

void ValidationObserver::save_event(const backend::Event *event) {
    if (!undo_ || undo_->events.count(event)) return;
    auto it = domain_->events_.find(event);
    if (it == domain_->events_.end())
        undo_->events.emplace(event, std::make_pair(false, Domain::Recorded{}));
    else
        undo_->events.emplace(event, std::make_pair(true, it->second));
}

void ValidationObserver::save_block(Block &block) {
    if (undo_)
        undo_->blocks.emplace(&block, Undo::SavedBlock{block.accesses, block.freed, block.free_op});
}

void ValidationObserver::roll_back(Undo &undo) {
    Domain &d = *domain_;
    for (auto &[index, actor] : undo.actors) d.actors_[index] = std::move(actor);
    for (auto &[event, saved] : undo.events) {
        if (saved.first)
            d.events_[event] = std::move(saved.second);
        else
            d.events_.erase(event);
    }
    for (auto &[block, saved] : undo.blocks) {
        block->accesses = std::move(saved.accesses);
        block->freed = saved.freed;
        block->free_op = std::move(saved.free_op);
    }
}

qd_status ValidationObserver::check_batch(const Op *ops, size_t n) {
    std::vector<Report> reports;
    std::vector<Held> release_now;
    bool refused = false;
    {
        std::lock_guard<std::mutex> lock(domain_->mutex);
        if (drained_) return QD_SUCCESS;
        Undo undo;
        undo_ = &undo;
        for (size_t i = 0; i < n && !refused; ++i) {
            const Op &op = ops[i];
            // A part the capture takes orders and touches nothing (as in check_op).
            if (op.captured || op.kind == OpKind::HostFn ||
                (op.kind == OpKind::MemAlloc && !op.graph_block))
                continue;
            const size_t had = reports.size();
            bool consumed = false;
            check_locked(op, &consumed, reports, release_now);
            refused = fail_calls_ && reports.size() > had;
        }
        undo_ = nullptr;
        if (refused) roll_back(undo);
    }
    const std::string first = refused ? reports.front().message : "";
    deliver(reports);
    release(release_now);
    if (refused) return fail(QD_ERROR_HAZARD, "%s", first.c_str());
    return QD_SUCCESS;
}

}  // namespace qd::core
