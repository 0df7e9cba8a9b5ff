// The test-only HIP runtime (hip_over_cuda.cpp) checked against the CUDA driver: the runtime is
// loaded by path (dlopen of the built libamdhip64.so.5), libcuda.so.1 by its soname, and each
// HIP answer compared with CUDA's own. Every function type is the real header's (decltype).
//
// Without a CUDA device every GPU test skips and says why; the export, error-name and constant
// checks run everywhere, and so does the no-device check: directly where there is no CUDA
// device, and in a child process with CUDA_VISIBLE_DEVICES empty where there is one. Nothing
// here waits on time: a stream callback is awaited on a condition variable.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <gtest/gtest.h>
#include <hip/hip_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backends/hip/hip_constants.h"

extern char **environ;

namespace {

// --- The runtime under test, by path -----------------------------------------------------------

// clang-format off
#define QD_HIP_FUNCTIONS(X)                                                                     \
    X(hipGetDeviceCount) X(hipInit) X(hipDriverGetVersion) X(hipGetErrorName)                    \
    X(hipGetErrorString) X(hipDeviceGet) X(hipDeviceGetName) X(hipDeviceGetAttribute)            \
    X(hipDeviceTotalMem) X(hipDevicePrimaryCtxRetain) X(hipDevicePrimaryCtxRelease)              \
    X(hipGetDevice) X(hipSetDevice) X(hipDeviceGetStreamPriorityRange)                           \
    X(hipStreamCreateWithPriority) X(hipStreamDestroy) X(hipStreamQuery) X(hipStreamSynchronize) \
    X(hipStreamWaitEvent) X(hipStreamGetPriority) X(hipEventCreateWithFlags) X(hipEventDestroy)  \
    X(hipEventRecord) X(hipEventQuery) X(hipEventSynchronize) X(hipEventElapsedTime)             \
    X(hipModuleLoadDataEx) X(hipModuleGetFunction) X(hipModuleUnload) X(hipModuleLaunchKernel)   \
    X(hipStreamAddCallback) X(hipFreeAsync) X(hipFree) X(hipMemcpyAsync) X(hipMemsetD8Async)     \
    X(hipHostFree) X(hipStreamBeginCapture) X(hipStreamEndCapture) X(hipStreamIsCapturing)       \
    X(hipGraphInstantiate) X(hipGraphInstantiateWithFlags) X(hipGraphLaunch)                     \
    X(hipGraphExecUpdate) X(hipGraphExecDestroy) X(hipGraphDestroy) X(hipDeviceCanAccessPeer)    \
    X(hipCtxEnablePeerAccess) X(hipDeviceGetMemPool) X(hipMemPoolSetAccess)                      \
    X(hipStreamGetCaptureInfo_v2) X(hipGraphKernelNodeGetParams) X(hipGraphExecKernelNodeSetParams)
// clang-format on

// hipMallocAsync and hipHostMalloc also have C++ template overloads in the header: their C
// declaration is picked by a cast (unevaluated), which fails to compile if it is not this type.
using MallocAsyncFn = hipError_t (*)(void **, size_t, hipStream_t);
using HostMallocFn = hipError_t (*)(void **, size_t, unsigned int);
static_assert(
    std::is_same_v<decltype(static_cast<MallocAsyncFn>(&::hipMallocAsync)), MallocAsyncFn>);
static_assert(std::is_same_v<decltype(static_cast<HostMallocFn>(&::hipHostMalloc)), HostMallocFn>);

struct Hip {
    void *lib = nullptr;
    std::string error;
#define QD_HIP_MEMBER(name) decltype(&::name) name = nullptr;
    QD_HIP_FUNCTIONS(QD_HIP_MEMBER)
#undef QD_HIP_MEMBER
    MallocAsyncFn hipMallocAsync = nullptr;
    HostMallocFn hipHostMalloc = nullptr;
    // Only the host-func build exports it (host-func/README.md).
    decltype(&::hipLaunchHostFunc) hipLaunchHostFunc = nullptr;
};

// `variable` names the library when the binary runs away from its build tree (tools/gpu-check
// carries the runtime, its host-func build and this test to the GPU machine).
Hip load_hip(const char *variable, const char *built) {
    Hip h;
    const char *path = std::getenv(variable);
    h.lib = dlopen(path && *path ? path : built, RTLD_NOW | RTLD_LOCAL);
    if (!h.lib) {
        h.error = dlerror();
        return h;
    }
#define QD_HIP_BIND(name)                                                                          \
    h.name = reinterpret_cast<decltype(h.name)>(dlsym(h.lib, #name));                              \
    if (!h.name) h.error += " no " #name;
    QD_HIP_FUNCTIONS(QD_HIP_BIND)
    QD_HIP_BIND(hipMallocAsync)
    QD_HIP_BIND(hipHostMalloc)
#undef QD_HIP_BIND
    h.hipLaunchHostFunc =
        reinterpret_cast<decltype(h.hipLaunchHostFunc)>(dlsym(h.lib, "hipLaunchHostFunc"));
    return h;
}

const Hip &hip() {
    static const Hip loaded = load_hip("QD_HIP_RUNTIME", QD_HIP_OVER_CUDA_PATH);
    return loaded;
}

// The host-func build (a second library of the same soname, loaded by its own path).
const Hip &hip_host_func() {
    static const Hip loaded = load_hip("QD_HIP_RUNTIME_HOST_FUNC", QD_HIP_OVER_CUDA_HOST_FUNC_PATH);
    return loaded;
}

// --- The CUDA driver, the reference ------------------------------------------------------------

#define QD_STR2(x) #x
#define QD_STR(x) QD_STR2(x)  // the header's versioned name: cuMemcpyDtoH -> "cuMemcpyDtoH_v2"

// clang-format off
#define QD_CU_FUNCTIONS(X)                                                                      \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)        \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                      \
    X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent)                           \
    X(cuCtxGetStreamPriorityRange) X(cuStreamGetCtx) X(cuMemcpyDtoH) X(cuGetErrorName)          \
    X(cuDeviceCanAccessPeer) X(cuMemPoolGetAccess)
// clang-format on

struct Cuda {
    std::string why_not;  // empty when usable
    int count = 0;
#define QD_CU_MEMBER(name) decltype(&::name) name = nullptr;
    QD_CU_FUNCTIONS(QD_CU_MEMBER)
#undef QD_CU_MEMBER
};

bool cuda_library_present() {
    static const bool present = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr;
    return present;
}

const Cuda &cuda() {
    static const Cuda loaded = [] {
        Cuda c;
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            c.why_not = std::string("no CUDA driver (") + (e ? e : "libcuda.so.1") + ")";
            return c;
        }
#define QD_CU_BIND(name)                                                                           \
    c.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, QD_STR(name)));                        \
    if (!c.name) c.why_not += " no " QD_STR(name);
        QD_CU_FUNCTIONS(QD_CU_BIND)
#undef QD_CU_BIND
        if (!c.why_not.empty()) {
            c.why_not = "the CUDA driver lacks" + c.why_not;
            return c;
        }
        CUresult r = c.cuInit(0);
        if (r == CUDA_SUCCESS) r = c.cuDeviceGetCount(&c.count);
        if (r != CUDA_SUCCESS) {
            const char *name = nullptr;
            c.cuGetErrorName(r, &name);
            c.why_not = std::string("no CUDA device: cuInit/cuDeviceGetCount: ") +
                        (name ? name : std::to_string(r).c_str());
        } else if (c.count == 0) {
            c.why_not = "no CUDA device: cuDeviceGetCount reports 0";
        }
        return c;
    }();
    return loaded;
}

