// Modules, kernels and launches: success and every documented status of qd_module_load,
// qd_module_unload, qd_kernel_get, qd_kernel_from_host_fn, qd_kernel_destroy, qd_launch and
// qd_launch_host_fn; CPU launch semantics (block order, kernel info, shared memory); the
// argument-lifetime figure; ordering within a stream.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "qd_test.h"

using namespace qdt;

namespace {

class ModuleTest : public BackendTest {};
class LaunchTest : public BackendTest {};

std::string temp_file(const std::string &name, const std::string &content) {
    const char *dir = getenv("TMPDIR");
    std::string path = std::string(dir && *dir ? dir : "/tmp") + "/qd_test_" +
                       std::to_string(getpid()) + "_" + name;
    FILE *f = fopen(path.c_str(), "wb");
    if (f) {
        fwrite(content.data(), 1, content.size(), f);
        fclose(f);
    }
    return path;
}

int32_t ok_kernel(const qd_host_kernel_info *, void *const *) { return 0; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// qd_module_load / unload, qd_kernel_get (CPU test module)
// ---------------------------------------------------------------------------------------------

TEST_P(ModuleTest, Load_CpuModule_KernelsByNameRun) {
    QDT_REQUIRE_CPU();
    std::string path = cpu_module_path();
    ASSERT_FALSE(path.empty()) << "QD_TEST_CPU_MODULE is not set";
    std::string why;
    std::unique_ptr<TestKernels> mk = make_module_kernels(ctx_, path.data(), path.size(), &why);
    ASSERT_TRUE(mk) << why;
    qd_stream s = new_stream();
    const uint32_t n = 1000;
    uint64_t data = alloc(s, 4 * n);
    ASSERT_QD_OK(qd_memset_async(s, data, 0, 4 * n));
    ASSERT_QD_OK(launch_add_one(s, mk->add_one(), data, n, 3, 7));
    ASSERT_QD_OK(launch_add_one(s, mk->add_one(), data, n, 1, 1));
    std::vector<uint8_t> host = read_back(s, data, 4 * n);
    const int32_t *v = reinterpret_cast<const int32_t *>(host.data());
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(v[i], 2) << i;
    }
    EXPECT_EQ(get_stats(ctx_).live_modules, 1u);
    EXPECT_QD_OK(qd_mem_free_async(s, data));
    EXPECT_QD_OK(qd_stream_destroy(s));
    mk.reset();
    EXPECT_EQ(get_stats(ctx_).live_modules, 0u);
}

TEST_P(ModuleTest, Load_SizeExcludesTrailingBytes_NoNulNeeded) {
    QDT_REQUIRE_CPU();
    std::string path = cpu_module_path();
    std::string padded = path + "garbage-after-the-path";
    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(ctx_, padded.data(), path.size(), &m));
    qd_kernel k = 0;
    EXPECT_QD_OK(qd_kernel_get(m, "qd_test_noop", &k));
    EXPECT_QD_OK(qd_module_unload(m));
}

TEST_P(ModuleTest, Load_SamePathTwice_ModulesAreIndependent) {
    QDT_REQUIRE_CPU();
    std::string path = cpu_module_path();
    qd_module a = 0, b = 0;
    ASSERT_QD_OK(qd_module_load(ctx_, path.data(), path.size(), &a));
    ASSERT_QD_OK(qd_module_load(ctx_, path.data(), path.size(), &b));
    EXPECT_NE(a, b);
    qd_kernel kb = 0;
    ASSERT_QD_OK(qd_kernel_get(b, "qd_test_write_value", &kb));
    ASSERT_QD_OK(qd_module_unload(a));
    qd_stream s = new_stream();
    uint64_t dst = alloc(s, 4);
    ASSERT_QD_OK(launch_write_value(s, kb, dst, 99));
    EXPECT_EQ(read_value<uint32_t>(s, dst), 99u);
    EXPECT_QD_OK(qd_mem_free_async(s, dst));
    EXPECT_QD_OK(qd_module_unload(b));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(ModuleTest, Load_ArgumentErrors_AreInvalidArgument) {
    std::string path = is_cpu() ? cpu_module_path() : std::string("/x.so");
    qd_module m = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "image|null", qd_module_load(ctx_, nullptr, 10, &m));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null",
                  qd_module_load(ctx_, path.data(), path.size(), nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "size|0|zero|empty",
                  qd_module_load(ctx_, path.data(), 0, &m));
    EXPECT_EQ(m, 0x5555u);
}

