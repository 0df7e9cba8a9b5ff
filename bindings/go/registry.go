package qd

import (
	"sort"
	"sync"
)

// The memory this package allocated and has not freed: every live DeviceBuffer and HostBuffer
// of every context. Memcpy, Memset and MemcpyPeer accept only ranges inside one of these
// blocks. libqd itself accepts any host address outside its allocations (qd.h, "Memory"), so
// without this check a Go []byte address passed as a DevicePtr would be copied after the call
// returned (the garbage collector may have moved or freed it by then), and a stale or made-up
// address would fault the process instead of returning an error.
type liveBlock struct {
	start, end uint64 // [start, end)
	ctx        *Context
}

var live struct {
	mu     sync.RWMutex
	blocks []liveBlock // sorted by start, disjoint
}

func registerBlock(start, size uint64, ctx *Context) {
	live.mu.Lock()
	defer live.mu.Unlock()
	i := sort.Search(len(live.blocks), func(i int) bool { return live.blocks[i].start >= start })
	live.blocks = append(live.blocks, liveBlock{})
	copy(live.blocks[i+1:], live.blocks[i:])
	live.blocks[i] = liveBlock{start: start, end: start + size, ctx: ctx}
}

func unregisterBlock(start uint64) {
	live.mu.Lock()
	defer live.mu.Unlock()
	i := sort.Search(len(live.blocks), func(i int) bool { return live.blocks[i].start >= start })
	if i < len(live.blocks) && live.blocks[i].start == start {
		live.blocks = append(live.blocks[:i], live.blocks[i+1:]...)
	}
}

// unregisterContext forgets every block of ctx (its Close freed them all).
func unregisterContext(ctx *Context) {
	live.mu.Lock()
	defer live.mu.Unlock()
	kept := live.blocks[:0]
	for _, b := range live.blocks {
		if b.ctx != ctx {
			kept = append(kept, b)
		}
	}
	for i := len(kept); i < len(live.blocks); i++ {
		live.blocks[i] = liveBlock{}
	}
	live.blocks = kept
}

// checkRange is nil when [p, p+bytes) lies inside one live block allocated through this
// package, else an ErrInvalidAddress (ErrOverflow when the range wraps around). bytes 0 is
// always accepted (a no-op in qd).
func checkRange(what string, p DevicePtr, bytes uint64) error {
	if bytes == 0 {
		return nil
	}
	if err := checkWrap(what, p, bytes); err != nil {
		return err
	}
	start := uint64(p)
	live.mu.RLock()
	defer live.mu.RUnlock()
	i := sort.Search(len(live.blocks), func(i int) bool { return live.blocks[i].start > start }) - 1
	if i >= 0 && start < live.blocks[i].end {
		if start+bytes <= live.blocks[i].end {
			return nil
		}
		b := live.blocks[i]
		return newError(StatusInvalidAddress, "%s range 0x%x + %d bytes runs past the end of its block (0x%x, %d bytes)",
			what, start, bytes, b.start, b.end-b.start)
	}
	return newError(StatusInvalidAddress, "%s 0x%x is not inside a live block of this package (%s)", what, start, blockKinds)
}

// checkWrap is ErrOverflow when p + bytes wraps around, as qd reports it.
func checkWrap(what string, p DevicePtr, bytes uint64) error {
	if uint64(p)+bytes < uint64(p) {
		return newError(StatusOverflow, "%s 0x%x + %d bytes wraps around", what, uint64(p), bytes)
	}
	return nil
}

const blockKinds = "Stream.Alloc or Context.HostAlloc, not freed and its context not closed; Go memory is never accepted"
