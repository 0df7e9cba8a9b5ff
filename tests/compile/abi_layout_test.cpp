// Pins the ABI of the public header: the size and every field offset of each public struct
// (x86-64 / LP64), the numeric status values, and that names come from QD_STATUS_LIST.
#include <qd/qd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the pinned layout is for LP64 targets (x86-64, aarch64)"
#endif

TEST(AbiLayout, ContextDesc_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_context_desc), 32u);
    EXPECT_EQ(alignof(qd_context_desc), 4u);
    EXPECT_EQ(offsetof(qd_context_desc, struct_size), 0u);
    EXPECT_EQ(offsetof(qd_context_desc, backend), 4u);
    EXPECT_EQ(offsetof(qd_context_desc, device), 8u);
    EXPECT_EQ(offsetof(qd_context_desc, stream_pool_size), 12u);
    EXPECT_EQ(offsetof(qd_context_desc, event_pool_size), 16u);
    EXPECT_EQ(offsetof(qd_context_desc, cpu_worker_threads), 20u);
    EXPECT_EQ(offsetof(qd_context_desc, flags), 24u);
    EXPECT_EQ(offsetof(qd_context_desc, reserved), 28u);
}

TEST(AbiLayout, StreamDesc_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_stream_desc), 16u);
    EXPECT_EQ(offsetof(qd_stream_desc, flags), 4u);
    EXPECT_EQ(offsetof(qd_stream_desc, priority), 8u);
    EXPECT_EQ(offsetof(qd_stream_desc, reserved), 12u);
}

TEST(AbiLayout, LaunchConfig_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_launch_config), 32u);
    EXPECT_EQ(alignof(qd_launch_config), 4u);
    EXPECT_EQ(offsetof(qd_launch_config, grid), 4u);
    EXPECT_EQ(offsetof(qd_launch_config, block), 16u);
    EXPECT_EQ(offsetof(qd_launch_config, shared_mem_bytes), 28u);
}

TEST(AbiLayout, Arg_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_arg), 16u);
    EXPECT_EQ(offsetof(qd_arg, data), 0u);
    EXPECT_EQ(offsetof(qd_arg, size), 8u);
}

TEST(AbiLayout, Task_SizeAndOffsetsArePinned) {
    // 64 bytes in 0.1; 0.3 appended attrs, num_attrs and reserved2 (the 0.1 fields stay put).
    EXPECT_EQ(sizeof(qd_task), 80u);
    EXPECT_EQ(alignof(qd_task), 8u);
    EXPECT_EQ(offsetof(qd_task, group), 4u);
    EXPECT_EQ(offsetof(qd_task, kernel), 8u);
    EXPECT_EQ(offsetof(qd_task, config), 16u);
    EXPECT_EQ(offsetof(qd_task, args), 48u);
    EXPECT_EQ(offsetof(qd_task, num_args), 56u);
    EXPECT_EQ(offsetof(qd_task, reserved), 60u);
    EXPECT_EQ(offsetof(qd_task, attrs), 64u);
    EXPECT_EQ(offsetof(qd_task, num_attrs), 72u);
    EXPECT_EQ(offsetof(qd_task, reserved2), 76u);
}

TEST(AbiLayout, LaunchAttr_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_launch_attr), 48u);
    EXPECT_EQ(alignof(qd_launch_attr), 8u);
    EXPECT_EQ(offsetof(qd_launch_attr, kind), 0u);
    EXPECT_EQ(offsetof(qd_launch_attr, value), 4u);
    EXPECT_EQ(offsetof(qd_launch_attr, cluster), 8u);
    EXPECT_EQ(offsetof(qd_launch_attr, reserved0), 20u);
    EXPECT_EQ(offsetof(qd_launch_attr, event), 24u);
    EXPECT_EQ(offsetof(qd_launch_attr, reserved), 32u);
}

