package qd

// #include "qdgo.h"
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// Status is a qd_status: 0 is success, a positive value a non-error status (StatusNotReady), a
// negative value an error. The named values are written by abi/gen from abi/qd-api.json
// (status_gen.go).
type Status int32

// Name is the status's C name, e.g. "QD_ERROR_INVALID_HANDLE", or "QD_STATUS_UNKNOWN".
func (s Status) Name() string {
	if info, ok := statusInfo[s]; ok {
		return info.name
	}
	return "QD_STATUS_UNKNOWN"
}

// Description is the header's one-line description of the status ("" for unknown values).
func (s Status) Description() string { return statusInfo[s].description }

// String is the status's C name.
func (s Status) String() string { return s.Name() }

// Error is a failed qd call: its status and the library's message, read in the same C call that
// failed (never a stale message of another call). Compare with errors.Is against the sentinels
// (qd.ErrInvalidHandle, ...), which match every *Error of their status.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("qd: %s (%s)", e.Status.Name(), e.Status.Description())
	}
	return fmt.Sprintf("qd: %s: %s", e.Status.Name(), e.Message)
}

// Is makes errors.Is(err, qd.ErrX) true for every *Error of ErrX's status. A target with a
// message matches only itself.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// statusError turns a failed call's status and message into an *Error and frees the message.
// Non-error statuses (QD_NOT_READY) also become an *Error: callers that expect them test the
// status first.
func statusError(status C.qd_status, msg *C.char) error {
	text := ""
	if msg != nil {
		text = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	if text == "" { // non-error statuses carry no message in qd
		text = Status(status).Description()
	}
	// Error() says "qd: STATUS: " itself; some of qd's messages begin with "qd: " too.
	text = strings.TrimPrefix(text, "qd: ")
	return &Error{Status: Status(status), Message: text}
}

// resultError is nil for a successful wrapper call, else its *Error.
func resultError(r C.gq_result) error {
	if r.status == 0 {
		return nil
	}
	return statusError(r.status, r.msg)
}

// u64Result is the output of a successful wrapper call with one 64-bit output, else its *Error.
func u64Result(r C.gq_u64) (uint64, error) {
	if r.status == 0 {
		return uint64(r.value), nil
	}
	return 0, statusError(r.status, r.msg)
}

// newError is an error the binding finds itself, before any C call, in qd's words.
func newError(status Status, format string, args ...interface{}) error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// errClosed is the error of a call on an object whose Close already ran.
func errClosed(what string) error {
	return &Error{Status: StatusInvalidHandle, Message: what + " was closed"}
}

// errNil is the error of a call given a nil object (a nil *Stream, *Event, *Kernel, ...):
// ErrInvalidHandle, as qd reports a 0 handle, from every method and argument alike.
func errNil(what string) error {
	return &Error{Status: StatusInvalidHandle, Message: what + " is nil"}
}