#define REQUIRE_RUNTIME()                                                                          \
    ASSERT_TRUE(hip().error.empty()) << "loading " QD_HIP_OVER_CUDA_PATH ":" << hip().error

#define REQUIRE_CUDA_DEVICE()                                                                      \
    REQUIRE_RUNTIME();                                                                             \
    if (!cuda().why_not.empty()) GTEST_SKIP() << cuda().why_not

// A PTX kernel (JIT-compiled by the driver for whatever GPU is there): p[i] = v + i, i = tid.x.
constexpr char kFillPtx[] = R"(.version 7.0
.target sm_75
.address_size 64

.visible .entry fill_u32(
    .param .u64 fill_u32_param_0,
    .param .u32 fill_u32_param_1
)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [fill_u32_param_0];
    ld.param.u32 %r1, [fill_u32_param_1];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    add.u32 %r3, %r1, %r2;
    st.global.u32 [%rd4], %r3;
    ret;
}
)";

// Skips when the device has no memory pools (hipMallocAsync needs them).
#define REQUIRE_MEMORY_POOLS()                                                                     \
    do {                                                                                           \
        int pools_ = 0;                                                                            \
        ASSERT_EQ(hip().hipDeviceGetAttribute(&pools_, hipDeviceAttributeMemoryPoolsSupported, 0), \
                  hipSuccess);                                                                     \
        if (!pools_) GTEST_SKIP() << "device 0 has no memory pools (hipMallocAsync)";              \
    } while (0)

// --- Runs everywhere -------------------------------------------------------------------------

TEST(HipOverCuda, ExportsWhatQdResolvesButNotHipLaunchHostFunc) {
    REQUIRE_RUNTIME();
    // Like Debian's libamdhip64.so.5: qd's host functions then go through hipStreamAddCallback.
    EXPECT_EQ(dlsym(hip().lib, "hipLaunchHostFunc"), nullptr);
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void *>(hip().hipInit), &info), 0);
    EXPECT_NE(std::strstr(info.dli_fname, "libamdhip64.so.5"), nullptr) << info.dli_fname;
}

TEST(HipOverCuda, HostFuncBuild_ExportsHipLaunchHostFuncToo) {
    const Hip &h = hip_host_func();
    ASSERT_TRUE(h.error.empty()) << "loading " QD_HIP_OVER_CUDA_HOST_FUNC_PATH ":" << h.error;
    EXPECT_NE(h.hipLaunchHostFunc, nullptr);
    EXPECT_NE(h.lib, hip().lib) << "the two builds are two libraries";
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void *>(h.hipInit), &info), 0);
    EXPECT_NE(std::strstr(info.dli_fname, "host-func/libamdhip64.so.5"), nullptr) << info.dli_fname;
}

TEST(HipOverCuda, ErrorNamesAndStrings) {
    REQUIRE_RUNTIME();
    const Hip &h = hip();
    EXPECT_STREQ(h.hipGetErrorName(hipSuccess), "hipSuccess");
    EXPECT_STREQ(h.hipGetErrorName(hipErrorNoDevice), "hipErrorNoDevice");
    EXPECT_STREQ(h.hipGetErrorName(hipErrorInvalidKernelFile), "hipErrorInvalidKernelFile");
    EXPECT_STREQ(h.hipGetErrorName(hipErrorNotReady), "hipErrorNotReady");
    EXPECT_STREQ(h.hipGetErrorName(hipErrorRuntimeOther), "hipErrorRuntimeOther");
    EXPECT_STREQ(h.hipGetErrorName(static_cast<hipError_t>(12345)), "hipErrorUnknown");
    for (hipError_t e : {hipSuccess, hipErrorNoDevice, hipErrorLaunchFailure, hipErrorUnknown}) {
        const char *text = h.hipGetErrorString(e);
        ASSERT_NE(text, nullptr);
        // The string names the code and this runtime, so a message shows which runtime ran.
        EXPECT_NE(std::strstr(text, h.hipGetErrorName(e)), nullptr) << text;
        EXPECT_NE(std::strstr(text, "hip_over_cuda"), nullptr) << text;
    }
}

TEST(HipOverCuda, ConstantsMatchTheHeaderAtRunTime) {
    // The one constant hip_constants_check.cpp cannot static_assert: a pointer cast.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(hipStreamPerThread),
              static_cast<uintptr_t>(qd::hip_abi::kStreamPerThread));
}

TEST(HipOverCuda, NoDeviceIsHipErrorNoDevice) {
    REQUIRE_RUNTIME();
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    bool hidden = visible && !*visible;
    if (cuda_library_present() && !hidden) {
        // A CUDA driver is here: check in a child that sees no device.
        std::vector<std::string> env_strings;
        for (char **e = environ; *e; ++e)
            if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_strings.push_back(*e);
        env_strings.push_back("CUDA_VISIBLE_DEVICES=");
        std::vector<char *> envp;
        for (std::string &s : env_strings) envp.push_back(s.data());
        envp.push_back(nullptr);
        std::string self = "/proc/self/exe";
        std::string filter = "--gtest_filter=HipOverCuda.NoDeviceIsHipErrorNoDevice";
        char *argv[] = {self.data(), filter.data(), nullptr};
        pid_t pid = 0;
        ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()), 0);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
        EXPECT_EQ(WEXITSTATUS(status), 0) << "the child with CUDA_VISIBLE_DEVICES= failed";
        return;
    }
    const Hip &h = hip();
    int count = -1;
    EXPECT_EQ(h.hipGetDeviceCount(&count), hipErrorNoDevice);
    EXPECT_EQ(count, 0);
    EXPECT_EQ(h.hipInit(0), hipErrorNoDevice);
    EXPECT_EQ(h.hipSetDevice(0), hipErrorNoDevice);
    int device = -1;
    EXPECT_EQ(h.hipGetDevice(&device), hipErrorNoDevice);
    hipStream_t stream = nullptr;
    EXPECT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamDefault, 0), hipErrorNoDevice);
    EXPECT_STREQ(h.hipGetErrorName(hipErrorNoDevice), "hipErrorNoDevice");
}

// --- With a CUDA device ------------------------------------------------------------------------

TEST(HipOverCuda, DeviceCountAndDriverVersionMatchCuda) {
    REQUIRE_CUDA_DEVICE();
    int count = -1;
    ASSERT_EQ(hip().hipGetDeviceCount(&count), hipSuccess);
    EXPECT_EQ(count, cuda().count);
    EXPECT_EQ(hip().hipInit(0), hipSuccess);
    EXPECT_EQ(hip().hipInit(1), hipErrorInvalidValue);
    int version = 0, cu_version = 0;
    ASSERT_EQ(hip().hipDriverGetVersion(&version), hipSuccess);
    ASSERT_EQ(cuda().cuDriverGetVersion(&cu_version), CUDA_SUCCESS);
    EXPECT_EQ(version, cu_version);
}

