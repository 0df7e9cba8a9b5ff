// What the core does around fork(), so that a child can always destroy what it inherited and
// make new contexts, whatever the parent's other threads were doing at the fork.
//
// A fork copies only the calling thread. Every lock another thread of the parent held at that
// moment stays held in the child, by a thread that does not exist there: a child that takes it
// waits forever. Two rules keep the child clear of such locks:
//
//   - The locks a child takes for its own objects (the handle table's slot locks and allocation
//     mutex, the trace files' table and the trace's attach mutex, the list of allocation
//     registries) are taken by a pthread_atfork prepare handler, so no other thread holds one
//     at the fork, and released in the parent and in the child.
//   - The locks of inherited objects (a context's stream pool, a module's kernel list, the
//     backend's queues and scheduler) are never waited for in the child: destroying or
//     releasing an inherited object only forgets it (its handle dies; the object and what it
//     holds are left as they are, never released), and every other call on it is refused with
//     QD_ERROR_FORKED (common/fork_generation.h). The calling thread's resolve cache
//     (core/resolve_cache.h), which holds references to inherited objects, is left behind in
//     the child for the same reason.
//
// The handlers are registered when the handle table is made (the first qd call that needs it):
// before that no lock of the core exists. The prepare handler costs a fork one spin-lock
// acquisition per handle slot ever used.
#pragma once

namespace qd::core {

// Registers the handlers (once; called by HandleTable's creation).
void register_fork_handlers();

}  // namespace qd::core
