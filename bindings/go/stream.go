package qd

// #include "qdgo.h"
import "C"

import (
	"runtime"
	"sync/atomic"
)

// StreamKind says who owns a stream handle and what Close does with it.
type StreamKind uint8

const (
	// StreamOwned: made by NewStream; Close destroys it (qd_stream_destroy).
	StreamOwned StreamKind = iota + 1
	// StreamLeased: leased from the context's pool by AcquireStream or Fork; Close gives it
	// back (qd_stream_release), Join gives back several.
	StreamLeased
	// StreamBorrowed: a native stream wrapped by ImportStream; Close forgets it and never
	// destroys the native stream.
	StreamBorrowed
	// StreamDefault: the context's default stream; Close does nothing (it lives as long as the
	// context).
	StreamDefault
)

func (k StreamKind) String() string {
	switch k {
	case StreamOwned:
		return "owned"
	case StreamLeased:
		return "leased"
	case StreamBorrowed:
		return "borrowed"
	case StreamDefault:
		return "default"
	}
	return "invalid"
}

// Stream is an in-order queue of work (qd_stream). Different streams run concurrently. Every
// call that schedules work is a method of the stream it is queued on: nothing in this package
// falls back to a default or "current" stream.
//
// Owned, leased and borrowed streams have a finalizer that destroys or releases a stream that
// was never closed (both return at once; queued work still completes). Close explicitly all the
// same: a finalizer runs at an unknown time, and a leased stream holds a slot of the pool until
// it is given back.
type Stream struct {
	h    atomic.Uint64
	ctx  *Context
	kind StreamKind
}

// StreamOptions are the parameters of NewStream (qd_stream_desc).
type StreamOptions struct {
	// Priority: lower is more urgent; 0 is the default; clamped to PriorityRange.
	Priority int32
	// NonBlocking states QD_STREAM_NON_BLOCKING (every qd stream already behaves so).
	NonBlocking bool
}

// StreamNonBlocking is QD_STREAM_NON_BLOCKING as Stream.Flags reports it: set for a stream made
// with StreamOptions.NonBlocking, the default stream and pool leases.
const StreamNonBlocking uint32 = C.QD_STREAM_NON_BLOCKING

func newStream(ctx *Context, h uint64, kind StreamKind) *Stream {
	s := &Stream{ctx: ctx, kind: kind}
	s.h.Store(h)
	if kind != StreamDefault {
		runtime.SetFinalizer(s, (*Stream).finalize)
	}
	return s
}

// NewStream creates a stream owned by the caller (qd_stream_create).
func (c *Context) NewStream(opts StreamOptions) (*Stream, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	flags := C.uint32_t(0)
	if opts.NonBlocking {
		flags |= C.QD_STREAM_NON_BLOCKING
	}
	sh, err := u64Result(C.gq_stream_create_from_fields(h, flags, C.int32_t(opts.Priority)))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newStream(c, sh, StreamOwned), nil
}

// AcquireStream leases a stream from the context's pool (qd_stream_acquire). The lease is
// exclusive; when every pool stream is leased it fails at once with ErrPoolExhausted. Close
// gives it back.
func (c *Context) AcquireStream() (*Stream, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	sh, err := u64Result(C.gq_stream_acquire(h))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newStream(c, sh, StreamLeased), nil
}

// ImportStream wraps a native stream (CUstream, hipStream_t) created outside qd as a borrowed
// stream (qd_stream_import). The caller keeps the native stream alive until Close. The CPU
// backend has no native streams (ErrNotSupported).
func (c *Context) ImportStream(native uint64) (*Stream, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	sh, err := u64Result(C.gq_stream_import(h, C.uint64_t(native)))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newStream(c, sh, StreamBorrowed), nil
}

// DefaultStream is the context's default stream (qd_context_default_stream): an ordinary stream
// that lives as long as the context. Its Close does nothing.
func (c *Context) DefaultStream() (*Stream, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	sh, err := u64Result(C.gq_context_default_stream(h))
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	return newStream(c, sh, StreamDefault), nil
}

// Kind says whether the stream is owned, leased, borrowed or the default stream.
func (s *Stream) Kind() StreamKind { return s.kind }

// Context is the context the stream belongs to.
func (s *Stream) Context() *Context { return s.ctx }

// Handle is the qd_stream handle (0 once closed), for calls into C.
func (s *Stream) Handle() uint64 { return s.h.Load() }

// handle is the stream's handle for a call that touches the device.
func (s *Stream) handle() (C.qd_stream, error) {
	if s == nil {
		return 0, errNil("stream")
	}
	h := s.h.Load()
	if h == 0 {
		return 0, errClosed("stream")
	}
	if e := s.ctx.lost.Load(); e != nil {
		return 0, e
	}
	return C.qd_stream(h), nil
}

