package qd

// #include <stdlib.h>
// #include "qdgo.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// StartTrace starts tracing the context into the file at path (qd_trace_start, qd.h "Timeline
// trace"): every operation of its streams from now on is recorded with the time it ran, for a
// Chrome trace JSON file that Perfetto opens (`qd trace view` draws it). StopTrace writes the
// file; so does Close while traced. A context is in one trace at a time.
//
// Errors: ErrInvalidArgument when path cannot be written (a missing or read-only directory, or
// a directory) or QD_TRACE_CAPACITY is malformed; ErrInvalidOperation when the context is
// already traced (a second StartTrace, or QD_TRACE is set).
func (c *Context) StartTrace(path string) error {
	h, err := c.liveHandle()
	if err != nil {
		return err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	err = resultError(C.gq_trace_start(h, cpath))
	runtime.KeepAlive(c)
	return err
}

// StopTrace stops tracing and writes the file (qd_trace_stop): it waits for the traced work
// still running (only that), then writes every operation of the trace. It works on a lost
// context, so the file shows the fault.
//
// Errors: ErrInvalidOperation when the context is not being traced; ErrInvalidArgument when the
// file cannot be written any more (tracing is off all the same; FlushTrace writes it again).
func (c *Context) StopTrace() error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_trace_stop(h))
	runtime.KeepAlive(c)
	return err
}

// FlushTrace writes the trace so far without stopping it (qd_trace_flush); after StopTrace it
// writes the stopped trace again.
//
// Errors: ErrInvalidOperation when the context was never traced; ErrInvalidArgument when the
// file cannot be written.
func (c *Context) FlushTrace() error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_trace_flush(h))
	runtime.KeepAlive(c)
	return err
}
