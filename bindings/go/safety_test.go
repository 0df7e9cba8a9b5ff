package qd_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"qd"
)

// noPanic turns a panic of the code under test into a test failure (the suite goes on).
func noPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s panicked: %v", what, r)
		}
	}()
	fn()
}

func TestContextClose_MakesItsBuffersReadClosed(t *testing.T) {
	ctx, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU})
	must(t, err)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	host, err := ctx.HostAlloc(1 << 20)
	must(t, err)
	dev, err := s.Alloc(4096)
	must(t, err)
	must(t, ctx.Close())
	if b := host.Bytes(); b != nil {
		t.Fatalf("HostBuffer.Bytes() after the context's Close: %d bytes of freed memory, want nil", len(b))
	}
	if p := host.Ptr(); p != 0 {
		t.Fatalf("HostBuffer.Ptr() after the context's Close = %#x, want 0", p)
	}
	must(t, dev.Close())
	if p := dev.Ptr(); p != 0 {
		t.Fatalf("DeviceBuffer.Ptr() after its Close returned nil = %#x, want 0", p)
	}
	must(t, host.Close())
}

func TestMemset_OfAnotherContextsFreedBlock_IsInvalidAddress(t *testing.T) {
	out, err, child := inSubprocess(t, func() {
		ctx := newContext(t)
		s := newStream(t, ctx)
		doomed, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU})
		must(t, err)
		ds, err := doomed.NewStream(qd.StreamOptions{})
		must(t, err)
		dev, err := ds.Alloc(1 << 20)
		must(t, err)
		stale := dev.Ptr()
		must(t, doomed.Close())
		expectIs(t, s.Memset(stale, 1, 1<<20), qd.ErrInvalidAddress)
		must(t, s.Synchronize())
	})
	if !child && err != nil {
		t.Fatalf("the test process died or failed (%v):\n%s", err, out)
	}
}

func TestMemsetAndMemcpy_OfAddressesNotAllocatedHere_AreInvalidAddress(t *testing.T) {
	out, err, child := inSubprocess(t, func() {
		ctx := newContext(t)
		s := newStream(t, ctx)
		host := hostBuffer(t, ctx, 64)
		expectIs(t, s.Memset(0xdead0000, 0, 64), qd.ErrInvalidAddress)
		goMem := make([]byte, 64)
		goPtr := qd.DevicePtr(uintptr(unsafe.Pointer(&goMem[0])))
		expectIs(t, s.Memcpy(host.Ptr(), goPtr, 64), qd.ErrInvalidAddress)
		expectIs(t, s.Memcpy(goPtr, host.Ptr(), 64), qd.ErrInvalidAddress)
		expectIs(t, s.Memcpy(host.Ptr(), host.Ptr().Add(32), 64), qd.ErrInvalidAddress) // runs past the end
		must(t, s.Memcpy(host.Ptr(), host.Ptr().Add(32), 32))
		must(t, s.Synchronize())
		runtime.KeepAlive(goMem)
	})
	if !child && err != nil {
		t.Fatalf("the test process died or failed (%v):\n%s", err, out)
	}
}

// Two launches on two unordered streams that only read their buffer are no hazard once the
// kernel's parameter 0, as the Go function reads it, is declared read-only.
func TestSetParamAccess_OfAGoHostKernel_CountsTheFunctionsOwnParameters(t *testing.T) {
	ctx := newContext(t, func(o *qd.ContextOptions) { o.Validate = true })
	read, err := ctx.NewHostKernel("read", func(b *qd.HostBlock) error { _ = *(*byte)(b.Pointer(0)); return nil })
	must(t, err)
	must(t, read.SetParamAccess(0, qd.ParamRead))
	a, b := newStream(t, ctx), newStream(t, ctx)
	buf := hostBuffer(t, ctx, 64)
	must(t, ctx.Synchronize())
	must(t, a.Launch(read, qd.LaunchConfig{}, qd.Address(buf.Ptr())))
	must(t, b.Launch(read, qd.LaunchConfig{}, qd.Address(buf.Ptr())))
	must(t, b.LaunchParallel([]qd.Task{
		{Group: 0, Kernel: read, Args: []qd.Arg{qd.Address(buf.Ptr())}},
		{Group: 1, Kernel: read, Args: []qd.Arg{qd.Address(buf.Ptr())}},
	}))
	must(t, ctx.Synchronize())
	st, err := ctx.Stats()
	must(t, err)
	if st.HazardsReported != 0 {
		t.Fatalf("HazardsReported = %d for reads declared read-only, want 0", st.HazardsReported)
	}
	expectIs(t, read.SetParamAccess(63, qd.ParamRead), qd.ErrInvalidArgument) // 64 with the header
}

