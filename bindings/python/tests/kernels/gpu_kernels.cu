// GPU test kernels for the Python binding's interop tests, with the names and argument layout
// of tests/support/test_kernels.h. Used only when no PTX image is given ($QD_TEST_PTX, ...):
// tests/test_gpu_interop.py then compiles this file with nvcc -ptx, if nvcc is on the PATH.
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
