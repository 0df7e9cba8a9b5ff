package qd

// #include "qdgo.h"
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Memory. Every copy and set is asynchronous, in stream order, between device addresses
// (DevicePtr): device memory from Stream.Alloc, or pinned host memory from Context.HostAlloc.
// Go memory ([]byte, slices, structs) is never passed to an asynchronous copy: the copy runs
// after the call returns, when the Go garbage collector may have moved or freed it, and cgo's
// rules forbid C from keeping a Go pointer past the call. To move Go data, copy it into a
// HostBuffer (HostBuffer.Bytes), queue the copy from HostBuffer.Ptr, and read results back from
// the HostBuffer after synchronizing.

// DeviceBuffer is a block of device memory allocated in stream order (qd_mem_alloc_async). It
// has no finalizer (a free must be ordered on a stream); Close frees it on the stream it was
// allocated on, Free on any stream; blocks still allocated when the context is closed are freed
// by it.
type DeviceBuffer struct {
	addr   atomic.Uint64
	size   uint64
	stream *Stream
}

// Alloc allocates bytes of device memory in stream order: work queued on s after this call may
// use it (other streams must be ordered after it with an event).
func (s *Stream) Alloc(bytes uint64) (*DeviceBuffer, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	addr, err := u64Result(C.gq_mem_alloc_async(h, C.uint64_t(bytes)))
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	b := &DeviceBuffer{size: bytes, stream: s}
	b.addr.Store(addr)
	s.ctx.track(b)
	registerBlock(addr, bytes, s.ctx)
	return b, nil
}

// Ptr is the block's address: 0 once freed, by Free, Close or its context's Close.
func (b *DeviceBuffer) Ptr() DevicePtr {
	if b == nil {
		return 0
	}
	return DevicePtr(b.addr.Load())
}

// Size is the block's size in bytes.
func (b *DeviceBuffer) Size() uint64 { return b.size }

// Free frees the block in s's order (qd_mem_free_async): after all work queued on s so far.
// Work on other streams that uses it must be ordered before (an event). A second Free fails
// with ErrInvalidAddress.
func (b *DeviceBuffer) Free(s *Stream) error {
	if b == nil {
		return newError(StatusInvalidHandle, "device buffer is nil")
	}
	h, err := s.handle()
	if err != nil {
		return err
	}
	addr := b.addr.Load()
	if addr == 0 {
		return newError(StatusInvalidAddress, "the block was freed already (Free, Close, or its context's Close)")
	}
	err = resultError(C.gq_mem_free_async(h, C.uint64_t(addr)))
	runtime.KeepAlive(s)
	if err == nil && b.addr.CompareAndSwap(addr, 0) {
		b.forget(addr)
	}
	return err
}

// forget drops a freed block from the package's live blocks and from its context.
func (b *DeviceBuffer) forget(addr uint64) {
	b.stream.ctx.untrack(b)
	unregisterBlock(addr)
}

// closedWithContext is called by the context's Close, which freed the block.
func (b *DeviceBuffer) closedWithContext() { b.addr.Store(0) }

// Close frees the block on the stream it was allocated on, unless it was freed already.
// Idempotent; nil when the context was closed first (which freed it).
func (b *DeviceBuffer) Close() error {
	if b == nil || b.addr.Load() == 0 {
		return nil
	}
	if b.stream.h.Load() == 0 {
		if b.stream.ctx.closing.Load() || b.stream.ctx.h.Load() == 0 {
			b.addr.Store(0) // freed by the context's Close
			return nil
		}
		return newError(StatusInvalidHandle, "the stream this block was allocated on was closed: free it with Free(stream)")
	}
	err := b.Free(b.stream)
	if err != nil && b.stream.ctx.childClosed(err) {
		b.addr.Store(0) // freed by the context's Close
		return nil
	}
	if e, ok := err.(*Error); ok && e.Status == StatusInvalidAddress && b.addr.Load() == 0 {
		return nil // a concurrent Close freed it
	}
	return err
}

