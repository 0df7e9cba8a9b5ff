#include "common/error.h"

#include <cstdarg>
#include <cstdio>

namespace qd {

namespace {
// A fixed buffer rather than std::string: no allocation on the failure path and no thread-exit
// destructor, so qd_last_error_message() stays safe to call from any thread at any time.
thread_local char t_message[512];
}  // namespace

qd_status fail(qd_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_message, sizeof t_message, fmt, ap);
    va_end(ap);
    return status;
}

const char *last_error_message() noexcept { return t_message; }

const char *status_name(qd_status status) {
    switch (status) {
#define QD_STATUS_NAME_CASE_(name, value, text)                                                    \
    case value: return #name;
        QD_STATUS_LIST(QD_STATUS_NAME_CASE_)
#undef QD_STATUS_NAME_CASE_
    default: return "QD_STATUS_UNKNOWN";
    }
}

}  // namespace qd