TEST(HipOverCuda, NamesAttributesAndMemoryMatchCuda) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    const Cuda &c = cuda();
    for (int i = 0; i < c.count; ++i) {
        hipDevice_t device = -1;
        CUdevice cu_device = -1;
        ASSERT_EQ(h.hipDeviceGet(&device, i), hipSuccess);
        ASSERT_EQ(c.cuDeviceGet(&cu_device, i), CUDA_SUCCESS);
        EXPECT_EQ(device, cu_device);
        char name[256] = {}, cu_name[256] = {};
        ASSERT_EQ(h.hipDeviceGetName(name, sizeof name, device), hipSuccess);
        ASSERT_EQ(c.cuDeviceGetName(cu_name, sizeof cu_name, cu_device), CUDA_SUCCESS);
        EXPECT_STREQ(name, cu_name);
        struct {
            hipDeviceAttribute_t hip;
            CUdevice_attribute cuda;
        } const pairs[] = {
            {hipDeviceAttributeComputeCapabilityMajor,
             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
            {hipDeviceAttributeComputeCapabilityMinor,
             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
            {hipDeviceAttributeMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
            {hipDeviceAttributeMemoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
        };
        for (const auto &p : pairs) {
            int value = -1, cu_value = -2;
            ASSERT_EQ(h.hipDeviceGetAttribute(&value, p.hip, i), hipSuccess) << p.hip;
            ASSERT_EQ(c.cuDeviceGetAttribute(&cu_value, p.cuda, cu_device), CUDA_SUCCESS);
            EXPECT_EQ(value, cu_value) << "attribute " << p.hip << " of device " << i;
        }
        int value = 0;
        EXPECT_EQ(h.hipDeviceGetAttribute(&value, hipDeviceAttributeClockRate, i),
                  hipErrorInvalidValue);  // not answered by the test runtime
        size_t bytes = 0, cu_bytes = 1;
        ASSERT_EQ(h.hipDeviceTotalMem(&bytes, device), hipSuccess);
        ASSERT_EQ(c.cuDeviceTotalMem(&cu_bytes, cu_device), CUDA_SUCCESS);
        EXPECT_EQ(bytes, cu_bytes);
    }
    int value = 0;
    EXPECT_EQ(h.hipDeviceGetAttribute(&value, hipDeviceAttributeMultiprocessorCount, c.count),
              hipErrorInvalidDevice);
}

// The primary context of device `ordinal`, as CUDA sees it (retained; release with the ordinal).
CUcontext cuda_primary(int ordinal) {
    CUdevice device = 0;
    CUcontext ctx = nullptr;
    EXPECT_EQ(cuda().cuDeviceGet(&device, ordinal), CUDA_SUCCESS);
    EXPECT_EQ(cuda().cuDevicePrimaryCtxRetain(&ctx, device), CUDA_SUCCESS);
    return ctx;
}
void cuda_release_primary(int ordinal) {
    CUdevice device = 0;
    EXPECT_EQ(cuda().cuDeviceGet(&device, ordinal), CUDA_SUCCESS);
    EXPECT_EQ(cuda().cuDevicePrimaryCtxRelease(device), CUDA_SUCCESS);
}

TEST(HipOverCuda, CurrentDeviceIsPerThreadAndFollowsTheCudaContext) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    const Cuda &c = cuda();
    const int last = c.count - 1;
    std::thread([&] {  // a fresh thread: no CUDA context current, HIP's device 0
        CUcontext current = reinterpret_cast<CUcontext>(1);
        ASSERT_EQ(c.cuCtxGetCurrent(&current), CUDA_SUCCESS);
        ASSERT_EQ(current, nullptr);
        int device = -1;
        ASSERT_EQ(h.hipGetDevice(&device), hipSuccess);
        EXPECT_EQ(device, 0);
        EXPECT_EQ(h.hipSetDevice(c.count), hipErrorInvalidDevice);
        EXPECT_EQ(h.hipSetDevice(-1), hipErrorInvalidDevice);

        // hipSetDevice makes the device's primary context current.
        ASSERT_EQ(h.hipSetDevice(last), hipSuccess);
        ASSERT_EQ(c.cuCtxGetCurrent(&current), CUDA_SUCCESS);
        EXPECT_EQ(current, cuda_primary(last));
        cuda_release_primary(last);
        ASSERT_EQ(h.hipGetDevice(&device), hipSuccess);
        EXPECT_EQ(device, last);

        // No context current: the thread's own device.
        ASSERT_EQ(c.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
        ASSERT_EQ(h.hipGetDevice(&device), hipSuccess);
        EXPECT_EQ(device, last);

        // A context made current by CUDA: its device.
        CUcontext first = cuda_primary(0);
        ASSERT_EQ(c.cuCtxSetCurrent(first), CUDA_SUCCESS);
        ASSERT_EQ(h.hipGetDevice(&device), hipSuccess);
        EXPECT_EQ(device, 0);
        ASSERT_EQ(c.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
        cuda_release_primary(0);

        // Another thread still starts at device 0.
        std::thread([&] {
            int other = -1;
            ASSERT_EQ(h.hipGetDevice(&other), hipSuccess);
            EXPECT_EQ(other, 0);
        }).join();
    })
        .join();
}

TEST(HipOverCuda, StreamsAreCreatedOnTheCurrentDevice) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    const Cuda &c = cuda();
    const int last = c.count - 1;
    std::thread([&] {
        ASSERT_EQ(h.hipSetDevice(last), hipSuccess);
        int least = 0, greatest = 0, cu_least = 1, cu_greatest = 1;
        ASSERT_EQ(h.hipDeviceGetStreamPriorityRange(&least, &greatest), hipSuccess);
        ASSERT_EQ(c.cuCtxGetStreamPriorityRange(&cu_least, &cu_greatest), CUDA_SUCCESS);
        EXPECT_EQ(least, cu_least);
        EXPECT_EQ(greatest, cu_greatest);

        // Created with no context current: HIP's current device's primary context is used.
        ASSERT_EQ(c.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
        hipStream_t stream = nullptr;
        ASSERT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, greatest),
                  hipSuccess);
        CUcontext ctx = nullptr;
        ASSERT_EQ(c.cuStreamGetCtx(reinterpret_cast<CUstream>(stream), &ctx), CUDA_SUCCESS);
        EXPECT_EQ(ctx, cuda_primary(last));
        cuda_release_primary(last);
        int priority = 0;
        ASSERT_EQ(h.hipStreamGetPriority(stream, &priority), hipSuccess);
        EXPECT_EQ(priority, greatest);
        EXPECT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
        EXPECT_EQ(h.hipStreamQuery(stream), hipSuccess);  // idle after the synchronize
        EXPECT_EQ(h.hipStreamDestroy(stream), hipSuccess);

        hipStream_t bad = nullptr;
        EXPECT_EQ(h.hipStreamCreateWithPriority(&bad, 0x80, 0), hipErrorInvalidValue);
    }).join();
}

TEST(HipOverCuda, MemcpyRoundTrip) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    constexpr size_t kBytes = 4096;
    std::vector<unsigned char> in(kBytes), out(kBytes, 0), expected(kBytes);
    for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
    expected = in;
    std::memset(expected.data() + 100, 0xAB, 50);

    hipStream_t stream = nullptr;
    ASSERT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, 0), hipSuccess);
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(h.hipMallocAsync(&a, kBytes, stream), hipSuccess);
    ASSERT_EQ(h.hipMallocAsync(&b, kBytes, stream), hipSuccess);
    ASSERT_EQ(h.hipMemcpyAsync(a, in.data(), kBytes, hipMemcpyHostToDevice, stream), hipSuccess);
    ASSERT_EQ(h.hipMemsetD8Async(static_cast<char *>(a) + 100, 0xAB, 50, stream), hipSuccess);
    ASSERT_EQ(h.hipMemcpyAsync(b, a, kBytes, hipMemcpyDeviceToDevice, stream), hipSuccess);
    ASSERT_EQ(h.hipMemcpyAsync(out.data(), b, kBytes, hipMemcpyDefault, stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    EXPECT_EQ(out, expected);

    // The same bytes, read by CUDA itself.
    std::vector<unsigned char> cu_out(kBytes, 0);
    ASSERT_EQ(cuda().cuMemcpyDtoH(cu_out.data(), reinterpret_cast<CUdeviceptr>(b), kBytes),
              CUDA_SUCCESS);
    EXPECT_EQ(cu_out, expected);

    EXPECT_EQ(h.hipMemcpyAsync(out.data(), b, kBytes, static_cast<hipMemcpyKind>(7), stream),
              hipErrorInvalidMemcpyDirection);
    EXPECT_EQ(h.hipFreeAsync(a, stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    EXPECT_EQ(h.hipFree(b), hipSuccess);  // a stream-ordered allocation, freed synchronously
    EXPECT_EQ(h.hipFree(nullptr), hipSuccess);
    EXPECT_EQ(h.hipStreamDestroy(stream), hipSuccess);
}

TEST(HipOverCuda, PinnedHostMemory) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    void *host = nullptr;
    ASSERT_EQ(h.hipHostMalloc(&host, 1 << 16, hipHostMallocPortable), hipSuccess);
    ASSERT_NE(host, nullptr);
    std::memset(host, 0x5A, 1 << 16);
    EXPECT_EQ(h.hipHostFree(host), hipSuccess);
    EXPECT_EQ(h.hipHostFree(nullptr), hipSuccess);
    void *numa = nullptr;
    EXPECT_EQ(h.hipHostMalloc(&numa, 64, hipHostMallocNumaUser), hipErrorInvalidValue);
}

TEST(HipOverCuda, EventsRecordWaitAndTime) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    hipStream_t s1 = nullptr, s2 = nullptr;
    ASSERT_EQ(h.hipStreamCreateWithPriority(&s1, hipStreamNonBlocking, 0), hipSuccess);
    ASSERT_EQ(h.hipStreamCreateWithPriority(&s2, hipStreamDefault, 0), hipSuccess);
    hipEvent_t start = nullptr, stop = nullptr, untimed = nullptr, bad = nullptr;
    ASSERT_EQ(h.hipEventCreateWithFlags(&start, hipEventDefault), hipSuccess);
    ASSERT_EQ(h.hipEventCreateWithFlags(&stop, hipEventDefault), hipSuccess);
    ASSERT_EQ(h.hipEventCreateWithFlags(&untimed, hipEventDisableTiming), hipSuccess);
    EXPECT_EQ(h.hipEventCreateWithFlags(&bad, 0x80), hipErrorInvalidValue);

    void *buffer = nullptr;
    ASSERT_EQ(h.hipMallocAsync(&buffer, 1 << 20, s1), hipSuccess);
    ASSERT_EQ(h.hipEventRecord(start, s1), hipSuccess);
    ASSERT_EQ(h.hipMemsetD8Async(buffer, 1, 1 << 20, s1), hipSuccess);
    ASSERT_EQ(h.hipEventRecord(stop, s1), hipSuccess);
    ASSERT_EQ(h.hipEventRecord(untimed, s1), hipSuccess);
    EXPECT_EQ(h.hipStreamWaitEvent(s2, stop, 0), hipSuccess);
    EXPECT_EQ(h.hipStreamWaitEvent(s2, stop, 1), hipErrorInvalidValue);
    ASSERT_EQ(h.hipEventSynchronize(stop), hipSuccess);
    EXPECT_EQ(h.hipEventQuery(stop), hipSuccess);
    float ms = -1;
    ASSERT_EQ(h.hipEventElapsedTime(&ms, start, stop), hipSuccess);
    EXPECT_GE(ms, 0.0f);
    ASSERT_EQ(h.hipEventSynchronize(untimed), hipSuccess);
    EXPECT_EQ(h.hipEventElapsedTime(&ms, start, untimed), hipErrorInvalidHandle);
    ASSERT_EQ(h.hipStreamSynchronize(s2), hipSuccess);
    EXPECT_EQ(h.hipFreeAsync(buffer, s1), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(s1), hipSuccess);
    for (hipEvent_t e : {start, stop, untimed}) EXPECT_EQ(h.hipEventDestroy(e), hipSuccess);
    EXPECT_EQ(h.hipStreamDestroy(s1), hipSuccess);
    EXPECT_EQ(h.hipStreamDestroy(s2), hipSuccess);
}

// What each stream callback saw.
struct CallbackLog {
    std::mutex mutex;
    std::condition_variable done;
    const unsigned char *host = nullptr;
    struct Call {
        int index;
        unsigned char seen;
        hipStream_t stream;
        hipError_t status;
    };
    std::vector<Call> calls;
};
struct CallbackTag {
    CallbackLog *log;
    int index;
};
void record_callback(hipStream_t stream, hipError_t status, void *user_data) {
    auto *tag = static_cast<CallbackTag *>(user_data);
    std::lock_guard<std::mutex> lock(tag->log->mutex);
    tag->log->calls.push_back({tag->index, *tag->log->host, stream, status});
    tag->log->done.notify_all();
}

TEST(HipOverCuda, StreamCallbacksRunInStreamOrderAfterEarlierWork) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    hipStream_t stream = nullptr;
    ASSERT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, 0), hipSuccess);
    void *device = nullptr, *host = nullptr;
    ASSERT_EQ(h.hipMallocAsync(&device, 4096, stream), hipSuccess);
    ASSERT_EQ(h.hipHostMalloc(&host, 4096, hipHostMallocPortable), hipSuccess);
    CallbackLog log;
    log.host = static_cast<const unsigned char *>(host);
    CallbackTag tags[3] = {{&log, 0}, {&log, 1}, {&log, 2}};
    const unsigned char values[3] = {0x11, 0x22, 0x33};
    // Each callback reads the byte that the copy just before it wrote, and the copy after it
    // overwrites: it sees its own value only if it runs after the one and before the other.
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(h.hipMemsetD8Async(device, values[i], 4096, stream), hipSuccess);
        ASSERT_EQ(h.hipMemcpyAsync(host, device, 4096, hipMemcpyDeviceToHost, stream), hipSuccess);
        ASSERT_EQ(h.hipStreamAddCallback(stream, record_callback, &tags[i], 0), hipSuccess);
    }
    EXPECT_EQ(h.hipStreamAddCallback(stream, record_callback, &tags[0], 1), hipErrorInvalidValue);
    {
        std::unique_lock<std::mutex> lock(log.mutex);
        log.done.wait(lock, [&] { return log.calls.size() == 3; });
    }
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    ASSERT_EQ(log.calls.size(), 3u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(log.calls[i].index, i);
        EXPECT_EQ(log.calls[i].seen, values[i]) << "callback " << i;
        EXPECT_EQ(log.calls[i].stream, stream);
        EXPECT_EQ(log.calls[i].status, hipSuccess);
    }
    EXPECT_EQ(h.hipFreeAsync(device, stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    EXPECT_EQ(h.hipHostFree(host), hipSuccess);
    EXPECT_EQ(h.hipStreamDestroy(stream), hipSuccess);
}

TEST(HipOverCuda, ModuleLoadAndLaunch) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    char log[4096] = {};
    hipJitOption options[] = {hipJitOptionErrorLogBuffer, hipJitOptionErrorLogBufferSizeBytes};
    void *values[] = {log, reinterpret_cast<void *>(static_cast<uintptr_t>(sizeof log))};
    hipModule_t module = nullptr;
    ASSERT_EQ(h.hipModuleLoadDataEx(&module, kFillPtx, 2, options, values), hipSuccess) << log;
    hipFunction_t fill = nullptr, missing = nullptr;
    ASSERT_EQ(h.hipModuleGetFunction(&fill, module, "fill_u32"), hipSuccess);
    EXPECT_EQ(h.hipModuleGetFunction(&missing, module, "no_such_kernel"), hipErrorNotFound);

    hipStream_t stream = nullptr;
    ASSERT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, 0), hipSuccess);
    constexpr unsigned kThreads = 64;
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(h.hipMallocAsync(&a, kThreads * 4, stream), hipSuccess);
    ASSERT_EQ(h.hipMallocAsync(&b, kThreads * 4, stream), hipSuccess);
    // Arguments by kernelParams ...
    unsigned base = 1000;
    void *params[] = {&a, &base};
    ASSERT_EQ(h.hipModuleLaunchKernel(fill, 1, 1, 1, kThreads, 1, 1, 0, stream, params, nullptr),
              hipSuccess);
    // ... and by HIP's `extra` buffer (its end marker differs from CUDA's).
    // The kernel's parameters as laid out in memory: a pointer at 0, a u32 at 8; 12 bytes.
    unsigned char packed[12];
    const unsigned base_b = 5000;
    std::memcpy(packed, &b, 8);
    std::memcpy(packed + 8, &base_b, 4);
    size_t packed_size = sizeof packed;
    void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, packed, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, HIP_LAUNCH_PARAM_END};
    ASSERT_EQ(h.hipModuleLaunchKernel(fill, 1, 1, 1, kThreads, 1, 1, 0, stream, nullptr, extra),
              hipSuccess);
    std::vector<unsigned> out_a(kThreads), out_b(kThreads);
    ASSERT_EQ(h.hipMemcpyAsync(out_a.data(), a, kThreads * 4, hipMemcpyDefault, stream),
              hipSuccess);
    ASSERT_EQ(h.hipMemcpyAsync(out_b.data(), b, kThreads * 4, hipMemcpyDefault, stream),
              hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    for (unsigned i = 0; i < kThreads; ++i) {
        EXPECT_EQ(out_a[i], 1000 + i);
        EXPECT_EQ(out_b[i], 5000 + i);
    }
    EXPECT_EQ(h.hipFreeAsync(a, stream), hipSuccess);
    EXPECT_EQ(h.hipFreeAsync(b, stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    EXPECT_EQ(h.hipStreamDestroy(stream), hipSuccess);
    EXPECT_EQ(h.hipModuleUnload(module), hipSuccess);

    // A broken PTX: CUDA_ERROR_INVALID_PTX, which is hipErrorInvalidKernelFile. (Whether the JIT
    // writes a log for it is the driver's business: the CUDA 13 driver writes none.)
    const char broken[] = ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry x( {\n";
    std::memset(log, 0, sizeof log);
    hipModule_t none = nullptr;
    EXPECT_EQ(h.hipModuleLoadDataEx(&none, broken, 2, options, values), hipErrorInvalidKernelFile)
        << log;
    hipJitOption unknown[] = {static_cast<hipJitOption>(999)};
    EXPECT_EQ(h.hipModuleLoadDataEx(&none, kFillPtx, 1, unknown, values), hipErrorInvalidValue);
}

// --- Copies between two devices ----------------------------------------------------------------
// HIP: the copy is performed by the stream's device, whatever device is current, and works
// between any two devices' memory (staged through the host where they are not peers). Each
// device's memory here comes from its stream-ordered pool, which the other device was never
// granted: CUDA's cuMemcpyAsync alone refuses such a copy in the other device's context.

TEST(HipOverCuda, MemcpyAsync_BetweenTwoDevices_WorksWhicheverDeviceIsCurrent) {
    REQUIRE_CUDA_DEVICE();
    if (cuda().count < 2) GTEST_SKIP() << "needs 2 CUDA devices, have " << cuda().count;
    const Hip &h = hip();
    const Cuda &c = cuda();
    for (int d = 0; d < 2; ++d) {
        int pools = 0;
        ASSERT_EQ(h.hipDeviceGetAttribute(&pools, hipDeviceAttributeMemoryPoolsSupported, d),
                  hipSuccess);
        if (!pools) GTEST_SKIP() << "device " << d << " has no memory pools";
    }
    std::thread([&] {  // a fresh thread: its current device is its own
        constexpr size_t kBytes = 1 << 16;
        hipStream_t s0 = nullptr, s1 = nullptr;
        void *a = nullptr, *b = nullptr, *host = nullptr;
        ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
        ASSERT_EQ(h.hipStreamCreateWithPriority(&s0, hipStreamNonBlocking, 0), hipSuccess);
        ASSERT_EQ(h.hipMallocAsync(&a, kBytes, s0), hipSuccess);
        ASSERT_EQ(h.hipMemsetD8Async(a, 0x11, kBytes, s0), hipSuccess);
        ASSERT_EQ(h.hipStreamSynchronize(s0), hipSuccess);
        ASSERT_EQ(h.hipHostMalloc(&host, kBytes, hipHostMallocPortable), hipSuccess);
        ASSERT_EQ(h.hipSetDevice(1), hipSuccess);
        ASSERT_EQ(h.hipStreamCreateWithPriority(&s1, hipStreamNonBlocking, 0), hipSuccess);
        ASSERT_EQ(h.hipMallocAsync(&b, kBytes, s1), hipSuccess);
        ASSERT_EQ(h.hipMemsetD8Async(b, 0x22, kBytes, s1), hipSuccess);
        ASSERT_EQ(h.hipStreamSynchronize(s1), hipSuccess);
        auto *bytes = static_cast<unsigned char *>(host);
        auto count_not = [&](size_t from, size_t to, unsigned char v) {
            size_t n = 0;
            for (size_t i = from; i < to; ++i) n += bytes[i] != v;
            return n;
        };
        CUcontext before = nullptr, after = nullptr;
        ASSERT_EQ(c.cuCtxGetCurrent(&before), CUDA_SUCCESS);

        // Device 1 current, device 1's stream: device 0's memory into pinned host memory.
        std::memset(host, 0, kBytes);
        ASSERT_EQ(h.hipMemcpyAsync(host, a, kBytes, hipMemcpyDefault, s1), hipSuccess);
        ASSERT_EQ(h.hipStreamSynchronize(s1), hipSuccess);
        EXPECT_EQ(count_not(0, kBytes, 0x11), 0u) << "device 0 -> host on device 1's stream";
        ASSERT_EQ(c.cuCtxGetCurrent(&after), CUDA_SUCCESS);
        EXPECT_EQ(after, before) << "the copy left another context current";

        // Device 0's memory into device 1's, on device 1's stream (half of it).
        ASSERT_EQ(h.hipMemcpyAsync(b, a, kBytes / 2, hipMemcpyDefault, s1), hipSuccess);
        ASSERT_EQ(h.hipMemcpyAsync(host, b, kBytes, hipMemcpyDeviceToHost, s1), hipSuccess);
        ASSERT_EQ(h.hipStreamSynchronize(s1), hipSuccess);
        EXPECT_EQ(count_not(0, kBytes / 2, 0x11), 0u) << "device 0 -> device 1";
        EXPECT_EQ(count_not(kBytes / 2, kBytes, 0x22), 0u) << "past the copied half";

        // Device 0 current, device 1's stream: device 1's memory into device 0's, and pinned
        // host memory into device 0's.
        ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
        ASSERT_EQ(h.hipMemcpyAsync(a, static_cast<char *>(b) + kBytes / 2, kBytes / 4,
                                   hipMemcpyDeviceToDevice, s1),
                  hipSuccess);
        std::memset(host, 0x33, kBytes);
        ASSERT_EQ(h.hipMemcpyAsync(static_cast<char *>(a) + kBytes / 2, host, kBytes / 4,
                                   hipMemcpyHostToDevice, s1),
                  hipSuccess);
        ASSERT_EQ(h.hipStreamSynchronize(s1), hipSuccess);
        std::memset(host, 0, kBytes);
        ASSERT_EQ(h.hipMemcpyAsync(host, a, kBytes, hipMemcpyDefault, s0), hipSuccess);
        ASSERT_EQ(h.hipStreamSynchronize(s0), hipSuccess);
        EXPECT_EQ(count_not(0, kBytes / 4, 0x22), 0u) << "device 1 -> device 0";
        EXPECT_EQ(count_not(kBytes / 4, kBytes / 2, 0x11), 0u) << "untouched";
        EXPECT_EQ(count_not(kBytes / 2, 3 * kBytes / 4, 0x33), 0u) << "host -> device 0";

        EXPECT_EQ(h.hipFreeAsync(a, s0), hipSuccess);
        EXPECT_EQ(h.hipFreeAsync(b, s1), hipSuccess);
        EXPECT_EQ(h.hipStreamSynchronize(s0), hipSuccess);
        EXPECT_EQ(h.hipStreamSynchronize(s1), hipSuccess);
        EXPECT_EQ(h.hipHostFree(host), hipSuccess);
        EXPECT_EQ(h.hipStreamDestroy(s0), hipSuccess);
        EXPECT_EQ(h.hipStreamDestroy(s1), hipSuccess);
    })
        .join();
}

// --- Graphs --------------------------------------------------------------------------------------

// A stream, a device buffer and pinned host memory of kGraphBytes on device 0.
constexpr size_t kGraphBytes = 4096;
struct GraphBench {
    const Hip &h;
    hipStream_t stream = nullptr;
    void *device = nullptr;
    void *host = nullptr;

    explicit GraphBench(const Hip &hip_runtime) : h(hip_runtime) {
        EXPECT_EQ(h.hipSetDevice(0), hipSuccess);
        EXPECT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, 0), hipSuccess);
        EXPECT_EQ(h.hipMallocAsync(&device, kGraphBytes, stream), hipSuccess);
        EXPECT_EQ(h.hipHostMalloc(&host, kGraphBytes, hipHostMallocPortable), hipSuccess);
        EXPECT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
        if (host) std::memset(host, 0, kGraphBytes);
    }
    ~GraphBench() {
        EXPECT_EQ(h.hipFreeAsync(device, stream), hipSuccess);
        EXPECT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
        EXPECT_EQ(h.hipHostFree(host), hipSuccess);
        EXPECT_EQ(h.hipStreamDestroy(stream), hipSuccess);
    }
    // Captures `sets` memsets of the device buffer (the last one to `value`) and its copy into
    // the host memory.
    hipGraph_t capture(unsigned char value, int sets = 1) {
        hipGraph_t graph = nullptr;
        EXPECT_EQ(h.hipStreamBeginCapture(stream, hipStreamCaptureModeRelaxed), hipSuccess);
        for (int i = sets; i > 0; --i)
            EXPECT_EQ(h.hipMemsetD8Async(device, static_cast<unsigned char>(value - i + 1),
                                         kGraphBytes, stream),
                      hipSuccess);
        EXPECT_EQ(h.hipMemcpyAsync(host, device, kGraphBytes, hipMemcpyDefault, stream),
                  hipSuccess);
        EXPECT_EQ(h.hipStreamEndCapture(stream, &graph), hipSuccess);
        return graph;
    }
    size_t host_not(unsigned char value) const {
        size_t n = 0;
        for (size_t i = 0; i < kGraphBytes; ++i)
            n += static_cast<unsigned char *>(host)[i] != value;
        return n;
    }
};

// qd grants a device access to another's memory with these four (src/backends/gpu/peer.cpp).
TEST(HipOverCuda, PeerAccess_AsCudaReportsIt_AndAPoolGrantIsCudasOwn) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    const Cuda &c = cuda();
    int can = -1;
    EXPECT_EQ(h.hipDeviceCanAccessPeer(nullptr, 0, 0), hipErrorInvalidValue);
    EXPECT_EQ(h.hipDeviceCanAccessPeer(&can, 0, c.count), hipErrorInvalidDevice);
    EXPECT_EQ(h.hipDeviceCanAccessPeer(&can, -1, 0), hipErrorInvalidDevice);
    ASSERT_EQ(h.hipDeviceCanAccessPeer(&can, 0, 0), hipSuccess);
    EXPECT_EQ(can, 0) << "a device is not its own peer";
    hipMemPool_t pool = nullptr;
    EXPECT_EQ(h.hipDeviceGetMemPool(nullptr, 0), hipErrorInvalidValue);
    EXPECT_EQ(h.hipDeviceGetMemPool(&pool, c.count), hipErrorInvalidDevice);
    if (c.count < 2) GTEST_SKIP() << "the grants need 2 CUDA devices, have " << c.count;
    CUdevice d0 = 0, d1 = 0;
    ASSERT_EQ(c.cuDeviceGet(&d0, 0), CUDA_SUCCESS);
    ASSERT_EQ(c.cuDeviceGet(&d1, 1), CUDA_SUCCESS);
    int cuda_can = -1;
    ASSERT_EQ(c.cuDeviceCanAccessPeer(&cuda_can, d1, d0), CUDA_SUCCESS);
    ASSERT_EQ(h.hipDeviceCanAccessPeer(&can, 1, 0), hipSuccess);
    EXPECT_EQ(can, cuda_can);
    if (!can) GTEST_SKIP() << "device 1 cannot access device 0 (no peer path between them)";
    std::thread([&] {  // a fresh thread: its current device is its own
        ASSERT_EQ(h.hipSetDevice(1), hipSuccess);
        hipCtx_t ctx0 = nullptr;
        ASSERT_EQ(h.hipDevicePrimaryCtxRetain(&ctx0, d0), hipSuccess);
        const hipError_t enabled = h.hipCtxEnablePeerAccess(ctx0, 0);
        EXPECT_TRUE(enabled == hipSuccess || enabled == hipErrorPeerAccessAlreadyEnabled)
            << h.hipGetErrorName(enabled);
        EXPECT_EQ(h.hipCtxEnablePeerAccess(ctx0, 0), hipErrorPeerAccessAlreadyEnabled);
        ASSERT_EQ(h.hipDeviceGetMemPool(&pool, 0), hipSuccess);
        ASSERT_NE(pool, nullptr);
        hipMemAccessDesc bad{};
        bad.location.type = hipMemLocationTypeInvalid;
        bad.location.id = 1;
        bad.flags = hipMemAccessFlagsProtReadWrite;
        EXPECT_EQ(h.hipMemPoolSetAccess(pool, &bad, 1), hipErrorInvalidValue);
        bad.location.type = hipMemLocationTypeDevice;
        bad.flags = static_cast<hipMemAccessFlags>(2);  // no such HIP flag
        EXPECT_EQ(h.hipMemPoolSetAccess(pool, &bad, 1), hipErrorInvalidValue);
        hipMemAccessDesc grant{};
        grant.location.type = hipMemLocationTypeDevice;
        grant.location.id = 1;
        grant.flags = hipMemAccessFlagsProtReadWrite;
        ASSERT_EQ(h.hipMemPoolSetAccess(pool, &grant, 1), hipSuccess);
        // CUDA itself now says device 1 may read and write device 0's pool.
        CUmemLocation where{};
        where.type = CU_MEM_LOCATION_TYPE_DEVICE;
        where.id = 1;
        CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        ASSERT_EQ(c.cuMemPoolGetAccess(&flags, reinterpret_cast<CUmemoryPool>(pool), &where),
                  CUDA_SUCCESS);
        EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        EXPECT_EQ(h.hipDevicePrimaryCtxRelease(d0), hipSuccess);
    })
        .join();
}

TEST(HipOverCuda, StreamCapture_RecordsInsteadOfRunning_AndSaysSo) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    GraphBench g(h);
    hipStreamCaptureStatus status = hipStreamCaptureStatusActive;
    ASSERT_EQ(h.hipStreamIsCapturing(g.stream, &status), hipSuccess);
    EXPECT_EQ(status, hipStreamCaptureStatusNone);
    EXPECT_EQ(h.hipStreamIsCapturing(g.stream, nullptr), hipErrorInvalidValue);
    EXPECT_EQ(h.hipStreamBeginCapture(g.stream, static_cast<hipStreamCaptureMode>(7)),
              hipErrorInvalidValue);
    ASSERT_EQ(h.hipStreamBeginCapture(g.stream, hipStreamCaptureModeRelaxed), hipSuccess);
    ASSERT_EQ(h.hipStreamIsCapturing(g.stream, &status), hipSuccess);
    EXPECT_EQ(status, hipStreamCaptureStatusActive);
    ASSERT_EQ(h.hipMemsetD8Async(g.device, 0x42, kGraphBytes, g.stream), hipSuccess);
    ASSERT_EQ(h.hipMemcpyAsync(g.host, g.device, kGraphBytes, hipMemcpyDefault, g.stream),
              hipSuccess);
    EXPECT_EQ(h.hipStreamEndCapture(g.stream, nullptr), hipErrorInvalidValue);
    hipGraph_t graph = nullptr;
    ASSERT_EQ(h.hipStreamEndCapture(g.stream, &graph), hipSuccess);
    ASSERT_NE(graph, nullptr);
    ASSERT_EQ(h.hipStreamIsCapturing(g.stream, &status), hipSuccess);
    EXPECT_EQ(status, hipStreamCaptureStatusNone);
    ASSERT_EQ(h.hipStreamSynchronize(g.stream), hipSuccess);
    EXPECT_EQ(g.host_not(0), 0u) << "captured work ran";
    // Ending a capture that was never begun is CUDA's illegal state, mapped as HIP's.
    hipGraph_t none = nullptr;
    EXPECT_NE(h.hipStreamEndCapture(g.stream, &none), hipSuccess);
    EXPECT_EQ(h.hipGraphDestroy(graph), hipSuccess);
}

