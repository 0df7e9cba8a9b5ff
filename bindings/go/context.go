package qd

// #include "qdgo.h"
import "C"

import (
	"errors"
	"os"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ContextOptions are the parameters of NewContext (qd_context_desc). The zero value is the
// default backend (CPU) with qd's default pool sizes and worker count.
type ContextOptions struct {
	Backend          Backend
	Device           uint32 // device ordinal; 0 on the CPU backend
	StreamPoolSize   uint32 // most streams leased at once; 0 = 32; at most 4096
	EventPoolSize    uint32 // fork/join events kept for reuse; 0 = 256
	CPUWorkerThreads uint32 // CPU backend worker threads; 0 = max(2, usable CPUs); at most 256
	// Validate turns the validation mode on (QD_CONTEXT_VALIDATE; qd.h "Validation"):
	// unsynchronised cross-stream accesses, unsafe frees and uses after free are reported,
	// one line on stderr each, and counted in Stats.HazardsReported. QD_VALIDATE=1 in the
	// environment turns it on for every context.
	Validate bool
	// ValidateFail (with Validate) also refuses a call that would be a hazard: it returns an
	// error matching ErrHazard, whose message is the report, and queues nothing
	// (QD_CONTEXT_VALIDATE_FAIL). The report is not printed as well.
	ValidateFail bool
}

// Context is one (backend, device): it owns its default stream, its stream and event pools,
// modules, kernels and allocations (qd_context).
//
// Close destroys it: it waits for all queued work (drains), then destroys every object made
// from it and frees every allocation; the Go objects of those children then report
// ErrInvalidHandle, and their Close returns nil.
//
// A Context has no finalizer. Destroying one drains its work, which can block for as long as
// that work runs, and Go runs every finalizer on one goroutine, so a finalizer that drains would
// stall all the others. A Context that is never closed therefore lives until the process
// exits: its worker threads, streams and memory stay allocated, and the Go functions of its host
// kernels stay registered. At exit the operating system reclaims all of it; work still pending
// is abandoned, not finished, and the exit status is the program's own (the tests check that a
// program exiting with live objects and pending work exits 0). Close every Context you create.
type Context struct {
	h       atomic.Uint64
	closing atomic.Bool // set before qd_context_destroy: children's Close then ignores INVALID_HANDLE
	closeMu sync.Mutex
	backend Backend
	// failMode: hazards are returned as errors, and not printed (qdgo.h's handler).
	failMode bool

	// lost is the fault a Go host callback or host kernel caused (a panic or a returned error);
	// once set, every call of this package that would touch the device returns it.
	lost atomic.Pointer[Error]

	// The Go functions C may call (lifetime.go), and what open captures recorded.
	goMu         sync.Mutex
	handles      map[cgo.Handle]struct{}
	captured     []kept
	openCaptures atomic.Int32 // captures begun through this package and not ended

	// The buffers allocated from the context and not yet freed: its Close frees them, so it
	// makes every one of them read closed (Ptr 0, Bytes nil).
	bufMu sync.Mutex
	bufs  map[ownedBuffer]struct{}
}

// ownedBuffer is a DeviceBuffer or HostBuffer, which the context's Close frees.
type ownedBuffer interface{ closedWithContext() }

func (c *Context) track(b ownedBuffer) {
	c.bufMu.Lock()
	if c.bufs == nil {
		c.bufs = make(map[ownedBuffer]struct{})
	}
	c.bufs[b] = struct{}{}
	c.bufMu.Unlock()
}

func (c *Context) untrack(b ownedBuffer) {
	c.bufMu.Lock()
	delete(c.bufs, b)
	c.bufMu.Unlock()
}

// closeBuffers marks every buffer of the context freed, after its destroy freed them.
func (c *Context) closeBuffers() {
	c.bufMu.Lock()
	bufs := c.bufs
	c.bufs = nil
	c.bufMu.Unlock()
	unregisterContext(c)
	for b := range bufs {
		b.closedWithContext()
	}
}

// NewContext creates a context (qd_context_create). On the CPU backend this starts its worker
// threads.
func NewContext(opts ContextOptions) (*Context, error) {
	var flags uint32
	if opts.Validate {
		flags |= C.QD_CONTEXT_VALIDATE
	}
	if opts.ValidateFail {
		flags |= C.QD_CONTEXT_VALIDATE_FAIL
	}
	// Fail mode, from the options or from QD_VALIDATE=error (qd.h, "Context creation flags").
	failMode := opts.Validate && opts.ValidateFail || os.Getenv("QD_VALIDATE") == "error"
	h, err := u64Result(C.gq_context_create_from_fields(C.uint32_t(opts.Backend), C.uint32_t(opts.Device),
		C.uint32_t(opts.StreamPoolSize), C.uint32_t(opts.EventPoolSize), C.uint32_t(opts.CPUWorkerThreads),
		C.uint32_t(flags), boolC(failMode)))
	if err != nil {
		return nil, err
	}
	c := &Context{backend: opts.Backend, failMode: failMode}
	if c.backend == BackendDefault {
		c.backend = BackendCPU
	}
	c.h.Store(h)
	return c, nil
}

// Handle is the context's qd_context handle (0 once closed), for calls into C.
func (c *Context) Handle() uint64 { return c.h.Load() }

// Backend is the backend the context runs on (BackendCPU for BackendDefault).
func (c *Context) Backend() Backend { return c.backend }

// Close drains and destroys the context (qd_context_destroy); see Context. It is idempotent:
// a second Close returns nil. Called from a host callback or host kernel of this context it
// returns ErrInvalidOperation and the context stays open.
func (c *Context) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	h := c.h.Load()
	if h == 0 {
		return nil
	}
	c.closing.Store(true)
	if err := resultError(C.gq_context_destroy(C.qd_context(h))); err != nil {
		if err.(*Error).Status == StatusInvalidOperation {
			c.closing.Store(false)
			return err
		}
		// INVALID_HANDLE: destroyed behind our back (e.g. through Handle()); it is gone either way.
	}
	c.h.Store(0)
	c.closeBuffers()
	c.dropAllHandles()
	return nil
}

