package qd

// #include "qdgo.h"
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"strings"
)

// hostCall is one queued host callback, reached from C through a cgo.Handle.
type hostCall struct {
	fn  func()
	ctx *Context
}

// LaunchHostFunc queues fn to run on a host thread after all earlier work on the stream; later
// work waits for it (qd_launch_host_fn). If the call fails, fn is never called.
//
// fn must not call blocking functions of this context (Synchronize, Close: they return
// ErrInvalidOperation), and on GPUs no function that reaches the driver. A panic in fn is
// recovered: it makes the context lost, as a faulting kernel does (every later call of this
// package that touches the device returns an error matching ErrDeviceLost whose message
// quotes the panic; Context.Err reports it), and never crashes the program.
func (s *Stream) LaunchHostFunc(fn func()) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if fn == nil {
		return newError(StatusInvalidArgument, "host function is nil")
	}
	// A capturing stream refuses qd_stream_query with a message saying so (qd.h, "Graphs"). fn
	// runs once (its handle is deleted by the call), and a graph would call it on every replay.
	if r := C.gq_stream_query(h); r.status == C.QD_ERROR_INVALID_OPERATION {
		if err := statusError(r.status, r.msg); strings.Contains(err.Error(), "is capturing") {
			runtime.KeepAlive(s)
			return newError(StatusInvalidOperation,
				"LaunchHostFunc on a capturing stream: fn runs once, and a graph would call it on every replay (%s)",
				err.(*Error).Message)
		}
	}
	gh := cgo.NewHandle(&hostCall{fn: fn, ctx: s.ctx})
	if err := resultError(C.gq_launch_host_fn(h, C.uintptr_t(gh))); err != nil {
		gh.Delete() // qd never calls fn when the launch fails
		return err
	}
	runtime.KeepAlive(s)
	return nil
}

// runHostCall is the Go side of gq_host_fn_trampoline.
func runHostCall(h uintptr) {
	var call *hostCall
	defer func() {
		if r := recover(); r != nil && call != nil {
			call.ctx.fault(fmt.Sprintf("a Go host callback panicked: %v", r))
		}
	}()
	gh := cgo.Handle(h)
	call = gh.Value().(*hostCall) // an unknown handle panics, and is dropped above
	gh.Delete()
	call.fn()
}
