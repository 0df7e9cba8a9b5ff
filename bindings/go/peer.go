package qd

// #include "qdgo.h"
import "C"

import "runtime"

// Several devices (qd.h, "Several devices"; since 0.2). One context is one device; a program
// drives several with one context each. A stream of one context may wait on an Event of another
// context of the same backend (Stream.WaitEvent), so work on one GPU is ordered after work on
// another without a host synchronization. Contexts of different backends are never mixed
// (ErrWrongContext). The CPU backend supports all of it between CPU contexts.

// CanAccessPeer reports whether work of c can be given access to peer's memory
// (qd_context_can_access_peer): always for two contexts of one device and for CPU contexts;
// between two GPUs when the driver reports peer access.
func (c *Context) CanAccessPeer(peer *Context) (bool, error) {
	h, err := c.liveHandle()
	if err != nil {
		return false, err
	}
	ph, err := peer.liveHandle()
	if err != nil {
		return false, err
	}
	v, err := u64Result(C.gq_context_can_access_peer(h, ph))
	runtime.KeepAlive(c)
	runtime.KeepAlive(peer)
	return v != 0, err
}

// EnablePeerAccess lets work of c access peer's memory, device memory from Stream.Alloc
// included (qd_context_enable_peer_access; on CUDA peer access and the peer pool's access).
// One direction; calling it again is a no-op. ErrNotSupported when the devices cannot.
func (c *Context) EnablePeerAccess(peer *Context) error {
	h, err := c.liveHandle()
	if err != nil {
		return err
	}
	ph, err := peer.liveHandle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_context_enable_peer_access(h, ph))
	runtime.KeepAlive(c)
	runtime.KeepAlive(peer)
	return err
}

// MemcpyPeer copies bytes from src, memory of srcCtx, to dst, memory of dstCtx, in stream order
// on s, a stream of either context (qd_memcpy_peer_async). Each range must lie inside one
// allocation (Stream.Alloc or Context.HostAlloc) of the context named with it. Order the other
// context's work with events. Not captured in graphs.
func (s *Stream) MemcpyPeer(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, bytes uint64) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	dh, err := dstCtx.handle()
	if err != nil {
		return err
	}
	sh, err := srcCtx.handle()
	if err != nil {
		return err
	}
	err = resultError(C.gq_memcpy_peer_async(h, C.uint64_t(dst), dh, C.uint64_t(src), sh, C.uint64_t(bytes)))
	runtime.KeepAlive(s)
	runtime.KeepAlive(dstCtx)
	runtime.KeepAlive(srcCtx)
	return err
}
