/* converge_kernels.cu: converge.c's kernels on a GPU: init, sweep and check, the same
 * arithmetic in the same order as its host kernels. One thread does the work (the problem has
 * 12 unknowns). nvcc builds it to PTX (examples/meson.build) with -fmad=false, so no multiply
 * and add is fused: the device loop and the host loop run these same kernels, and no fusion
 * decision of the compiler could tell them apart anyway. The check only writes memory (the
 * condition word), which PTX can do: qd turns the word into the loop's decision. */
#include "converge.h"

__device__ static bool first_thread() {
    return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 &&
           threadIdx.y == 0 && threadIdx.z == 0;
}

extern "C" {

/* (u64 state): x = 0, y = 0, flag = 1, iterations = 0. */
__global__ void converge_init(uint64_t state) {
    if (!first_thread()) return;
    ConvergeState *s = reinterpret_cast<ConvergeState *>(state);
    for (int i = 0; i < CONVERGE_N; ++i) s->x[i] = s->y[i] = 0.0;
    s->flag = 1;
    s->iterations = 0;
}

/* (u64 state, u32 dir): one Jacobi sweep, to[i] = (1 + from[i-1] + from[i+1]) / 2; dir 0
 * sweeps x into y, 1 sweeps y into x. */
__global__ void converge_sweep(uint64_t state, uint32_t dir) {
    if (!first_thread()) return;
    ConvergeState *s = reinterpret_cast<ConvergeState *>(state);
    const double *from = dir ? s->y : s->x;
    double *to = dir ? s->x : s->y;
    for (int i = 0; i < CONVERGE_N; ++i) {
        const double left = i > 0 ? from[i - 1] : 0.0;
        const double right = i < CONVERGE_N - 1 ? from[i + 1] : 0.0;
        to[i] = (1.0 + left + right) / 2.0;
    }
}

/* (u64 state): the residual's largest component; flag = 1 while it is above the threshold. */
__global__ void converge_check(uint64_t state) {
    if (!first_thread()) return;
    ConvergeState *s = reinterpret_cast<ConvergeState *>(state);
    double worst = 0.0;
    for (int i = 0; i < CONVERGE_N; ++i) {
        const double left = i > 0 ? s->x[i - 1] : 0.0;
        const double right = i < CONVERGE_N - 1 ? s->x[i + 1] : 0.0;
        const double r = fabs(1.0 - (2.0 * s->x[i] - left - right));
        if (r > worst) worst = r;
    }
    s->iterations += 1;
    s->flag = worst > CONVERGE_THRESHOLD && s->iterations < CONVERGE_MAX_ITERATIONS;
}

} /* extern "C" */
