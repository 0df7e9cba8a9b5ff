#include "backends/cpu/cpu_module.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>

#include "backends/common/callback_scope.h"
#include "common/error.h"

namespace qd::backend::cpu {

CpuModule::~CpuModule() {
    const std::shared_ptr<Scheduler> owner = owner_.lock();
    CallbackScope scope(owner.get(), false);
    handle_ = DlLibrary();  // dlclose: the library's destructors
}

qd_status load_cpu_module(const void *image, uint64_t size, std::shared_ptr<Module> *out,
                          const std::shared_ptr<Scheduler> &owner) {
    // The image is the module's path. A path with no '/' would make dlopen search library
    // paths (and possibly the current directory's neighbours): a CPU module is named exactly.
    if (size > 4096) return fail(QD_ERROR_INVALID_ARGUMENT, "a module path is at most 4096 bytes");
    const char *p = static_cast<const char *>(image);
    if (std::memchr(p, '\0', size))
        return fail(QD_ERROR_INVALID_ARGUMENT, "the module path contains a NUL byte");
    if (!std::memchr(p, '/', size))
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "the module path '%.*s' has no '/'; give a relative ('./x.so') or absolute "
                    "path so no search path is used",
                    int(size), p);
    std::string path(p, static_cast<size_t>(size));
    struct stat info;
    if (::stat(path.c_str(), &info) != 0 && (errno == ENOENT || errno == ENOTDIR))
        return fail(QD_ERROR_NOT_FOUND, "no module file at '%s'", path.c_str());
    // RTLD_NOW: a library with unresolved symbols is rejected here, not at its first launch.
    // RTLD_LOCAL: two modules may export kernels of the same name.
    const char *reason = nullptr;
    DlLibrary handle;
    {
        CallbackScope scope(owner.get(), false);  // the library's constructors (CpuModule)
        handle = DlLibrary::open(path.c_str(), &reason);
    }
    if (!handle)
        return fail(QD_ERROR_INVALID_IMAGE, "cannot load module '%s': %s", path.c_str(), reason);
    try {
        *out = std::make_shared<CpuModule>(std::move(handle), std::move(path), owner);
    } catch (...) {
        CallbackScope scope(owner.get(), false);
        handle = DlLibrary();
        throw;
    }
    return QD_SUCCESS;
}

qd_status make_host_fn_kernel(qd_host_kernel_fn fn, const char *name,
                              std::shared_ptr<Kernel> *out) {
    std::string label;
    if (name) {
        label = name;
    } else {
        uintptr_t address;
        static_assert(sizeof address == sizeof fn, "function pointers are not address-sized");
        std::memcpy(&address, &fn, sizeof address);
        char buffer[48];
        std::snprintf(buffer, sizeof buffer, "<host fn 0x%llx>",
                      static_cast<unsigned long long>(address));
        label = buffer;
    }
    *out = std::make_shared<CpuKernel>(fn, std::move(label), nullptr);
    return QD_SUCCESS;
}

qd_status CpuModule::get_kernel(const char *name, std::shared_ptr<Kernel> *out) {
    // dlsym on a library handle searches the library and then its dependencies, so "free" or a
    // misspelt "sync" would come back as libc's. A kernel is a function the module itself
    // defines: the object that holds the symbol (dladdr1) must be the module's own link map,
    // and the symbol must be a function, not data.
    void *symbol = ::dlsym(handle_.get(), name);
    struct link_map *own = nullptr, *holder = nullptr;
    void *entry = nullptr;  // an ElfW(Sym) *
    Dl_info where;
    if (!symbol || ::dlinfo(handle_.get(), RTLD_DI_LINKMAP, &own) != 0 ||
        ::dladdr1(symbol, &where, reinterpret_cast<void **>(&holder), RTLD_DL_LINKMAP) == 0 ||
        holder != own)
        return fail(QD_ERROR_NOT_FOUND, "module '%s' has no kernel '%s'%s", path_.c_str(), name,
                    symbol ? " (the name resolves only in a library the module depends on)" : "");
    if (::dladdr1(symbol, &where, &entry, RTLD_DL_SYMENT) != 0 && entry) {
        const unsigned type = ELF64_ST_TYPE(static_cast<const ElfW(Sym) *>(entry)->st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC)
            return fail(QD_ERROR_NOT_FOUND,
                        "module '%s' exports '%s', but it is not a function, so not a kernel",
                        path_.c_str(), name);
    }
    // Object to function pointer: memcpy is the conversion that is defined on every compiler.
    qd_host_kernel_fn fn;
    static_assert(sizeof fn == sizeof symbol, "function and object pointers differ in size");
    std::memcpy(&fn, &symbol, sizeof fn);
    *out = std::make_shared<CpuKernel>(fn, name, shared_from_this());
    return QD_SUCCESS;
}

}  // namespace qd::backend::cpu
