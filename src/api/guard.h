// The C boundary's one rule: nothing thrown below crosses it. Each entry point runs its body
// through guarded(), which maps std::bad_alloc to QD_ERROR_OUT_OF_MEMORY and anything else to
// QD_ERROR_INTERNAL, with a message.
#pragma once

#include <qd/qd.h>

#include <exception>
#include <new>

#include "common/error.h"
#include "core/resolve_cache.h"

namespace qd::api {

template <class F>
inline qd_status guarded(F &&body) noexcept {
    try {
        // Counts the thread's nesting of qd calls: what this call resolves stays alive until the
        // outermost call on the thread returns (core/resolve_cache.h).
        core::ResolveCache::CallScope scope;
        return body();
    } catch (const std::bad_alloc &) {
        return fail(QD_ERROR_OUT_OF_MEMORY, "out of host memory");
    } catch (const std::exception &e) {
        return fail(QD_ERROR_INTERNAL, "internal error: %s", e.what());
    } catch (...) {
        return fail(QD_ERROR_INTERNAL, "internal error: unknown exception");
    }
}

inline qd_status null_argument(const char *name) {
    return fail(QD_ERROR_INVALID_ARGUMENT, "%s is NULL", name);
}

}  // namespace qd::api
