// Operations run now on the calling worker (backend::Context::run_inline): the bodies of a
// conditional that a replay's host task decides and runs on the host (qd.h, "Conditionals").
// The same grid semantics as a queued launch (task.cpp): one call per block, x fastest, each
// block with freshly zeroed shared memory.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "backends/cpu/cpu_context.h"
#include "backends/cpu/cpu_module.h"
#include "common/error.h"

namespace qd::backend::cpu {

namespace {

// As a queued launch's limit (cpu_stream.cpp), which a captured launch never met.
constexpr uint32_t kMaxInlineSharedBytes = 256u << 20;

void to_lost(LostState &lost, const char *kernel, int32_t rc) {
    char message[400];
    std::snprintf(message, sizeof message,
                  "kernel '%s' returned %d (device fault) in a conditional's body on a stream of "
                  "this CPU context",
                  kernel, static_cast<int>(rc));
    lost.mark_lost(message);
}

qd_status run_launch_now(const InlineOp &op, LostState &lost) {
    const auto &kernel = static_cast<const CpuKernel &>(*op.kernel);
    const LaunchDims &dims = *op.dims;
    qd_host_kernel_info info{};
    info.struct_size = sizeof info;
    for (int i = 0; i < 3; ++i) {
        info.grid_dim[i] = dims.grid[i];
        info.block_dim[i] = dims.block[i];
    }
    info.shared_mem_bytes = dims.shared_mem_bytes;
    if (dims.shared_mem_bytes > kMaxInlineSharedBytes) {
        lost.mark_lost(std::string("kernel '") + kernel.name() +
                       "' in a conditional's body asks more shared memory than the CPU "
                       "backend's limit of 256 MiB per block");
        return QD_SUCCESS;
    }
    std::vector<unsigned char> shared(dims.shared_mem_bytes);
    if (!shared.empty()) info.shared_mem = shared.data();
    void *argv[QD_MAX_ARGS];
    for (uint32_t i = 0; i < op.num_args; ++i) argv[i] = const_cast<void *>(op.args[i].data);
    void *const *args = op.num_args != 0 ? argv : nullptr;
    for (uint32_t z = 0; z < dims.grid[2]; ++z)
        for (uint32_t y = 0; y < dims.grid[1]; ++y)
            for (uint32_t x = 0; x < dims.grid[0]; ++x) {
                if (lost.lost()) return QD_SUCCESS;
                info.block_idx[0] = x;
                info.block_idx[1] = y;
                info.block_idx[2] = z;
                if (!shared.empty()) std::memset(shared.data(), 0, shared.size());
                const int32_t rc = kernel.fn()(&info, args);
                if (rc != 0) {
                    to_lost(lost, kernel.name(), rc);
                    return QD_SUCCESS;
                }
            }
    return QD_SUCCESS;
}

void *to_pointer(uint64_t address) { return reinterpret_cast<void *>(uintptr_t(address)); }

}  // namespace

qd_status CpuContext::run_inline(const InlineOp &op) {
    LostState &lost = lost_state();
    if (lost.lost()) return QD_SUCCESS;  // as a queued task after a fault: skipped
    switch (op.kind) {
    case InlineOp::Kind::Launch: try { return run_launch_now(op, lost);
        } catch (const std::bad_alloc &) {
            lost.mark_lost("a conditional's body: no host memory for a launch's shared memory");
            return QD_SUCCESS;
        }
    case InlineOp::Kind::Memcpy:
        std::memmove(to_pointer(op.dst), to_pointer(op.src), op.bytes);
        return QD_SUCCESS;
    case InlineOp::Kind::Memset:
        std::memset(to_pointer(op.dst), op.value, op.bytes);
        return QD_SUCCESS;
    case InlineOp::Kind::HostFn: op.fn(op.user_data); return QD_SUCCESS;
    }
    return fail(QD_ERROR_INTERNAL, "unknown inline operation");
}

}  // namespace qd::backend::cpu