TEST(HipOverCuda, GraphInstantiateAndLaunch_RunTheCapturedWork) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    GraphBench g(h);
    hipGraph_t graph = g.capture(0x42);
    ASSERT_NE(graph, nullptr);
    hipGraphExec_t exec = nullptr, exec2 = nullptr, bad = nullptr, autofree = nullptr;
    hipGraphNode_t node = reinterpret_cast<hipGraphNode_t>(1);
    char log[64] = "not written";
    ASSERT_EQ(h.hipGraphInstantiate(&exec, graph, &node, log, sizeof log), hipSuccess);
    EXPECT_EQ(node, nullptr);
    EXPECT_STREQ(log, "");
    ASSERT_EQ(h.hipGraphInstantiateWithFlags(&exec2, graph, 0), hipSuccess);
    EXPECT_EQ(h.hipGraphInstantiateWithFlags(&bad, graph, 0x100), hipErrorInvalidValue);
    EXPECT_EQ(h.hipGraphInstantiateWithFlags(nullptr, graph, 0), hipErrorInvalidValue);
    ASSERT_EQ(
        h.hipGraphInstantiateWithFlags(&autofree, graph, hipGraphInstantiateFlagAutoFreeOnLaunch),
        hipSuccess);
    EXPECT_EQ(h.hipGraphExecDestroy(autofree), hipSuccess);

    ASSERT_EQ(h.hipGraphLaunch(exec, g.stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(g.stream), hipSuccess);
    EXPECT_EQ(g.host_not(0x42), 0u);
    // Again, from the other executable, on another stream.
    std::memset(g.host, 0, kGraphBytes);
    hipStream_t other = nullptr;
    ASSERT_EQ(h.hipStreamCreateWithPriority(&other, hipStreamNonBlocking, 0), hipSuccess);
    ASSERT_EQ(h.hipGraphLaunch(exec2, other), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(other), hipSuccess);
    EXPECT_EQ(g.host_not(0x42), 0u);
    EXPECT_EQ(h.hipStreamDestroy(other), hipSuccess);
    EXPECT_EQ(h.hipGraphExecDestroy(exec), hipSuccess);
    EXPECT_EQ(h.hipGraphExecDestroy(exec2), hipSuccess);
    EXPECT_EQ(h.hipGraphDestroy(graph), hipSuccess);
}

