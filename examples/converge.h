/* converge.h: the problem converge.c solves, shared by its host kernels (converge.c) and its
 * device kernels (converge_kernels.cu): the size, the threshold, and the solver's state in the
 * context's memory. */
#ifndef QD_EXAMPLE_CONVERGE_H
#define QD_EXAMPLE_CONVERGE_H

#include <stdint.h>

#define CONVERGE_N 12
#define CONVERGE_MAX_ITERATIONS 100000u
#define CONVERGE_THRESHOLD 1e-9

/* The solver's state in the context's memory. */
typedef struct {
    double x[CONVERGE_N], y[CONVERGE_N];
    uint32_t flag;       /* the condition word: 1 while not converged */
    uint32_t iterations; /* sweeps done (two per iteration) */
} ConvergeState;

#endif