TEST_P(ModuleTest, Load_CpuPathWithoutSlashOrWithNul_IsInvalidArgument) {
    QDT_REQUIRE_CPU();
    qd_module m = 0x5555;
    const char bare[] = "libqd_test_kernels.so";
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "/|slash|path",
                  qd_module_load(ctx_, bare, sizeof bare - 1, &m));
    std::string path = cpu_module_path();
    std::string with_nul = path;
    with_nul.push_back('\0');
    with_nul += "x";
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "nul|path",
                  qd_module_load(ctx_, with_nul.data(), with_nul.size(), &m));
    // A NUL counted in size is also a NUL byte inside the path.
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_module_load(ctx_, path.c_str(), path.size() + 1, &m));
    EXPECT_EQ(m, 0x5555u);
}

TEST_P(ModuleTest, Load_CpuMissingFile_IsNotFound) {
    QDT_REQUIRE_CPU();
    const std::string path = "/nonexistent-qd-test-dir/libnothing.so";
    qd_module m = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_NOT_FOUND, "nonexistent-qd-test-dir|libnothing",
                  qd_module_load(ctx_, path.data(), path.size(), &m));
    EXPECT_EQ(m, 0x5555u);
    EXPECT_EQ(get_stats(ctx_).live_modules, 0u);
}

TEST_P(ModuleTest, Load_CpuNotASharedLibrary_IsInvalidImage) {
    QDT_REQUIRE_CPU();
    std::string path = temp_file("not_a_library.so", "this is not an ELF shared object\n");
    qd_module m = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_IMAGE, "", qd_module_load(ctx_, path.data(), path.size(), &m));
    EXPECT_EQ(m, 0x5555u);
    unlink(path.c_str());
}

TEST_P(ModuleTest, Load_GpuGarbageImage_IsInvalidImage) {
    QDT_REQUIRE_GPU();
    const char garbage[] =
        "\x7f"
        "ELF this is no cubin at all";
    qd_module m = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_IMAGE, "", qd_module_load(ctx_, garbage, sizeof garbage, &m));
    EXPECT_EQ(m, 0x5555u);
}

TEST_P(ModuleTest, Load_BadContext_IsInvalidHandle) {
    std::string path = cpu_module_path();
    qd_module m = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx",
                  qd_module_load(0, path.data(), path.size(), &m));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx",
                  qd_module_load(default_stream_, path.data(), path.size(), &m));
    EXPECT_EQ(m, 0x5555u);
}

TEST_P(ModuleTest, UnloadAndKernelGet_Errors) {
    QDT_REQUIRE_CPU();
    std::string path = cpu_module_path();
    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(ctx_, path.data(), path.size(), &m));
    qd_kernel k = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "name|null", qd_kernel_get(m, nullptr, &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null", qd_kernel_get(m, "qd_test_noop", nullptr));
    EXPECT_QD_ERR(QD_ERROR_NOT_FOUND, "qd_test_no_such_kernel",
                  qd_kernel_get(m, "qd_test_no_such_kernel", &k));
    EXPECT_QD_ERR(QD_ERROR_NOT_FOUND, "", qd_kernel_get(m, "", &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_kernel_get(0, "qd_test_noop", &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_kernel_get(ctx_, "qd_test_noop", &k));
    EXPECT_EQ(k, 0x5555u);
    qd_kernel k1 = 0, k2 = 0;
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &k1));
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &k2));
    EXPECT_NE(k1, k2) << "each call returns a new handle";
    const uint64_t provider_kernels = 0
#define QDT_COUNT_(id, sym) +1
        QDT_KERNEL_LIST(QDT_COUNT_)
#undef QDT_COUNT_
        ;
    EXPECT_EQ(get_stats(ctx_).live_kernels, provider_kernels + 2);
    EXPECT_QD_OK(qd_kernel_destroy(k1));
    EXPECT_QD_OK(qd_module_unload(m));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", launch0(default_stream_, k2))
        << "unload invalidates its kernels";
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", qd_kernel_destroy(k2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_module_unload(m));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_kernel_get(m, "qd_test_noop", &k));
    for (qd_module x : {(qd_module)0, (qd_module)default_stream_, (qd_module)ctx_, kAllOnes})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "module", qd_module_unload(x));
    EXPECT_EQ(get_stats(ctx_).live_kernels, provider_kernels);
    EXPECT_EQ(get_stats(ctx_).live_modules, 0u);
}