TEST(AbiLayout, HostKernelInfo_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_host_kernel_info), 56u);
    EXPECT_EQ(offsetof(qd_host_kernel_info, block_idx), 4u);
    EXPECT_EQ(offsetof(qd_host_kernel_info, grid_dim), 16u);
    EXPECT_EQ(offsetof(qd_host_kernel_info, block_dim), 28u);
    EXPECT_EQ(offsetof(qd_host_kernel_info, shared_mem_bytes), 40u);
    EXPECT_EQ(offsetof(qd_host_kernel_info, shared_mem), 48u);
}

TEST(AbiLayout, ContextStats_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_context_stats), 152u);
    EXPECT_EQ(offsetof(qd_context_stats, reserved), 4u);
    EXPECT_EQ(offsetof(qd_context_stats, live_streams), 8u);
    EXPECT_EQ(offsetof(qd_context_stats, live_events), 16u);
    EXPECT_EQ(offsetof(qd_context_stats, live_modules), 24u);
    EXPECT_EQ(offsetof(qd_context_stats, live_kernels), 32u);
    EXPECT_EQ(offsetof(qd_context_stats, stream_pool_capacity), 40u);
    EXPECT_EQ(offsetof(qd_context_stats, stream_pool_created), 48u);
    EXPECT_EQ(offsetof(qd_context_stats, stream_pool_leased), 56u);
    EXPECT_EQ(offsetof(qd_context_stats, stream_pool_hits), 64u);
    EXPECT_EQ(offsetof(qd_context_stats, stream_pool_misses), 72u);
    EXPECT_EQ(offsetof(qd_context_stats, event_pool_created), 80u);
    EXPECT_EQ(offsetof(qd_context_stats, event_pool_hits), 88u);
    EXPECT_EQ(offsetof(qd_context_stats, event_pool_misses), 96u);
    EXPECT_EQ(offsetof(qd_context_stats, live_allocations), 104u);
    EXPECT_EQ(offsetof(qd_context_stats, bytes_allocated), 112u);
    EXPECT_EQ(offsetof(qd_context_stats, host_bytes_allocated), 120u);
    EXPECT_EQ(offsetof(qd_context_stats, live_graphs), 128u);       // since 0.2
    EXPECT_EQ(offsetof(qd_context_stats, hazards_reported), 136u);  // since 0.2
    EXPECT_EQ(offsetof(qd_context_stats, live_timelines), 144u);    // since 0.3
}

TEST(AbiLayout, DeviceInfo_SizeAndOffsetsArePinned) {
    EXPECT_EQ(sizeof(qd_device_info), 176u);  // 168 in 0.1; 0.3 appended the split rule
    EXPECT_EQ(offsetof(qd_device_info, split_granularity), 168u);  // since 0.3
    EXPECT_EQ(offsetof(qd_device_info, split_minimum), 172u);      // since 0.3
    EXPECT_EQ(offsetof(qd_device_info, backend), 4u);
    EXPECT_EQ(offsetof(qd_device_info, device), 8u);
    EXPECT_EQ(offsetof(qd_device_info, driver_version), 12u);
    EXPECT_EQ(offsetof(qd_device_info, compute_major), 16u);
    EXPECT_EQ(offsetof(qd_device_info, compute_minor), 20u);
    EXPECT_EQ(offsetof(qd_device_info, multiprocessors), 24u);
    EXPECT_EQ(offsetof(qd_device_info, reserved), 28u);
    EXPECT_EQ(offsetof(qd_device_info, total_memory), 32u);
    EXPECT_EQ(offsetof(qd_device_info, name), 40u);
    EXPECT_EQ(sizeof(((qd_device_info *)nullptr)->name), 128u);
}

