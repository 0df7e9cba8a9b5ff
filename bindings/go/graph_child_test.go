package qd_test

import (
	"runtime"
	"testing"

	"qd"
)

// A graph launched on a capturing stream is recorded into that capture (qd.h, "Child graphs"):
// the new graph replays it, with its Go callback, after the child was closed; no marker of the
// child's is captured, and every Go function is let go of once the new graph is closed.
func TestGraph_LaunchedOnACapturingStream_IsRecordedIntoTheCapture(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	host := hostBuffer(t, ctx, 16)
	base := ctx.LiveGoFunctions()
	calls := 0
	must(t, s.BeginCapture())
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(7)))
	must(t, s.LaunchHostFunc(func() { calls++ }))
	child, err := s.EndCapture()
	must(t, err)
	must(t, s.BeginCapture())
	must(t, child.Launch(s))
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()+4), qd.Uint32(8)))
	parent, err := s.EndCapture()
	must(t, err)
	must(t, child.Close())
	runtime.GC()
	for i := 1; i <= 3; i++ {
		must(t, parent.Launch(s))
		must(t, s.Synchronize())
		if u32At(host, 0) != 7 || u32At(host, 1) != 8 || calls != i {
			t.Fatalf("replay %d: words %d, %d and %d calls; want 7, 8 and %d", i,
				u32At(host, 0), u32At(host, 1), calls, i)
		}
	}
	must(t, parent.Close())
	must(t, s.Synchronize())
	if n := ctx.LiveGoFunctions(); n != base {
		t.Fatalf("LiveGoFunctions = %d after both graphs were closed, want %d", n, base)
	}
}
