// GPU test kernels of the Go binding's tests (gpu_test.go), with the names and argument layout
// of tests/support/test_kernels.h. gpu_kernels.ptx is generated from this file (go generate,
// see gpu_test.go) and embedded in the test binary, so it runs on a GPU machine without nvcc.
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
