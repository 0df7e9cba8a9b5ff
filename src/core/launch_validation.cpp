#include "core/launch_validation.h"
#include "common/first_sizes.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

namespace {

qd_status check_dims(const uint32_t d[3], const char *what) {
    for (int i = 0; i < 3; ++i)
        if (d[i] == 0)
            return fail(QD_ERROR_INVALID_ARGUMENT, "%s[%d] is 0; every dimension must be >= 1",
                        what, i);
    uint64_t n = uint64_t(d[0]) * d[1];
    if (n > UINT32_MAX || n * d[2] > UINT32_MAX)
        return fail(QD_ERROR_OVERFLOW, "%s %u x %u x %u has more than 2^32-1 entries", what, d[0],
                    d[1], d[2]);
    return QD_SUCCESS;
}
}  // namespace

qd_status validate_config(const qd_launch_config *config, backend::LaunchDims *out) {
    if (!config) {
        *out = backend::LaunchDims{{1, 1, 1}, {1, 1, 1}, 0};
        return QD_SUCCESS;
    }
    if (config->struct_size < first_size<qd_launch_config>())
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "qd_launch_config.struct_size is %u; at least %u is required (use "
                    "QD_LAUNCH_CONFIG_INIT)",
                    config->struct_size, first_size<qd_launch_config>());
    qd_status st = check_dims(config->grid, "grid");
    if (st == QD_SUCCESS) st = check_dims(config->block, "block");
    if (st != QD_SUCCESS) return st;
    for (int i = 0; i < 3; ++i) {
        out->grid[i] = config->grid[i];
        out->block[i] = config->block[i];
    }
    out->shared_mem_bytes = config->shared_mem_bytes;
    return QD_SUCCESS;
}

qd_status validate_args(const qd_arg *args, uint32_t num_args) {
    if (num_args == 0) return QD_SUCCESS;
    if (num_args > QD_MAX_ARGS)
        return fail(QD_ERROR_INVALID_ARGUMENT, "num_args %u is above QD_MAX_ARGS (%u)", num_args,
                    QD_MAX_ARGS);
    if (!args) return fail(QD_ERROR_INVALID_ARGUMENT, "args is NULL but num_args is %u", num_args);
    uint64_t total = 0;
    for (uint32_t i = 0; i < num_args; ++i) {
        if (args[i].size == 0 || !args[i].data)
            return fail(QD_ERROR_INVALID_ARGUMENT, "argument %u has %s", i,
                        args[i].size == 0 ? "size 0" : "NULL data");
        if (add_overflows(total, args[i].size, &total) || total > QD_MAX_ARG_BYTES)
            return fail(QD_ERROR_OVERFLOW,
                        "the arguments total more than QD_MAX_ARG_BYTES (%u) bytes at argument %u",
                        QD_MAX_ARG_BYTES, i);
    }
    return QD_SUCCESS;
}

namespace {

const char *kind_name(uint32_t kind) {
    switch (kind) {
    case QD_LAUNCH_ATTR_CLUSTER_DIM: return "CLUSTER_DIM";
    case QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION: return "PROGRAMMATIC_SERIALIZATION";
    case QD_LAUNCH_ATTR_PRIORITY: return "PRIORITY";
    case QD_LAUNCH_ATTR_COMPLETION_EVENT: return "COMPLETION_EVENT";
    default: return nullptr;
    }
}

// The fields a kind leaves unused must be 0: the name of the first that is not, or null.
const char *unused_field(const qd_launch_attr &a) {
    uint32_t k;  // checked to be a kind already (validate_attrs)
    std::memcpy(&k, &a.kind, sizeof k);
    if (a.reserved0 != 0) return "reserved0";
    if (a.reserved[0] != 0 || a.reserved[1] != 0) return "reserved";
    if (k != QD_LAUNCH_ATTR_PRIORITY && k != QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION &&
        a.value != 0)
        return "value";
    if (k != QD_LAUNCH_ATTR_CLUSTER_DIM && (a.cluster[0] | a.cluster[1] | a.cluster[2]) != 0)
        return "cluster";
    if (k != QD_LAUNCH_ATTR_COMPLETION_EVENT && a.event != 0) return "event";
    return nullptr;
}

}  // namespace

