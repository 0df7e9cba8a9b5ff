// The GPU test-kernel provider hook. Until a GPU image of the test kernels is built (see
// tests/support/README.md, "Adding the GPU provider"), GPU contexts have no test kernels, and
// the tests that launch kernels skip with a message saying so; every other GPU test runs.
//
// When the image exists, this function loads it with make_module_kernels(ctx, image, size, why):
// the kernels have the names and argument layout of QDT_KERNEL_LIST, as on the CPU.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_kernels.h"

namespace qdt {

bool read_gpu_test_image(qd_backend backend, std::vector<char> *image, std::string *why) {
    // QD_TEST_CUDA_KERNELS / QD_TEST_HIP_KERNELS name an image file (cubin, fatbin, PTX or HIP
    // code object) holding the QDT_KERNEL_LIST kernels. The build sets them when it makes one.
    const char *var = backend == QD_BACKEND_CUDA  ? "QD_TEST_CUDA_KERNELS"
                      : backend == QD_BACKEND_HIP ? "QD_TEST_HIP_KERNELS"
                                                  : nullptr;
    const char *path = var ? getenv(var) : nullptr;
    if (!path || !*path) {
        if (why) *why = std::string(var ? var : "?") + " is not set (no GPU test image built)";
        return false;
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        if (why) *why = std::string("cannot read ") + path;
        return false;
    }
    image->assign((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    // PTX is NUL-terminated text for the driver.
    image->push_back('\0');
    return true;
}

std::unique_ptr<TestKernels> make_gpu_test_kernels(qd_backend backend, qd_context ctx,
                                                   std::string *why) {
    std::vector<char> image;
    if (!read_gpu_test_image(backend, &image, why)) return nullptr;
    return make_module_kernels(ctx, image.data(), image.size(), why);
}

}  // namespace qdt
