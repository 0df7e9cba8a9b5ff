// GpuEvent: one native event, created without timing unless timing was asked for (timing
// events cost more to record and to wait on).
#include "backends/gpu/gpu_objects.h"
#include "common/error.h"

namespace qd::backend::gpu {

GpuEvent::GpuEvent(std::shared_ptr<DeviceContext> dc, NativeEvent event, bool timing)
    : dc_(std::move(dc)), t_(dc_->t), event_(event), timing_(timing) {}

// Returns at once: the driver keeps a pending record alive, and streams already waiting on it
// still wait for it.
GpuEvent::~GpuEvent() { dc_->release_event(event_); }

qd_status GpuEvent::query() {
    DriverEntry entry(*dc_, false, last_kernel());
    if (!entry.ok()) return entry.status();
    Result r = t_.event_query(event_);
    if (r == t_.success) return QD_SUCCESS;
    if (r == t_.not_ready) return QD_NOT_READY;
    return dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::event_query, last_kernel());
}

qd_status GpuEvent::synchronize() {
    DriverEntry entry(*dc_, false, last_kernel());
    if (!entry.ok()) return entry.status();
    dc_->run_deferred();
    Result r = t_.event_synchronize(event_);
    if (r == t_.success) return QD_SUCCESS;
    return dc_->fail_call(r, QD_ERROR_INTERNAL, Fn::event_synchronize, last_kernel());
}

}  // namespace qd::backend::gpu
