// Resolving a call's handle arguments to core objects, and the one check that the handles of one
// call belong to contexts it may mix (qd.h, Conventions: "Handles", "Which error wins").
//
// Every entry point that names more than one object resolves them here, in argument order, and
// hands the core objects (core takes objects, never raw handles): first every handle
// (QD_ERROR_INVALID_HANDLE), then the contexts (QD_ERROR_WRONG_CONTEXT, with one wording for
// every call), then each context's state (QD_ERROR_FORKED, QD_ERROR_DEVICE_LOST). What a call
// resolves stays alive until the outermost qd call on the thread returns (core/resolve_cache.h,
// api::guarded's CallScope): the pointers in an Arg are valid for the whole call.
#pragma once

#include <qd/qd.h>

#include <cstdint>

#include "core/context.h"

namespace qd::api {

// How a message names a handle argument: `name`, or `name[index]member` for an element of an
// array argument ("children[2]", "tasks[0].kernel").
struct ArgName {
    static constexpr uint32_t kNoIndex = UINT32_MAX;
    const char *name;
    uint32_t index = kNoIndex;
    const char *member = "";
};

// A handle argument of a call and, once resolved, its object.
template <class T>
struct Arg {
    ArgName name;
    uint64_t handle;
    T *obj = nullptr;
};

// Which contexts one call may mix.
enum class Mix {
    SameContext,  // every handle of one context: the rule (qd.h, "Handles")
    SameBackend,  // contexts of one backend: the calls of qd.h's "Several devices"
};

// The context an object belongs to; a context belongs to itself.
template <class T>
inline const core::Context &context_of(const T &obj) {
    return *obj.ctx;
}
inline const core::Context &context_of(const core::Context &ctx) { return ctx; }

// QD_ERROR_WRONG_CONTEXT with the message naming both handles and their contexts (or, for
// Mix::SameBackend, their backends). Out of line: the error path of check_mix.
qd_status wrong_context(Mix mix, const ArgName &a_name, uint64_t a, const core::Context &a_ctx,
                        const ArgName &b_name, uint64_t b, const core::Context &b_ctx);

// QD_SUCCESS when objects of contexts a and b may be mixed in one call, else wrong_context.
inline qd_status check_mix(Mix mix, const ArgName &a_name, uint64_t a, const core::Context &a_ctx,
                           const ArgName &b_name, uint64_t b, const core::Context &b_ctx) {
    if (&a_ctx == &b_ctx || (mix == Mix::SameBackend && a_ctx.kind() == b_ctx.kind()))
        return QD_SUCCESS;
    return wrong_context(mix, a_name, a, a_ctx, b_name, b, b_ctx);
}

// Resolves one element of an array argument; a failure's message is prefixed with its name
// ("children[2]: ...").
qd_status element_failed(const ArgName &name, qd_status st);
template <class T>
inline qd_status resolve_element(const ArgName &name, uint64_t handle, T **out) {
    qd_status st = core::resolve(handle, out);
    return st == QD_SUCCESS ? st : element_failed(name, st);
}

// Step 2: every argument, in order; the first that is not live fails the call.
template <class... T>
inline qd_status resolve_all(Arg<T> &...args) {
    qd_status st = QD_SUCCESS;
    ((st = st == QD_SUCCESS ? core::resolve(args.handle, &args.obj) : st), ...);
    return st;
}

// Step 3: every argument against the first one's context.
template <class A, class... R>
inline qd_status check_contexts(Mix mix, const Arg<A> &first, const Arg<R> &...rest) {
    const core::Context &ctx = context_of(*first.obj);
    qd_status st = QD_SUCCESS;
    ((st = st == QD_SUCCESS ? check_mix(mix, first.name, first.handle, ctx, rest.name, rest.handle,
                                        context_of(*rest.obj))
                            : st),
     ...);
    return st;
}

// Step 4: the first argument's context, then every other context the call mixes.
template <class A, class... R>
inline qd_status check_usable(const Arg<A> &first, const Arg<R> &...rest) {
    const core::Context &ctx = context_of(*first.obj);
    qd_status st = ctx.usable();
    ((st =
          st == QD_SUCCESS && &context_of(*rest.obj) != &ctx ? context_of(*rest.obj).usable() : st),
     ...);
    return st;
}

// Steps 2 to 4 for a call whose handles may mix the contexts `mix` allows.
template <class A, class... R>
inline qd_status resolve_contexts(Mix mix, Arg<A> &first, Arg<R> &...rest) {
    qd_status st = resolve_all(first, rest...);
    if (st == QD_SUCCESS) st = check_contexts(mix, first, rest...);
    if (st == QD_SUCCESS) st = check_usable(first, rest...);
    return st;
}

// Steps 2 to 4 for a call whose handles all belong to one context.
template <class A, class... R>
inline qd_status resolve_same_context(Arg<A> &first, Arg<R> &...rest) {
    return resolve_contexts(Mix::SameContext, first, rest...);
}

// A context, resolved and usable.
inline qd_status resolve_usable_context(uint64_t handle, core::Context **out) {
    qd_status st = core::resolve(handle, out);
    return st == QD_SUCCESS ? (*out)->usable() : st;
}

}  // namespace qd::api
