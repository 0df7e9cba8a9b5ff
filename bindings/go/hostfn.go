package qd

// #include "qdgo.h"
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
	"sync/atomic"
)

// hostCall is one queued host callback, reached from C through a cgo.Handle. A callback run
// from a stream runs once and lets go of its handle; a captured one is held by the graphs
// that captured it (lifetime.go) and runs on every replay.
type hostCall struct {
	keeper
	fn       func()
	captured atomic.Bool
}

// LaunchHostFunc queues fn to run on a host thread after all earlier work on the stream; later
// work waits for it (qd_launch_host_fn). If the call fails, fn is never called.
//
// On a capturing stream fn is captured, as qd.h ("Graphs") says: it does not run now, and runs
// on every replay of the graph; the graph (and each graph updated from it) keeps fn until it is
// closed and its queued replays have run.
//
// fn must not call blocking functions of this context (Synchronize, Close: they return
// ErrInvalidOperation), and on GPUs no function that reaches the driver. A panic in fn
// (panic(nil) included) is recovered: it makes the context lost, as a faulting kernel does
// (every later call of this package that touches the device returns an error matching
// ErrDeviceLost whose message quotes the panic; Context.Err reports it), and never crashes the
// program. runtime.Goexit in fn (t.FailNow, t.Fatal, t.SkipNow do it) cannot be stopped once
// it has begun and Go ends the process for it ("internal lockOSThread error"); this package
// first prints why to stderr. Report test failures from a callback with t.Error.
func (s *Stream) LaunchHostFunc(fn func()) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if fn == nil {
		return newError(StatusInvalidArgument, "host function is nil")
	}
	call := &hostCall{fn: fn}
	call.ctx = s.ctx
	call.refs.Store(1) // the queued run, or the capture
	call.gh = s.ctx.newHandle(call)
	r := C.gq_launch_go_host_fn(h, C.uintptr_t(call.gh), s.ctx.mayCapture())
	runtime.KeepAlive(s)
	if r.status != 0 {
		call.release() // qd never calls fn when the launch fails
		return statusError(r.status, r.msg)
	}
	if r.captured != 0 {
		call.captured.Store(true)
		s.ctx.adoptCaptured(call)
	}
	return nil
}

// hostStatusCall is one queued host callback with status (LaunchHostFuncWithStatus): qd calls
// it exactly once after a successful launch, so it always lets go of its handle when it runs.
type hostStatusCall struct {
	keeper
	fn func(status error)
}

// LaunchHostFuncWithStatus queues fn as LaunchHostFunc does, but qd calls it exactly once
// whatever happens to the context (qd_launch_host_status_fn, as CuPy's add_callback), so
// cleanup code in fn runs either way: with status nil when it ran in turn after all earlier
// work; with an error matching ErrDeviceLost when the context was lost before its turn (fn is
// then called by the context's Close at the latest); with one matching ErrInvalidHandle when
// the context's destroy began before its turn. If the call fails, fn is never called.
//
// It is never captured: on a capturing stream it returns an error matching
// ErrInvalidOperation and the capture goes on. fn follows LaunchHostFunc's rules (no blocking
// call of this context; a panic is recovered and makes the context lost).
func (s *Stream) LaunchHostFuncWithStatus(fn func(status error)) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if fn == nil {
		return newError(StatusInvalidArgument, "host function is nil")
	}
	call := &hostStatusCall{fn: fn}
	call.ctx = s.ctx
	call.refs.Store(1) // the one call qd makes
	call.gh = s.ctx.newHandle(call)
	r := C.gq_launch_go_host_status_fn(h, C.uintptr_t(call.gh))
	runtime.KeepAlive(s)
	if r.status != 0 {
		call.release() // qd never calls fn when the launch fails
		return statusError(r.status, r.msg)
	}
	return nil
}

// runHostStatusCall is the Go side of gq_host_status_fn_trampoline.
func runHostStatusCall(h uintptr, status int32) {
	call, ok := lookupHandle(h).(*hostStatusCall)
	if !ok {
		return // a handle of a closed context: nothing to run
	}
	var outcome error
	switch Status(status) {
	case StatusSuccess:
	case StatusDeviceLost:
		outcome = newError(StatusDeviceLost, "the context was lost before this host callback's turn")
	default:
		outcome = newError(Status(status), "the context was destroyed before this host callback's turn")
	}
	returned := false
	defer exitGuard(&returned, "a Go host callback")
	if msg, failed := callGuarded("a Go host callback", func() error { call.fn(outcome); return nil }); failed {
		call.ctx.fault(msg)
	}
	call.release()
	returned = true
}

// runHostCall is the Go side of gq_host_fn_trampoline.
func runHostCall(h uintptr) {
	call, ok := lookupHandle(h).(*hostCall)
	if !ok {
		return // a handle of a closed context: nothing to run
	}
	returned := false
	defer exitGuard(&returned, "a Go host callback")
	if msg, failed := callGuarded("a Go host callback", func() error { call.fn(); return nil }); failed {
		call.ctx.fault(msg)
	}
	if !call.captured.Load() {
		call.release()
	}
	returned = true
}

// lookupHandle is the value behind a handle C passed back, or nil for one already deleted.
func lookupHandle(h uintptr) (v interface{}) {
	defer func() { _ = recover() }() // cgo.Handle.Value panics on a deleted handle
	return cgo.Handle(h).Value()
}

// goexitMessage is printed when a Go callback calls runtime.Goexit, which Go then turns into a
// fatal error of the process (a goroutine called from C cannot exit).
const goexitMessage = "qd: %s called runtime.Goexit (t.FailNow, t.Fatal or t.SkipNow?): a function " +
	"that C calls cannot end its goroutine, and Go now ends the process; report failures from " +
	"a callback with t.Error or a returned error\n"

// exitGuard, deferred by a function C calls, sees runtime.Goexit: the function is unwinding
// without having returned (a panic never gets this far: callGuarded recovers it).
func exitGuard(returned *bool, what string) {
	if !*returned {
		fmt.Fprintf(os.Stderr, goexitMessage, what)
	}
}

// callGuarded runs fn for C: a returned error or a panic (panic(nil) included) becomes a fault
// message; it never unwinds into C.
func callGuarded(what string, fn func() error) (msg string, failed bool) {
	finished := false
	defer func() {
		if finished {
			return
		}
		r := recover()
		failed = true
		if r != nil {
			msg = fmt.Sprintf("%s panicked: %v", what, r)
			return
		}
		// panic(nil), which recover has now stopped (Go 1.19 reports its value as nil); or
		// runtime.Goexit, which goes on unwinding past this function (see exitGuard).
		msg = fmt.Sprintf("%s panicked with a nil value", what)
	}()
	err := fn()
	finished = true
	if err != nil {
		return fmt.Sprintf("%s failed: %v", what, err), true
	}
	return "", false
}
