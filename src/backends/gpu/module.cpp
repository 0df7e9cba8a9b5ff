// Modules and kernels. The driver's loader takes a bare pointer and finds the image's size by
// itself (from an ELF or fat-binary header, or a NUL for text), so qd checks first that the
// bytes it was given hold the whole image: a truncated binary is refused, never over-read, and
// text without a terminating NUL is copied and terminated.
#include <cstring>
#include <string>

#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

namespace {

uint64_t read_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// The end of the furthest byte an ELF header, its program headers or its sections refer to.
qd_status elf_extent(const unsigned char *p, uint64_t size, uint64_t *extent) {
    const bool is64 = p[4] == 2;
    if ((p[4] != 1 && p[4] != 2) || p[5] != 1)
        return fail(QD_ERROR_INVALID_IMAGE,
                    "the image is an ELF file that is not little-endian 32- or 64-bit");
    const uint64_t header = is64 ? 64 : 52;
    if (size < header)
        return fail(QD_ERROR_INVALID_IMAGE, "the ELF image is truncated: %llu bytes",
                    static_cast<unsigned long long>(size));
    const int word = is64 ? 8 : 4;
    const uint64_t phoff = read_le(p + (is64 ? 32 : 28), word);
    const uint64_t shoff = read_le(p + (is64 ? 40 : 32), word);
    const uint64_t phentsize = read_le(p + (is64 ? 54 : 42), 2);
    const uint64_t phnum = read_le(p + (is64 ? 56 : 44), 2);
    const uint64_t shentsize = read_le(p + (is64 ? 58 : 46), 2);
    const uint64_t shnum = read_le(p + (is64 ? 60 : 48), 2);

    uint64_t end = header;
    auto extend = [&](uint64_t offset, uint64_t length) {
        uint64_t e = 0;
        if (add_overflows(offset, length, &e)) return false;
        if (e > end) end = e;
        return true;
    };
    uint64_t table = 0;
    bool ok = !mul_overflows(phentsize, phnum, &table) && extend(phoff, table) &&
              !mul_overflows(shentsize, shnum, &table) && extend(shoff, table);
    if (ok && end <= size) {
        // The tables are inside the buffer: every segment and section must be too.
        const uint64_t phmin = is64 ? 40 : 20, shmin = is64 ? 40 : 24;
        for (uint64_t i = 0; ok && phnum && phentsize >= phmin && i < phnum; ++i) {
            const unsigned char *ph = p + phoff + i * phentsize;
            ok = extend(read_le(ph + (is64 ? 8 : 4), word), read_le(ph + (is64 ? 32 : 16), word));
        }
        for (uint64_t i = 0; ok && shnum && shentsize >= shmin && i < shnum; ++i) {
            const unsigned char *sh = p + shoff + i * shentsize;
            const uint64_t type = read_le(sh + 4, 4);
            if (type == 8) continue;  // SHT_NOBITS occupies no bytes in the file
            ok = extend(read_le(sh + (is64 ? 24 : 16), word), read_le(sh + (is64 ? 32 : 20), word));
        }
    }
    if (!ok) return fail(QD_ERROR_INVALID_IMAGE, "the ELF image's headers overflow 64-bit offsets");
    if (end > size)
        return fail(QD_ERROR_INVALID_IMAGE,
                    "the ELF image is truncated: its headers reach byte %llu, %llu bytes given",
                    static_cast<unsigned long long>(end), static_cast<unsigned long long>(size));
    *extent = end;
    return QD_SUCCESS;
}

}  // namespace

