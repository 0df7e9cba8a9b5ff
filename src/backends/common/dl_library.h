// The one owner of a dlopen handle, for every backend: the CPU backend's modules (a host
// library whose exported functions are kernels) and the GPU drivers (libcuda.so.1,
// libamdhip64.so). Move-only; dlclose at destruction. A GPU driver keeps its library for the
// whole process (a driver is never destroyed, see registry.cpp); a CPU module's goes with the
// last kernel that holds the module.
#pragma once

#include <dlfcn.h>

#include <utility>

namespace qd::backend {

class DlLibrary {
  public:
    DlLibrary() = default;
    explicit DlLibrary(void *handle) noexcept : handle_(handle) {}
    DlLibrary(DlLibrary &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    DlLibrary &operator=(DlLibrary &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    DlLibrary(const DlLibrary &) = delete;
    DlLibrary &operator=(const DlLibrary &) = delete;
    ~DlLibrary() { reset(); }

    // dlopen(path, RTLD_NOW | RTLD_LOCAL). On failure the result is empty and *error (when
    // given) points at dlerror()'s text, or at a fixed sentence when dlerror() has none.
    static DlLibrary open(const char *path, const char **error = nullptr) noexcept {
        void *handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!handle && error) {
            const char *why = ::dlerror();
            *error = why ? why : "dlopen failed without a reason";
        }
        return DlLibrary(handle);
    }

    void *get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    // dlsym on the library handle: the library, then its dependencies. Null when absent.
    void *symbol(const char *name) const noexcept {
        return handle_ ? ::dlsym(handle_, name) : nullptr;
    }

  private:
    void reset() noexcept {
        if (handle_) ::dlclose(handle_);
        handle_ = nullptr;
    }
    void *handle_ = nullptr;
};

}  // namespace qd::backend