func TestLaunchHostFunc_WhileCapturing_RunsOnEveryReplay_AndIsReleasedWithTheGraph(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	base := ctx.LiveGoFunctions()
	calls := 0
	must(t, s.BeginCapture())
	must(t, s.LaunchHostFunc(func() { calls++ }))
	g, err := s.EndCapture()
	must(t, err)
	must(t, s.Synchronize())
	if calls != 0 {
		t.Fatalf("a captured callback ran %d times during its capture", calls)
	}
	for i := 0; i < 3; i++ {
		must(t, g.Launch(s))
	}
	must(t, g.Close()) // replays already queued still run: the graph keeps fn until they have
	must(t, s.Synchronize())
	if calls != 3 {
		t.Fatalf("3 replays called the captured callback %d times", calls)
	}
	if n := ctx.LiveGoFunctions(); n != base {
		t.Fatalf("LiveGoFunctions = %d after the graph was closed and its replays ran, want %d", n, base)
	}
}

func TestKernelClose_ReleasesAGoHostKernel_OnceItsLaunchesHaveRun(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	g := newGate(t, ctx)
	base := ctx.LiveGoFunctions()
	ran := 0
	for i := 0; i < 50; i++ { // a JIT-style loop: a new kernel per launch
		k, err := ctx.NewHostKernel("jit", func(*qd.HostBlock) error { ran++; return nil })
		must(t, err)
		must(t, s.Launch(k, qd.Grid1D(2, 1)))
		must(t, k.Close())
	}
	must(t, s.Synchronize())
	if n := ctx.LiveGoFunctions(); n != base || ran != 100 {
		t.Fatalf("LiveGoFunctions = %d after 50 closed kernels ran (%d blocks), want %d", n, ran, base)
	}
	// A launch still queued keeps the function after Close; its last block lets go of it.
	k, err := ctx.NewHostKernel("held", func(*qd.HostBlock) error { return nil })
	must(t, err)
	g.hold(t, s)
	must(t, s.Launch(k, qd.Grid1D(3, 1)))
	must(t, k.Close())
	if n := ctx.LiveGoFunctions(); n != base+1 {
		t.Fatalf("LiveGoFunctions = %d with a launch of a closed kernel queued, want %d", n, base+1)
	}
	g.open()
	must(t, s.Synchronize())
	if n := ctx.LiveGoFunctions(); n != base {
		t.Fatalf("LiveGoFunctions = %d after the queued launch ran, want %d", n, base)
	}
}

func TestGraph_OfAGoHostKernel_KeepsItUntilClosed(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	base := ctx.LiveGoFunctions()
	ran := 0
	k, err := ctx.NewHostKernel("captured", func(*qd.HostBlock) error { ran++; return nil })
	must(t, err)
	must(t, s.BeginCapture())
	must(t, s.Launch(k, qd.LaunchConfig{}))
	g, err := s.EndCapture()
	must(t, err)
	must(t, k.Close())
	must(t, g.Launch(s))
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	if ran != 2 {
		t.Fatalf("2 replays ran the captured kernel %d times", ran)
	}
	if n := ctx.LiveGoFunctions(); n != base+1 {
		t.Fatalf("LiveGoFunctions = %d while the graph is open, want %d", n, base+1)
	}
	must(t, g.Close())
	if n := ctx.LiveGoFunctions(); n != base {
		t.Fatalf("LiveGoFunctions = %d after the graph's Close, want %d", n, base)
	}
}