qd_status binary_image_extent(const DriverTable &table, const void *image, uint64_t size,
                              uint64_t *extent) {
    const auto *p = static_cast<const unsigned char *>(image);
    *extent = 0;
    if (size >= 16 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')
        return elf_extent(p, size, extent);
    if (table.fat_binary_size) {
        uint64_t fat = table.fat_binary_size(image, size);
        if (fat > size)
            return fail(QD_ERROR_INVALID_IMAGE,
                        "the fat binary is truncated: its header says %llu bytes, %llu given",
                        static_cast<unsigned long long>(fat),
                        static_cast<unsigned long long>(size));
        *extent = fat;
    }
    return QD_SUCCESS;
}

// --- Context::load_module (here rather than in context.cpp: it is all about images) ----------

qd_status GpuContext::load_module(const void *image, uint64_t size, std::shared_ptr<Module> *out) {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    dc_->run_deferred();
    const DriverTable &t = dc_->t;

    uint64_t extent = 0;
    if (qd_status st = binary_image_extent(t, image, size, &extent); st != QD_SUCCESS) return st;
    const void *data = image;
    std::string text;
    if (extent == 0 && std::memchr(image, 0, size) == nullptr) {
        text.assign(static_cast<const char *>(image), size);  // c_str() adds the NUL
        data = text.c_str();
    }

    // Ask the JIT for its error log, so a rejected PTX says why.
    char log[2048] = {0};
    int options[2] = {t.jit_error_log_buffer, t.jit_error_log_buffer_bytes};
    void *values[2] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof log))};

    NativeModule module = nullptr;
    Result r = t.module_load_data(&module, data, 2, options, values);
    if (r != t.success) {
        qd_status st = dc_->fail_call(r, QD_ERROR_INVALID_IMAGE, Fn::module_load_data, nullptr);
        if (st == QD_ERROR_INVALID_IMAGE && log[0] != '\0') {
            std::string reason = last_error_message();
            return fail(st, "%s; JIT log: %s", reason.c_str(), log);
        }
        return st;
    }
    dc_->counters.modules_loaded.fetch_add(1, std::memory_order_relaxed);
    try {
        *out = std::make_shared<GpuModule>(dc_, module);
    } catch (...) {
        dc_->release_module(module);
        throw;
    }
    return QD_SUCCESS;
}

// --- GpuModule ----------------------------------------------------------------------------------

GpuModule::GpuModule(std::shared_ptr<DeviceContext> dc, NativeModule module)
    : dc_(std::move(dc)), module_(module) {}

// Runs when the module handle and every kernel of it are gone (kernels hold the module).
GpuModule::~GpuModule() { dc_->release_module(module_); }

qd_status GpuModule::get_kernel(const char *name, std::shared_ptr<Kernel> *out) {
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    const DriverTable &t = dc_->t;
    NativeFunction function = nullptr;
    Result r = t.module_get_function(&function, module_, name);
    if (r != t.success) {
        qd_status st = dc_->fail_call(r, QD_ERROR_NOT_FOUND, Fn::module_get_function, nullptr);
        if (st == QD_ERROR_NOT_FOUND)
            return fail(st, "the module has no kernel named '%s' (%s)", name,
                        std::string(last_error_message()).c_str());
        return st;
    }

    // Load the kernel's code now. Under the driver's lazy loading (the default since CUDA 12.3)
    // the code is otherwise loaded by the kernel's first launch, and that load may wait for
    // every piece of work in flight in the context: a launch that silently synchronises, or
    // deadlocks against a kernel waiting on the host. qd_launch must never block, so the wait,
    // if any, happens here, where qd.h documents it.
    if (t.func_load) {
        Result lr = t.func_load(function);
        if (lr != t.success)
            return dc_->fail_call(lr, QD_ERROR_INVALID_IMAGE, Fn::func_load, nullptr);
    }

    // Describe the parameters once, so every launch can check its arguments cheaply. A driver
    // that cannot (no entry, or an error other than "index past the end") leaves them unknown.
    std::vector<uint32_t> sizes;
    bool known = false;
    if (t.func_get_param_info) {
        for (size_t i = 0; i < QD_MAX_ARGS + 1; ++i) {
            size_t offset = 0, bytes = 0;
            Result pr = t.func_get_param_info(function, i, &offset, &bytes);
            if (pr == t.success) {
                sizes.push_back(static_cast<uint32_t>(bytes));
                continue;
            }
            known = pr == t.invalid_value && i > 0;  // 0 params: nothing to check anyway
            break;
        }
    }
    *out = std::make_shared<GpuKernel>(shared_from_this(), function, dc_->intern(name),
                                       std::move(sizes), known);
    return QD_SUCCESS;
}

// --- GpuKernel ----------------------------------------------------------------------------------

GpuKernel::GpuKernel(std::shared_ptr<GpuModule> module, NativeFunction function, const char *name,
                     std::vector<uint32_t> param_sizes, bool params_known)
    : module_(std::move(module)),
      function_(function),
      name_(name),
      param_sizes_(std::move(param_sizes)),
      params_known_(params_known) {}

qd_status GpuKernel::arg_count_mismatch(uint32_t num_args) const {
    return fail(QD_ERROR_LAUNCH_FAILED, "kernel '%s' takes %zu parameters, %u arguments given",
                name_, param_sizes_.size(), num_args);
}

qd_status GpuKernel::arg_size_mismatch(uint32_t index, uint64_t size) const {
    return fail(QD_ERROR_LAUNCH_FAILED,
                "argument %u of kernel '%s' is %llu bytes, the parameter is %u bytes", index, name_,
                static_cast<unsigned long long>(size), param_sizes_[index]);
}

}  // namespace qd::backend::gpu
