// SM partitions (qd.h, "SM partitions"): a context split into parts, each a green context over
// SMs of its own. The device's SM resource is cut into one group per part (parts of one size in
// one cut; otherwise one cut per part, each taking one group of exactly the part's count and
// leaving the rest for the next), and each group becomes a resource descriptor, a green context
// and the CUcontext qd works in.
#include <algorithm>
#include <memory>
#include <vector>

#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

void split_rule(const DevResource &whole, int compute_major, unsigned *granularity,
                unsigned *minimum) {
    // Drivers before CUDA 12.8 report smCount only: the rule is then the one the driver
    // documents per architecture.
    unsigned g = whole.sm.coscheduled_alignment, m = whole.sm.min_partition_size;
    if (g == 0) g = compute_major >= 9 ? 8 : 2;
    if (m == 0) m = compute_major >= 9 ? 8 : compute_major == 8 ? 4 : 2;
    *granularity = g;
    *minimum = m < g ? g : m;
}

qd_status GpuContext::split(const uint32_t *counts, uint32_t n,
                            std::vector<std::unique_ptr<Context>> *out) {
    const DriverTable &t = dc_->t;
    const Fn missing = first_missing_partition_entry(t);
    if (missing != Fn::count) {
        if (!t.green_ctx_requires)
            return fail(QD_ERROR_NOT_SUPPORTED,
                        "%s has no SM partitions (green contexts); qd_context_split needs CUDA "
                        "12.4 or newer",
                        t.api_name);
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "SM partitions need green contexts, %s: this %s driver lacks %s",
                    t.green_ctx_requires, t.api_name, symbol_name(t, missing));
    }
    DriverEntry entry(*dc_);
    if (!entry.ok()) return entry.status();
    dc_->run_deferred();

    DevResource whole{};
    Result r = t.device_get_dev_resource(dc_->device, &whole, t.dev_resource_type_sm);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_NOT_SUPPORTED, Fn::device_get_dev_resource, nullptr);
    int major = 0;
    r = t.device_get_attribute(&major, t.attr_compute_major, dc_->device);
    if (r != t.success)
        return dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::device_get_attribute, nullptr);
    unsigned granularity = 0, minimum = 0;
    split_rule(whole, major, &granularity, &minimum);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; ++i) {
        if (counts[i] < minimum)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "counts[%u] is %u SMs; a part of device %u needs at least %u "
                        "(qd_device_info.split_minimum)",
                        i, counts[i], dc_->ordinal, minimum);
        if (counts[i] % granularity != 0)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "counts[%u] is %u SMs, not a multiple of %u, the SMs device %u schedules "
                        "together (qd_device_info.split_granularity)",
                        i, counts[i], granularity, dc_->ordinal);
        total += counts[i];
    }
    if (total > whole.sm.sm_count)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "the counts add up to %llu SMs, and device %u has %u: the parts' SMs are "
                    "disjoint",
                    static_cast<unsigned long long>(total), dc_->ordinal, whole.sm.sm_count);

    // The cuts first (they make nothing to release). Parts of one size: one cut of n groups,
    // the driver's documented use; parts of several sizes: one group per cut, each from what
    // the cut before left over.
    std::vector<DevResource> groups_made(n);
    const bool same_size =
        std::all_of(counts, counts + n, [&](uint32_t c) { return c == counts[0]; });
    DevResource rest = whole;
    for (uint32_t i = 0; i < n; i += same_size ? n : 1) {
        DevResource remaining{};
        unsigned groups = same_size ? n : 1;
        r = t.dev_sm_resource_split_by_count(&groups_made[i], &groups, &rest, &remaining, 0,
                                             counts[i]);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_ARGUMENT, Fn::dev_sm_resource_split_by_count,
                                  nullptr);
        const unsigned wanted = same_size ? n : 1;
        for (unsigned k = 0; k < wanted; ++k) {
            const unsigned got = k < groups ? groups_made[i + k].sm.sm_count : 0u;
            if (groups != wanted || got != counts[i + k])
                return fail(QD_ERROR_INVALID_ARGUMENT,
                            "the %s driver cannot give part %u exactly %u SMs of device %u (it "
                            "offered %u group(s) of %u)",
                            t.api_name, i + k, counts[i + k], dc_->ordinal, groups, got);
        }
        rest = remaining;
    }

    // All or none: a failure below drops the parts made so far, whose DeviceContexts destroy
    // their green contexts.
    std::vector<std::unique_ptr<Context>> parts;
    parts.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        NativeResourceDesc desc = nullptr;
        r = t.dev_resource_generate_desc(&desc, &groups_made[i], 1);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_INVALID_ARGUMENT, Fn::dev_resource_generate_desc,
                                  nullptr);
        NativeGreenCtx green = nullptr;
        r = t.green_ctx_create(&green, desc, dc_->device, t.green_ctx_default_stream);
        if (r != t.success)
            return dc_->fail_call(r, QD_ERROR_OUT_OF_MEMORY, Fn::green_ctx_create, nullptr);
        NativeContext native = nullptr;
        r = t.ctx_from_green_ctx(&native, green);
        if (r != t.success) {
            t.green_ctx_destroy(green);
            return dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::ctx_from_green_ctx, nullptr);
        }
        std::shared_ptr<DeviceContext> part;
        try {
            part = std::make_shared<DeviceContext>(t, dc_->counters, dc_->ordinal, dc_->device,
                                                   native);
        } catch (...) {
            t.green_ctx_destroy(green);
            throw;
        }
        part->green = green;
        part->least_priority = dc_->least_priority;
        part->greatest_priority = dc_->greatest_priority;
        parts.push_back(std::make_unique<GpuContext>(std::move(part)));
    }
    *out = std::move(parts);
    return QD_SUCCESS;
}

}  // namespace qd::backend::gpu