TEST(HipOverCuda, GraphExecUpdate_TakesTheNewValues_OrSaysWhyNot) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    GraphBench g(h);
    hipGraph_t first = g.capture(0x01), same_shape = g.capture(0x02), other_shape = g.capture(3, 2);
    hipGraphExec_t exec = nullptr;
    ASSERT_EQ(h.hipGraphInstantiateWithFlags(&exec, first, 0), hipSuccess);

    hipGraphNode_t node = reinterpret_cast<hipGraphNode_t>(1);
    hipGraphExecUpdateResult result = hipGraphExecUpdateError;
    ASSERT_EQ(h.hipGraphExecUpdate(exec, same_shape, &node, &result), hipSuccess);
    EXPECT_EQ(result, hipGraphExecUpdateSuccess);
    ASSERT_EQ(h.hipGraphLaunch(exec, g.stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(g.stream), hipSuccess);
    EXPECT_EQ(g.host_not(0x02), 0u) << "the update's value";

    // Another topology: refused with a reason; the executable keeps its values.
    result = hipGraphExecUpdateSuccess;
    EXPECT_EQ(h.hipGraphExecUpdate(exec, other_shape, &node, &result),
              hipErrorGraphExecUpdateFailure);
    EXPECT_NE(result, hipGraphExecUpdateSuccess);
    EXPECT_EQ(h.hipGraphExecUpdate(exec, same_shape, nullptr, &result), hipErrorInvalidValue);
    std::memset(g.host, 0, kGraphBytes);
    ASSERT_EQ(h.hipGraphLaunch(exec, g.stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(g.stream), hipSuccess);
    EXPECT_EQ(g.host_not(0x02), 0u) << "a refused update changed the executable";

    EXPECT_EQ(h.hipGraphExecDestroy(exec), hipSuccess);
    for (hipGraph_t graph : {first, same_shape, other_shape})
        EXPECT_EQ(h.hipGraphDestroy(graph), hipSuccess);
}

void count_host_call(void *user) { static_cast<std::atomic<int> *>(user)->fetch_add(1); }

TEST(HipOverCuda, HostFuncBuild_LaunchHostFunc_RunsInOrder_AndACaptureRecordsIt) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip_host_func();
    ASSERT_TRUE(h.error.empty()) << h.error;
    ASSERT_NE(h.hipLaunchHostFunc, nullptr);
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    GraphBench g(h);
    std::atomic<int> calls{0};
    EXPECT_EQ(h.hipLaunchHostFunc(g.stream, nullptr, &calls), hipErrorInvalidValue);
    ASSERT_EQ(h.hipLaunchHostFunc(g.stream, count_host_call, &calls), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(g.stream), hipSuccess);
    EXPECT_EQ(calls.load(), 1);

    ASSERT_EQ(h.hipStreamBeginCapture(g.stream, hipStreamCaptureModeRelaxed), hipSuccess);
    ASSERT_EQ(h.hipLaunchHostFunc(g.stream, count_host_call, &calls), hipSuccess);
    hipGraph_t graph = nullptr;
    ASSERT_EQ(h.hipStreamEndCapture(g.stream, &graph), hipSuccess);
    EXPECT_EQ(calls.load(), 1) << "a captured host function ran during the capture";
    hipGraphExec_t exec = nullptr;
    ASSERT_EQ(h.hipGraphInstantiateWithFlags(&exec, graph, 0), hipSuccess);
    ASSERT_EQ(h.hipGraphLaunch(exec, g.stream), hipSuccess);
    ASSERT_EQ(h.hipGraphLaunch(exec, g.stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(g.stream), hipSuccess);
    EXPECT_EQ(calls.load(), 3) << "once per launch";
    EXPECT_EQ(h.hipGraphExecDestroy(exec), hipSuccess);
    EXPECT_EQ(h.hipGraphDestroy(graph), hipSuccess);
}

}  // namespace

