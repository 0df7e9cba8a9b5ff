// NCCL on qd streams (qd.h, "Several devices"): one CUDA context per GPU, one qd stream each,
// an all-reduce that NCCL runs on the qd streams' native handles, ordered after the qd kernels
// that produce its input and before the qd kernels that consume its output by qd events; and a
// qd_launch_parallel whose groups feed a join on another device. NCCL is not a dependency of
// qd: libnccl.so.2 is loaded here at run time (PyTorch's wheels ship one in
// site-packages/nvidia/nccl/lib; tools/gpu-check puts that on LD_LIBRARY_PATH). Every test
// skips visibly without two GPUs or without NCCL.
#include <qd/qd.h>

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpu_test_config.h"

namespace {

std::string status_text(qd_status st) {
    return std::string(qd_status_name(st)) +
           (st < 0 ? std::string(": ") + qd_last_error_message() : "");
}

#define QD_OK(call)                                                                                \
    do {                                                                                           \
        qd_status st_ = (call);                                                                    \
        ASSERT_EQ(st_, QD_SUCCESS) << #call << " -> " << status_text(st_);                         \
    } while (0)

// What the tests use of nccl.h (NCCL 2.x ABI).
struct NcclComm;
using ncclComm_t = NcclComm *;
using ncclResult_t = int;  // ncclSuccess = 0
constexpr int ncclInt32 = 2, ncclSum = 0;

struct Nccl {
    ncclResult_t (*CommInitAll)(ncclComm_t *, int, const int *) = nullptr;
    ncclResult_t (*AllReduce)(const void *, void *, size_t, int, int, ncclComm_t, void *) = nullptr;
    ncclResult_t (*GroupStart)() = nullptr;
    ncclResult_t (*GroupEnd)() = nullptr;
    ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
    const char *(*GetErrorString)(ncclResult_t) = nullptr;
    ncclResult_t (*GetVersion)(int *) = nullptr;
    std::string error;

    // By soname, as libqd loads drivers: the system loader's search path.
    bool load() {
        void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char *e = dlerror();
            error = e ? e : "dlopen failed";
            return false;
        }
        bind(lib, "ncclCommInitAll", &CommInitAll);
        bind(lib, "ncclAllReduce", &AllReduce);
        bind(lib, "ncclGroupStart", &GroupStart);
        bind(lib, "ncclGroupEnd", &GroupEnd);
        bind(lib, "ncclCommDestroy", &CommDestroy);
        bind(lib, "ncclGetErrorString", &GetErrorString);
        bind(lib, "ncclGetVersion", &GetVersion);
        return error.empty();
    }
    template <class F>
    void bind(void *lib, const char *name, F *out) {
        *reinterpret_cast<void **>(out) = dlsym(lib, name);
        if (!*out && error.empty()) error = std::string("libnccl.so.2 has no ") + name;
    }
};

#define NCCL_OK(call)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        ASSERT_EQ(r_, 0) << #call << " -> " << nccl_.GetErrorString(r_);                           \
    } while (0)

std::vector<char> read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

constexpr uint32_t kCount = 1u << 20;  // int32 elements per device
constexpr uint32_t kGroups = 8;

class NcclOnQdStreams : public ::testing::Test {
  protected:
    void SetUp() override {
        uint32_t n = 0;
        qd_status st = qd_device_count(QD_BACKEND_CUDA, &n);
        if (st != QD_SUCCESS) GTEST_SKIP() << "CUDA backend unavailable: " << status_text(st);
        if (n < 2) GTEST_SKIP() << "needs 2 GPUs (this machine has " << n << ")";
        if (!nccl_.load()) GTEST_SKIP() << "NCCL not loadable: " << nccl_.error;
        const char *env = getenv("QD_GPU_TEST_FATBIN");
        image_ = read_file(env && *env ? env : QD_GPU_TEST_FATBIN);
        if (image_.empty())
            GTEST_SKIP() << "no test-kernel fatbin (nvcc was not found at build time)";
        for (int d = 0; d < 2; ++d) {
            qd_context_desc desc = QD_CONTEXT_DESC_INIT;
            desc.backend = QD_BACKEND_CUDA;
            desc.device = uint32_t(d);
            desc.stream_pool_size = 16;
            QD_OK(qd_context_create(&desc, &ctx_[d]));
            QD_OK(qd_stream_create(ctx_[d], nullptr, &work_[d]));
            QD_OK(qd_stream_create(ctx_[d], nullptr, &comm_[d]));
            QD_OK(qd_module_load(ctx_[d], image_.data(), image_.size(), &module_[d]));
            QD_OK(qd_kernel_get(module_[d], "qd_test_add_one", &add_one_[d]));
        }
        int version = 0;
        if (nccl_.GetVersion) nccl_.GetVersion(&version);
        printf("NCCL %d on 2 GPUs\n", version);
    }
    void TearDown() override {
        for (int d = 0; d < 2; ++d)
            if (ctx_[d]) {
                EXPECT_EQ(qd_context_destroy(ctx_[d]), QD_SUCCESS) << qd_last_error_message();
            }
    }