// A module's kernels are the functions it defines itself. dlsym also finds the functions of the
// libraries the module depends on, and data; a launch of libc's free(info) aborted the process.
TEST_P(ModuleTest, KernelGet_NameOnlyInADependencyOrData_NotFound_NothingLaunchable) {
    QDT_REQUIRE_CPU();
    std::string path = cpu_module_path();
    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(ctx_, path.data(), path.size(), &m));
    const uint64_t kernels_before = get_stats(ctx_).live_kernels;
    for (const char *name : {"free", "malloc", "abort", "printf", "sync", "pause", "time", "index",
                             "dlopen", "qd_launch", "qd_context_destroy"}) {
        qd_kernel k = 0x5555;
        EXPECT_QD_ERR(QD_ERROR_NOT_FOUND, "no kernel", qd_kernel_get(m, name, &k)) << name;
        EXPECT_EQ(k, 0x5555u) << name;
    }
    qd_kernel k = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_NOT_FOUND, "not a function",
                  qd_kernel_get(m, "qd_test_exported_data", &k));
    EXPECT_EQ(k, 0x5555u);
    EXPECT_EQ(get_stats(ctx_).live_kernels, kernels_before) << "no kernel handle was made";
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_noop", &k)) << "the module's own kernels still resolve";
    EXPECT_QD_OK(launch0(default_stream_, k));
    EXPECT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_QD_OK(qd_module_unload(m));
}

TEST_P(ModuleTest, Unload_WithQueuedWork_CodeStaysAliveUntilItRuns) {
    QDT_REQUIRE_CPU();
    std::string path = cpu_module_path();
    qd_module m = 0;
    ASSERT_QD_OK(qd_module_load(ctx_, path.data(), path.size(), &m));
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_write_value", &k));
    qd_stream s = new_stream();
    uint64_t dst = alloc(s, 4);
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    ASSERT_QD_OK(launch_write_value(s, k, dst, 4242));
    ASSERT_QD_OK(qd_kernel_destroy(k));
    ASSERT_QD_OK(qd_module_unload(m));
    EXPECT_FALSE(gate.done()) << "unload waited for the queued work";
    gate.open();
    EXPECT_EQ(read_value<uint32_t>(s, dst), 4242u);
    EXPECT_QD_OK(qd_mem_free_async(s, dst));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// Moved from tests/gpu/gpu_test.cpp (Gpu.KernelGet_UnknownName_NotFound): on every backend.
TEST_P(ModuleTest, KernelGet_UnknownName_NotFoundNamingIt) {
    QDT_LOAD_TEST_MODULE(m);
    qd_kernel k = 0x5555;
    EXPECT_QD_ERR(QD_ERROR_NOT_FOUND, "qd_test_no_such_kernel",
                  qd_kernel_get(m, "qd_test_no_such_kernel", &k));
    EXPECT_EQ(k, 0x5555u);
    EXPECT_QD_OK(qd_module_unload(m));
}

// Moved from tests/gpu/gpu_test.cpp (Gpu.ModuleUnload_WithQueuedWork_TheWorkStillRuns): a module
// unloaded (and its kernels destroyed) right after queueing a delayed launch of one of them; the
// work still runs. The spin only makes the work likely to be queued still; the result does not
// depend on it.
TEST_P(ModuleTest, Unload_RightAfterQueueingLaunches_TheWorkStillRuns) {
    QDT_LOAD_TEST_MODULE(m);
    qd_kernel spin = 0, write = 0;
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_spin", &spin));
    ASSERT_QD_OK(qd_kernel_get(m, "qd_test_write_value", &write));
    qd_stream s = new_stream();
    uint64_t d = alloc(s, 4);
    ASSERT_QD_OK(qd_memset_async(s, d, 0, 4));
    ASSERT_QD_OK(launch_spin(s, spin, 20000));
    ASSERT_QD_OK(launch_write_value(s, write, d, 7));
    ASSERT_QD_OK(qd_module_unload(m));  // destroys spin and write too
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_kernel_destroy(write)) << "unload invalidates kernels";
    EXPECT_EQ(read_value<uint32_t>(s, d), 7u);
    EXPECT_QD_OK(qd_mem_free_async(s, d));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// ---------------------------------------------------------------------------------------------
// qd_kernel_from_host_fn / qd_kernel_destroy
// ---------------------------------------------------------------------------------------------

TEST_P(ModuleTest, FromHostFn_Errors) {
    qd_kernel k = 0x5555;
    if (!is_cpu()) {
        EXPECT_QD_ERR(QD_ERROR_NOT_SUPPORTED, "cpu|support|host",
                      qd_kernel_from_host_fn(ctx_, &ok_kernel, "k", &k));
        EXPECT_EQ(k, 0x5555u);
        return;
    }
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "fn|null",
                  qd_kernel_from_host_fn(ctx_, nullptr, "k", &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "out|null",
                  qd_kernel_from_host_fn(ctx_, &ok_kernel, "k", nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx",
                  qd_kernel_from_host_fn(0, &ok_kernel, "k", &k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "context|ctx",
                  qd_kernel_from_host_fn(default_stream_, &ok_kernel, "k", &k));
    EXPECT_EQ(k, 0x5555u);
    // name is optional
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &ok_kernel, nullptr, &k));
    EXPECT_QD_OK(launch0(default_stream_, k));
    EXPECT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(ModuleTest, KernelDestroy_BadHandlesAndTwice_AreInvalidHandle) {
    QDT_REQUIRE_CPU();
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &ok_kernel, "k", &k));
    ASSERT_QD_OK(qd_kernel_destroy(k));
    for (qd_kernel x : {(qd_kernel)0, k, (qd_kernel)default_stream_, (qd_kernel)ctx_, kAllOnes})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", qd_kernel_destroy(x));
}