// Err is the fault a Go host callback or Go host kernel of this context caused (an *Error with
// StatusDeviceLost), or nil.
func (c *Context) Err() error {
	if e := c.lost.Load(); e != nil {
		return e
	}
	return nil
}

// handle is the live handle, or the error of a closed context.
func (c *Context) handle() (C.qd_context, error) {
	if c == nil {
		return 0, errNil("context")
	}
	h := c.h.Load()
	if h == 0 {
		return 0, errClosed("context")
	}
	return C.qd_context(h), nil
}

// liveHandle is handle() for calls that touch the device: a context lost to a Go fault fails.
func (c *Context) liveHandle() (C.qd_context, error) {
	if e := c.lost.Load(); e != nil {
		return 0, e
	}
	return c.handle()
}

// childClosed reports whether an INVALID_HANDLE from destroying a child means that this
// context already destroyed it.
func (c *Context) childClosed(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Status == StatusInvalidHandle && (c.closing.Load() || c.h.Load() == 0)
}

// fault marks the context lost by a Go host callback or kernel (the first fault wins).
func (c *Context) fault(message string) {
	c.lost.CompareAndSwap(nil, &Error{Status: StatusDeviceLost, Message: message})
}

// afterWait is the result of a wait: a fault that a Go callback caused during the waited work
// wins over success, so the wait reports it as qd reports a kernel's fault.
func (c *Context) afterWait(err error) error {
	if e := c.lost.Load(); e != nil {
		if qe, ok := err.(*Error); err == nil || (ok && qe.Status == StatusDeviceLost) {
			return e
		}
	}
	return err
}

// Synchronize blocks until all work queued on every stream of the context has completed
// (qd_context_synchronize).
func (c *Context) Synchronize() error {
	h, err := c.liveHandle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_context_synchronize(h))
	runtime.KeepAlive(c)
	return c.afterWait(err)
}

// Stats are a context's statistics (qd_context_stats).
type Stats struct {
	LiveStreams        uint64 // streams with a valid handle: created, imported, leased, default
	LiveEvents         uint64
	LiveModules        uint64
	LiveKernels        uint64
	StreamPoolCapacity uint64 // most streams leased at once
	StreamPoolCreated  uint64
	StreamPoolLeased   uint64 // leases held now (acquire, fork, parallel launch)
	StreamPoolHits     uint64
	StreamPoolMisses   uint64
	EventPoolCreated   uint64
	EventPoolHits      uint64
	EventPoolMisses    uint64
	LiveAllocations    uint64 // stream-ordered device blocks not yet freed
	BytesAllocated     uint64
	HostBytesAllocated uint64 // HostAlloc bytes not yet freed
	HazardsReported    uint64 // hazards the validation mode reported (0 when it is off)
	LiveTimelines      uint64 // timelines not yet closed (since 0.3)
}

// Stats reads the context's statistics (qd_context_get_stats). They stay readable on a lost
// context.
func (c *Context) Stats() (Stats, error) {
	h, err := c.handle()
	if err != nil {
		return Stats{}, err
	}
	out := (*C.qd_context_stats)(C.calloc(1, C.sizeof_qd_context_stats))
	if out == nil {
		return Stats{}, newError(StatusOutOfMemory, "no memory for a qd_context_stats")
	}
	defer C.free(unsafe.Pointer(out))
	out.struct_size = C.sizeof_qd_context_stats
	if err := resultError(C.gq_context_get_stats(h, out)); err != nil {
		return Stats{}, err
	}
	return Stats{
		LiveStreams: uint64(out.live_streams), LiveEvents: uint64(out.live_events),
		LiveModules: uint64(out.live_modules), LiveKernels: uint64(out.live_kernels),
		StreamPoolCapacity: uint64(out.stream_pool_capacity),
		StreamPoolCreated:  uint64(out.stream_pool_created),
		StreamPoolLeased:   uint64(out.stream_pool_leased),
		StreamPoolHits:     uint64(out.stream_pool_hits), StreamPoolMisses: uint64(out.stream_pool_misses),
		EventPoolCreated: uint64(out.event_pool_created), EventPoolHits: uint64(out.event_pool_hits),
		EventPoolMisses: uint64(out.event_pool_misses), LiveAllocations: uint64(out.live_allocations),
		BytesAllocated: uint64(out.bytes_allocated), HostBytesAllocated: uint64(out.host_bytes_allocated),
		HazardsReported: uint64(out.hazards_reported), LiveTimelines: uint64(out.live_timelines),
	}, nil
}

// Validating reports whether the validation mode is on for the context (ContextOptions.Validate,
// or QD_VALIDATE in the environment). Its reports go to stderr, one line each (qd's default
// hazard handler, which this call reinstates; the package offers no Go handler); with
// ValidateFail they are the errors of the refused calls only.
func (c *Context) Validating() (bool, error) {
	h, err := c.handle()
	if err != nil {
		return false, err
	}
	err = resultError(C.gq_context_reset_hazard_handler(h, boolC(c.failMode)))
	if errors.Is(err, ErrInvalidOperation) {
		return false, nil
	}
	return err == nil, err
}

func boolC(b bool) C.uint32_t {
	if b {
		return 1
	}
	return 0
}