    // data[i] += 1 for i < n, on stream s of device d.
    qd_status add_one(int d, qd_stream s, uint64_t data, uint32_t n) {
        qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
        cfg.grid[0] = 256;
        cfg.block[0] = 256;
        qd_arg args[2] = {{&data, 8}, {&n, 4}};
        return qd_launch(s, add_one_[d], &cfg, args, 2);
    }
    std::vector<int32_t> read(int d, qd_stream s, uint64_t address, uint32_t n) {
        std::vector<int32_t> out(n, -1);
        void *pinned = nullptr;
        EXPECT_EQ(qd_host_alloc(ctx_[d], uint64_t(n) * 4, &pinned), QD_SUCCESS);
        EXPECT_EQ(qd_memcpy_async(s, uint64_t(uintptr_t(pinned)), address, uint64_t(n) * 4),
                  QD_SUCCESS);
        EXPECT_EQ(qd_stream_synchronize(s), QD_SUCCESS) << qd_last_error_message();
        std::memcpy(out.data(), pinned, out.size() * 4);
        qd_host_free(ctx_[d], pinned);
        return out;
    }

    Nccl nccl_;
    std::vector<char> image_;
    qd_context ctx_[2] = {0, 0};
    qd_stream work_[2] = {0, 0}, comm_[2] = {0, 0};
    qd_module module_[2] = {0, 0};
    qd_kernel add_one_[2] = {0, 0};
};

// Device d produces d+1 in every element with qd kernels (a parallel launch of 8 groups, each
// adding one over a slice, d+1 times), NCCL sums the two devices' buffers on the qd comm
// streams, and a qd kernel adds one to the result: every element is 1 + 2 + 1 = 4 on both.
TEST_F(NcclOnQdStreams, AllReduce_OrderedAfterProducersAndBeforeConsumersByQdEvents) {
    uint64_t in[2], out[2], native[2];
    qd_event produced[2], reduced[2];
    const uint32_t slice = kCount / kGroups;
    for (int d = 0; d < 2; ++d) {
        QD_OK(qd_mem_alloc_async(work_[d], uint64_t(kCount) * 4, &in[d]));
        QD_OK(qd_mem_alloc_async(work_[d], uint64_t(kCount) * 4, &out[d]));
        QD_OK(qd_memset_async(work_[d], in[d], 0, uint64_t(kCount) * 4));
        QD_OK(qd_memset_async(work_[d], out[d], 0xff, uint64_t(kCount) * 4));
        std::vector<qd_task> tasks;
        std::vector<uint64_t> ptrs;
        ptrs.reserve(kGroups * 2);
        std::vector<qd_arg> args;
        args.reserve(kGroups * 2 * 2);
        static const uint32_t n_slice = kCount / kGroups;
        for (int rep = 0; rep <= d; ++rep)
            for (uint32_t g = 0; g < kGroups; ++g) {
                ptrs.push_back(in[d] + uint64_t(g) * slice * 4);
                args.push_back({&ptrs.back(), 8});
                args.push_back({&n_slice, 4});
                qd_task t = QD_TASK_INIT;
                t.group = g;
                t.kernel = add_one_[d];
                t.config.grid[0] = 64;
                t.config.block[0] = 256;
                t.args = &args[args.size() - 2];
                t.num_args = 2;
                tasks.push_back(t);
            }
        QD_OK(qd_launch_parallel(work_[d], tasks.data(), uint32_t(tasks.size())));
        QD_OK(qd_event_create(ctx_[d], 0, &produced[d]));
        QD_OK(qd_event_create(ctx_[d], 0, &reduced[d]));
        QD_OK(qd_event_record(work_[d], produced[d]));
        QD_OK(qd_stream_wait_event(comm_[d], produced[d]));
        QD_OK(qd_stream_native_handle(comm_[d], &native[d]));
    }
    ncclComm_t comms[2] = {nullptr, nullptr};
    const int devs[2] = {0, 1};
    NCCL_OK(nccl_.CommInitAll(comms, 2, devs));
    NCCL_OK(nccl_.GroupStart());
    for (int d = 0; d < 2; ++d)
        NCCL_OK(nccl_.AllReduce(reinterpret_cast<const void *>(uintptr_t(in[d])),
                                reinterpret_cast<void *>(uintptr_t(out[d])), kCount, ncclInt32,
                                ncclSum, comms[d], reinterpret_cast<void *>(uintptr_t(native[d]))));
    NCCL_OK(nccl_.GroupEnd());
    for (int d = 0; d < 2; ++d) {
        QD_OK(qd_event_record(comm_[d], reduced[d]));
        QD_OK(qd_stream_wait_event(work_[d], reduced[d]));
        QD_OK(add_one(d, work_[d], out[d], kCount));
    }
    for (int d = 0; d < 2; ++d) {
        std::vector<int32_t> got = read(d, work_[d], out[d], kCount);
        size_t wrong = 0;
        for (int32_t v : got) wrong += v != 4;
        EXPECT_EQ(wrong, 0u) << "device " << d << ": first value " << got[0];
    }
    for (int d = 0; d < 2; ++d) {
        NCCL_OK(nccl_.CommDestroy(comms[d]));
        QD_OK(qd_event_destroy(produced[d]));
        QD_OK(qd_event_destroy(reduced[d]));
    }
}