TEST_P(ModuleTest, KernelDestroy_QueuedWorkStillRuns) {
    QDT_REQUIRE_CPU();
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(
        ctx_,
        [](const qd_host_kernel_info *, void *const *a) {
            **static_cast<std::atomic<int> *const *>(a[0]) += 1;
            return 0;
        },
        "inc", &k));
    std::atomic<int> counter{0};
    std::atomic<int> *p = &counter;
    qd_stream s = new_stream();
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    qd_arg arg = {&p, sizeof p};
    for (int i = 0; i < 5; ++i) {
        ASSERT_QD_OK(qd_launch(s, k, nullptr, &arg, 1));
    }
    ASSERT_QD_OK(qd_kernel_destroy(k));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_launch(s, k, nullptr, &arg, 1));
    gate.open();
    EXPECT_QD_OK(qd_stream_synchronize(s));
    EXPECT_EQ(counter.load(), 5);
    EXPECT_QD_OK(qd_stream_destroy(s));
}

QDT_INSTANTIATE_BACKENDS(ModuleTest);

// ---------------------------------------------------------------------------------------------
// qd_launch: validation
// ---------------------------------------------------------------------------------------------

TEST_P(LaunchTest, NullConfig_IsOneBlockOfOneThread) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint32_t n = 64;
    uint64_t data = alloc(s, 4 * n);
    ASSERT_QD_OK(qd_memset_async(s, data, 0, 4 * n));
    uint32_t count = n;
    qd_arg args[2] = {{&data, 8}, {&count, 4}};
    ASSERT_QD_OK(qd_launch(s, kernels_->add_one(), nullptr, args, 2));
    std::vector<uint8_t> host = read_back(s, data, 4 * n);
    const int32_t *v = reinterpret_cast<const int32_t *>(host.data());
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(v[i], 1) << "grid-stride over one thread covers all";
    }
    EXPECT_QD_OK(qd_mem_free_async(s, data));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(LaunchTest, Grid3D_EveryElementTouchedOnce) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    const uint32_t n = 5000;
    uint64_t data = alloc(s, 4 * n);
    ASSERT_QD_OK(qd_memset_async(s, data, 0, 4 * n));
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = 3;
    cfg.grid[1] = 2;
    cfg.grid[2] = 2;
    cfg.block[0] = 32;
    cfg.block[1] = 1;
    cfg.block[2] = 1;
    uint32_t count = n;
    qd_arg args[2] = {{&data, 8}, {&count, 4}};
    ASSERT_QD_OK(qd_launch(s, kernels_->add_one(), &cfg, args, 2));
    std::vector<uint8_t> host = read_back(s, data, 4 * n);
    const int32_t *v = reinterpret_cast<const int32_t *>(host.data());
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_EQ(v[i], 1) << i;
    }
    EXPECT_QD_OK(qd_mem_free_async(s, data));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(LaunchTest, InvalidConfigAndArgs_AreRejectedAndNothingRuns) {
    QDT_REQUIRE_KERNELS();
    qd_stream s = new_stream();
    uint64_t dst = alloc(s, 4);
    ASSERT_QD_OK(qd_memset_async(s, dst, 0, 4));
    uint32_t value = 77;
    qd_arg good[2] = {{&dst, 8}, {&value, 4}};
    qd_kernel k = kernels_->write_value();
    for (int d = 0; d < 6; ++d) {
        qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
        (d < 3 ? cfg.grid[d] : cfg.block[d - 3]) = 0;
        EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT,
                      d < 3 ? "grid|dimension|dim" : "block|dimension|dim",
                      qd_launch(s, k, &cfg, good, 2));
    }
    qd_launch_config small = QD_LAUNCH_CONFIG_INIT;
    small.struct_size = 0;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "struct_size|size", qd_launch(s, k, &small, good, 2));
    small.struct_size = sizeof small - 4;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "struct_size|size", qd_launch(s, k, &small, good, 2));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "args|null", qd_launch(s, k, nullptr, nullptr, 2));
    qd_arg zero_size[2] = {{&dst, 8}, {&value, 0}};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "size|arg", qd_launch(s, k, nullptr, zero_size, 2));
    qd_arg null_data[2] = {{&dst, 8}, {nullptr, 4}};
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "data|null|arg",
                  qd_launch(s, k, nullptr, null_data, 2));
    std::vector<qd_arg> many(QD_MAX_ARGS + 1, qd_arg{&value, 4});
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "args|num_args|64",
                  qd_launch(s, k, nullptr, many.data(), QD_MAX_ARGS + 1));
    std::vector<uint8_t> big(QD_MAX_ARG_BYTES + 1);
    qd_arg too_big[1] = {{big.data(), big.size()}};
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "4096|size|bytes", qd_launch(s, k, nullptr, too_big, 1));
    qd_arg sum_too_big[2] = {{big.data(), 2048}, {big.data(), 2049}};
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "4096|size|bytes", qd_launch(s, k, nullptr, sum_too_big, 2));
    qd_arg wrap[2] = {{big.data(), 16}, {big.data(), kAllOnes - 8}};
    EXPECT_QD(QD_ERROR_OVERFLOW, qd_launch(s, k, nullptr, wrap, 2));
    qd_launch_config huge = QD_LAUNCH_CONFIG_INIT;
    huge.grid[0] = 65536;
    huge.grid[1] = 65536;
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "grid|block|overflow", qd_launch(s, k, &huge, good, 2));
    huge = qd_launch_config QD_LAUNCH_CONFIG_INIT;
    huge.grid[0] = huge.grid[1] = huge.grid[2] = 0xffffffffu;
    EXPECT_QD(QD_ERROR_OVERFLOW, qd_launch(s, k, &huge, good, 2));
    huge = qd_launch_config QD_LAUNCH_CONFIG_INIT;
    huge.block[0] = 65536;
    huge.block[2] = 65536;
    EXPECT_QD_ERR(QD_ERROR_OVERFLOW, "block|thread|overflow", qd_launch(s, k, &huge, good, 2));
    EXPECT_EQ(read_value<uint32_t>(s, dst), 0u) << "a rejected launch ran";
    EXPECT_QD_OK(qd_mem_free_async(s, dst));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(LaunchTest, ArgumentLimits_Themselves_AreAccepted) {
    QDT_REQUIRE_CPU();
    std::atomic<int> calls{0};
    static std::atomic<int> *s_calls;
    s_calls = &calls;
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(
        ctx_,
        [](const qd_host_kernel_info *, void *const *) {
            s_calls->fetch_add(1);
            return 0;
        },
        "limits", &k));
    std::vector<uint32_t> values(QD_MAX_ARGS, 1);
    std::vector<qd_arg> args;
    for (uint32_t &v : values) args.push_back({&v, 4});
    EXPECT_QD_OK(qd_launch(default_stream_, k, nullptr, args.data(), QD_MAX_ARGS));
    std::vector<uint8_t> big(QD_MAX_ARG_BYTES, 1);
    qd_arg one[1] = {{big.data(), big.size()}};
    EXPECT_QD_OK(qd_launch(default_stream_, k, nullptr, one, 1));
    EXPECT_QD_OK(qd_launch(default_stream_, k, nullptr, nullptr, 0));
    EXPECT_QD_OK(qd_stream_synchronize(default_stream_));
    EXPECT_EQ(calls.load(), 3);
    EXPECT_QD_OK(qd_kernel_destroy(k));
}

