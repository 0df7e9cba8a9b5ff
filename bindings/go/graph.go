package qd

// #include "qdgo.h"
import "C"

import (
	"runtime"
	"sync/atomic"
)

// Graph is captured stream work that can be replayed (qd.h, "Graphs"). Make one with
// Stream.BeginCapture and Stream.EndCapture; replay it with Launch; Close destroys it.
type Graph struct {
	h   atomic.Uint64
	ctx *Context
}

// BeginCapture starts capturing the work queued on s, and on the streams forked from it,
// into a graph instead of running it (qd_stream_begin_capture).
func (s *Stream) BeginCapture() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_stream_begin_capture(h))
	runtime.KeepAlive(s)
	return err
}

// EndCapture ends the capture whose origin is s and returns the graph (qd_stream_end_capture).
// If a forked stream has not joined back, the error names it and s stays capturing.
func (s *Stream) EndCapture() (*Graph, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	gh, err := u64Result(C.gq_stream_end_capture(h))
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	g := &Graph{ctx: s.ctx}
	g.h.Store(gh)
	runtime.SetFinalizer(g, (*Graph).finalize)
	return g, nil
}

// Handle is the qd_graph handle (0 once closed).
func (g *Graph) Handle() uint64 { return g.h.Load() }

func (g *Graph) handle() (C.qd_graph, error) {
	h := g.h.Load()
	if h == 0 {
		return 0, errClosed("graph")
	}
	if l := g.ctx.lost.Load(); l != nil {
		return 0, l
	}
	return C.qd_graph(h), nil
}

// Launch replays the graph on s, a stream of the graph's context (qd_graph_launch).
func (g *Graph) Launch(s *Stream) error {
	gh, err := g.handle()
	if err != nil {
		return err
	}
	sh, err := s.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_graph_launch(gh, sh))
	runtime.KeepAlive(g)
	runtime.KeepAlive(s)
	return err
}

// Update gives g the values of from, a capture of the same calls with other arguments
// (qd_graph_update): later replays of g use them.
func (g *Graph) Update(from *Graph) error {
	gh, err := g.handle()
	if err != nil {
		return err
	}
	fh, err := from.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_graph_update(gh, fh))
	runtime.KeepAlive(g)
	runtime.KeepAlive(from)
	return err
}

// Close destroys the graph (qd_graph_destroy); replays already queued still complete.
// Idempotent; nil when the context was closed first.
func (g *Graph) Close() error {
	h := g.h.Swap(0)
	if h == 0 {
		return nil
	}
	runtime.SetFinalizer(g, nil)
	err := resultError(C.gq_graph_destroy(C.qd_graph(h)))
	if err != nil && g.ctx.childClosed(err) {
		return nil
	}
	return err
}

func (g *Graph) finalize() {
	if h := g.h.Swap(0); h != 0 {
		_ = resultError(C.gq_graph_destroy(C.qd_graph(h)))
	}
}
