package qd

// #include <stdlib.h>
// #include "qdgo.h"
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Graph is captured stream work that can be replayed (qd.h, "Graphs"). Make one with
// Stream.BeginCapture and Stream.EndCapture; replay it with Launch; Close destroys it.
//
// A graph keeps the Go functions it captured (host callbacks, launches of Go host kernels, and
// those of the graphs it was updated from) until it is closed and every replay queued before
// has run: a replay of such a graph queues one host callback after itself on its stream, which
// tells the graph that the replay is done.
type Graph struct {
	h   atomic.Uint64
	ctx *Context

	mu       sync.Mutex
	owned    []kept // references to the Go functions the graph may call
	inflight int    // replays queued whose marker has not run
	closed   bool
}

// BeginCapture starts capturing the work queued on s, and on the streams forked from it,
// into a graph instead of running it (qd_stream_begin_capture).
func (s *Stream) BeginCapture() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	s.ctx.captureStarting()
	err = resultError(C.gq_stream_begin_capture(h))
	runtime.KeepAlive(s)
	if err != nil {
		s.ctx.captureFailed()
	}
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
	s.ctx.captureEnded(g)
	runtime.SetFinalizer(g, (*Graph).finalize)
	return g, nil
}

// Handle is the qd_graph handle (0 once closed).
func (g *Graph) Handle() uint64 { return g.h.Load() }

func (g *Graph) handle() (C.qd_graph, error) {
	if g == nil {
		return 0, errNil("graph")
	}
	h := g.h.Load()
	if h == 0 {
		return 0, errClosed("graph")
	}
	if l := g.ctx.lost.Load(); l != nil {
		return 0, l
	}
	return C.qd_graph(h), nil
}

// Launch replays the graph on s, a stream of the graph's context (qd_graph_launch). On a
// capturing stream the graph is recorded into that capture as a child graph (qd.h, "Child
// graphs"): the graph the capture makes replays g's operations as they are now and keeps g's
// Go functions, so g may be closed before it.
//
// Errors: ErrWrongContext for a stream of another context; ErrNotSupported when s is capturing
// and the graph allocates or has conditionals (the capture goes on).
func (g *Graph) Launch(s *Stream) error {
	gh, err := g.handle()
	if err != nil {
		return err
	}
	sh, err := s.handle()
	if err != nil {
		return err
	}
	// On a capturing stream the graph is recorded into the capture (qd.h, "Child graphs"): no
	// replay runs now, so no marker; the graph that capture makes keeps g's functions instead.
	capturing := C.gq_capturing(sh, g.ctx.mayCapture()) != 0
	g.mu.Lock()
	var marker *hostCall
	if len(g.owned) > 0 && !capturing {
		marker = &hostCall{fn: g.replayDone}
		marker.ctx = g.ctx
		marker.refs.Store(1)
		marker.gh = g.ctx.newHandle(marker)
		g.inflight++
	}
	g.mu.Unlock()
	var mh C.uintptr_t
	if marker != nil {
		mh = C.uintptr_t(marker.gh)
	}
	r := C.gq_graph_launch_marked(gh, sh, mh)
	runtime.KeepAlive(g)
	runtime.KeepAlive(s)
	if marker != nil && r.captured == 0 {
		// Not queued: a refused replay is no replay; a replay whose marker could not be
		// queued keeps the graph's functions until the context's Close.
		marker.release()
		if r.status != 0 {
			g.replayDone()
		}
	}
	if r.status != 0 {
		return statusError(r.status, r.msg)
	}
	if capturing {
		g.mu.Lock()
		theirs := append([]kept(nil), g.owned...)
		g.mu.Unlock()
		for _, k := range theirs {
			k.acquire()
			g.ctx.adoptCaptured(k)
		}
	}
	return nil
}

// replayDone is a replay's marker: the replay has run.
func (g *Graph) replayDone() {
	g.mu.Lock()
	g.inflight--
	owned := g.letGo()
	g.mu.Unlock()
	for _, k := range owned {
		k.release()
	}
}

// letGo takes the graph's references once it is closed and no replay is in flight (g.mu held).
func (g *Graph) letGo() []kept {
	if !g.closed || g.inflight > 0 {
		return nil
	}
	owned := g.owned
	g.owned = nil
	return owned
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
	if err == nil && g != from {
		// Later replays of g call from's functions; replays queued before still call g's own.
		from.mu.Lock()
		theirs := append([]kept(nil), from.owned...)
		from.mu.Unlock()
		for _, k := range theirs {
			k.acquire()
		}
		g.mu.Lock()
		g.owned = append(g.owned, theirs...)
		g.mu.Unlock()
	}
	return err
}

