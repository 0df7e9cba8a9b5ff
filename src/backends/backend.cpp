#include "backends/backend.h"

#include "common/error.h"

namespace qd::backend {

qd_status Stream::get_native_handle(uint64_t *out) const {
    const uint64_t h = native_handle();
    if (h == 0) return fail(QD_ERROR_NOT_SUPPORTED, "this backend has no native streams");
    *out = h;
    return QD_SUCCESS;
}

qd_status Stream::host_status_fn(qd_host_status_fn, uint64_t, void *) {
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend has no host callbacks with status");
}

qd_status Stream::native_flags(uint32_t *flags) const {
    *flags = QD_STREAM_NON_BLOCKING;
    return QD_SUCCESS;
}

const char *first_attr_name(const LaunchAttrs &attrs) noexcept {
    if (attrs.has_cluster()) return "CLUSTER_DIM";
    if (attrs.programmatic) return "PROGRAMMATIC_SERIALIZATION";
    if (attrs.has_priority) return "PRIORITY";
    if (attrs.completion_event) return "COMPLETION_EVENT";
    return "";
}

qd_status Stream::launch_ex(Kernel &, const LaunchDims &, const LaunchAttrs &attrs, const qd_arg *,
                            uint32_t) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "launch attribute %s: this backend has no launch attributes",
                first_attr_name(attrs));
}

qd_status Context::check_launch_attrs(const LaunchAttrs &attrs, const LaunchDims &, bool) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "launch attribute %s: this backend has no launch attributes",
                first_attr_name(attrs));
}

qd_status Stream::begin_capture(std::unique_ptr<Capture> *) {
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend has no native graphs");
}

qd_status Capture::begin_conditional(Stream &, qd_conditional_kind, uint32_t, uint64_t,
                                     uint64_t *) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "qd_stream_begin_conditional: this backend's driver graphs cannot hold "
                "conditional nodes (CUDA's need driver 12.3, and 12.8 for IF_ELSE and SWITCH); "
                "nothing was queued and the capture goes on");
}

qd_status Capture::next_branch(Stream &, bool *done) {
    *done = false;
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend's driver graphs have no conditional nodes");
}

qd_status Capture::end_conditional(Stream &, bool *done) {
    *done = false;
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend's driver graphs have no conditional nodes");
}

qd_status Stream::signal(Timeline &, uint64_t) {
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend has no timelines");
}

qd_status Stream::wait_value(Timeline &, uint64_t) {
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend has no timelines");
}

qd_status Context::create_timeline(uint64_t, std::shared_ptr<Timeline> *) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "this backend has no timelines in this release (the CPU backend has them)");
}

qd_status Context::import_stream(uint64_t, std::shared_ptr<Stream> *) {
    return fail(QD_ERROR_NOT_SUPPORTED, "this backend has no native streams to import");
}

qd_status Context::run_inline(const InlineOp &) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "this backend cannot run a conditional's operations on the host");
}

qd_status Context::kernel_from_host_fn(qd_host_kernel_fn, const char *, std::shared_ptr<Kernel> *) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "host-function kernels exist only on the CPU backend; load a module instead");
}

qd_status Stream::memcpy_peer(uint64_t dst, Context &, uint64_t src, Context &, uint64_t bytes) {
    return memcpy(dst, src, bytes);
}

qd_status Context::can_access_peer(Context &, bool *out) {
    *out = true;
    return QD_SUCCESS;
}

qd_status Context::enable_peer_access(Context &) { return QD_SUCCESS; }

qd_status Context::split(const uint32_t *, uint32_t, std::vector<std::unique_ptr<Context>> *) {
    return fail(QD_ERROR_NOT_SUPPORTED,
                "this backend cannot split a context into partitions of its execution units");
}

}  // namespace qd::backend
