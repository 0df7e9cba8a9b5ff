// CUDA test kernels, compiled by nvcc at build time to a cubin (sm_90) and to PTX
// (compute_90); see meson.build. Two sets:
//
//  - qd_test_*: the QDT_KERNEL_LIST of tests/support/test_kernels.h, with the same names and
//    argument layout as the CPU test kernels, so the backend-parameterised semantic suites run
//    on CUDA too (QD_TEST_CUDA_KERNELS names this cubin);
//  - gpu_*: kernels of the GPU suite (tests/gpu/gpu_test.cpp) and of the benchmarks;
//  - qd_test_while_*, at the end: the WHILE loops of bench_gpu's B12 (not in QDT_KERNEL_LIST;
//    those that call cudaGraphSetConditional are in the cubin only).
//
// All are extern "C" so qd_kernel_get finds them by their plain names.
#include <stdint.h>

// Nanoseconds from the GPU's global timer: wall-clock time that does not depend on the SM clock
// (clock64() counts cycles, which change with boost and throttling).
__device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void spin_ns(uint64_t ns) {
    const uint64_t start = global_ns();
    while (global_ns() - start < ns) {
    }
}

__device__ __forceinline__ bool first_thread_of_grid() {
    return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 &&
           threadIdx.y == 0 && threadIdx.z == 0;
}

struct Blob256 {
    unsigned char bytes[256];
};

extern "C" {

// ---- QDT_KERNEL_LIST ----------------------------------------------------------------------

__global__ void qd_test_noop() {}

// (u64 int32_t* data, u32 n): data[i] += 1 for every global thread index i < n (grid-stride).
__global__ void qd_test_add_one(uint64_t data, uint32_t n) {
    int32_t *p = reinterpret_cast<int32_t *>(data);
    const uint64_t threads = (uint64_t)blockDim.x * blockDim.y * blockDim.z;
    const uint64_t blocks = (uint64_t)gridDim.x * gridDim.y * gridDim.z;
    const uint64_t block =
        blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
    const uint64_t thread =
        threadIdx.x + (uint64_t)blockDim.x * (threadIdx.y + (uint64_t)blockDim.y * threadIdx.z);
    for (uint64_t i = block * threads + thread; i < n; i += threads * blocks) p[i] += 1;
}

// (u64 uint32_t* dst, u32 value)
__global__ void qd_test_write_value(uint64_t dst, uint32_t value) {
    if (first_thread_of_grid()) *reinterpret_cast<volatile uint32_t *>(dst) = value;
}

// (u64 microseconds)
__global__ void qd_test_spin(uint64_t microseconds) {
    if (first_thread_of_grid()) spin_ns(microseconds * 1000);
}

// (u64 uint32_t* dst, u32 value, u64 microseconds): wait, then *dst = value.
__global__ void qd_test_spin_write(uint64_t dst, uint32_t value, uint64_t microseconds) {
    if (first_thread_of_grid()) {
        spin_ns(microseconds * 1000);
        *reinterpret_cast<volatile uint32_t *>(dst) = value;
    }
}

// (u64 uint32_t* dst, u64 uint32_t* src, u32 add): *dst = *src + add.
__global__ void qd_test_add_value(uint64_t dst, uint64_t src, uint32_t add) {
    if (first_thread_of_grid())
        *reinterpret_cast<volatile uint32_t *>(dst) =
            *reinterpret_cast<volatile const uint32_t *>(src) + add;
}

// (u64 uint32_t* log, u32 value): log[1 + log[0]] = value; ++log[0].
__global__ void qd_test_append_log(uint64_t log, uint32_t value) {
    if (first_thread_of_grid()) {
        volatile uint32_t *l = reinterpret_cast<volatile uint32_t *>(log);
        const uint32_t n = l[0];
        l[1 + n] = value;
        l[0] = n + 1;
    }
}

// (u64 uint32_t* vals, u32 n, u32 base, u64 uint32_t* out): *out = #{i : vals[i] != base + i}.
__global__ void qd_test_count_mismatches(uint64_t vals, uint32_t n, uint32_t base, uint64_t out) {
    if (first_thread_of_grid()) {
        const uint32_t *v = reinterpret_cast<const uint32_t *>(vals);
        uint32_t bad = 0;
        for (uint32_t i = 0; i < n; ++i) bad += v[i] != base + i;
        *reinterpret_cast<uint32_t *>(out) = bad;
    }
}

// (u64 uint64_t* out, u32 index, 256-byte blob by value): out[index] = fnv1a(blob) ^ index.
__global__ void qd_test_check_blob(uint64_t out, uint32_t index, Blob256 blob) {
    if (first_thread_of_grid()) {
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < 256; ++i) {
            h ^= blob.bytes[i];
            h *= 1099511628211ull;
        }
        reinterpret_cast<uint64_t *>(out)[index] = h ^ (uint64_t)index;
    }
}