// Close destroys an owned or borrowed stream, gives a leased one back to its pool, and does
// nothing for the default stream. It returns at once; work already queued still completes.
// It is idempotent, and returns nil when the context was closed first.
func (s *Stream) Close() error {
	if s == nil {
		return nil
	}
	h := s.h.Swap(0)
	if h == 0 || s.kind == StreamDefault {
		return nil
	}
	runtime.SetFinalizer(s, nil)
	err := s.release(C.qd_stream(h))
	if err != nil && s.ctx.childClosed(err) {
		return nil
	}
	return err
}

func (s *Stream) release(h C.qd_stream) error {
	if s.kind == StreamLeased {
		return resultError(C.gq_stream_release(h))
	}
	return resultError(C.gq_stream_destroy(h))
}

func (s *Stream) finalize() {
	if h := s.h.Swap(0); h != 0 {
		_ = s.release(C.qd_stream(h)) // a stale handle (context gone) is an error we can drop
	}
}

// Synchronize blocks until all work queued on the stream so far has completed
// (qd_stream_synchronize). From a host callback or host kernel of the same context it returns
// ErrInvalidOperation.
func (s *Stream) Synchronize() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_stream_synchronize(h))
	runtime.KeepAlive(s)
	return s.ctx.afterWait(err)
}

// Query reports whether all work queued on the stream has completed (qd_stream_query). It
// never blocks.
func (s *Stream) Query() (bool, error) {
	h, err := s.handle()
	if err != nil {
		return false, err
	}
	r := C.gq_stream_query(h)
	runtime.KeepAlive(s)
	switch r.status {
	case C.QD_SUCCESS:
		return true, nil
	case C.QD_NOT_READY:
		return false, nil
	}
	return false, statusError(r.status, r.msg)
}

// WaitEvent makes later work on the stream wait for the event's most recent record
// (qd_stream_wait_event); the host does not block.
func (s *Stream) WaitEvent(e *Event) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	eh, err := e.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_stream_wait_event(h, eh))
	runtime.KeepAlive(s)
	runtime.KeepAlive(e)
	return err
}

// RecordEvent records e on the stream (qd_event_record): e completes when all work queued on
// the stream so far has completed.
func (s *Stream) RecordEvent(e *Event) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	eh, err := e.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_event_record(h, eh))
	runtime.KeepAlive(s)
	runtime.KeepAlive(e)
	return err
}

// Priority is the stream's priority after clamping to the backend's range
// (qd_stream_get_priority).
func (s *Stream) Priority() (int32, error) {
	h := s.h.Load()
	if h == 0 {
		return 0, errClosed("stream")
	}
	v, err := u64Result(C.gq_stream_get_priority(C.qd_stream(h)))
	runtime.KeepAlive(s)
	return int32(uint32(v)), err
}

// IsCapturing reports whether the stream is capturing (qd_stream_is_capturing): the origin of
// an open capture, or a stream that joined one (a forked child, a stream that waited on an
// event recorded in it). It queues nothing, so it may be asked in the middle of a capture.
func (s *Stream) IsCapturing() (bool, error) {
	h, err := s.handle()
	if err != nil {
		return false, err
	}
	v, err := u64Result(C.gq_stream_is_capturing(h))
	runtime.KeepAlive(s)
	return v != 0, err
}

// Flags is the qd_stream_flags the stream was created with (qd_stream_get_flags):
// StreamNonBlocking for the default stream and pool leases; an imported stream's native ones
// (ErrNotSupported where the driver cannot say).
func (s *Stream) Flags() (uint32, error) {
	h, err := s.handle()
	if err != nil {
		return 0, err
	}
	v, err := u64Result(C.gq_stream_get_flags(h))
	runtime.KeepAlive(s)
	return uint32(v), err
}

// NonBlocking reports whether Flags has StreamNonBlocking.
func (s *Stream) NonBlocking() (bool, error) {
	f, err := s.Flags()
	return f&StreamNonBlocking != 0, err
}

// NativeHandle is the native stream behind the handle (CUstream, hipStream_t), owned by qd
// (qd_stream_native_handle). The CPU backend has none (ErrNotSupported).
func (s *Stream) NativeHandle() (uint64, error) {
	h, err := s.handle()
	if err != nil {
		return 0, err
	}
	v, err := u64Result(C.gq_stream_native_handle(h))
	runtime.KeepAlive(s)
	return v, err
}

// ContextHandle is the qd_context handle the stream belongs to, as libqd reports it
// (qd_stream_get_context).
func (s *Stream) ContextHandle() (uint64, error) {
	h := s.h.Load()
	if h == 0 {
		return 0, errClosed("stream")
	}
	v, err := u64Result(C.gq_stream_get_context(C.qd_stream(h)))
	runtime.KeepAlive(s)
	return v, err
}

// PriorityRange is the backend's priority range (qd_stream_priority_range): least is the
// default (numerically largest), greatest the most urgent. CPU: 0 and -2.
func (c *Context) PriorityRange() (least, greatest int32, err error) {
	h, err := c.handle()
	if err != nil {
		return 0, 0, err
	}
	v, err := u64Result(C.gq_stream_priority_range_packed(h))
	runtime.KeepAlive(c)
	return int32(uint32(v >> 32)), int32(uint32(v)), err
}