TEST_P(LaunchTest, BadHandlesAndWrongContext_AreErrors) {
    QDT_REQUIRE_KERNELS();
    qd_context c2 = other_context();
    std::unique_ptr<TestKernels> foreign = make_test_kernels(backend(), c2, nullptr);
    ASSERT_TRUE(foreign);
    qd_stream c2_stream = 0;
    ASSERT_QD_OK(qd_context_default_stream(c2, &c2_stream));
    qd_stream dead = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(dead));
    qd_kernel k = kernels_->noop();
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", launch0(0, k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", launch0(dead, k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", launch0(k, k));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", launch0(default_stream_, 0));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", launch0(default_stream_, default_stream_));
    EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "kernel", launch0(default_stream_, kAllOnes));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", launch0(default_stream_, foreign->noop()));
    EXPECT_QD_ERR(QD_ERROR_WRONG_CONTEXT, "context", launch0(c2_stream, k));
    foreign.reset();
}

TEST_P(LaunchTest, GpuBlockTooLarge_IsLaunchFailed) {
    QDT_REQUIRE_GPU();
    QDT_REQUIRE_KERNELS();
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    cfg.block[0] = 4096;  // above every GPU's per-block thread limit
    EXPECT_QD_ERR(QD_ERROR_LAUNCH_FAILED, "",
                  qd_launch(default_stream_, kernels_->noop(), &cfg, nullptr, 0));
}

