// Kernels that set a conditional's value themselves (qd.h, "Conditionals": condition 0 and
// qd_conditional_handle), for gpu_test.cpp. A file of their own: cudaGraphSetConditional is an
// extern device function that only ptxas resolves, so this file is built as a cubin only,
// never as PTX (kernels.cu is also built as PTX).
#include <cuda_runtime.h>

// One iteration of a WHILE without a word: counts *counter down and continues while it is not 0.
extern "C" __global__ void qdt_count_down_and_continue(cudaGraphConditionalHandle handle,
                                                       unsigned int *counter) {
    const unsigned int left = *counter - 1;
    *counter = left;
    cudaGraphSetConditional(handle, left != 0 ? 1u : 0u);
}
