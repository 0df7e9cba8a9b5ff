package qd

// #include "qdgo.h"
import "C"

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// Timeline is a 64-bit counter that only grows, signalled and waited on by streams and the host
// (qd_timeline; qd.h, "Timelines"). Streams use Stream.Signal and Stream.WaitValue (a wait may
// be queued before the signal that satisfies it); the host Signal, Wait and Value. It has a
// finalizer that destroys a timeline that was never closed (destroy returns at once).
type Timeline struct {
	h   atomic.Uint64
	ctx *Context
}

// NewTimeline creates a timeline whose counter starts at initial (qd_timeline_create).
func (c *Context) NewTimeline(initial uint64) (*Timeline, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	th, err := u64Result(C.gq_timeline_create(h, C.uint64_t(initial)))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	t := &Timeline{ctx: c}
	t.h.Store(th)
	runtime.SetFinalizer(t, (*Timeline).finalize)
	return t, nil
}

// Handle is the qd_timeline handle (0 once closed).
func (t *Timeline) Handle() uint64 { return t.h.Load() }

func (t *Timeline) handle() (C.qd_timeline, error) {
	if t == nil {
		return 0, errNil("timeline")
	}
	h := t.h.Load()
	if h == 0 {
		return 0, errClosed("timeline")
	}
	if l := t.ctx.lost.Load(); l != nil {
		return 0, l
	}
	return C.qd_timeline(h), nil
}

// Close destroys the timeline (qd_timeline_destroy). It returns at once: signals already
// queued still complete, and a queued wait that no signal will reach is released. Idempotent;
// nil when the context was closed first.
func (t *Timeline) Close() error {
	if t == nil {
		return nil
	}
	h := t.h.Swap(0)
	if h == 0 {
		return nil
	}
	runtime.SetFinalizer(t, nil)
	err := resultError(C.gq_timeline_destroy(C.qd_timeline(h)))
	if err != nil && t.ctx.childClosed(err) {
		return nil
	}
	return err
}

func (t *Timeline) finalize() {
	if h := t.h.Swap(0); h != 0 {
		_ = resultError(C.gq_timeline_destroy(C.qd_timeline(h)))
	}
}

// Value is the counter now (qd_timeline_query).
func (t *Timeline) Value() (uint64, error) {
	h, err := t.handle()
	if err != nil {
		return 0, err
	}
	v, err := u64Result(C.gq_timeline_query(h))
	runtime.KeepAlive(t)
	return v, err
}

// Signal signals from the host (qd_timeline_host_signal): the counter becomes value now. The
// value must be above every value signalled or queued before (ErrInvalidArgument otherwise).
func (t *Timeline) Signal(value uint64) error {
	h, err := t.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_timeline_host_signal(h, C.uint64_t(value)))
	runtime.KeepAlive(t)
	return err
}

// Wait blocks until the counter reaches value (qd_timeline_host_wait): true when it did, false
// when timeout passed first. A negative timeout waits without a limit; 0 only looks. A destroyed
// timeline or context, or a lost context, is an error, never a hang.
func (t *Timeline) Wait(value uint64, timeout time.Duration) (bool, error) {
	h, err := t.handle()
	if err != nil {
		return false, err
	}
	ns := uint64(math.MaxUint64)
	if timeout >= 0 {
		ns = uint64(timeout.Nanoseconds())
	}
	r := C.gq_timeline_host_wait(h, C.uint64_t(value), C.uint64_t(ns))
	runtime.KeepAlive(t)
	switch r.status {
	case C.QD_SUCCESS:
		return true, nil
	case C.QD_NOT_READY:
		return false, nil
	}
	return false, t.ctx.afterWait(statusError(r.status, r.msg))
}

// Signal queues a signal of tl on the stream (qd_timeline_signal): once the work queued so far
// has completed, tl's counter becomes value, which must be above every value signalled or
// queued on tl before (ErrInvalidArgument otherwise, nothing queued).
func (s *Stream) Signal(tl *Timeline, value uint64) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	th, err := tl.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_timeline_signal(h, th, C.uint64_t(value)))
	runtime.KeepAlive(s)
	runtime.KeepAlive(tl)
	return err
}

// WaitValue makes later work on the stream wait until tl's counter reaches value
// (qd_timeline_wait). The host does not block; the signal may be queued later.
func (s *Stream) WaitValue(tl *Timeline, value uint64) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	th, err := tl.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_timeline_wait(h, th, C.uint64_t(value)))
	runtime.KeepAlive(s)
	runtime.KeepAlive(tl)
	return err
}
