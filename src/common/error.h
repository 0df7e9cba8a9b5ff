// Thread-local error reporting shared by every layer (api, core, backends).
//
// Every failure path calls qd::fail(status, fmt, ...), which writes the thread-local message that
// qd_last_error_message() returns and hands the status back, so a failing branch reads
// `return fail(QD_ERROR_INVALID_ARGUMENT, "bytes is 0");`. Success never touches the message.
#pragma once

#include <qd/qd.h>

#include <cstdint>

namespace qd {

// Writes the message (truncated to the buffer) and returns status unchanged.
qd_status fail(qd_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The status's name ("QD_ERROR_INVALID_HANDLE"), from qd.h's status list; "QD_STATUS_UNKNOWN"
// for a value not in it. qd_status_name() returns this.
const char *status_name(qd_status status);

// The current thread's message; "" until the first failure. Never null.
const char *last_error_message() noexcept;

// Overflow-checked arithmetic for sizes; true when the result does not fit.
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}
inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}

}  // namespace qd