// Upload prepares the graph's replays on s ahead of the first Launch (qd_graph_upload, as
// cuGraphUpload), so that the first launch costs what later ones do. It is ordered on s like a
// launch and runs nothing; a Launch afterwards, on any stream, gives the same results as without
// it. On the CPU backend it only makes the pooled events a replay takes.
//
// Errors: ErrWrongContext for a stream of another context; ErrInvalidOperation when s is
// capturing (the capture goes on); ErrNotSupported where the CUDA driver lacks cuGraphUpload
// (before CUDA 11.1).
func (g *Graph) Upload(s *Stream) error {
	gh, err := g.handle()
	if err != nil {
		return err
	}
	sh, err := s.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_graph_upload(gh, sh))
	runtime.KeepAlive(g)
	runtime.KeepAlive(s)
	return err
}

// DebugDot writes the graph to path as a Graphviz DOT digraph (qd_graph_debug_dot, as
// cuGraphDebugDotPrint), from the operations qd recorded at capture, on every backend: a cluster
// per stream ("lane N"), a node per operation (kernel name, grid and block; bytes of copies,
// sets and allocations; records and waits), the lanes' order and the fork, join and event
// edges; a conditional's bodies as clusters. verbose adds argument sizes and addresses
// (QD_GRAPH_DOT_VERBOSE). The file is written whole.
//
// Errors: ErrInvalidArgument when path is empty, a directory or special file, or cannot be
// written.
func (g *Graph) DebugDot(path string, verbose bool) error {
	gh, err := g.handle()
	if err != nil {
		return err
	}
	var flags C.uint32_t
	if verbose {
		flags = C.QD_GRAPH_DOT_VERBOSE
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	err = resultError(C.gq_graph_debug_dot(gh, cpath, flags))
	runtime.KeepAlive(g)
	return err
}

// KernelNodeCount is the number of the graph's kernel nodes (qd_graph_kernel_node_count): its
// launches in the order they were queued during the capture (a LaunchParallel's tasks in task
// order), numbered from 0.
func (g *Graph) KernelNodeCount() (uint32, error) {
	gh, err := g.handle()
	if err != nil {
		return 0, err
	}
	n, err := u64Result(C.gq_graph_kernel_node_count(gh))
	runtime.KeepAlive(g)
	return uint32(n), err
}

// SetKernelArgs rebinds kernel node `node` (qd_graph_set_kernel_args): every later replay runs
// that launch with these arguments, copied before it returns, while replays already queued keep
// theirs. The count and every size must be the captured launch's. k is the kernel the node
// launches; it packs the arguments as Stream.Launch does. The node of a Go host kernel is
// refused (StatusNotSupported): its arguments carry the capture's reference to the Go
// function; capture again and use Update instead.
func (g *Graph) SetKernelArgs(node uint32, k *Kernel, args ...Arg) error {
	gh, err := g.handle()
	if err != nil {
		return err
	}
	if k == nil {
		return errNil("kernel")
	}
	if k.goFn != 0 {
		return newError(StatusNotSupported,
			"the node of a Go host kernel cannot be rebound (its arguments hold the capture's reference to the Go function): capture the graph again and use Update")
	}
	b := argBlobs.Get().(*argBlob)
	defer argBlobs.Put(b)
	n, err := b.pack(k, args)
	if err != nil {
		return err
	}
	err = resultError(C.gq_graph_set_kernel_args_blob(gh, C.uint32_t(node),
		(*C.uint8_t)(unsafe.Pointer(&b.data[0])), &b.sizes[0], C.uint32_t(n)))
	runtime.KeepAlive(g)
	runtime.KeepAlive(k)
	return err
}

// Close destroys the graph (qd_graph_destroy); replays already queued still complete.
// Idempotent; nil when the context was closed first.
func (g *Graph) Close() error {
	if g == nil {
		return nil
	}
	h := g.h.Swap(0)
	if h == 0 {
		return nil
	}
	runtime.SetFinalizer(g, nil)
	err := resultError(C.gq_graph_destroy(C.qd_graph(h)))
	g.closeOwned()
	if err != nil && g.ctx.childClosed(err) {
		return nil
	}
	return err
}

// closeOwned lets go of the graph's functions now, or when its last queued replay has run.
func (g *Graph) closeOwned() {
	g.mu.Lock()
	g.closed = true
	owned := g.letGo()
	g.mu.Unlock()
	for _, k := range owned {
		k.release()
	}
}

func (g *Graph) finalize() {
	if h := g.h.Swap(0); h != 0 {
		_ = resultError(C.gq_graph_destroy(C.qd_graph(h)))
		g.closeOwned()
	}
}
