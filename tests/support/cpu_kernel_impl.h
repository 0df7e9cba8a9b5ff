// Bodies of the CPU test kernels (the contract is in test_kernels.h). Included by the in-process
// provider (qd_kernel_from_host_fn) and by the CPU test module, which exports them by name, so
// both run the same code.
//
// A CPU kernel is called once per block; it loops over the threads of its block itself.
#pragma once

#include <qd/qd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace qdt_cpu {

template <typename T>
inline T arg(void *const *args, int i) {
    T value;
    memcpy(&value, args[i], sizeof(T));
    return value;
}

template <typename T>
inline T *ptr(void *const *args, int i) {
    return reinterpret_cast<T *>(static_cast<uintptr_t>(arg<uint64_t>(args, i)));
}

inline bool first_thread_of_grid(const qd_host_kernel_info *info) {
    return info->block_idx[0] == 0 && info->block_idx[1] == 0 && info->block_idx[2] == 0;
}

inline void sleep_us(uint64_t us) {
    if (us) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

inline uint64_t fnv1a(const uint8_t *data, uint32_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; ++i) {
        h ^= data[i];
        h *= 1099511628211ull;
    }
    return h;
}

inline int32_t noop(const qd_host_kernel_info *, void *const *) { return 0; }

// (u64 int32_t* data, u32 n): data[i] += 1 for every global thread index i < n (grid-stride).
inline int32_t add_one(const qd_host_kernel_info *info, void *const *args) {
    int32_t *data = ptr<int32_t>(args, 0);
    uint32_t n = arg<uint32_t>(args, 1);
    uint64_t block_threads = (uint64_t)info->block_dim[0] * info->block_dim[1] * info->block_dim[2];
    uint64_t blocks = (uint64_t)info->grid_dim[0] * info->grid_dim[1] * info->grid_dim[2];
    uint64_t block_linear =
        info->block_idx[0] +
        (uint64_t)info->grid_dim[0] *
            (info->block_idx[1] + (uint64_t)info->grid_dim[1] * info->block_idx[2]);
    uint64_t stride = block_threads * blocks;
    for (uint64_t t = 0; t < block_threads; ++t)
        for (uint64_t i = block_linear * block_threads + t; i < n; i += stride) data[i] += 1;
    return 0;
}

// (u64 uint32_t* dst, u32 value)
inline int32_t write_value(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info)) *ptr<uint32_t>(args, 0) = arg<uint32_t>(args, 1);
    return 0;
}

// (u64 microseconds)
inline int32_t spin(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info)) sleep_us(arg<uint64_t>(args, 0));
    return 0;
}

// (u64 uint32_t* dst, u32 value, u64 microseconds): sleep, then *dst = value.
inline int32_t spin_write(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info)) {
        sleep_us(arg<uint64_t>(args, 2));
        *ptr<uint32_t>(args, 0) = arg<uint32_t>(args, 1);
    }
    return 0;
}

// (u64 uint32_t* dst, u64 uint32_t* src, u32 add): *dst = *src + add.
inline int32_t add_value(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info))
        *ptr<uint32_t>(args, 0) = *ptr<uint32_t>(args, 1) + arg<uint32_t>(args, 2);
    return 0;
}

// (u64 uint32_t* log, u32 value): log[1 + log[0]] = value; ++log[0].
inline int32_t append_log(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info)) {
        uint32_t *log = ptr<uint32_t>(args, 0);
        uint32_t n = log[0];
        log[1 + n] = arg<uint32_t>(args, 1);
        log[0] = n + 1;
    }
    return 0;
}

// (u64 uint32_t* vals, u32 n, u32 base, u64 uint32_t* out): *out = #{i : vals[i] != base + i}.
inline int32_t count_mismatches(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info)) {
        const uint32_t *vals = ptr<uint32_t>(args, 0);
        uint32_t n = arg<uint32_t>(args, 1);
        uint32_t base = arg<uint32_t>(args, 2);
        uint32_t bad = 0;
        for (uint32_t i = 0; i < n; ++i) bad += vals[i] != base + i;
        *ptr<uint32_t>(args, 3) = bad;
    }
    return 0;
}

// (u64 uint64_t* out, u32 index, 256-byte blob): out[index] = fnv1a(blob) ^ index.
inline int32_t check_blob(const qd_host_kernel_info *info, void *const *args) {
    if (first_thread_of_grid(info)) {
        uint32_t index = arg<uint32_t>(args, 1);
        ptr<uint64_t>(args, 0)[index] =
            fnv1a(static_cast<const uint8_t *>(args[2]), 256u) ^ (uint64_t)index;
    }
    return 0;
}

// (u64 uint32_t* words, u64 timeout_us): wait until the host sets words[0], or the timeout
// passes; then words[1] = 1 (opened by the host) or 2 (timed out). The words are shared with
// the host thread, so they are read and written atomically.
inline int32_t wait_flag(const qd_host_kernel_info *info, void *const *args) {
    if (!first_thread_of_grid(info)) return 0;
    uint32_t *words = ptr<uint32_t>(args, 0);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(arg<uint64_t>(args, 1));
    bool opened = false;
    while (!(opened = __atomic_load_n(&words[0], __ATOMIC_ACQUIRE) != 0) &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    __atomic_store_n(&words[1], opened ? 1u : 2u, __ATOMIC_RELEASE);
    return 0;
}

// () a device fault: a CPU kernel that returns non-zero.
inline int32_t fault(const qd_host_kernel_info *, void *const *) { return 7; }

}  // namespace qdt_cpu