TEST(AbiLayout, HandlesEnumsAndLimits_ArePinned) {
    EXPECT_EQ(sizeof(qd_context), 8u);
    EXPECT_EQ(sizeof(qd_stream), 8u);
    EXPECT_EQ(sizeof(qd_event), 8u);
    EXPECT_EQ(sizeof(qd_module), 8u);
    EXPECT_EQ(sizeof(qd_kernel), 8u);
    EXPECT_EQ(sizeof(qd_status), 4u);
    EXPECT_EQ(sizeof(qd_backend), 4u);
    EXPECT_EQ(QD_BACKEND_DEFAULT, 0);
    EXPECT_EQ(QD_BACKEND_CPU, 1);
    EXPECT_EQ(QD_BACKEND_CUDA, 2);
    EXPECT_EQ(QD_BACKEND_HIP, 3);
    EXPECT_EQ((unsigned)QD_STREAM_NON_BLOCKING, 1u);
    EXPECT_EQ((unsigned)QD_EVENT_TIMING, 1u);
    EXPECT_EQ(QD_MAX_ARGS, 64u);
    EXPECT_EQ(QD_MAX_ARG_BYTES, 4096u);
    EXPECT_EQ(QD_VERSION, (QD_VERSION_MAJOR << 16) | (QD_VERSION_MINOR << 8) | QD_VERSION_PATCH);
}

TEST(AbiLayout, InitMacros_SetStructSizeAndDefaults) {
    qd_context_desc c = QD_CONTEXT_DESC_INIT;
    EXPECT_EQ(c.struct_size, sizeof c);
    EXPECT_EQ(c.backend, (uint32_t)QD_BACKEND_DEFAULT);
    EXPECT_EQ(c.stream_pool_size, 0u);
    qd_stream_desc s = QD_STREAM_DESC_INIT;
    EXPECT_EQ(s.struct_size, sizeof s);
    EXPECT_EQ(s.priority, 0);
    qd_launch_config l = QD_LAUNCH_CONFIG_INIT;
    EXPECT_EQ(l.struct_size, sizeof l);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(l.grid[i], 1u);
        EXPECT_EQ(l.block[i], 1u);
    }
    qd_task t = QD_TASK_INIT;
    EXPECT_EQ(t.struct_size, sizeof t);
    EXPECT_EQ(t.config.struct_size, sizeof(qd_launch_config));
    EXPECT_EQ(t.args, nullptr);
    qd_context_stats st = QD_CONTEXT_STATS_INIT;
    EXPECT_EQ(st.struct_size, sizeof st);
    qd_device_info d = QD_DEVICE_INFO_INIT;
    EXPECT_EQ(d.struct_size, sizeof d);
    EXPECT_EQ(d.name[0], '\0');
}

// Numbered values are never renumbered: pin each one.
TEST(StatusCodes, Values_ArePinned) {
    EXPECT_EQ(QD_SUCCESS, 0);
    EXPECT_EQ(QD_NOT_READY, 1);
    EXPECT_EQ(QD_ERROR_INVALID_ARGUMENT, -1);
    EXPECT_EQ(QD_ERROR_INVALID_HANDLE, -2);
    EXPECT_EQ(QD_ERROR_WRONG_CONTEXT, -3);
    EXPECT_EQ(QD_ERROR_INVALID_OPERATION, -4);
    EXPECT_EQ(QD_ERROR_OUT_OF_MEMORY, -5);
    EXPECT_EQ(QD_ERROR_OVERFLOW, -6);
    EXPECT_EQ(QD_ERROR_INVALID_ADDRESS, -7);
    EXPECT_EQ(QD_ERROR_POOL_EXHAUSTED, -8);
    EXPECT_EQ(QD_ERROR_NOT_FOUND, -9);
    EXPECT_EQ(QD_ERROR_INVALID_IMAGE, -10);
    EXPECT_EQ(QD_ERROR_TIMING_DISABLED, -11);
    EXPECT_EQ(QD_ERROR_NOT_RECORDED, -12);
    EXPECT_EQ(QD_ERROR_NOT_SUPPORTED, -13);
    EXPECT_EQ(QD_ERROR_BACKEND_UNAVAILABLE, -14);
    EXPECT_EQ(QD_ERROR_DEVICE_LOST, -15);
    EXPECT_EQ(QD_ERROR_FORKED, -16);
    EXPECT_EQ(QD_ERROR_LAUNCH_FAILED, -17);
    EXPECT_EQ(QD_ERROR_INTERNAL, -18);
    EXPECT_EQ(QD_ERROR_HAZARD, -19);  // since 0.2
}

