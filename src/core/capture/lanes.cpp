// The lanes of an open capture (core/capture/capture.h): the pool leases it holds until it
// ends, the handles that name its streams in messages, and whether a join fits its lanes.
#include "common/error.h"
#include "core/capture/capture.h"
#include "core/capture/conditional.h"
#include "core/capture/open_capture.h"

namespace qd::core {

bool CaptureRouter::keep_lease(const std::shared_ptr<Stream> &stream) {
    if (open_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(stream.get());
    if (it == lanes_.end()) return false;
    it->second.capture->held.push_back(stream);
    it->second.capture->lane_handles[it->second.lane] = 0;  // the handle is stale now
    return true;
}

void CaptureRouter::reuse_leases(const Stream &parent, uint32_t want,
                                 std::vector<std::shared_ptr<Stream>> *out) {
    if (open_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&parent);
    if (it == lanes_.end()) return;
    auto &held = it->second.capture->held;
    while (want > 0 && !held.empty()) {
        out->push_back(std::move(held.back()));
        held.pop_back();
        --want;
    }
}

void CaptureRouter::note_handle(const Stream &stream, uint64_t handle) {
    if (open_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = lanes_.find(&stream);
    if (it != lanes_.end()) it->second.capture->lane_handles[it->second.lane] = handle;
}

qd_status CaptureRouter::check_join(const Stream &parent, uint64_t parent_handle,
                                    Stream *const *children, const uint64_t *handles,
                                    uint32_t n) const {
    if (open_.load(std::memory_order_acquire) == 0) return QD_SUCCESS;
    std::lock_guard<std::mutex> lock(mutex_);
    auto capture_of = [&](const Stream &s) -> const Capture * {
        auto it = lanes_.find(&s);
        return it == lanes_.end() ? nullptr : it->second.capture;
    };
    auto frame_of = [&](const Stream &s) -> const CaptureFrame * {
        auto it = lanes_.find(&s);
        return it == lanes_.end() ? nullptr : it->second.capture->lane_frame[it->second.lane];
    };
    const Capture *into = capture_of(parent);  // the parent joins a child's capture by waiting
    const CaptureFrame *frame = frame_of(parent);
    for (uint32_t i = 0; i < n; ++i) {
        const Capture *from = capture_of(*children[i]);
        if (!into) {
            into = from;
            frame = frame_of(*children[i]);
            continue;
        }
        if (from == into) {
            if (frame_of(*children[i]) == frame) continue;
            return fail(QD_ERROR_INVALID_OPERATION,
                        "children[%u] (0x%016llx) and stream 0x%016llx are in different bodies "
                        "of the capture's conditionals (or one is outside them); a body joins "
                        "only streams of the same body",
                        i, (unsigned long long)handles[i], (unsigned long long)parent_handle);
        }
        if (!from)
            return fail(QD_ERROR_INVALID_OPERATION,
                        "children[%u] (0x%016llx) is not part of the capture that stream "
                        "0x%016llx is in; a capturing stream can only wait on work of its own "
                        "capture",
                        i, (unsigned long long)handles[i], (unsigned long long)parent_handle);
        return fail(QD_ERROR_INVALID_OPERATION,
                    "children[%u] (0x%016llx) is in another capture (of stream 0x%016llx) than "
                    "stream 0x%016llx",
                    i, (unsigned long long)handles[i], (unsigned long long)from->origin_handle,
                    (unsigned long long)parent_handle);
    }
    return QD_SUCCESS;
}

}  // namespace qd::core
