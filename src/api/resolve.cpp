// The messages of api/resolve.h: one wording for every call that mixes contexts it may not.
#include "api/resolve.h"

#include <cstdio>
#include <string>

#include "common/backend_table.h"
#include "common/error.h"

namespace qd::api {

namespace {

std::string describe(const ArgName &name) {
    std::string s = name.name;
    if (name.index != ArgName::kNoIndex) s += "[" + std::to_string(name.index) + "]";
    return s + name.member;
}

// "stream 0x... (context 0x...)", or "ctx 0x..." for a handle that is the context itself.
std::string describe(const ArgName &name, uint64_t handle, const core::Context &ctx, Mix mix) {
    char buf[160];
    const std::string who = describe(name);
    if (mix == Mix::SameBackend) {
        if (handle == ctx.handle())
            snprintf(buf, sizeof buf, "%s 0x%016llx (a %s context)", who.c_str(),
                     (unsigned long long)handle, backend_display_name(ctx.kind()));
        else
            snprintf(buf, sizeof buf, "%s 0x%016llx (of a %s context, 0x%016llx)", who.c_str(),
                     (unsigned long long)handle, backend_display_name(ctx.kind()),
                     (unsigned long long)ctx.handle());
    } else if (handle == ctx.handle()) {
        snprintf(buf, sizeof buf, "%s 0x%016llx", who.c_str(), (unsigned long long)handle);
    } else {
        snprintf(buf, sizeof buf, "%s 0x%016llx (context 0x%016llx)", who.c_str(),
                 (unsigned long long)handle, (unsigned long long)ctx.handle());
    }
    return buf;
}

}  // namespace

qd_status wrong_context(Mix mix, const ArgName &a_name, uint64_t a, const core::Context &a_ctx,
                        const ArgName &b_name, uint64_t b, const core::Context &b_ctx) {
    const std::string first = describe(a_name, a, a_ctx, mix);
    const std::string second = describe(b_name, b, b_ctx, mix);
    if (mix == Mix::SameBackend)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "%s and %s belong to different backends; only contexts of the same backend "
                    "can be mixed",
                    first.c_str(), second.c_str());
    return fail(QD_ERROR_WRONG_CONTEXT,
                "%s and %s belong to different contexts; the handles of one call must belong "
                "to one context",
                first.c_str(), second.c_str());
}

qd_status element_failed(const ArgName &name, qd_status st) {
    const std::string reason = last_error_message();
    return fail(st, "%s: %s", describe(name).c_str(), reason.c_str());
}

}  // namespace qd::api
