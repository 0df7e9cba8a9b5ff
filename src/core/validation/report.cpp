// The reports: how a report names an operation, the handler they go to (the default one writes
// the message to stderr), and their delivery outside the domain's mutex.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/validation/observer.h"
#include "core/validation/state.h"

namespace qd::core {

void ValidationObserver::default_handler(const qd_hazard *hazard, void *) {
    std::fprintf(stderr, "%s\n", hazard->message);
}

void ValidationObserver::set_handler(qd_hazard_fn fn, void *user_data) {
    std::lock_guard<std::mutex> lock(domain_->mutex);
    handler_ = fn ? fn : &default_handler;
    handler_data_ = fn ? user_data : nullptr;
}

std::shared_ptr<const ValidationObserver::OpInfo> ValidationObserver::describe(const Op &op,
                                                                               const char *what,
                                                                               uint32_t actor) {
    auto info = std::make_shared<OpInfo>();
    info->what = what;
    char buf[96];
    if (actor == 0) {
        info->where = "the host";
    } else if (const uint64_t h =
                   op.stream ? op.stream->handle.load(std::memory_order_relaxed) : 0) {
        info->stream = h;
        std::snprintf(buf, sizeof buf, "stream 0x%016" PRIx64, h);
        info->where = buf;
    } else if (op.stream && op.origin == OpOrigin::GraphLaunch) {
        info->where = "a pooled stream of a graph replay";
    } else if (op.stream && op.origin == OpOrigin::ParallelLaunch) {
        info->where = "a pooled stream of qd_launch_parallel";
    } else {
        std::snprintf(buf, sizeof buf, "a pooled stream (slot %u)",
                      op.stream ? op.stream->pool_slot : 0);
        info->where = buf;
    }
    return info;
}

void ValidationObserver::deliver(std::vector<Report> &reports) {
    if (reports.empty()) return;
    qd_hazard_fn fn;
    void *data;
    {
        std::lock_guard<std::mutex> lock(domain_->mutex);
        fn = handler_;
        data = handler_data_;
    }
    for (const Report &r : reports) {
        reported_.fetch_add(1, std::memory_order_relaxed);
        qd_hazard h;
        std::memset(&h, 0, sizeof h);
        h.struct_size = sizeof h;
        h.kind = r.kind;
        h.context = ctx_.handle();
        h.stream = r.stream;
        h.other_stream = r.other_stream;
        h.allocation = r.allocation;
        h.allocation_bytes = r.bytes;
        h.offset = r.offset;
        h.operation = r.operation.c_str();
        h.other_operation = r.other_operation.c_str();
        h.message = r.message.c_str();
        fn(&h, data);
    }
}

}  // namespace qd::core
