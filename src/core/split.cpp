// qd_context_split's core half (qd.h, "SM partitions"): the backend makes every part's backend
// context, all or none; each then becomes a context of its own, made with the parent's
// description, and a failure there destroys the parts made before it.
#include <vector>

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

qd_status Context::split(Context &parent, const uint32_t *counts, uint32_t n, uint64_t *out) {
    if (parent.is_part())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "context 0x%016llx is itself a part of a split; split its parent again "
                    "instead",
                    (unsigned long long)parent.handle());
    qd_status st = parent.may_block();
    if (st != QD_SUCCESS) return st;
    std::vector<std::unique_ptr<backend::Context>> impls;
    st = parent.impl().split(counts, n, &impls);
    if (st != QD_SUCCESS) return st;
    if (impls.size() != n)
        return fail(QD_ERROR_INTERNAL, "the backend made %zu parts of %u", impls.size(), n);
    std::vector<uint64_t> made;
    made.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        uint64_t handle = 0;
        st = adopt_impl(parent.desc_, parent.kind(), std::move(impls[i]), true, &handle);
        if (st != QD_SUCCESS) {
            // All or none: the parts made so far go again, and the rest were never adopted
            // (their backend contexts are released with `impls`).
            const std::string reason = last_error_message();
            for (uint64_t h : made) destroy(h);
            return fail(st, "part %u of the split: %s", i, reason.c_str());
        }
        made.push_back(handle);
    }
    for (uint32_t i = 0; i < n; ++i) out[i] = made[i];
    return QD_SUCCESS;
}

}  // namespace qd::core
