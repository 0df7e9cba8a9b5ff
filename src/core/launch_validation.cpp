#include "core/launch_validation.h"
#include "common/first_sizes.h"

#include "common/error.h"

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

}  // namespace qd::core
