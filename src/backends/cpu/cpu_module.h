// CPU modules (shared libraries whose exported functions are host kernels) and CPU kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/common/dl_library.h"

namespace qd::backend::cpu {

class CpuModule final : public Module, public std::enable_shared_from_this<CpuModule> {
  public:
    CpuModule(DlLibrary handle, std::string path) noexcept
        : handle_(std::move(handle)), path_(std::move(path)) {}
    qd_status get_kernel(const char *name, std::shared_ptr<Kernel> *out) override;

  private:
    DlLibrary handle_;
    std::string path_;
};

class CpuKernel final : public Kernel, public std::enable_shared_from_this<CpuKernel> {
  public:
    // module is null for a kernel made from a host function.
    CpuKernel(qd_host_kernel_fn fn, std::string name, std::shared_ptr<const CpuModule> module) noexcept
        : fn_(fn), name_(std::move(name)), module_(std::move(module)) {}
    const char *name() const override { return name_.c_str(); }
    qd_host_kernel_fn fn() const noexcept { return fn_; }

  private:
    qd_host_kernel_fn fn_;
    std::string name_;
    // Keeps the library mapped while this kernel (or queued work holding it) exists.
    std::shared_ptr<const CpuModule> module_;
};

// image/size is the library's path (already checked by the core: has a '/', no NUL).
qd_status load_cpu_module(const void *image, uint64_t size, std::shared_ptr<Module> *out);
// name may be null.
qd_status make_host_fn_kernel(qd_host_kernel_fn fn, const char *name, std::shared_ptr<Kernel> *out);

}  // namespace qd::backend::cpu
