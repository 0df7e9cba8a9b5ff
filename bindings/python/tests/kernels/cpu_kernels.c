/* CPU test kernels for the Python binding's tests: a shared library whose exported functions
 * are qd host kernels (qd_host_kernel_fn), loaded with ctx.load_module(path). Built at test
 * time with cc (tests/conftest.py). Arguments: one qd_arg each; addresses are uint64_t. */
#define _POSIX_C_SOURCE 200809L
#include <qd/qd.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

static uint64_t u64(void *const *args, int i) { uint64_t v; memcpy(&v, args[i], 8); return v; }
static uint32_t u32(void *const *args, int i) { uint32_t v; memcpy(&v, args[i], 4); return v; }
static int first_block(const qd_host_kernel_info *info) {
    return !info->block_idx[0] && !info->block_idx[1] && !info->block_idx[2];
}
static void sleep_us(uint64_t us) {
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    while (us && nanosleep(&ts, &ts) != 0) {}
}

/* () */
EXPORT int32_t noop(const qd_host_kernel_info *info, void *const *args) {
    (void)info; (void)args; return 0;
}

/* (u64 int32_t *data, u32 n): data[i] += 1 for every global thread index i < n. */
EXPORT int32_t add_one(const qd_host_kernel_info *info, void *const *args) {
    int32_t *data = (int32_t *)(uintptr_t)u64(args, 0);
    uint32_t n = u32(args, 1);
    uint64_t threads = (uint64_t)info->block_dim[0] * info->block_dim[1] * info->block_dim[2];
    uint64_t block = info->block_idx[0] + (uint64_t)info->grid_dim[0] *
                     (info->block_idx[1] + (uint64_t)info->grid_dim[1] * info->block_idx[2]);
    for (uint64_t t = 0; t < threads; ++t) {
        uint64_t i = block * threads + t;
        if (i < n) data[i] += 1;
    }
    return 0;
}

/* (u64 uint32_t *dst, u32 value, u64 microseconds): sleep, then *dst = value. */
EXPORT int32_t spin_write(const qd_host_kernel_info *info, void *const *args) {
    if (first_block(info)) {
        sleep_us(u64(args, 2));
        *(volatile uint32_t *)(uintptr_t)u64(args, 0) = u32(args, 1);
    }
    return 0;
}

/* (u64 microseconds) */
EXPORT int32_t spin(const qd_host_kernel_info *info, void *const *args) {
    if (first_block(info)) sleep_us(u64(args, 0));
    return 0;
}

/* (u64 uint32_t *log, u32 value): log[1 + log[0]++] = value (atomically). */
EXPORT int32_t append_log(const qd_host_kernel_info *info, void *const *args) {
    if (first_block(info)) {
        uint32_t *log = (uint32_t *)(uintptr_t)u64(args, 0);
        uint32_t slot = __atomic_fetch_add(&log[0], 1u, __ATOMIC_SEQ_CST);
        __atomic_store_n(&log[1 + slot], u32(args, 1), __ATOMIC_SEQ_CST);
    }
    return 0;
}

/* () device fault: the context becomes lost. */
EXPORT int32_t fault(const qd_host_kernel_info *info, void *const *args) {
    (void)info; (void)args; return 1;
}

/* (u64 uint8_t *out, u8 a, u16 b, u32 c, u64 d, float e, double f, 16-byte struct g):
 * writes a, b, c, d, e, f, g packed at out (1 + 2 + 4 + 8 + 4 + 8 + 16 = 43 bytes). */
EXPORT int32_t echo8(const qd_host_kernel_info *info, void *const *args) {
    if (!first_block(info)) return 0;
    uint8_t *out = (uint8_t *)(uintptr_t)u64(args, 0);
    static const int sizes[7] = {1, 2, 4, 8, 4, 8, 16};
    for (int i = 0; i < 7; ++i) {
        memcpy(out, args[1 + i], (size_t)sizes[i]);
        out += sizes[i];
    }
    return 0;
}