// () a device fault: a store to an address no allocation can have.
__global__ void qd_test_fault() {
    if (first_thread_of_grid()) *reinterpret_cast<volatile uint32_t *>(uintptr_t{0x10}) = 1;
}

// (u64 uint32_t* words, u64 timeout_us): wait until the host sets words[0] (pinned host memory,
// read through the system), or the timeout passes; then words[1] = 1 (opened) or 2 (timed out).
__global__ void qd_test_wait_flag(uint64_t words, uint64_t timeout_us) {
    if (!first_thread_of_grid()) return;
    volatile uint32_t *w = reinterpret_cast<volatile uint32_t *>(words);
    const uint64_t start = global_ns(), limit = timeout_us * 1000;
    bool opened = false;
    while (!(opened = w[0] != 0) && global_ns() - start < limit) {
        __nanosleep(1000);
    }
    __threadfence_system();
    w[1] = opened ? 1u : 2u;
    __threadfence_system();
}

// ---- GPU suite and benchmarks --------------------------------------------------------------

// (u64 uint64_t* data, u32 n): data[i] += 1 (grid-stride over x).
__global__ void gpu_add_one(uint64_t data, uint32_t n) {
    uint64_t *p = reinterpret_cast<uint64_t *>(data);
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        p[i] += 1;
}

// (u64 uint64_t* dst, u64 value)
__global__ void gpu_write_value(uint64_t dst, uint64_t value) {
    if (first_thread_of_grid()) *reinterpret_cast<volatile uint64_t *>(dst) = value;
}

// (u32 microseconds): busy-waits, to delay a producer or keep a stream busy.
__global__ void gpu_spin_us(uint32_t microseconds) {
    if (first_thread_of_grid()) spin_ns((uint64_t)microseconds * 1000);
}

// (u64 uint64_t* dst, u64 uint64_t* src, u64 add): *dst = *src + add.
__global__ void gpu_copy_add(uint64_t dst, uint64_t src, uint64_t add) {
    if (first_thread_of_grid())
        *reinterpret_cast<volatile uint64_t *>(dst) =
            *reinterpret_cast<volatile const uint64_t *>(src) + add;
}

// (u64 uint64_t* out, u64 uint64_t* in, u32 n): *out = sum of in[0..n).
__global__ void gpu_sum(uint64_t out, uint64_t in, uint32_t n) {
    if (first_thread_of_grid()) {
        const volatile uint64_t *v = reinterpret_cast<const volatile uint64_t *>(in);
        uint64_t s = 0;
        for (uint32_t i = 0; i < n; ++i) s += v[i];
        *reinterpret_cast<volatile uint64_t *>(out) = s;
    }
}

// (u64 uint64_t* stamps, u32 slot, u32 microseconds): stamps[2 slot] = start time (ns),
// busy-wait, stamps[2 slot + 1] = end time. Shows when work really ran on the device.
__global__ void gpu_stamp_spin(uint64_t stamps, uint32_t slot, uint32_t microseconds) {
    if (first_thread_of_grid()) {
        volatile uint64_t *s = reinterpret_cast<volatile uint64_t *>(stamps);
        s[2 * slot] = global_ns();
        spin_ns((uint64_t)microseconds * 1000);
        s[2 * slot + 1] = global_ns();
    }
}

// (u64 uint32_t* out, u32 microseconds): out[blockIdx.x] = the SM the block ran on (%smid),
// after a spin, so that the blocks of a large grid spread over every SM the launch may use (SM
// partitions: gpu_test's Split_*).
__global__ void gpu_record_smid(uint64_t out, uint32_t microseconds) {
    if (threadIdx.x == 0) {
        spin_ns((uint64_t)microseconds * 1000);
        uint32_t sm;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        reinterpret_cast<volatile uint32_t *>(out)[blockIdx.x] = sm;
    }
}

