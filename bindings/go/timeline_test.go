package qd_test

import (
	"testing"
	"time"

	"qd"
)

func newTimeline(t *testing.T, ctx *qd.Context, initial uint64) *qd.Timeline {
	t.Helper()
	tl, err := ctx.NewTimeline(initial)
	must(t, err)
	t.Cleanup(func() { _ = tl.Close() })
	return tl
}

func TestTimeline_WaitQueuedBeforeItsSignal_OrdersWorkAcrossStreams(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	a, b := newStream(t, ctx), newStream(t, ctx)
	g := newGate(t, ctx)
	tl := newTimeline(t, ctx, 0)
	host := hostBuffer(t, ctx, 8) // [0]: written on a, [1]: a's value + 1, computed on b
	must(t, b.WaitValue(tl, 1))   // before the signal is queued
	must(t, b.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(host.Ptr().Add(4)), qd.Address(host.Ptr()), qd.Uint32(1)))
	g.hold(t, a)
	must(t, a.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(42)))
	must(t, a.Signal(tl, 1))
	reached, err := tl.Wait(1, 0)
	must(t, err)
	if reached {
		t.Fatal("the timeline reached 1 while the gate holds the signalling stream")
	}
	g.open()
	reached, err = tl.Wait(1, -1)
	must(t, err)
	if !reached {
		t.Fatal("Wait without a limit returned false")
	}
	must(t, b.Synchronize())
	if got := u32At(host, 1); got != 43 {
		t.Fatalf("b computed %d: it did not wait for a's signal (want 43)", got)
	}
}

func TestTimeline_HostSignalValueAndStats(t *testing.T) {
	ctx := newContext(t)
	before, err := ctx.Stats()
	must(t, err)
	tl := newTimeline(t, ctx, 3)
	st, err := ctx.Stats()
	must(t, err)
	if st.LiveTimelines != before.LiveTimelines+1 {
		t.Fatalf("LiveTimelines %d, want %d", st.LiveTimelines, before.LiveTimelines+1)
	}
	v, err := tl.Value()
	must(t, err)
	if v != 3 {
		t.Fatalf("Value %d, want the initial 3", v)
	}
	expectIs(t, tl.Signal(3), qd.ErrInvalidArgument) // values only grow
	must(t, tl.Signal(4))
	reached, err := tl.Wait(4, time.Millisecond)
	must(t, err)
	if !reached {
		t.Fatal("Wait(4) after Signal(4) returned false")
	}
	reached, err = tl.Wait(5, time.Millisecond)
	must(t, err)
	if reached {
		t.Fatal("Wait(5) returned true with the counter at 4")
	}
	must(t, tl.Close())
	must(t, tl.Close()) // idempotent
	_, err = tl.Value()
	expectIs(t, err, qd.ErrInvalidHandle)
}

func TestTimeline_OfAnotherContext_IsWrongContext(t *testing.T) {
	ctx, other := newContext(t), newContext(t)
	s := newStream(t, ctx)
	tl := newTimeline(t, other, 0)
	expectIs(t, s.Signal(tl, 1), qd.ErrWrongContext)
	expectIs(t, s.WaitValue(tl, 1), qd.ErrWrongContext)
}
