// Modules and kernels.
#include <cstring>

#include "api/guard.h"
#include "api/resolve.h"
#include "core/context.h"
#include "core/lifecycle.h"

using namespace qd;
using core::Context;
using core::Kernel;
using core::Module;

extern "C" {

QD_API qd_status qd_module_load(qd_context ctx, const void *image, uint64_t size, qd_module *out) {
    return api::guarded([&]() -> qd_status {
        if (!image) return api::null_argument("image");
        if (!out) return api::null_argument("out");
        if (size == 0) return fail(QD_ERROR_INVALID_ARGUMENT, "size is 0");
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::load_module(*c, image, size, out);
    });
}

QD_API qd_status qd_module_unload(qd_module module) {
    return api::guarded([&]() -> qd_status { return core::unload_module(module); });
}

QD_API qd_status qd_kernel_get(qd_module module, const char *name, qd_kernel *out) {
    return api::guarded([&]() -> qd_status {
        if (!name) return api::null_argument("name");
        if (!out) return api::null_argument("out");
        Module *m = nullptr;
        qd_status st = core::resolve_usable(module, &m);
        if (st != QD_SUCCESS) return st;
        return core::get_kernel(*m, name, out);
    });
}

QD_API qd_status qd_kernel_from_host_fn(qd_context ctx, qd_host_kernel_fn fn, const char *name,
                                        qd_kernel *out) {
    return api::guarded([&]() -> qd_status {
        if (!fn) return api::null_argument("fn");
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = api::resolve_usable_context(ctx, &c);
        if (st != QD_SUCCESS) return st;
        return core::kernel_from_host_fn(*c, fn, name, out);
    });
}

QD_API qd_status qd_kernel_destroy(qd_kernel kernel) {
    return api::guarded([&]() -> qd_status { return core::destroy_kernel(kernel); });
}

}  // extern "C"
