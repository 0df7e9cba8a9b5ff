// Launch attributes (qd_launch_ex; qd.h, "Launch attributes") over the driver table: what the
// device and driver can honour (GpuContext::check_launch_attrs, asked before anything of the
// call is queued) and the launch itself through launch_kernel_ex (cuLaunchKernelEx). A launch
// without attributes never comes here: it keeps launch_kernel (GpuStream::launch).
#include <cstdio>

#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

qd_status GpuContext::check_launch_attrs(const LaunchAttrs &attrs, const LaunchDims &dims,
                                         bool capturing) {
    (void)dims;  // the core checked that the cluster divides the grid
    const DriverTable &t = dc_->t;
    const char *name = first_attr_name(attrs);
    if (!t.launch_ex_requires)
        return qd::fail(
            QD_ERROR_NOT_SUPPORTED,
            "launch attribute %s: the %s backend has no launch attributes (only the CPU "
            "and CUDA backends do); nothing was queued",
            name, t.api_name);
    if (!t.launch_kernel_ex)
        return qd::fail(QD_ERROR_NOT_SUPPORTED,
                        "launch attribute %s needs %s, which this driver lacks (%s); nothing was "
                        "queued",
                        name, symbol_name(t, Fn::launch_kernel_ex), t.launch_ex_requires);
    if (attrs.has_cluster()) {
        int major = 0, minor = 0;
        t.device_get_attribute(&major, t.attr_compute_major, dc_->device);
        t.device_get_attribute(&minor, t.attr_compute_minor, dc_->device);
        if (t.cluster_min_compute_major == 0 || major < t.cluster_min_compute_major)
            return qd::fail(
                QD_ERROR_NOT_SUPPORTED,
                "launch attribute CLUSTER_DIM needs a device of compute capability %d.0 "
                "or above; device %u is %d.%d; nothing was queued",
                t.cluster_min_compute_major, dc_->ordinal, major, minor);
    }
    if (attrs.programmatic && capturing) {
        int version = 0;
        if (t.driver_get_version(&version) != t.success ||
            t.programmatic_capture_min_version == 0 || version < t.programmatic_capture_min_version)
            return qd::fail(
                QD_ERROR_NOT_SUPPORTED,
                "launch attribute PROGRAMMATIC_SERIALIZATION on a capturing stream needs "
                "%s to keep the programmatic edge in the graph; this driver is %d; "
                "nothing was queued",
                t.programmatic_capture_requires, version);
    }
    return QD_SUCCESS;
}

qd_status GpuStream::launch_ex(Kernel &kernel, const LaunchDims &dims, const LaunchAttrs &attrs,
                               const qd_arg *args, uint32_t num_args) {
    DriverEntry entry(*dc_, true, last_kernel());
    if (!entry.ok()) return entry.status();
    auto &k = static_cast<GpuKernel &>(kernel);
    if (qd_status st = k.check_args(args, num_args); st != QD_SUCCESS) return st;
    if (!t_.launch_kernel_ex)  // checked by the context before; a table without it refuses
        return qd::fail(QD_ERROR_NOT_SUPPORTED, "launch attribute %s: no %s in this driver",
                        first_attr_name(attrs), symbol_name(t_, Fn::launch_kernel_ex));

    LaunchAttribute list[QD_MAX_LAUNCH_ATTRS] = {};
    unsigned n = 0;
    if (attrs.has_cluster()) {
        list[n].id = t_.launch_attr_cluster_dimension;
        list[n].value.cluster.x = attrs.cluster[0];
        list[n].value.cluster.y = attrs.cluster[1];
        list[n].value.cluster.z = attrs.cluster[2];
        ++n;
    }
    if (attrs.programmatic) {
        list[n].id = t_.launch_attr_programmatic_serialization;
        list[n].value.programmatic = 1;
        ++n;
    }
    if (attrs.has_priority) {
        list[n].id = t_.launch_attr_priority;
        list[n].value.priority = attrs.priority;
        ++n;
    }
    GpuEvent *completion = static_cast<GpuEvent *>(attrs.completion_event);
    if (completion) {
        list[n].id = t_.launch_attr_launch_completion_event;
        list[n].value.completion_event.event = completion->native();
        list[n].value.completion_event.flags = 0;
        ++n;
    }
    void *params[QD_MAX_ARGS];
    for (uint32_t i = 0; i < num_args; ++i) params[i] = const_cast<void *>(args[i].data);
    LaunchConfig config{};
    config.grid_x = dims.grid[0];
    config.grid_y = dims.grid[1];
    config.grid_z = dims.grid[2];
    config.block_x = dims.block[0];
    config.block_y = dims.block[1];
    config.block_z = dims.block[2];
    config.shared_mem_bytes = dims.shared_mem_bytes;
    config.stream = native();
    config.attrs = list;
    config.num_attrs = n;
    Result r = t_.launch_kernel_ex(&config, k.function(), num_args ? params : nullptr, nullptr);
    if (r != t_.success) return fail(r, QD_ERROR_LAUNCH_FAILED, Fn::launch_kernel_ex);
    last_kernel_.store(k.name(), std::memory_order_relaxed);
    if (completion) completion->note_recorded(k.name());
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
