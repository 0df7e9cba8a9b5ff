package qd

// #include "qdgo.h"
import "C"

import "runtime"

// The active stream is a thread-local value of qd (per OS thread and context) that callers read
// explicitly; no qd call uses it behind the caller's back. Goroutines move between OS threads,
// so in Go a value set in one goroutine can be read by another goroutine that later runs on that
// thread, or be lost when the setting goroutine moves on. Plain Go code should pass streams
// explicitly, as every method of this package does; WithActiveStream is for code that must
// hand a stream to C code reading the active stream.

// WithActiveStream runs fn with s as this thread's active stream for c, with the goroutine
// locked to its OS thread for the whole scope (runtime.LockOSThread), and restores the previous
// active stream afterwards, also when fn panics. Code inside fn that reads the active stream (ActiveStreamHandle, or
// C code calling qd_stream_get_active) on this goroutine sees s. Goroutines that fn starts run
// on other threads and do not see it.
func (c *Context) WithActiveStream(s *Stream, fn func() error) (err error) {
	if s == nil {
		return errNil("stream")
	}
	if fn == nil {
		return newError(StatusInvalidArgument, "WithActiveStream needs a function")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	previous, err := c.SetActiveStream(s)
	if err != nil {
		return err
	}
	// Restored however fn ends: a return, a panic that the caller recovers, runtime.Goexit.
	defer func() {
		if restoreErr := c.setActiveHandle(previous); err == nil {
			err = restoreErr
		}
	}()
	return fn()
}

// SetActiveStream sets the calling OS thread's active stream for c and returns the handle of
// the one it replaced (qd_stream_set_active). Without runtime.LockOSThread the goroutine may run
// on another thread by its next statement; use WithActiveStream.
func (c *Context) SetActiveStream(s *Stream) (previous uint64, err error) {
	if s == nil {
		return 0, errNil("stream")
	}
	h, err := c.handle()
	if err != nil {
		return 0, err
	}
	sh := s.h.Load()
	if sh == 0 {
		return 0, errClosed("stream")
	}
	previous, err = u64Result(C.gq_stream_set_active(h, C.qd_stream(sh)))
	runtime.KeepAlive(c)
	runtime.KeepAlive(s)
	return previous, err
}

func (c *Context) setActiveHandle(stream uint64) error {
	h, err := c.handle()
	if err != nil {
		return err
	}
	_, err = u64Result(C.gq_stream_set_active(h, C.qd_stream(stream)))
	runtime.KeepAlive(c)
	return err
}

// ActiveStreamHandle is the calling OS thread's active stream for c (qd_stream_get_active): the
// last one set on this thread, or the default stream. Compare it with Stream.Handle.
func (c *Context) ActiveStreamHandle() (uint64, error) {
	h, err := c.handle()
	if err != nil {
		return 0, err
	}
	v, err := u64Result(C.gq_stream_get_active(h))
	runtime.KeepAlive(c)
	return v, err
}
