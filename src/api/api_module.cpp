// Modules and kernels.
#include <cstring>

#include "api/guard.h"
#include "core/context.h"

using namespace qd;
using core::Context;
using core::Kernel;
using core::Module;

namespace {

qd_status register_kernel(const std::shared_ptr<Context> &c, std::shared_ptr<backend::Kernel> impl,
                          qd_kernel *out) {
    auto k = std::make_shared<Kernel>(c, std::move(impl));
    qd_status st = c->adopt(core::Tag::Kernel, std::move(k), out);
    if (st == QD_SUCCESS) c->live_kernels.fetch_add(1, std::memory_order_relaxed);
    return st;
}

}  // namespace

extern "C" {

QD_API qd_status qd_module_load(qd_context ctx, const void *image, uint64_t size, qd_module *out) {
    return api::guarded([&]() -> qd_status {
        if (!image) return api::null_argument("image");
        if (!out) return api::null_argument("out");
        if (size == 0) return fail(QD_ERROR_INVALID_ARGUMENT, "size is 0");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
        if (st != QD_SUCCESS) return st;
        if (c->kind() == QD_BACKEND_CPU) {
            // A path with no '/' would make dlopen search library paths (and possibly the
            // current directory's neighbours); a CPU module must be named exactly.
            if (size > 4096) return fail(QD_ERROR_INVALID_ARGUMENT, "a module path is at most 4096 bytes");
            const char *p = static_cast<const char *>(image);
            if (std::memchr(p, '\0', size))
                return fail(QD_ERROR_INVALID_ARGUMENT, "the module path contains a NUL byte");
            if (!std::memchr(p, '/', size))
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "the module path '%.*s' has no '/'; give a relative ('./x.so') or "
                            "absolute path so no search path is used",
                            int(size), p);
        }
        std::shared_ptr<backend::Module> impl;
        st = c->impl().load_module(image, size, &impl);
        if (st != QD_SUCCESS) return st;
        auto m = std::make_shared<Module>(c->shared_from_this(), std::move(impl));
        st = c->adopt(core::Tag::Module, std::move(m), out);
        if (st == QD_SUCCESS) c->live_modules.fetch_add(1, std::memory_order_relaxed);
        return st;
    });
}

QD_API qd_status qd_module_unload(qd_module module) {
    return api::guarded([&]() -> qd_status {
        std::shared_ptr<core::Object> removed;
        qd_status st = core::HandleTable::instance().remove(module, core::Tag::Module, &removed);
        if (st != QD_SUCCESS) return st;
        core::ResolveCache::local().forget(module);
        auto &m = static_cast<Module &>(*removed);
        m.ctx->live_modules.fetch_sub(1, std::memory_order_relaxed);
        std::vector<uint64_t> kernels;
        {
            std::lock_guard<std::mutex> lock(m.kernels_mutex);
            kernels.swap(m.kernels);
        }
        for (uint64_t k : kernels)
            if (core::HandleTable::instance().remove(k, core::Tag::Kernel) == QD_SUCCESS)
                m.ctx->live_kernels.fetch_sub(1, std::memory_order_relaxed);
        return QD_SUCCESS;
    });
}

QD_API qd_status qd_kernel_get(qd_module module, const char *name, qd_kernel *out) {
    return api::guarded([&]() -> qd_status {
        if (!name) return api::null_argument("name");
        if (!out) return api::null_argument("out");
        Module *m = nullptr;
        qd_status st = core::resolve_usable(module, &m);
        if (st != QD_SUCCESS) return st;
        std::shared_ptr<backend::Kernel> impl;
        st = m->impl->get_kernel(name, &impl);
        if (st != QD_SUCCESS) return st;
        st = register_kernel(m->ctx, std::move(impl), out);
        if (st != QD_SUCCESS) return st;
        std::lock_guard<std::mutex> lock(m->kernels_mutex);
        m->kernels.push_back(*out);
        return QD_SUCCESS;
    });
}

QD_API qd_status qd_kernel_from_host_fn(qd_context ctx, qd_host_kernel_fn fn, const char *name,
                                        qd_kernel *out) {
    return api::guarded([&]() -> qd_status {
        if (!fn) return api::null_argument("fn");
        if (!out) return api::null_argument("out");
        Context *c = nullptr;
        qd_status st = core::resolve(ctx, &c);
        if (st == QD_SUCCESS) st = c->usable();
        if (st != QD_SUCCESS) return st;
        std::shared_ptr<backend::Kernel> impl;
        st = c->impl().kernel_from_host_fn(fn, name, &impl);
        if (st != QD_SUCCESS) return st;
        return register_kernel(c->shared_from_this(), std::move(impl), out);
    });
}

QD_API qd_status qd_kernel_destroy(qd_kernel kernel) {
    return api::guarded([&]() -> qd_status {
        std::shared_ptr<core::Object> removed;
        qd_status st = core::HandleTable::instance().remove(kernel, core::Tag::Kernel, &removed);
        core::ResolveCache::local().forget(kernel);
        if (st == QD_SUCCESS)
            static_cast<Kernel &>(*removed).ctx->live_kernels.fetch_sub(1, std::memory_order_relaxed);
        return st;
    });
}

}  // extern "C"