// ---------------------------------------------------------------------------------------------
// CPU launch semantics
// ---------------------------------------------------------------------------------------------

namespace {
struct InfoLog {
    std::mutex mutex;
    std::vector<qd_host_kernel_info> infos;
    std::vector<std::thread::id> threads;
    bool shared_zeroed = true;
    bool shared_null_when_zero = true;
};
InfoLog *g_info_log;

int32_t record_info(const qd_host_kernel_info *info, void *const *) {
    std::lock_guard<std::mutex> lock(g_info_log->mutex);
    g_info_log->infos.push_back(*info);
    g_info_log->threads.push_back(std::this_thread::get_id());
    if (info->shared_mem_bytes == 0) {
        if (info->shared_mem != nullptr) g_info_log->shared_null_when_zero = false;
    } else {
        uint8_t *p = static_cast<uint8_t *>(info->shared_mem);
        for (uint32_t i = 0; i < info->shared_mem_bytes; ++i)
            if (p[i] != 0) g_info_log->shared_zeroed = false;
        memset(p, 0xAB, info->shared_mem_bytes);  // dirty it: the next block must see zeros
    }
    return 0;
}
}  // namespace

TEST_P(LaunchTest, Cpu_KernelCalledOncePerBlockInRowMajorOrderWithInfo) {
    QDT_REQUIRE_CPU();
    InfoLog log;
    g_info_log = &log;
    qd_kernel k = 0;
    ASSERT_QD_OK(qd_kernel_from_host_fn(ctx_, &record_info, "record_info", &k));
    qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = 3;
    cfg.grid[1] = 2;
    cfg.grid[2] = 2;
    cfg.block[0] = 4;
    cfg.block[1] = 5;
    cfg.block[2] = 6;
    cfg.shared_mem_bytes = 100;
    qd_stream s = new_stream();
    ASSERT_QD_OK(qd_launch(s, k, &cfg, nullptr, 0));
    cfg = qd_launch_config QD_LAUNCH_CONFIG_INIT;
    cfg.grid[0] = 2;
    ASSERT_QD_OK(qd_launch(s, k, &cfg, nullptr, 0));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_EQ(log.infos.size(), 12u + 2u);
    size_t i = 0;
    for (uint32_t z = 0; z < 2; ++z)
        for (uint32_t y = 0; y < 2; ++y)
            for (uint32_t x = 0; x < 3; ++x, ++i) {
                const qd_host_kernel_info &in = log.infos[i];
                EXPECT_EQ(in.struct_size, sizeof(qd_host_kernel_info));
                EXPECT_EQ(in.block_idx[0], x) << i;
                EXPECT_EQ(in.block_idx[1], y) << i;
                EXPECT_EQ(in.block_idx[2], z) << i;
                EXPECT_EQ(in.grid_dim[0], 3u);
                EXPECT_EQ(in.grid_dim[1], 2u);
                EXPECT_EQ(in.grid_dim[2], 2u);
                EXPECT_EQ(in.block_dim[0], 4u);
                EXPECT_EQ(in.block_dim[1], 5u);
                EXPECT_EQ(in.block_dim[2], 6u);
                EXPECT_EQ(in.shared_mem_bytes, 100u);
                EXPECT_NE(in.shared_mem, nullptr);
            }
    EXPECT_EQ(log.infos[12].shared_mem_bytes, 0u);
    EXPECT_EQ(log.infos[13].block_idx[0], 1u);
    EXPECT_TRUE(log.shared_zeroed) << "each block gets zeroed shared memory";
    EXPECT_TRUE(log.shared_null_when_zero) << "shared_mem is NULL when shared_mem_bytes is 0";
    for (size_t j = 1; j < 12; ++j) {
        EXPECT_EQ(log.threads[j], log.threads[0]) << "blocks run on one worker thread";
    }
    EXPECT_NE(log.threads[0], std::this_thread::get_id());
    EXPECT_QD_OK(qd_kernel_destroy(k));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(LaunchTest, Cpu_LaunchIsAsynchronous) {
    QDT_REQUIRE_CPU();
    qd_stream s = new_stream();
    Gate gate;
    ASSERT_QD_OK(gate.enqueue(s));
    uint64_t dst = alloc(s, 4);
    ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), dst, 5));
    EXPECT_QD(QD_NOT_READY, qd_stream_query(s));
    gate.open();
    EXPECT_EQ(read_value<uint32_t>(s, dst), 5u);
    EXPECT_QD_OK(qd_mem_free_async(s, dst));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// ---------------------------------------------------------------------------------------------
