// The checks of the calls qd.h refuses on a capturing stream or on an event recorded inside an
// open capture (core/capture/capture.h): each one question about the object.
#include "common/error.h"
#include "core/capture/capture.h"

namespace qd::core {

qd_status refuse_if_capturing(const Stream &stream, uint64_t handle, const char *what) {
    if (stream.capturing())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s: stream 0x%016llx is capturing (qd_stream_begin_capture); end the "
                    "capture first",
                    what, (unsigned long long)handle);
    return QD_SUCCESS;
}

qd_status refuse_if_captured_event(const Event &event, uint64_t handle, const char *what) {
    if (event.recorded_in_capture())
        return fail(QD_ERROR_INVALID_OPERATION,
                    "%s: event 0x%016llx was recorded inside a capture that is still open; its "
                    "record is part of the graph, not of the stream",
                    what, (unsigned long long)handle);
    return QD_SUCCESS;
}

}  // namespace qd::core