// A parallel launch on device 1 whose groups each fill a slice; device 0 joins them through a
// cross-context wait, peer-copies the slices and adds one: it sees every group's work.
TEST_F(NcclOnQdStreams, LaunchParallelGroups_FeedACrossDeviceJoin) {
    uint32_t can = 0;
    QD_OK(qd_context_can_access_peer(ctx_[0], ctx_[1], &can));
    if (can) QD_OK(qd_context_enable_peer_access(ctx_[0], ctx_[1]));
    uint64_t src = 0, dst = 0;
    QD_OK(qd_mem_alloc_async(work_[1], uint64_t(kCount) * 4, &src));
    QD_OK(qd_memset_async(work_[1], src, 0, uint64_t(kCount) * 4));
    QD_OK(qd_mem_alloc_async(work_[0], uint64_t(kCount) * 4, &dst));
    const uint32_t slice = kCount / kGroups;
    std::vector<qd_task> tasks(kGroups * 2);
    std::vector<uint64_t> ptrs(kGroups);
    std::vector<qd_arg> args(kGroups * 2);
    for (uint32_t g = 0; g < kGroups; ++g) {
        ptrs[g] = src + uint64_t(g) * slice * 4;
        args[2 * g] = {&ptrs[g], 8};
        args[2 * g + 1] = {&slice, 4};
        for (int rep = 0; rep < 2; ++rep) {  // two tasks per group, in order: each slice is 2
            qd_task &t = tasks[2 * g + rep];
            t = QD_TASK_INIT;
            t.group = g;
            t.kernel = add_one_[1];
            t.config.grid[0] = 64;
            t.config.block[0] = 256;
            t.args = &args[2 * g];
            t.num_args = 2;
        }
    }
    QD_OK(qd_launch_parallel(work_[1], tasks.data(), uint32_t(tasks.size())));
    qd_event groups_done = 0;
    QD_OK(qd_event_create(ctx_[1], 0, &groups_done));
    QD_OK(qd_event_record(work_[1], groups_done));
    QD_OK(qd_stream_wait_event(work_[0], groups_done));  // the cross-device join
    QD_OK(qd_memcpy_peer_async(work_[0], dst, ctx_[0], src, ctx_[1], uint64_t(kCount) * 4));
    QD_OK(add_one(0, work_[0], dst, kCount));
    std::vector<int32_t> got = read(0, work_[0], dst, kCount);
    size_t wrong = 0;
    for (int32_t v : got) wrong += v != 3;
    EXPECT_EQ(wrong, 0u) << "first value " << got[0];
    qd_event copied = 0;  // device 1 frees its buffer only after device 0's copy read it
    QD_OK(qd_event_create(ctx_[0], 0, &copied));
    QD_OK(qd_event_record(work_[0], copied));
    QD_OK(qd_stream_wait_event(work_[1], copied));
    QD_OK(qd_mem_free_async(work_[1], src));
    QD_OK(qd_mem_free_async(work_[0], dst));
    QD_OK(qd_event_destroy(groups_done));
    QD_OK(qd_event_destroy(copied));
}

}  // namespace