// Argument lifetime and ordering
// ---------------------------------------------------------------------------------------------

TEST_P(LaunchTest, ArgumentStorage_OverwrittenRightAfterLaunch_EveryTaskSeesItsOwnArgs) {
    QDT_REQUIRE_KERNELS();
    const uint32_t K = 8;
    const uint32_t rounds = (uint32_t)scaled(50, 5);
    std::vector<qd_stream> streams(K);
    for (qd_stream &s : streams) s = new_stream();
    uint64_t out = alloc(streams[0], 8 * (uint64_t)K * rounds);
    ASSERT_QD_OK(qd_memset_async(streams[0], out, 0, 8 * (uint64_t)K * rounds));
    declare_slots(kernels_->check_blob(), {0});  // each launch its own word of `out`
    ASSERT_QD_OK(qd_stream_synchronize(streams[0]));
    std::vector<uint64_t> expected(K * rounds);
    // One shared argument buffer, as the buggy runtimes had: reused for every launch.
    struct {
        uint64_t out;
        uint32_t index;
        uint8_t blob[QDT_BLOB_BYTES];
    } shared;
    qd_arg args[3] = {{&shared.out, 8}, {&shared.index, 4}, {shared.blob, QDT_BLOB_BYTES}};
    for (uint32_t r = 0; r < rounds; ++r) {
        for (uint32_t k = 0; k < K; ++k) {
            // Delay each stream so the kernel runs long after the storage was overwritten.
            if (r == 0) {
                ASSERT_QD_OK(launch_spin(streams[k], kernels_->spin(), 2000));
            }
            uint32_t index = r * K + k;
            shared.out = out;
            shared.index = index;
            for (uint32_t b = 0; b < QDT_BLOB_BYTES; ++b)
                shared.blob[b] = (uint8_t)(index * 31 + b * 7);
            expected[index] = blob_checksum(shared.blob, index);
            ASSERT_QD_OK(qd_launch(streams[k], kernels_->check_blob(), nullptr, args, 3));
            memset(&shared, 0xCD, sizeof shared);
            shared.out = 0;  // a task reading this would write to NULL
        }
    }
    for (qd_stream s : streams) {
        ASSERT_QD_OK(qd_stream_synchronize(s));
    }
    std::vector<uint8_t> host = read_back(streams[0], out, 8 * (uint64_t)K * rounds);
    const uint64_t *got = reinterpret_cast<const uint64_t *>(host.data());
    int wrong = 0;
    for (uint32_t i = 0; i < K * rounds; ++i) wrong += got[i] != expected[i];
    EXPECT_EQ(wrong, 0) << "tasks that saw another launch's (or overwritten) arguments";
    EXPECT_QD_OK(qd_mem_free_async(streams[0], out));
    for (qd_stream s : streams) {
        EXPECT_QD_OK(qd_stream_destroy(s));
    }
}

// Moved from tests/gpu/gpu_test.cpp (Gpu.AddOne_EveryElementIncrementedTwice): a grid of many
// blocks of many threads covers every element, and two launches on one stream both apply.
TEST_P(LaunchTest, AddOne_ManyBlocksTwice_EveryElementIncrementedTwice) {
    QDT_REQUIRE_KERNELS();
    const uint32_t n = 100000;
    qd_stream s = new_stream();
    uint64_t d = alloc(s, n * sizeof(int32_t));
    ASSERT_QD_OK(qd_memset_async(s, d, 0, n * sizeof(int32_t)));
    for (int i = 0; i < 2; ++i) {
        ASSERT_QD_OK(launch_add_one(s, kernels_->add_one(), d, n, 64, 256));
    }
    std::vector<uint8_t> bytes = read_back(s, d, n * sizeof(int32_t));
    const int32_t *v = reinterpret_cast<const int32_t *>(bytes.data());
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < n; ++i) wrong += v[i] != 2;
    EXPECT_EQ(wrong, 0u) << "of " << n << " elements";
    EXPECT_QD_OK(qd_mem_free_async(s, d));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// Moved from tests/gpu/gpu_test.cpp (Gpu.FreshThread_NeedsNoSetup): a thread that never called qd
