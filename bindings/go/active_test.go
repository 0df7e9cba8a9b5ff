package qd_test

import (
	"runtime"
	"testing"

	"qd"
)

// The trap: the active stream belongs to an OS thread, not to a goroutine. A value set on one
// thread is not there for code that runs on another, which is where a goroutine may find itself
// after any statement. Here the two threads are pinned (each goroutine is locked to its own OS
// thread), so the loss is certain rather than left to the scheduler.
func TestActiveStream_SetOnOneThread_IsNotSeenOnAnother(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	def, err := ctx.DefaultStream()
	must(t, err)
	set, reset := make(chan error), make(chan struct{})
	go func() {
		runtime.LockOSThread() // this thread now belongs to this goroutine alone
		defer runtime.UnlockOSThread()
		_, err := ctx.SetActiveStream(s)
		set <- err
		<-reset
		_, err = ctx.SetActiveStream(def) // restore before the thread goes back to the pool
		set <- err
	}()
	must(t, <-set)
	seen := make(chan uint64)
	go func() {
		runtime.LockOSThread() // a different thread: the first one is locked to its goroutine
		defer runtime.UnlockOSThread()
		h, err := ctx.ActiveStreamHandle()
		if err != nil {
			t.Error(err)
		}
		seen <- h
	}()
	if h := <-seen; h != def.Handle() {
		t.Fatalf("another thread sees active stream %#x, want the default %#x", h, def.Handle())
	}
	close(reset)
	must(t, <-set)
}

// The fix: WithActiveStream locks the goroutine to its thread for the whole scope, so the value
// set is the value read, however often the goroutine yields, and the previous one comes back.
func TestWithActiveStream_KeepsTheStreamForItsScopeAndRestoresThePrevious(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	runtime.LockOSThread() // to read the value before and after on the same thread
	defer runtime.UnlockOSThread()
	before, err := ctx.ActiveStreamHandle()
	must(t, err)
	must(t, ctx.WithActiveStream(s, func() error {
		for i := 0; i < 100; i++ {
			runtime.Gosched()
			h, err := ctx.ActiveStreamHandle()
			if err != nil {
				return err
			}
			if h != s.Handle() {
				t.Fatalf("inside the scope the active stream is %#x, want %#x", h, s.Handle())
			}
		}
		return nil
	}))
	after, err := ctx.ActiveStreamHandle()
	must(t, err)
	if after != before {
		t.Fatalf("after the scope the active stream is %#x, want %#x", after, before)
	}
	other := newContext(t)
	expectIs(t, other.WithActiveStream(s, func() error { return nil }), qd.ErrWrongContext)
	expectIs(t, ctx.WithActiveStream(nil, func() error { return nil }), qd.ErrInvalidHandle)
	expectIs(t, ctx.WithActiveStream(s, nil), qd.ErrInvalidArgument)
}
