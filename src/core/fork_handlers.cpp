#include "core/fork_handlers.h"

#include <pthread.h>

#include "core/alloc_registry.h"
#include "core/handle_table.h"
#include "core/resolve_cache.h"
#include "core/trace/observer.h"

namespace qd::core {

namespace {

// Lock order: the trace's locks, the list of allocation registries, then the handle table's
// locks (no thread holds one of these while it waits for another).
void prepare() {
    lock_trace_files_for_fork();
    AllocRegistry::lock_list_for_fork();
    HandleTable::instance().lock_for_fork();
}

void parent() {
    HandleTable::instance().unlock_after_fork();
    AllocRegistry::unlock_list_after_fork(false);
    unlock_trace_files_after_fork();
}

void child() {
    HandleTable::instance().unlock_after_fork();
    AllocRegistry::unlock_list_after_fork(true);
    unlock_trace_files_after_fork();
    ResolveCache::abandon_after_fork();
}

}  // namespace

void register_fork_handlers() { pthread_atfork(prepare, parent, child); }

}  // namespace qd::core