// qd's HIP rebind (src/backends/hip/hip_kernel_node_args.h): the node of a captured launch from
// the capture's dependency set, its parameters read back as CUDA recorded them (func the
// hipFunction_t launched), set on the executable with a new argument, and the next launch runs
// it.
TEST(HipOverCuda, KernelNode_ReadBackAndSetWithANewArgument_TheLaunchRunsIt) {
    REQUIRE_CUDA_DEVICE();
    const Hip &h = hip();
    ASSERT_EQ(h.hipSetDevice(0), hipSuccess);
    REQUIRE_MEMORY_POOLS();
    hipModule_t module = nullptr;
    ASSERT_EQ(h.hipModuleLoadDataEx(&module, kFillPtx, 0, nullptr, nullptr), hipSuccess);
    hipFunction_t fill = nullptr;
    ASSERT_EQ(h.hipModuleGetFunction(&fill, module, "fill_u32"), hipSuccess);
    hipStream_t stream = nullptr;
    ASSERT_EQ(h.hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, 0), hipSuccess);
    constexpr unsigned kThreads = 64;
    void *out = nullptr;
    ASSERT_EQ(h.hipMallocAsync(&out, kThreads * 4, stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);

    ASSERT_EQ(h.hipStreamBeginCapture(stream, hipStreamCaptureModeRelaxed), hipSuccess);
    unsigned base = 1000;
    void *params[] = {&out, &base};
    ASSERT_EQ(h.hipModuleLaunchKernel(fill, 1, 1, 1, kThreads, 1, 1, 0, stream, params, nullptr),
              hipSuccess);
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    unsigned long long id = 0;
    hipGraph_t capturing = nullptr;
    const hipGraphNode_t *deps = nullptr;
    size_t n = 0;
    ASSERT_EQ(h.hipStreamGetCaptureInfo_v2(stream, &status, &id, &capturing, &deps, &n),
              hipSuccess);
    EXPECT_EQ(status, hipStreamCaptureStatusActive);
    ASSERT_EQ(n, 1u);
    const hipGraphNode_t node = deps[0];
    hipGraph_t graph = nullptr;
    ASSERT_EQ(h.hipStreamEndCapture(stream, &graph), hipSuccess);
    EXPECT_EQ(graph, capturing);
    hipGraphExec_t exec = nullptr;
    ASSERT_EQ(h.hipGraphInstantiateWithFlags(&exec, graph, 0), hipSuccess);

    hipKernelNodeParams p{};
    ASSERT_EQ(h.hipGraphKernelNodeGetParams(node, &p), hipSuccess);
    EXPECT_EQ(p.func, reinterpret_cast<void *>(fill));
    EXPECT_EQ(p.gridDim.x, 1u);
    EXPECT_EQ(p.blockDim.x, kThreads);
    EXPECT_EQ(p.sharedMemBytes, 0u);
    unsigned rebound = 7000;
    void *new_params[] = {&out, &rebound};
    p.kernelParams = new_params;
    p.extra = nullptr;
    ASSERT_EQ(h.hipGraphExecKernelNodeSetParams(exec, node, &p), hipSuccess);
    rebound = 1;  // the runtime copied the values at the call

    std::vector<unsigned> host(kThreads);
    ASSERT_EQ(h.hipGraphLaunch(exec, stream), hipSuccess);
    ASSERT_EQ(h.hipMemcpyAsync(host.data(), out, kThreads * 4, hipMemcpyDefault, stream),
              hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    for (unsigned i = 0; i < kThreads; ++i) EXPECT_EQ(host[i], 7000 + i) << i;

    EXPECT_EQ(h.hipGraphExecDestroy(exec), hipSuccess);
    EXPECT_EQ(h.hipGraphDestroy(graph), hipSuccess);
    EXPECT_EQ(h.hipFreeAsync(out, stream), hipSuccess);
    ASSERT_EQ(h.hipStreamSynchronize(stream), hipSuccess);
    EXPECT_EQ(h.hipStreamDestroy(stream), hipSuccess);
    EXPECT_EQ(h.hipModuleUnload(module), hipSuccess);
}