// (on CUDA: no current context) gets a kernel, launches, copies and synchronises without setup.
TEST_P(LaunchTest, FreshThread_KernelGetLaunchCopySync_NeedNoSetup) {
    QDT_LOAD_TEST_MODULE(m);
    uint64_t d = alloc(default_stream_, 4);
    ASSERT_QD_OK(qd_stream_synchronize(default_stream_));
    qd_status st = QD_ERROR_INTERNAL;
    const char *step = "thread did not run";
    uint32_t got = 0;
    std::thread([&] {
        qd_kernel k = 0;
        step = "qd_kernel_get";
        st = qd_kernel_get(m, "qd_test_write_value", &k);
        if (st == QD_SUCCESS)
            step = "qd_launch", st = launch_write_value(default_stream_, k, d, 17);
        if (st == QD_SUCCESS)
            step = "qd_memcpy_async",
            st = qd_memcpy_async(default_stream_, (uint64_t)(uintptr_t)&got, d, 4);
        if (st == QD_SUCCESS)
            step = "qd_stream_synchronize", st = qd_stream_synchronize(default_stream_);
        if (k) (void)qd_kernel_destroy(k);
    }).join();
    EXPECT_EQ(st, QD_SUCCESS) << step << ": " << qd_status_name(st);
    EXPECT_EQ(got, 17u);
    EXPECT_QD_OK(qd_mem_free_async(default_stream_, d));
    EXPECT_QD_OK(qd_module_unload(m));
}

TEST_P(LaunchTest, OneStream_ManySmallTasks_RunInOrder) {
    QDT_REQUIRE_KERNELS();
    const uint32_t n = (uint32_t)scaled(2000, 100);
    qd_stream s = new_stream();
    uint64_t log = alloc(s, 4 * (1 + (uint64_t)n));
    ASSERT_QD_OK(qd_memset_async(s, log, 0, 4 * (1 + (uint64_t)n)));
    for (uint32_t i = 0; i < n; ++i) {
        ASSERT_QD_OK(launch_append_log(s, kernels_->append_log(), log, i));
        if (i % 97 == 0) {
            ASSERT_QD_OK(launch_spin(s, kernels_->spin(), 100));
        }
    }
    std::vector<uint8_t> host = read_back(s, log, 4 * (1 + (uint64_t)n));
    const uint32_t *v = reinterpret_cast<const uint32_t *>(host.data());
    ASSERT_EQ(v[0], n);
    uint32_t out_of_order = 0;
    for (uint32_t i = 0; i < n; ++i) out_of_order += v[1 + i] != i;
    EXPECT_EQ(out_of_order, 0u);
    EXPECT_QD_OK(qd_mem_free_async(s, log));
    EXPECT_QD_OK(qd_stream_destroy(s));
}

// ---------------------------------------------------------------------------------------------
// qd_launch_host_fn
// ---------------------------------------------------------------------------------------------

namespace {
struct OrderLog {
    std::vector<int> order;  // written only by callbacks of one stream: stream order is the lock
    int next = 0;
};
struct OrderItem {
    OrderLog *log;
    int value;
};
void append_order(void *user) {
    OrderItem *item = static_cast<OrderItem *>(user);
    item->log->order.push_back(item->value);
}
}  // namespace

TEST_P(LaunchTest, HostFn_RunInStreamOrderAndInterleaveWithKernels) {
    const int n = (int)scaled(500, 50);
    qd_stream s = new_stream();
    OrderLog log;
    std::vector<OrderItem> items(n);
    uint64_t dst = kernels_ ? alloc(s, 4) : 0;
    for (int i = 0; i < n; ++i) {
        items[i] = {&log, i};
        ASSERT_QD_OK(qd_launch_host_fn(s, &append_order, &items[i]));
        if (kernels_ && i % 50 == 0) {
            ASSERT_QD_OK(launch_write_value(s, kernels_->write_value(), dst, i));
        }
    }
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_EQ(log.order.size(), (size_t)n);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(log.order[i], i);
    }
    if (kernels_) {
        EXPECT_QD_OK(qd_mem_free_async(s, dst));
    }
    EXPECT_QD_OK(qd_stream_destroy(s));
}

TEST_P(LaunchTest, HostFn_Errors_AndFnNeverCalledOnFailure) {
    Flag f;
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "fn|null",
                  qd_launch_host_fn(default_stream_, nullptr, &f));
    qd_stream dead = new_stream();
    ASSERT_QD_OK(qd_stream_destroy(dead));
    for (qd_stream x : {(qd_stream)0, dead, (qd_stream)ctx_, kAllOnes})
        EXPECT_QD_ERR(QD_ERROR_INVALID_HANDLE, "stream", qd_launch_host_fn(x, &Flag::set_cb, &f));
    EXPECT_QD_OK(qd_context_synchronize(ctx_));
    EXPECT_FALSE(f.is_set());
}

QDT_INSTANTIATE_BACKENDS(LaunchTest);
