package qd

// #include "qdgo.h"
import "C"

import (
	"runtime/cgo"
	"sync/atomic"
)

// What this package keeps for qd: the Go functions that C reaches through a cgo.Handle (host
// callbacks, Go host kernels, the markers that tell a graph its replays have run). Each one is
// kept alive by whatever may still call it, and released on one path when the last of those
// lets go:
//
//   - a Go host kernel: its Kernel until Close, and each launch until its last block has run;
//   - a host callback: its one run, or, when it was captured, the graphs that hold it;
//   - a graph's callbacks and kernels: the Graph until Close, and each replay until it has run
//     (a marker callback queued after the replay on the same stream says so);
//   - everything: the context, whose Close deletes what work that never ran (a lost context
//     skips its queued work) still held.
type keeper struct {
	refs atomic.Int64
	gh   cgo.Handle
	ctx  *Context
}

func (k *keeper) acquire() { k.refs.Add(1) }

// release drops one reference; the last one deletes the handle.
func (k *keeper) release() {
	if k.refs.Add(-1) == 0 {
		k.ctx.dropHandle(k.gh)
	}
}

// kept is what a capture or a graph holds: a keeper's reference.
type kept interface {
	acquire()
	release()
}

// newHandle makes the handle C will hold for v and records it with the context.
func (c *Context) newHandle(v interface{}) cgo.Handle {
	gh := cgo.NewHandle(v)
	c.goMu.Lock()
	if c.handles == nil {
		c.handles = make(map[cgo.Handle]struct{})
	}
	c.handles[gh] = struct{}{}
	c.goMu.Unlock()
	return gh
}

// dropHandle deletes a handle once, whichever of its last reference and the context's Close
// gets there first.
func (c *Context) dropHandle(gh cgo.Handle) {
	c.goMu.Lock()
	_, ok := c.handles[gh]
	delete(c.handles, gh)
	c.goMu.Unlock()
	if ok {
		gh.Delete()
	}
}

// LiveGoFunctions is the number of Go functions (host kernels, host callbacks, graph replay
// markers) that the context keeps for qd to call: those of kernels not yet closed, of work
// queued or captured and not yet run or released. It drops as work drains and objects close.
func (c *Context) LiveGoFunctions() int {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	return len(c.handles)
}

// dropAllHandles is the context's Close, after its destroy drained every stream: nothing can
// call a Go function of the context any more.
func (c *Context) dropAllHandles() {
	c.goMu.Lock()
	handles := c.handles
	c.handles = nil
	c.captured = nil
	c.goMu.Unlock()
	for gh := range handles {
		gh.Delete()
	}
}

// captureStarting counts a capture about to begin, before qd begins it, so that no launch on
// its stream can miss it; captureFailed takes it back. While none is open no stream of the
// context can be capturing (a stream joins only an open capture), and launches of Go functions
// need not ask (qdgo.h, gq_capturing).
func (c *Context) captureStarting() { c.openCaptures.Add(1) }

func (c *Context) captureFailed() { c.openCaptures.Add(-1) }

// mayCapture is 1 while a capture of the context is open.
func (c *Context) mayCapture() C.uint32_t {
	if c.openCaptures.Load() > 0 {
		return 1
	}
	return 0
}

// adoptCaptured hands a captured launch's reference to the captures open now: the graph that
// ends next takes it (and every graph that ends while it is pending).
func (c *Context) adoptCaptured(k kept) {
	c.goMu.Lock()
	c.captured = append(c.captured, k)
	c.goMu.Unlock()
}

// captureEnded gives graph g, just ended, a reference to everything captured while captures
// were open; once none is open, the pending list lets go of its own.
func (c *Context) captureEnded(g *Graph) {
	c.goMu.Lock()
	pending := c.captured
	for _, k := range pending {
		k.acquire()
		g.owned = append(g.owned, k)
	}
	if c.openCaptures.Add(-1) <= 0 {
		c.captured = nil
	} else {
		pending = nil
	}
	c.goMu.Unlock()
	for _, k := range pending {
		k.release()
	}
}