qd_status validate_attrs(const qd_launch_attr *attrs, uint32_t num_attrs,
                         const backend::LaunchDims &dims, const char *prefix, CheckedAttrs *out) {
    *out = CheckedAttrs{};
    if (num_attrs == 0) return QD_SUCCESS;
    if (num_attrs > QD_MAX_LAUNCH_ATTRS)
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "%snum_attrs %u is above QD_MAX_LAUNCH_ATTRS (%u): one attribute of each kind",
                    prefix, num_attrs, QD_MAX_LAUNCH_ATTRS);
    if (!attrs)
        return fail(QD_ERROR_INVALID_ARGUMENT, "%sattrs is NULL but num_attrs is %u", prefix,
                    num_attrs);
    uint32_t seen = 0;  // bit per kind
    for (uint32_t i = 0; i < num_attrs; ++i) {
        const qd_launch_attr &a = attrs[i];
        // Read as the 32 bits the caller stored: a value outside the enum is the caller's
        // mistake to report, and loading it as qd_launch_attr_kind is undefined behaviour.
        uint32_t kind;
        static_assert(sizeof kind == sizeof a.kind, "qd_launch_attr.kind is 32 bits");
        std::memcpy(&kind, &a.kind, sizeof kind);
        const char *name = kind_name(kind);
        if (!name)
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "%sattrs[%u]: kind %u is not a qd_launch_attr_kind", prefix, i, kind);
        if (seen & (1u << kind))
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "%sattrs[%u]: %s is given twice; each kind at most once", prefix, i, name);
        seen |= 1u << kind;
        if (const char *field = unused_field(a))
            return fail(QD_ERROR_INVALID_ARGUMENT,
                        "%sattrs[%u]: %s has a nonzero '%s', a field it does not use (must be 0)",
                        prefix, i, name, field);
        switch (kind) {
        case QD_LAUNCH_ATTR_CLUSTER_DIM:
            for (int d = 0; d < 3; ++d) {
                if (a.cluster[d] == 0)
                    return fail(QD_ERROR_INVALID_ARGUMENT,
                                "%sattrs[%u]: CLUSTER_DIM cluster[%d] is 0; every dimension must "
                                "be >= 1",
                                prefix, i, d);
                if (dims.grid[d] % a.cluster[d] != 0)
                    return fail(
                        QD_ERROR_INVALID_ARGUMENT,
                        "%sattrs[%u]: CLUSTER_DIM cluster[%d] = %u does not divide grid[%d] "
                        "= %u",
                        prefix, i, d, a.cluster[d], d, dims.grid[d]);
                out->attrs.cluster[d] = a.cluster[d];
            }
            break;
        case QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION:
            if (a.value != 0 && a.value != 1)
                return fail(
                    QD_ERROR_INVALID_ARGUMENT,
                    "%sattrs[%u]: PROGRAMMATIC_SERIALIZATION value is %d; 1 (on) or 0 (off)",
                    prefix, i, int(a.value));
            out->attrs.programmatic = a.value == 1;
            break;
        case QD_LAUNCH_ATTR_PRIORITY:
            out->attrs.has_priority = true;
            out->attrs.priority = a.value;
            break;
        case QD_LAUNCH_ATTR_COMPLETION_EVENT:
            out->has_event = true;
            out->event = a.event;
            out->event_index = i;
            break;
        }
    }
    return QD_SUCCESS;
}

void set_completion_event(backend::LaunchAttrs &attrs, Event &event) {
    attrs.completion_event = event.impl.get();
}

qd_status check_launch_attrs(Stream &s, const backend::LaunchAttrs &attrs,
                             const backend::LaunchDims &dims, const char *prefix) {
    if (attrs.completion_event && s.capturing())
        return fail(QD_ERROR_NOT_SUPPORTED,
                    "%sCOMPLETION_EVENT on a capturing stream: a graph's kernel node records no "
                    "event of the caller's (record one after the launch instead); nothing was "
                    "queued",
                    prefix);
    qd_status st = s.ctx->impl().check_launch_attrs(attrs, dims, s.capturing());
    if (st != QD_SUCCESS && prefix[0] != '\0') {
        std::string message = std::string(prefix) + last_error_message();
        return fail(st, "%s", message.c_str());
    }
    return st;
}

}  // namespace qd::core