// Memcpy copies bytes from src to dst in stream order (qd_memcpy_async). Each range must lie
// inside one live block allocated through this package, of any context: a DeviceBuffer
// (Stream.Alloc) or a HostBuffer (Context.HostAlloc) not yet freed, whose context is not
// closed. Anything else, Go memory included, is refused with ErrInvalidAddress before qd is
// called, so nothing is queued (qd alone would accept any host address outside its
// allocations, and copy it after this call returned). A range that wraps around is
// ErrOverflow; bytes 0 is a no-op.
func (s *Stream) Memcpy(dst, src DevicePtr, bytes uint64) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if err := checkWrap("dst", dst, bytes); err != nil {
		return err
	}
	if err := checkWrap("src", src, bytes); err != nil {
		return err
	}
	if err := checkRange("dst", dst, bytes); err != nil {
		return err
	}
	if err := checkRange("src", src, bytes); err != nil {
		return err
	}
	err = resultError(C.gq_memcpy_async(h, C.uint64_t(dst), C.uint64_t(src), C.uint64_t(bytes)))
	runtime.KeepAlive(s)
	return err
}

// Memset sets bytes bytes at dst to value in stream order (qd_memset_async). dst is checked
// as Memcpy checks its ranges.
func (s *Stream) Memset(dst DevicePtr, value byte, bytes uint64) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if err := checkRange("dst", dst, bytes); err != nil {
		return err
	}
	err = resultError(C.gq_memset_async(h, C.uint64_t(dst), C.uint8_t(value), C.uint64_t(bytes)))
	runtime.KeepAlive(s)
	return err
}

// HostBuffer is pinned host memory registered with a context (qd_host_alloc): the memory Go
// code reads and writes (Bytes) and asynchronous copies use (Ptr). It has no finalizer,
// because freeing is immediate and queued copies may still use it: synchronize, then Close.
type HostBuffer struct {
	mu   sync.RWMutex
	p    unsafe.Pointer // C memory; nil once closed
	size uint64
	ctx  *Context
}

// HostAlloc allocates bytes of pinned host memory (qd_host_alloc).
func (c *Context) HostAlloc(bytes uint64) (*HostBuffer, error) {
	h, err := c.liveHandle()
	if err != nil {
		return nil, err
	}
	r := C.gq_host_alloc(h, C.uint64_t(bytes))
	runtime.KeepAlive(c)
	if r.status != 0 {
		return nil, statusError(r.status, r.msg)
	}
	b := &HostBuffer{p: r.ptr, size: bytes, ctx: c}
	c.track(b)
	registerBlock(uint64(uintptr(r.ptr)), bytes, c)
	return b, nil
}

// Bytes is the buffer as a byte slice over its C memory: nil once the buffer or its context is
// closed. A slice taken before must not be used after either Close (the memory is freed).
func (b *HostBuffer) Bytes() []byte {
	if b == nil {
		return nil
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.p), b.size)
}

// Ptr is the buffer's address for Memcpy, Memset and kernel arguments (0 once closed).
func (b *HostBuffer) Ptr() DevicePtr {
	if b == nil {
		return 0
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return DevicePtr(uintptr(b.p))
}

// Size is the buffer's size in bytes.
func (b *HostBuffer) Size() uint64 { return b.size }

// Close frees the buffer at once (qd_host_free): no queued work may still use it (synchronize
// first). Idempotent; nil when the context was closed first (which freed it).
func (b *HostBuffer) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return nil
	}
	p := b.p
	b.p = nil
	b.ctx.untrack(b)
	unregisterBlock(uint64(uintptr(p)))
	h := C.qd_context(b.ctx.h.Load())
	if h == 0 {
		return nil
	}
	err := resultError(C.gq_host_free(h, p))
	if err != nil && b.ctx.childClosed(err) {
		return nil
	}
	return err
}

// closedWithContext is called by the context's Close, which freed the buffer.
func (b *HostBuffer) closedWithContext() {
	b.mu.Lock()
	b.p = nil
	b.mu.Unlock()
}
