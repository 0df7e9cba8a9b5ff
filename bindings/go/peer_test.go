package qd_test

import (
	"bytes"
	"sync"
	"testing"

	"qd"
)

func TestWaitEvent_OfAnotherContext_OrdersTheStreamAfterItsRecord(t *testing.T) {
	a, b := newContext(t), newContext(t)
	sa, sb := newStream(t, a), newStream(t, b)
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	must(t, sa.LaunchHostFunc(func() { <-gate; note("a") }))
	e := newEvent(t, a, false)
	must(t, sa.RecordEvent(e))
	must(t, sb.WaitEvent(e))
	must(t, sb.LaunchHostFunc(func() { note("b") }))
	if done, err := sb.Query(); err != nil || done {
		t.Fatalf("the waiting stream is idle before the other context's gate opened (%v, %v)", done, err)
	}
	close(gate)
	must(t, sb.Synchronize())
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("order = %v", order)
	}
}

func TestPeerAccessAndMemcpyPeer_BetweenTwoCPUContexts(t *testing.T) {
	a, b := newContext(t), newContext(t)
	can, err := a.CanAccessPeer(b)
	must(t, err)
	if !can {
		t.Fatal("CPU contexts report no peer access")
	}
	must(t, a.EnablePeerAccess(b))
	must(t, a.EnablePeerAccess(b))
	expectIs(t, a.EnablePeerAccess(a), qd.ErrInvalidArgument)

	sa, sb := newStream(t, a), newStream(t, b)
	const n = 4096
	bufA, err := sa.Alloc(n)
	must(t, err)
	bufB, err := sb.Alloc(n)
	must(t, err)
	must(t, sa.Memset(bufA.Ptr(), 0x33, n))
	e := newEvent(t, a, false)
	must(t, sa.RecordEvent(e))
	must(t, sb.WaitEvent(e))
	must(t, sb.MemcpyPeer(bufB.Ptr(), b, bufA.Ptr(), a, n))
	host, err := b.HostAlloc(n)
	must(t, err)
	must(t, sb.MemcpyPeer(host.Ptr(), b, bufB.Ptr(), b, n))
	must(t, sb.Synchronize())
	if !bytes.Equal(host.Bytes(), bytes.Repeat([]byte{0x33}, n)) {
		t.Fatal("the peer copy did not arrive")
	}
	// Each range is checked against the context named with it.
	expectIs(t, sb.MemcpyPeer(bufB.Ptr(), a, bufA.Ptr(), a, n), qd.ErrWrongContext)
	expectIs(t, sa.MemcpyPeer(bufB.Ptr(), a, bufA.Ptr(), a, n), qd.ErrInvalidAddress)
	must(t, host.Close())
	must(t, bufA.Free(sa))
	must(t, bufB.Free(sb))
	must(t, sb.Synchronize())
}
