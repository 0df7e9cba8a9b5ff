// RAII owner of a dlopen handle. The GPU drivers keep theirs for the whole process (a driver
// is never destroyed, see registry.cpp); the owner matters on the failure paths of loading.
#pragma once

#include <dlfcn.h>

#include <utility>

namespace qd::backend::gpu {

class Library {
  public:
    Library() = default;
    explicit Library(void *handle) : handle_(handle) {}
    Library(Library &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Library &operator=(Library &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    Library(const Library &) = delete;
    Library &operator=(const Library &) = delete;
    ~Library() { reset(); }

    void *get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    void *symbol(const char *name) const noexcept { return handle_ ? dlsym(handle_, name) : nullptr; }

  private:
    void reset() noexcept {
        if (handle_) dlclose(handle_);
        handle_ = nullptr;
    }
    void *handle_ = nullptr;
};

}  // namespace qd::backend::gpu
