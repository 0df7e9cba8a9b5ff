// GpuDriver: devices and context creation over a filled DriverTable.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

qd_status make_gpu_driver(const DriverTable &table, DlLibrary library,
                          std::unique_ptr<Driver> *out) {
    Fn missing = first_missing(table);
    if (missing != Fn::count)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "the %s driver lacks %s", table.api_name,
                    symbol_name(table, missing));
    int count = 0;
    Result r = table.device_get_count(&count);
    if (r != table.success) {
        char what[256];
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "%s failed: %s",
                    symbol_name(table, Fn::device_get_count),
                    describe_result(table, r, what, sizeof what));
    }
    if (count <= 0)
        return fail(QD_ERROR_BACKEND_UNAVAILABLE, "the %s driver loaded but reports no device",
                    table.api_name);
    *out = std::make_unique<GpuDriver>(table, std::move(library), static_cast<uint32_t>(count));
    return QD_SUCCESS;
}

void (*g_table_hook)(DriverTable &table) = nullptr;

const NativeCounters *native_counters(const Driver *driver) {
    auto *gpu = dynamic_cast<const GpuDriver *>(driver);
    return gpu ? &const_cast<GpuDriver *>(gpu)->counters() : nullptr;
}

GpuDriver::GpuDriver(const DriverTable &table, DlLibrary library, uint32_t device_count)
    : table_(table), library_(std::move(library)), device_count_(device_count) {}

// Before a context exists there is nothing to mark lost: a non-sticky rule's status applies
// (e.g. out of memory), and other codes give fallback.
qd_status GpuDriver::fail(Result result, qd_status fallback, Fn fn) {
    char what[256];
    const ErrorRule *rule = find_rule(table_, result);
    return qd::fail(rule && !rule->sticky ? rule->status : fallback, "%s failed: %s",
                    symbol_name(table_, fn), describe_result(table_, result, what, sizeof what));
}

qd_status GpuDriver::device_count(uint32_t *out) {
    *out = device_count_;
    return QD_SUCCESS;
}

qd_status GpuDriver::device_info(uint32_t ordinal, qd_device_info *out) {
    if (ordinal >= device_count_)
        return qd::fail(QD_ERROR_INVALID_ARGUMENT, "device %u does not exist (%s has %u)", ordinal,
                        table_.api_name, device_count_);
    if (g_fork_generation.load(std::memory_order_relaxed) != 0)
        return qd::fail(QD_ERROR_BACKEND_UNAVAILABLE,
                        "the %s driver was initialised before fork(); a child process cannot use "
                        "it",
                        table_.api_name);
    const DriverTable &t = table_;
    NativeDevice device = 0;
    Result r = t.device_get(&device, static_cast<int>(ordinal));
    if (r != t.success) return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::device_get);
    char name[sizeof out->name] = {0};
    r = t.device_get_name(name, static_cast<int>(sizeof name - 1), device);
    if (r != t.success) return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::device_get_name);
    int major = 0, minor = 0, sms = 0, version = 0;
    size_t memory = 0;
    if ((r = t.device_get_attribute(&major, t.attr_compute_major, device)) != t.success ||
        (r = t.device_get_attribute(&minor, t.attr_compute_minor, device)) != t.success ||
        (r = t.device_get_attribute(&sms, t.attr_multiprocessors, device)) != t.success)
        return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::device_get_attribute);
    if ((r = t.device_total_mem(&memory, device)) != t.success)
        return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::device_total_mem);
    if ((r = t.driver_get_version(&version)) != t.success)
        return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::driver_get_version);

    out->backend = static_cast<uint32_t>(t.kind);
    out->device = ordinal;
    out->driver_version = static_cast<uint32_t>(std::max(version, 0));
    out->compute_major = static_cast<uint32_t>(std::max(major, 0));
    out->compute_minor = static_cast<uint32_t>(std::max(minor, 0));
    out->multiprocessors = static_cast<uint32_t>(std::max(sms, 0));
    out->total_memory = memory;
    // SM partitions: the split rule where the driver has green contexts, 0 (none) otherwise.
    out->split_granularity = 0;
    out->split_minimum = 0;
    DevResource whole{};
    if (first_missing_partition_entry(t) == Fn::count &&
        t.device_get_dev_resource(device, &whole, t.dev_resource_type_sm) == t.success)
        split_rule(whole, major, &out->split_granularity, &out->split_minimum);
    std::memcpy(out->name, name, sizeof out->name);
    out->name[sizeof out->name - 1] = '\0';
    return QD_SUCCESS;
}

// Uses the device's primary context, the one the runtime API, PyTorch, CuPy and cuda.core
// use, so memory and streams are shared with them without context switches.
qd_status GpuDriver::create_context(const ContextParams &params, std::unique_ptr<Context> *out) {
    if (params.device >= device_count_)
        return qd::fail(QD_ERROR_INVALID_ARGUMENT, "device %u does not exist (%s has %u)",
                        params.device, table_.api_name, device_count_);
    if (g_fork_generation.load(std::memory_order_relaxed) != 0)
        return qd::fail(QD_ERROR_BACKEND_UNAVAILABLE,
                        "the %s driver was initialised before fork(); a child process cannot "
                        "create GPU contexts",
                        table_.api_name);
    const DriverTable &t = table_;
    NativeDevice device = 0;
    Result r = t.device_get(&device, static_cast<int>(params.device));
    if (r != t.success) return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::device_get);
    NativeContext primary = nullptr;
    r = t.device_primary_ctx_retain(&primary, device);
    if (r != t.success) return fail(r, QD_ERROR_BACKEND_UNAVAILABLE, Fn::device_primary_ctx_retain);
    // From here the DeviceContext owns the retain: its destructor releases it.
    auto dc = std::make_shared<DeviceContext>(t, counters_, params.device, device, primary);
    {
        ScopedCurrent current(*dc);
        if (!current.ok()) return fail(current.status(), QD_ERROR_INTERNAL, current.failed_entry());
        int least = 0, greatest = 0;
        r = t.ctx_get_stream_priority_range(&least, &greatest);
        if (r != t.success) return fail(r, QD_ERROR_INTERNAL, Fn::ctx_get_stream_priority_range);
        dc->least_priority = least;
        dc->greatest_priority = greatest;
    }
    *out = std::make_unique<GpuContext>(std::move(dc));
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
