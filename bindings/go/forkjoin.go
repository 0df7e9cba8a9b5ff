package qd

// #include "qdgo.h"
import "C"

import "runtime"

// Fork leases n streams from the pool, each waiting for the work queued on s so far
// (qd_stream_fork; pooled events, no host synchronisation). All or nothing: on an error no
// stream stays leased. Give the children back with Join (or Close each).
func (s *Stream) Fork(n int) ([]*Stream, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > 1<<32-1 {
		return nil, newError(StatusInvalidArgument, "fork of %d streams: n must be at least 1", n)
	}
	children := make([]C.qd_stream, n)
	err = resultError(C.gq_stream_fork(h, C.uint32_t(n), &children[0]))
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	out := make([]*Stream, n)
	for i, ch := range children {
		out[i] = newStream(s.ctx, uint64(ch), StreamLeased)
	}
	return out, nil
}

// Join makes s wait for all work queued so far on each child, then gives every child back to
// the pool (qd_stream_join). The children must be leases of s's context. Everything is checked
// before anything is queued: on an error nothing changes and the children stay open.
func (s *Stream) Join(children []*Stream) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if len(children) == 0 {
		return newError(StatusInvalidArgument, "join of no streams: children must not be empty")
	}
	// One rule for every child, whatever their number: a nil child or one closed or joined
	// already is ErrInvalidHandle, named by its index, before qd is called.
	handles := make([]C.qd_stream, len(children))
	for i, ch := range children {
		if ch == nil {
			return newError(StatusInvalidHandle, "join: child %d is nil", i)
		}
		handles[i] = C.qd_stream(ch.h.Load())
		if handles[i] == 0 {
			return newError(StatusInvalidHandle, "join: child %d was closed or joined already", i)
		}
	}
	err = resultError(C.gq_stream_join(h, &handles[0], C.uint32_t(len(handles))))
	runtime.KeepAlive(s)
	runtime.KeepAlive(children)
	if err != nil {
		return err
	}
	for i, ch := range children {
		// Released by the join: forget the handle unless a concurrent Close got there first.
		if ch.h.CompareAndSwap(uint64(handles[i]), 0) {
			runtime.SetFinalizer(ch, nil)
		}
	}
	return nil
}
