// qd's condition kernel (qd.h, "Conditionals"): sets a conditional node's value from a condition
// word that any compiler's kernels can write. The CUDA capture queues it before a conditional
// node that has a word, and at the end of a WHILE body.
//
// Built by tools/gen-condition-kernel into condition_kernel_image.h (a fat binary with one cubin
// per architecture, never PTX: cudaGraphSetConditional is an extern device function that only
// ptxas resolves, when it compiles to SASS). libqd never needs nvcc to build; the meson test
// condition-kernel-hash checks that the header was made from this file.
#include <cuda_runtime.h>

extern "C" __global__ void qd_set_condition(cudaGraphConditionalHandle handle,
                                            const unsigned int *word) {
    cudaGraphSetConditional(handle, *word);
}