func TestWithActiveStream_RestoresThePreviousStream_WhenFnPanics(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := ctx.ActiveStreamHandle()
	must(t, err)
	func() {
		defer func() { _ = recover() }()
		_ = ctx.WithActiveStream(s, func() error { panic("fn failed") })
	}()
	after, err := ctx.ActiveStreamHandle()
	must(t, err)
	if after != before {
		t.Fatalf("active stream after a panic in fn = %#x, want the previous %#x", after, before)
	}
}

func TestHostCallback_PanicNil_FaultsTheContext(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	must(t, s.LaunchHostFunc(func() { panic(nil) }))
	err := s.Synchronize()
	expectIs(t, err, qd.ErrDeviceLost)
	if !strings.Contains(err.Error(), "nil") {
		t.Fatalf("the fault does not say what happened: %v", err)
	}
}

func TestHostCallback_Goexit_EndsTheProcessSayingWhy(t *testing.T) {
	out, err, child := inSubprocess(t, func() {
		ctx := newContext(t)
		s := newStream(t, ctx)
		must(t, s.LaunchHostFunc(runtime.Goexit))
		_ = s.Synchronize()
	})
	if child {
		return
	}
	if err == nil {
		t.Fatalf("runtime.Goexit in a callback: the process went on, want the documented end:\n%s", out)
	}
	if !strings.Contains(out, "called runtime.Goexit") {
		t.Fatalf("runtime.Goexit in a callback: the process died without saying why:\n%s", out)
	}
}

func TestJoin_OfChildrenJoinedAlready_IsInvalidHandle_WhateverTheirNumber(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	for _, n := range []int{1, 2, 3} {
		children, err := s.Fork(n)
		must(t, err)
		must(t, s.Join(children))
		expectIs(t, s.Join(children), qd.ErrInvalidHandle)
	}
	expectIs(t, s.Join([]*qd.Stream{nil}), qd.ErrInvalidHandle)
}

func TestNilObjects_AreInvalidHandle_NeverAPanic(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	var nilStream *qd.Stream
	var nilEvent *qd.Event
	var nilKernel *qd.Kernel
	var nilGraph *qd.Graph
	noPanic(t, "nil *Event", func() {
		expectIs(t, s.RecordEvent(nilEvent), qd.ErrInvalidHandle)
		expectIs(t, s.WaitEvent(nilEvent), qd.ErrInvalidHandle)
		expectIs(t, nilEvent.Synchronize(), qd.ErrInvalidHandle)
		_, err := qd.Elapsed(nilEvent, nilEvent)
		expectIs(t, err, qd.ErrInvalidHandle)
		must(t, nilEvent.Close())
	})
	noPanic(t, "nil *Stream", func() {
		expectIs(t, nilStream.Synchronize(), qd.ErrInvalidHandle)
		expectIs(t, nilStream.Launch(nilKernel, qd.LaunchConfig{}), qd.ErrInvalidHandle)
		_, err := ctx.SetActiveStream(nilStream)
		expectIs(t, err, qd.ErrInvalidHandle)
		expectIs(t, ctx.WithActiveStream(nilStream, func() error { return nil }), qd.ErrInvalidHandle)
		must(t, nilStream.Close())
	})
	noPanic(t, "nil *Kernel and *Graph", func() {
		expectIs(t, s.Launch(nilKernel, qd.LaunchConfig{}), qd.ErrInvalidHandle)
		expectIs(t, nilGraph.Launch(s), qd.ErrInvalidHandle)
		must(t, nilGraph.Close())
	})
}

