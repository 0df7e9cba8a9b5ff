// The kernels the semantic tests launch, behind one interface so every backend runs the same
// tests. See tests/support/README.md for the contract a provider (CPU, CUDA, HIP) follows.
//
// Argument layout (identical on every backend): each argument is its own qd_arg; device
// addresses are uint64_t (on the CPU backend they are host pointers), counts and values are
// uint32_t, durations are uint64_t microseconds, the blob is QDT_BLOB_BYTES raw bytes passed by
// value.
#pragma once

#include <qd/qd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#define QDT_BLOB_BYTES 256u

namespace qdt {

// Symbol names shared by the CPU test module (tests/cpu_module) and GPU images.
#define QDT_KERNEL_LIST(X)                                                                         \
    X(noop, "qd_test_noop")               /* ()                                        */          \
    X(add_one, "qd_test_add_one")         /* (u64 int32_t* data, u32 n): data[i] += 1  */          \
    X(write_value, "qd_test_write_value") /* (u64 uint32_t* dst, u32 value)            */          \
    X(spin, "qd_test_spin")               /* (u64 microseconds)                        */          \
    X(spin_write, "qd_test_spin_write")   /* (u64 uint32_t* dst, u32 value, u64 us)    */          \
    X(add_value, "qd_test_add_value")     /* (u64 u32* dst, u64 u32* src, u32 add)     */          \
    X(append_log, "qd_test_append_log")   /* (u64 u32* log, u32 value)                 */          \
    X(count_mismatches,                                                                            \
      "qd_test_count_mismatches")       /* (u64 u32* v, u32 n, u32 base, u64 u32* out) */          \
    X(check_blob, "qd_test_check_blob") /* (u64 u64* out, u32 index, blob)           */            \
    X(fault, "qd_test_fault")           /* () device fault                           */            \
    X(wait_flag, "qd_test_wait_flag")   /* (u64 u32* words, u64 timeout_us)          */

// The checksum qd_test_check_blob stores: FNV-1a 64 over the blob, xor index.
uint64_t blob_checksum(const uint8_t *blob, uint32_t index);

class TestKernels {
  public:
    virtual ~TestKernels() = default;
    // Each accessor returns a kernel handle owned by the provider (valid until the provider is
    // destroyed), or 0 when this provider cannot offer that kernel.
#define QDT_KERNEL_ACCESSOR_(id, sym) virtual qd_kernel id() const = 0;
    QDT_KERNEL_LIST(QDT_KERNEL_ACCESSOR_)
#undef QDT_KERNEL_ACCESSOR_
    // The name the library should report when fault() faults the context.
    virtual std::string fault_name() const = 0;
};

// In-process CPU kernels made with qd_kernel_from_host_fn (CPU contexts only).
std::unique_ptr<TestKernels> make_cpu_host_fn_kernels(qd_context ctx);

// Kernels loaded from a module image with qd_kernel_get by the names in QDT_KERNEL_LIST.
// Works for the CPU test module (image = its path) and for GPU images (cubin/PTX/code object).
// Returns null and fills *why when loading fails.
std::unique_ptr<TestKernels> make_module_kernels(qd_context ctx, const void *image, uint64_t size,
                                                 std::string *why);

// The GPU provider hook (tests/support/gpu_kernels.cpp): null until a GPU image is built.
std::unique_ptr<TestKernels> make_gpu_test_kernels(qd_backend backend, qd_context ctx,
                                                   std::string *why);

// The provider for a context of `backend`: CPU -> host-fn kernels; CUDA/HIP -> the GPU hook.
std::unique_ptr<TestKernels> make_test_kernels(qd_backend backend, qd_context ctx,
                                               std::string *why);

// Loads the test-kernel image of `backend` as a module of its own, for tests that need a module
// handle (unload, kernel_get by name): CPU -> the CPU test module; CUDA/HIP -> the image named
// by QD_TEST_CUDA_KERNELS / QD_TEST_HIP_KERNELS. Returns the qd_module_load status, or
// QD_ERROR_NOT_FOUND when the backend has no image here; *why says why on failure.
qd_status load_test_module(qd_backend backend, qd_context ctx, qd_module *out, std::string *why);

// The GPU image of `backend` (NUL-appended, as PTX text needs), or false and *why.
bool read_gpu_test_image(qd_backend backend, std::vector<char> *image, std::string *why);

// Absolute path of the CPU test module (QD_TEST_CPU_MODULE, else the path built in).
std::string cpu_module_path();

// Convenience launchers (one block of one thread unless said). Return the qd_launch status.
qd_status launch0(qd_stream s, qd_kernel k);
qd_status launch_add_one(qd_stream s, qd_kernel k, uint64_t data, uint32_t n, uint32_t blocks = 1,
                         uint32_t threads = 1);
qd_status launch_write_value(qd_stream s, qd_kernel k, uint64_t dst, uint32_t value);
qd_status launch_spin(qd_stream s, qd_kernel k, uint64_t microseconds);
qd_status launch_spin_write(qd_stream s, qd_kernel k, uint64_t dst, uint32_t value,
                            uint64_t microseconds);
qd_status launch_add_value(qd_stream s, qd_kernel k, uint64_t dst, uint64_t src, uint32_t add);
qd_status launch_append_log(qd_stream s, qd_kernel k, uint64_t log, uint32_t value);
// (words[0]: the host's "open" flag, words[1]: the kernel's verdict, 1 opened / 2 timed out)
qd_status launch_wait_flag(qd_stream s, qd_kernel k, uint64_t words, uint64_t timeout_us);
qd_status launch_count_mismatches(qd_stream s, qd_kernel k, uint64_t vals, uint32_t n,
                                  uint32_t base, uint64_t out);

// Argument storage for a qd_task (keeps the values the qd_arg array points to).
struct TaskArgs {
    uint64_t u64[4] = {0, 0, 0, 0};
    uint32_t u32[4] = {0, 0, 0, 0};
    qd_arg args[8];
    uint32_t count = 0;
};
// Fill `t` and `storage` for add_value(dst, src, add) / spin(us) / append_log(log, value).
void task_add_value(qd_task *t, TaskArgs *storage, uint32_t group, qd_kernel k, uint64_t dst,
                    uint64_t src, uint32_t add);
void task_spin(qd_task *t, TaskArgs *storage, uint32_t group, qd_kernel k, uint64_t us);
void task_append_log(qd_task *t, TaskArgs *storage, uint32_t group, qd_kernel k, uint64_t log,
                     uint32_t value);
// ... and write_value(dst, value) / wait_flag(words, timeout_us).
void task_write_value(qd_task *t, TaskArgs *storage, uint32_t group, qd_kernel k, uint64_t dst,
                      uint32_t value);
void task_wait_flag(qd_task *t, TaskArgs *storage, uint32_t group, qd_kernel k, uint64_t words,
                    uint64_t timeout_us);

}  // namespace qdt
