// GPU test kernels of the Rust binding's tests/gpu.rs, with the names and argument layout of
// tests/support/test_kernels.h. The test reads the PTX from $QD_TEST_PTX, else from
// target/gpu/qd_rust_gpu_kernels.ptx (written by bindings/rust/gpu-test-build with nvcc -ptx).
extern "C" __global__ void qd_test_add_one(unsigned long long data, unsigned n) {
    int *d = (int *)data;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) d[i] += 1;
}
extern "C" __global__ void qd_test_spin(unsigned long long us) {
    if (threadIdx.x || blockIdx.x) return;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < us * 1000ull);
}