func TestHazardError_CarriesQdsMessageOnce_AndFailModePrintsNothing(t *testing.T) {
	out, err, child := inSubprocess(t, func() {
		ctx := newContext(t, func(o *qd.ContextOptions) { o.Validate, o.ValidateFail = true, true })
		a, b := newStream(t, ctx), newStream(t, ctx)
		buf, err := a.Alloc(64)
		must(t, err)
		err = b.Memset(buf.Ptr(), 0, 64)
		expectIs(t, err, qd.ErrHazard)
		if n := strings.Count(err.Error(), "qd: "); n != 1 {
			t.Errorf("%q: \"qd: \" %d times, want once", err.Error(), n)
		}
		if _, err := ctx.Validating(); err != nil { // sets the handler again
			t.Error(err)
		}
		expectIs(t, b.Memset(buf.Ptr(), 0, 64), qd.ErrHazard)
		must(t, a.Synchronize())
	})
	if child {
		return
	}
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if strings.Contains(out, "qd: hazard:") {
		t.Fatalf("a fail-mode hazard was printed as well as returned:\n%s", out)
	}
}

func TestSynchronizeContext_ReturnsCtxErr_WhileTheWorkGoesOn(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	g := newGate(t, ctx)
	ev := newEvent(t, ctx, false)
	g.hold(t, s)
	must(t, s.RecordEvent(ev))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for what, err := range map[string]error{
		"Stream":  s.SynchronizeContext(cancelled),
		"Event":   ev.SynchronizeContext(cancelled),
		"Context": ctx.SynchronizeContext(cancelled),
	} {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s.SynchronizeContext with a cancelled ctx: %v, want context.Canceled", what, err)
		}
	}
	// Given up while waiting: the wait has begun, and ctx is cancelled while it goes on.
	waiting, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.SynchronizeContext(waiting) }()
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("SynchronizeContext cancelled while waiting: %v", err)
	}
	if ok, err := s.Query(); err != nil || ok {
		t.Fatalf("the held work finished (%v, %v) though the gate is closed", ok, err)
	}
	g.open()
	must(t, s.SynchronizeContext(context.Background()))
}

func TestCloseContext_ReturnsCtxErr_AndTheCloseCompletesInTheBackground(t *testing.T) {
	ctx, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU, CPUWorkerThreads: 2})
	must(t, err)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	release := make(chan struct{})
	must(t, s.LaunchHostFunc(func() { <-release }))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ctx.CloseContext(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("CloseContext with a cancelled ctx: %v", err)
	}
	waiting, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctx.CloseContext(waiting) }()
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("CloseContext cancelled while draining: %v", err)
	}
	close(release)
	must(t, ctx.Close()) // waits for the background Close
	if ctx.Handle() != 0 {
		t.Fatal("the context is not closed after Close returned")
	}
}

// After Update, a graph's replays call the callbacks of the graph it was updated from, which
// it keeps even when that graph is closed.
func TestGraphUpdate_KeepsTheCallbacksOfTheGraphItWasUpdatedFrom(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	base := ctx.LiveGoFunctions()
	var got []string
	capture := func(name string) *qd.Graph {
		must(t, s.BeginCapture())
		must(t, s.LaunchHostFunc(func() { got = append(got, name) }))
		g, err := s.EndCapture()
		must(t, err)
		return g
	}
	g, from := capture("first"), capture("second")
	must(t, g.Update(from))
	must(t, from.Close())
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	must(t, ctx.Err())
	if len(got) != 1 || got[0] != "second" {
		t.Fatalf("the updated graph's replay called %v, want [second]", got)
	}
	must(t, g.Close())
	must(t, s.Synchronize())
	if n := ctx.LiveGoFunctions(); n != base {
		t.Fatalf("LiveGoFunctions = %d after both graphs were closed, want %d", n, base)
	}
}

// QD_VALIDATE=error is fail mode for every context: hazards are returned, not printed too.
func TestFailModeFromTheEnvironment_PrintsNothing(t *testing.T) {
	out, err, child := inSubprocess(t, func() {
		must(t, os.Setenv("QD_VALIDATE", "error"))
		ctx := newContext(t)
		a, b := newStream(t, ctx), newStream(t, ctx)
		buf, err := a.Alloc(64)
		must(t, err)
		expectIs(t, b.Memset(buf.Ptr(), 0, 64), qd.ErrHazard)
		must(t, a.Synchronize())
	})
	if child {
		return
	}
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if strings.Contains(out, "qd: hazard:") {
		t.Fatalf("a fail-mode hazard was printed as well as returned:\n%s", out)
	}
}
