package qd

// #include "qdgo.h"
import "C"

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// Event is a completion marker recorded on a stream (qd_event). It has a finalizer that
// destroys an event that was never closed (destroy returns at once).
type Event struct {
	h   atomic.Uint64
	ctx *Context
}

// NewEvent creates an event (qd_event_create). With timing set it records timestamps, so
// Elapsed can use it.
func (c *Context) NewEvent(timing bool) (*Event, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	flags := C.uint32_t(0)
	if timing {
		flags = C.QD_EVENT_TIMING
	}
	eh, err := u64Result(C.gq_event_create(h, flags))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	e := &Event{ctx: c}
	e.h.Store(eh)
	runtime.SetFinalizer(e, (*Event).finalize)
	return e, nil
}

// Handle is the qd_event handle (0 once closed).
func (e *Event) Handle() uint64 { return e.h.Load() }

func (e *Event) handle() (C.qd_event, error) {
	if e == nil {
		return 0, errNil("event")
	}
	h := e.h.Load()
	if h == 0 {
		return 0, errClosed("event")
	}
	if l := e.ctx.lost.Load(); l != nil {
		return 0, l
	}
	return C.qd_event(h), nil
}

// Close destroys the event (qd_event_destroy). It returns at once; streams already waiting on
// it still wait for its record. Idempotent; nil when the context was closed first.
func (e *Event) Close() error {
	if e == nil {
		return nil
	}
	h := e.h.Swap(0)
	if h == 0 {
		return nil
	}
	runtime.SetFinalizer(e, nil)
	err := resultError(C.gq_event_destroy(C.qd_event(h)))
	if err != nil && e.ctx.childClosed(err) {
		return nil
	}
	return err
}

func (e *Event) finalize() {
	if h := e.h.Swap(0); h != 0 {
		_ = resultError(C.gq_event_destroy(C.qd_event(h)))
	}
}

// Query reports whether the most recent record has completed (true also when never recorded)
// (qd_event_query). It never blocks.
func (e *Event) Query() (bool, error) {
	h, err := e.handle()
	if err != nil {
		return false, err
	}
	r := C.gq_event_query(h)
	runtime.KeepAlive(e)
	switch r.status {
	case C.QD_SUCCESS:
		return true, nil
	case C.QD_NOT_READY:
		return false, nil
	}
	return false, statusError(r.status, r.msg)
}

// Synchronize blocks until the most recent record has completed (qd_event_synchronize).
func (e *Event) Synchronize() error {
	h, err := e.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_event_synchronize(h))
	runtime.KeepAlive(e)
	return e.ctx.afterWait(err)
}

// Elapsed is the time between the completion of start's and end's most recent records
// (qd_event_elapsed_ms, whose float milliseconds it converts, to the nearest nanosecond);
// negative if end completed first. Both events need timing. While a record is still pending
// it returns an error that matches ErrNotReady.
func Elapsed(start, end *Event) (time.Duration, error) {
	sh, err := start.handle()
	if err != nil {
		return 0, err
	}
	eh, err := end.handle()
	if err != nil {
		return 0, err
	}
	bits, err := u64Result(C.gq_event_elapsed_ms(sh, eh))
	runtime.KeepAlive(start)
	runtime.KeepAlive(end)
	if err != nil {
		return 0, err
	}
	ms := float64(math.Float32frombits(uint32(bits)))
	return time.Duration(math.Round(ms * float64(time.Millisecond))), nil
}