// The fan-out workload of the benchmarks: about 20 µs of one block.
__global__ void gpu_fanout_20us() {
    if (threadIdx.x == 0) spin_ns(20000);
    __syncthreads();
}

// Empty kernels with 0, 1, 8 and 16 parameters of mixed sizes (launch overhead).
__global__ void gpu_empty0() {}
__global__ void gpu_empty1(uint64_t) {}
__global__ void gpu_empty8(uint64_t, uint32_t, uint16_t, uint8_t, float, double, uint64_t,
                           int32_t) {}
__global__ void gpu_empty16(uint64_t, uint32_t, uint16_t, uint8_t, float, double, uint64_t, int32_t,
                            uint64_t, uint32_t, uint16_t, uint8_t, float, double, uint64_t,
                            int32_t) {}

// One step of a dependent chain (bench_gpu's B13): launched with programmatic dependent launch
// (qd_launch_ex, PROGRAMMATIC_SERIALIZATION), it waits for the previous kernel of its stream
// before anything else and lets the next one start as soon as it has; launched without, both
// instructions return at once (sm_90 and above; older devices have neither).
__global__ void gpu_pdl_step(uint64_t) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launch attributes (gpu_test's LaunchAttr tests). gpu_cluster_rank: each block writes its rank
// in its thread-block cluster to out[blockIdx.x] (0xffffffff below sm_90). gpu_pdl_add: one
// step of a dependent chain that adds 1 to *counter after its grid-dependency wait, then lets
// the next kernel start.
__global__ void gpu_cluster_rank(uint64_t out) {
    uint32_t rank = 0xffffffffu;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
#endif
    if (threadIdx.x == 0) reinterpret_cast<uint32_t *>(out)[blockIdx.x] = rank;
}
__global__ void gpu_pdl_add(uint64_t counter) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    if (threadIdx.x == 0 && blockIdx.x == 0) *reinterpret_cast<volatile uint32_t *>(counter) += 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __threadfence();
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A device fault, for the subprocess fault test.
__global__ void gpu_fault() {
    if (first_thread_of_grid()) *reinterpret_cast<volatile uint64_t *>(uintptr_t{0x8}) = 1;
}

// ---- WHILE loops on the device (bench_gpu's B12) -------------------------------------------
// Not in QDT_KERNEL_LIST. The loop's counter is a uint32_t in device memory, set to the number
// of iterations before each replay; every iteration decrements it, and the loop ends at 0.

// (u64 uint32_t* counter): --*counter. The body of a loop decided from a word (qd's condition
// word, or the host reading the counter back).
__global__ void qd_test_while_decrement(uint64_t counter) {
    if (first_thread_of_grid()) *reinterpret_cast<volatile uint32_t *>(counter) -= 1;
}

// The two below call cudaGraphSetConditional, which the driver resolves when it loads a cubin;
// PTX cannot call it (the JIT finds no such function), so the PTX and fatbin builds of this
// file leave them out (tests/gpu/meson.build defines QD_KERNELS_WITHOUT_SET_CONDITIONAL there).
#ifndef QD_KERNELS_WITHOUT_SET_CONDITIONAL
// (u64 cudaGraphConditionalHandle, u64 uint32_t* counter): --*counter, and the handle's value
// becomes counter != 0: a WHILE body that decides its own loop.
__global__ void qd_test_while_count_down(uint64_t handle, uint64_t counter) {
    if (first_thread_of_grid()) {
        volatile uint32_t *c = reinterpret_cast<volatile uint32_t *>(counter);
        const uint32_t left = *c - 1;
        *c = left;
        cudaGraphSetConditional(static_cast<cudaGraphConditionalHandle>(handle), left != 0);
    }
}

// (u64 cudaGraphConditionalHandle, u64 uint32_t* word): the handle's value becomes word != 0
// (what qd's condition kernel does with a condition word, written by hand for the anchor).
__global__ void qd_test_while_set_from_word(uint64_t handle, uint64_t word) {
    if (first_thread_of_grid())
        cudaGraphSetConditional(static_cast<cudaGraphConditionalHandle>(handle),
                                *reinterpret_cast<volatile const uint32_t *>(word) != 0);
}
#endif

}  // extern "C"