struct StatusEntry {
    const char *name;
    int value;
    const char *text;
};
#define QDT_ENTRY(name, value, text) {#name, value, text},
static const StatusEntry kStatuses[] = {QD_STATUS_LIST(QDT_ENTRY)};
#undef QDT_ENTRY

TEST(StatusCodes, EveryListEntry_HasItsStringizedName) {
    for (const StatusEntry &e : kStatuses) {
        const char *name = qd_status_name(e.value);
        ASSERT_NE(name, nullptr) << e.name;
        EXPECT_STREQ(name, e.name) << "value " << e.value;
    }
}

TEST(StatusCodes, Values_AreUniqueAndDescriptionsNonEmpty) {
    std::set<int> values;
    for (const StatusEntry &e : kStatuses) {
        EXPECT_TRUE(values.insert(e.value).second) << e.name << " reuses value " << e.value;
        EXPECT_GT(strlen(e.text), 0u) << e.name;
        if (e.value < 0) {
            EXPECT_EQ(strncmp(e.name, "QD_ERROR_", 9), 0) << e.name;
        }
    }
    EXPECT_EQ(values.size(), 21u);
}

TEST(StatusCodes, UnknownValues_AreNamedStatusUnknown) {
    for (int v : {2, 3, 100, -20, -100, 0x7fffffff, (int)0x80000000, -2147483647}) {
        const char *name = qd_status_name(v);
        ASSERT_NE(name, nullptr) << v;
        EXPECT_STREQ(name, "QD_STATUS_UNKNOWN") << v;
    }
}

TEST(StatusCodes, NameStrings_AreStatic) {
    const char *a = qd_status_name(QD_ERROR_INVALID_HANDLE);
    const char *b = qd_status_name(QD_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a, b);
}

TEST(Version, LibraryVersion_MatchesHeader) { EXPECT_EQ(qd_version(), (uint32_t)QD_VERSION); }

// QD_STRUCT_FIRST_SIZES is the one table every struct_size check uses. The table keeps a
// struct's first size when a field is appended (0.2 appended qd_context_stats.live_graphs and
// .hazards_reported; 0.3 appended qd_device_info.split_granularity and .split_minimum, and
// qd_task.attrs, .num_attrs and .reserved2), so each size is its sizeof, or below it for a
// struct that grew.
TEST(FirstSizes, EveryStruct_StillHasItsFirstSize) {
    int entries = 0;
#define QD_CHECK_FIRST_SIZE(type, size, version)                                                   \
    if (std::string(#type) == "qd_context_stats") {                                                \
        EXPECT_EQ((size_t)(size), 128u);                                                           \
        EXPECT_GT(sizeof(type), (size_t)(size)) << #type " grew in 0.2";                           \
    } else if (std::string(#type) == "qd_device_info") {                                           \
        EXPECT_EQ((size_t)(size), 168u);                                                           \
    } else if (std::string(#type) == "qd_task") {                                                  \
        EXPECT_EQ((size_t)(size), 64u);                                                            \
        EXPECT_GT(sizeof(type), (size_t)(size)) << #type " grew in 0.3";                           \
    } else {                                                                                       \
        EXPECT_EQ(sizeof(type), (size_t)(size)) << #type;                                          \
    }                                                                                              \
    ++entries;
    QD_STRUCT_FIRST_SIZES(QD_CHECK_FIRST_SIZE)
#undef QD_CHECK_FIRST_SIZE
    EXPECT_EQ(entries, 9);  // every struct that starts with struct_size (qd_hazard: 0.2,
                            // qd_conditional_desc: 0.3)
}
