// CPU modules (shared libraries whose exported functions are host kernels) and CPU kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/common/dl_library.h"

namespace qd::backend::cpu {

class Scheduler;

// A module's library runs code of its own when it is loaded and unloaded (its constructors and
// destructors), while the dynamic loader's lock is held, which a worker of the context may be
// waiting for (releasing another module's last launch). Both run as callbacks of the loading
// context (CallbackScope with its scheduler), so a blocking call on that context from them is
// refused (QD_ERROR_INVALID_OPERATION) instead of waiting for itself.
class CpuModule final : public Module, public std::enable_shared_from_this<CpuModule> {
  public:
    CpuModule(DlLibrary handle, std::string path, std::weak_ptr<Scheduler> owner) noexcept
        : handle_(std::move(handle)), path_(std::move(path)), owner_(std::move(owner)) {}
    ~CpuModule() override;
    qd_status get_kernel(const char *name, std::shared_ptr<Kernel> *out) override;

  private:
    DlLibrary handle_;
    std::string path_;
    std::weak_ptr<Scheduler> owner_;  // the loading context's scheduler
};

class CpuKernel final : public Kernel, public std::enable_shared_from_this<CpuKernel> {
  public:
    // module is null for a kernel made from a host function.
    CpuKernel(qd_host_kernel_fn fn, std::string name,
              std::shared_ptr<const CpuModule> module) noexcept
        : fn_(fn), name_(std::move(name)), module_(std::move(module)) {}
    const char *name() const override { return name_.c_str(); }
    qd_host_kernel_fn fn() const noexcept { return fn_; }

  private:
    qd_host_kernel_fn fn_;
    std::string name_;
    // Keeps the library mapped while this kernel (or queued work holding it) exists.
    std::shared_ptr<const CpuModule> module_;
};

// image/size is the library's path (already checked by the core: has a '/', no NUL). owner is
// the loading context's scheduler: the library's constructors and destructors run as its
// callbacks.
qd_status load_cpu_module(const void *image, uint64_t size, std::shared_ptr<Module> *out,
                          const std::shared_ptr<Scheduler> &owner = nullptr);
// name may be null.
qd_status make_host_fn_kernel(qd_host_kernel_fn fn, const char *name, std::shared_ptr<Kernel> *out);

}  // namespace qd::backend::cpu
