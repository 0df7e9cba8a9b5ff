#include "backends/cpu/cpu_module.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace qd::backend::cpu {

qd_status load_cpu_module(const void *image, uint64_t size, std::shared_ptr<Module> *out) {
    std::string path(static_cast<const char *>(image), static_cast<size_t>(size));
    struct stat info;
    if (::stat(path.c_str(), &info) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return fail(QD_ERROR_NOT_FOUND, "no module file at '%s'", path.c_str());
    // RTLD_NOW: a library with unresolved symbols is rejected here, not at its first launch.
    // RTLD_LOCAL: two modules may export kernels of the same name.
    DlHandle handle(::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (!handle.get()) {
        const char *reason = ::dlerror();
        return fail(QD_ERROR_INVALID_IMAGE, "cannot load module '%s': %s", path.c_str(),
                    reason ? reason : "dlopen failed");
    }
    *out = std::make_shared<CpuModule>(std::move(handle), std::move(path));
    return QD_SUCCESS;
}

qd_status make_host_fn_kernel(qd_host_kernel_fn fn, const char *name, std::shared_ptr<Kernel> *out) {
    std::string label;
    if (name) {
        label = name;
    } else {
        uintptr_t address;
        static_assert(sizeof address == sizeof fn, "function pointers are not address-sized");
        std::memcpy(&address, &fn, sizeof address);
        char buffer[48];
        std::snprintf(buffer, sizeof buffer, "<host fn 0x%llx>", static_cast<unsigned long long>(address));
        label = buffer;
    }
    *out = std::make_shared<CpuKernel>(fn, std::move(label), nullptr);
    return QD_SUCCESS;
}

qd_status CpuModule::get_kernel(const char *name, std::shared_ptr<Kernel> *out) {
    void *symbol = ::dlsym(handle_.get(), name);
    if (!symbol)
        return fail(QD_ERROR_NOT_FOUND, "module '%s' has no kernel '%s'", path_.c_str(), name);
    // Object to function pointer: memcpy is the conversion that is defined on every compiler.
    qd_host_kernel_fn fn;
    static_assert(sizeof fn == sizeof symbol, "function and object pointers differ in size");
    std::memcpy(&fn, &symbol, sizeof fn);
    *out = std::make_shared<CpuKernel>(fn, name, shared_from_this());
    return QD_SUCCESS;
}

DlHandle::~DlHandle() {
    if (handle_) ::dlclose(handle_);
}

}  // namespace qd::backend::cpu
