#include "backends/cpu/task.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "backends/cpu/cpu_module.h"
#include "backends/cpu/cpu_timeline.h"
#include "backends/cpu/marker.h"
#include "backends/cpu/scheduler.h"
#include "backends/common/callback_scope.h"

namespace qd::backend::cpu {

namespace {

// A host kernel or callback runs under CallbackScope(scheduler, false)
// (backends/common/callback_scope.h): in_callback_of() reads it. A worker is not a driver
// thread, so code running there may call any backend, a GPU one included.

void run_launch(Task &task, const CpuKernel *kernel, LaunchExtras *extras,
                WorkerState &worker) noexcept;
uint64_t first_arg_offset(uint32_t num_args) noexcept;
uint64_t align_arg(uint64_t offset, uint64_t size) noexcept;
uint16_t *arg_sizes(Task &task) noexcept;
void copy_arg(void *dst, const void *src, uint64_t size) noexcept;
void mark_lost(LostState &lost, const char *fmt, ...) noexcept
    __attribute__((format(printf, 2, 3)));
constexpr uint64_t round_up16(uint64_t n) noexcept { return (n + 15u) & ~uint64_t{15}; }

}  // namespace

uint32_t launch_record_bytes(const qd_arg *args, uint32_t num_args) noexcept {
    uint64_t offset = first_arg_offset(num_args);
    for (uint32_t i = 0; i < num_args; ++i) offset = align_arg(offset, args[i].size) + args[i].size;
    return static_cast<uint32_t>(round_up16(offset));
}

void pack_launch_args(Task &task, const qd_arg *args, uint32_t num_args) noexcept {
    task.num_args = static_cast<uint8_t>(num_args);
    uint16_t *sizes = arg_sizes(task);
    auto *base = reinterpret_cast<unsigned char *>(&task);
    uint64_t offset = first_arg_offset(num_args);
    for (uint32_t i = 0; i < num_args; ++i) {
        const uint64_t size = args[i].size;
        offset = align_arg(offset, size);
        sizes[i] = static_cast<uint16_t>(size);
        copy_arg(base + offset, args[i].data, size);
        offset += size;
    }
}

void execute(Task &task, WorkerState &worker) noexcept {
    // After a fault the context is unusable: skip user work, but keep completing markers (and
    // freeing) so every host and stream waiter still drains.
    const bool lost = worker.lost->lost();
    switch (task.kind) {
    case TaskKind::kLaunch:
        if (!lost)
            run_launch(task, static_cast<const CpuKernel *>(task.ref.get()), nullptr, worker);
        break;
    case TaskKind::kLaunchEx: {
        auto *extras = static_cast<LaunchExtras *>(task.ref.get());
        if (!lost) run_launch(task, extras->kernel.get(), extras, worker);
        extras->finish(worker.woken);
        break;
    }
    case TaskKind::kHostFn:
        if (!lost) {
            CallbackScope scope(worker.scheduler, false);
            task.u.host.fn(task.u.host.user_data);
        }
        break;
    case TaskKind::kHostStatusFn: {
        // Called either way (qd_launch_host_status_fn): the status says whether it ran in turn.
        CallbackScope scope(worker.scheduler, false);
        task.u.status.fn(task.u.status.handle, lost ? QD_ERROR_DEVICE_LOST : QD_SUCCESS,
                         task.u.status.user_data);
        break;
    }
    case TaskKind::kMemcpy:
        // memmove: nothing checks that the ranges are disjoint, and memcpy would be undefined.
        if (!lost) std::memmove(task.u.copy.dst, task.u.copy.src, task.u.copy.bytes);
        break;
    case TaskKind::kMemset:
        if (!lost) std::memset(task.u.set.dst, static_cast<int>(task.extra), task.u.set.bytes);
        break;
    case TaskKind::kFree: std::free(task.u.free_ptr); break;
    case TaskKind::kRecord:
        static_cast<Marker *>(task.ref.get())->complete(Marker::Clock::now(), worker.woken);
        break;
    case TaskKind::kWait: break;
    case TaskKind::kSignal:
        // Like a record, a signal completes on a lost context too, so its waiters drain.
        static_cast<CpuTimeline *>(task.ref.get())->reach(task.u.value, worker.woken);
        break;
    }
}

void LaunchExtras::finish(StreamList &woken) noexcept {
    if (completion && !completed) {
        completed = true;
        completion->complete(Marker::Clock::now(), woken);
    }
    if (urgent) {
        urgent->fetch_sub(1, std::memory_order_relaxed);
        urgent_total->fetch_sub(1, std::memory_order_relaxed);
        urgent = nullptr;
    }
}

void abandon(Task &task, StreamList &woken) noexcept {
    if (task.kind == TaskKind::kLaunchEx) {
        static_cast<LaunchExtras *>(task.ref.get())->finish(woken);
    } else if (task.kind == TaskKind::kFree) {
        std::free(task.u.free_ptr);
    } else if (task.kind == TaskKind::kRecord) {
        static_cast<Marker *>(task.ref.get())->complete(Marker::Clock::now(), woken);
    } else if (task.kind == TaskKind::kSignal) {
        static_cast<CpuTimeline *>(task.ref.get())->reach(task.u.value, woken);
    }
}

bool in_callback_of(const Scheduler *scheduler) noexcept {
    return scheduler != nullptr && callback_owner() == scheduler;
}

namespace {

// The CPU grid semantics: one call per block, blocks in row-major order (x fastest), one after
// another on this worker, each with freshly zeroed shared memory.
void run_launch(Task &task, const CpuKernel *kernel, LaunchExtras *extras,
                WorkerState &worker) noexcept {
    LostState &lost = *worker.lost;
    const auto &dims = task.u.launch;
    // COMPLETION_EVENT: completes as the last block starts (blocks run in order).
    Marker *completion = extras && extras->completion ? extras->completion.get() : nullptr;
    const uint64_t last_block = uint64_t(dims.grid[0]) * dims.grid[1] * dims.grid[2] - 1;
    uint64_t block = 0;
    const uint32_t shared_bytes = task.extra;
    qd_host_kernel_info info{};
    info.struct_size = sizeof info;
    for (int i = 0; i < 3; ++i) {
        info.grid_dim[i] = dims.grid[i];
        info.block_dim[i] = dims.block[i];
    }
    info.shared_mem_bytes = shared_bytes;
    if (shared_bytes != 0) {
        info.shared_mem = worker.scratch(shared_bytes);
        if (info.shared_mem == nullptr) {
            mark_lost(lost, "kernel '%s': %u bytes of shared memory could not be allocated",
                      kernel->name(), shared_bytes);
            return;
        }
    }
    // The pointer array is built here rather than stored: two bytes per argument in the record
    // instead of eight.
    void *argv[QD_MAX_ARGS];
    const uint16_t *sizes = arg_sizes(task);
    auto *base = reinterpret_cast<unsigned char *>(&task);
    uint64_t offset = first_arg_offset(task.num_args);
    for (uint32_t i = 0; i < task.num_args; ++i) {
        offset = align_arg(offset, sizes[i]);
        argv[i] = base + offset;
        offset += sizes[i];
    }
    void *const *args = task.num_args != 0 ? argv : nullptr;
    const qd_host_kernel_fn fn = kernel->fn();
    CallbackScope scope(worker.scheduler, false);
    for (uint32_t z = 0; z < dims.grid[2]; ++z) {
        for (uint32_t y = 0; y < dims.grid[1]; ++y) {
            for (uint32_t x = 0; x < dims.grid[0]; ++x) {
                // A fault on another stream also ends this launch: the context is unusable.
                if (lost.lost()) return;
                info.block_idx[0] = x;
                info.block_idx[1] = y;
                info.block_idx[2] = z;
                if (info.shared_mem != nullptr) std::memset(info.shared_mem, 0, shared_bytes);
                if (completion && block++ == last_block) {
                    extras->completed = true;
                    completion->complete(Marker::Clock::now(), worker.woken);
                    // What waits on it may run beside this last block, on other workers.
                    if (!worker.woken.empty()) worker.scheduler->make_ready(worker.woken);
                }
                const int32_t rc = fn(&info, args);
                if (rc != 0) {
                    mark_lost(lost,
                              "kernel '%s' returned %d (device fault) on a stream of this CPU "
                              "context",
                              kernel->name(), static_cast<int>(rc));
                    return;
                }
            }
        }
    }
}

// Record layout of a launch: [Task][uint16_t size per argument, padded to 16][arguments].
uint64_t first_arg_offset(uint32_t num_args) noexcept {
    return sizeof(Task) + round_up16(uint64_t{num_args} * sizeof(uint16_t));
}

// Each argument is aligned to the largest power of two dividing its size, capped at 16 (the
// record's own alignment): at least its type's alignment, which always divides the size.
uint64_t align_arg(uint64_t offset, uint64_t size) noexcept {
    const uint64_t lowest_bit = size & (~size + 1);
    const uint64_t align = lowest_bit < 16 ? lowest_bit : 16;
    return (offset + align - 1) & ~(align - 1);
}

uint16_t *arg_sizes(Task &task) noexcept { return reinterpret_cast<uint16_t *>(&task + 1); }

// The common scalar sizes get a fixed-size copy the compiler inlines: most arguments are
// pointers and 4- or 8-byte scalars, and a libc call per argument would dominate the enqueue.
void copy_arg(void *dst, const void *src, uint64_t size) noexcept {
    switch (size) {
    case 4: std::memcpy(dst, src, 4); break;
    case 8: std::memcpy(dst, src, 8); break;
    case 16: std::memcpy(dst, src, 16); break;
    default: std::memcpy(dst, src, size);
    }
}

void mark_lost(LostState &lost, const char *fmt, ...) noexcept {
    char message[400];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    try {
        lost.mark_lost(message);
    } catch (const std::bad_alloc &) {
        lost.mark_lost("device fault");  // fits std::string's inline buffer: no allocation
    }
}

}  // namespace

}  // namespace qd::backend::cpu
