package qd_test

import (
	"sync"
	"testing"

	"qd"
)

// A stream's state read back (IsCapturing, Flags) and host callbacks that learn the stream's
// status (LaunchHostFuncWithStatus, qd_launch_host_status_fn).

func TestIsCapturing_InsideACaptureAndOnAForkedChild_FalseAfterItEnds(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	expectCapturing := func(s *qd.Stream, want bool, what string) {
		t.Helper()
		got, err := s.IsCapturing()
		must(t, err)
		if got != want {
			t.Fatalf("%s: IsCapturing = %v, want %v", what, got, want)
		}
	}
	expectCapturing(s, false, "before the capture")
	must(t, s.BeginCapture())
	expectCapturing(s, true, "the origin")
	kids, err := s.Fork(2)
	must(t, err)
	for _, k := range kids {
		expectCapturing(k, true, "a forked child")
	}
	must(t, s.Join(kids))
	g, err := s.EndCapture()
	must(t, err)
	expectCapturing(s, false, "after the capture")
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	must(t, g.Close())
}

func TestFlags_RoundTripTheCreationOptions(t *testing.T) {
	ctx := newContext(t)
	plain, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	defer plain.Close()
	nb, err := ctx.NewStream(qd.StreamOptions{NonBlocking: true})
	must(t, err)
	defer nb.Close()
	if f, err := plain.Flags(); err != nil || f != 0 {
		t.Fatalf("plain stream: Flags = %d, %v; want 0", f, err)
	}
	if f, err := nb.Flags(); err != nil || f != qd.StreamNonBlocking {
		t.Fatalf("non-blocking stream: Flags = %d, %v; want %d", f, err, qd.StreamNonBlocking)
	}
	def, err := ctx.DefaultStream()
	must(t, err)
	if b, err := def.NonBlocking(); err != nil || !b {
		t.Fatalf("default stream: NonBlocking = %v, %v; want true", b, err)
	}
}

func TestLaunchHostFuncWithStatus_RunsInOrderWithNilStatus(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	var order []string
	var status error = qd.ErrInternal
	must(t, s.LaunchHostFunc(func() { order = append(order, "plain") }))
	must(t, s.LaunchHostFuncWithStatus(func(st error) { order = append(order, "status"); status = st }))
	must(t, s.Synchronize())
	if len(order) != 2 || order[1] != "status" || status != nil {
		t.Fatalf("order %v, status %v; want [plain status], nil", order, status)
	}
	if n := ctx.LiveGoFunctions(); n != 0 {
		t.Fatalf("%d Go functions still kept after their one call", n)
	}
	expectIs(t, s.LaunchHostFuncWithStatus(nil), qd.ErrInvalidArgument)
}

func TestLaunchHostFuncWithStatus_QueuedBeforeALoss_GetsDeviceLost(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	other := newStream(t, ctx)
	// A gate: holds s until the fault on the other stream was seen.
	entered, open := make(chan struct{}), make(chan struct{})
	must(t, s.LaunchHostFunc(func() { close(entered); <-open }))
	<-entered
	var mu sync.Mutex
	var statuses []error
	must(t, s.LaunchHostFuncWithStatus(func(st error) {
		mu.Lock()
		statuses = append(statuses, st)
		mu.Unlock()
	}))
	must(t, other.Launch(k.fault, qd.LaunchConfig{}))
	expectIs(t, other.Synchronize(), qd.ErrDeviceLost)
	close(open)
	expectIs(t, s.Synchronize(), qd.ErrDeviceLost)
	must(t, ctx.Close()) // called by the destroy at the latest
	mu.Lock()
	defer mu.Unlock()
	if len(statuses) != 1 {
		t.Fatalf("called %d times, want once", len(statuses))
	}
	expectIs(t, statuses[0], qd.ErrDeviceLost)
}

func TestLaunchHostFuncWithStatus_OnACapturingStream_IsRefusedAndNeverCalled(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	called := false
	must(t, s.BeginCapture())
	expectIs(t, s.LaunchHostFuncWithStatus(func(error) { called = true }), qd.ErrInvalidOperation)
	g, err := s.EndCapture()
	must(t, err)
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	must(t, g.Close())
	if called {
		t.Fatal("a refused call's function was called")
	}
}
