package qd_test

import (
	"testing"
	"time"

	"qd"
)

func TestWaitEvent_OrdersWorkAcrossStreams(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	a, b := newStream(t, ctx), newStream(t, ctx)
	g := newGate(t, ctx)
	e := newEvent(t, ctx, false)
	host := hostBuffer(t, ctx, 8) // [0]: written on a, [1]: a's value + 1, computed on b
	g.hold(t, a)
	must(t, a.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(42)))
	must(t, a.RecordEvent(e))
	must(t, b.WaitEvent(e))
	must(t, b.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(host.Ptr().Add(4)), qd.Address(host.Ptr()), qd.Uint32(1)))
	done, err := e.Query()
	must(t, err)
	if done {
		t.Fatal("the event completed while the gate holds its stream")
	}
	g.open()
	must(t, b.Synchronize())
	if got := u32At(host, 1); got != 43 {
		t.Fatalf("b computed %d: it did not wait for a's write (want 43)", got)
	}
	must(t, e.Synchronize())
}

func TestElapsed_BetweenTimingEvents_CoversTheWorkBetweenThem(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	start, end := newEvent(t, ctx, true), newEvent(t, ctx, true)
	must(t, s.RecordEvent(start))
	must(t, s.Launch(k.spin, qd.LaunchConfig{}, qd.Uint64(2000))) // sleeps at least 2 ms
	must(t, s.RecordEvent(end))
	must(t, end.Synchronize())
	ms, err := qd.Elapsed(start, end)
	must(t, err)
	if ms < 1990*time.Microsecond {
		t.Fatalf("elapsed %v across a kernel that sleeps 2 ms", ms)
	}
}

func TestElapsed_BeforeTheEndCompleted_IsNotReady(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	g := newGate(t, ctx)
	start, end := newEvent(t, ctx, true), newEvent(t, ctx, true)
	must(t, s.RecordEvent(start))
	g.hold(t, s)
	must(t, s.RecordEvent(end))
	_, err := qd.Elapsed(start, end)
	expectIs(t, err, qd.ErrNotReady)
	g.open()
	must(t, s.Synchronize())
	_, err = qd.Elapsed(start, end)
	must(t, err)
}

func TestElapsed_WithoutTimingOrRecord_FailsWithItsStatus(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	plain, timed, never := newEvent(t, ctx, false), newEvent(t, ctx, true), newEvent(t, ctx, true)
	must(t, s.RecordEvent(plain))
	must(t, s.RecordEvent(timed))
	must(t, s.Synchronize())
	_, err := qd.Elapsed(plain, timed)
	expectIs(t, err, qd.ErrTimingDisabled)
	_, err = qd.Elapsed(timed, never)
	expectIs(t, err, qd.ErrNotRecorded)
}

func TestRecordEvent_OfAnotherContext_IsWrongContext(t *testing.T) {
	ctx1, ctx2 := newContext(t), newContext(t)
	s := newStream(t, ctx1)
	e := newEvent(t, ctx2, false)
	expectIs(t, s.RecordEvent(e), qd.ErrWrongContext)
	// A wait may name an event of another context of the same backend (since 0.2).
	if err := s.WaitEvent(e); err != nil {
		t.Fatalf("WaitEvent on another context's event: %v", err)
	}
}
