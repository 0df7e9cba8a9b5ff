package qd_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"qd"
)

func splitParts(t *testing.T, ctx *qd.Context, counts ...uint32) []*qd.Context {
	t.Helper()
	parts, err := ctx.Split(counts)
	must(t, err)
	t.Cleanup(func() {
		for _, p := range parts {
			_ = p.Close()
		}
	})
	return parts
}

func TestSplit_PartsAreContextsThatRunWork(t *testing.T) {
	ctx := newContext(t) // 4 workers
	parts := splitParts(t, ctx, 2, 2)
	if len(parts) != 2 || parts[0].Handle() == parts[1].Handle() {
		t.Fatalf("parts = %v", parts)
	}
	// A Go host callback cannot name its worker thread; the parts' disjoint workers are checked
	// by the C suite (tests/semantic/split_test.cpp). Here: each part runs work of its own.
	for _, p := range parts {
		s := newStream(t, p)
		var ran sync.WaitGroup
		ran.Add(1)
		must(t, s.LaunchHostFunc(func() { ran.Done() }))
		must(t, s.Synchronize())
		ran.Wait()
	}
}

func TestSplit_WorkOfTwoPartsIsOrderedByACrossContextWait(t *testing.T) {
	parts := splitParts(t, newContext(t), 2, 2)
	sa, sb := newStream(t, parts[0]), newStream(t, parts[1])
	gate := make(chan struct{})
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	must(t, sa.LaunchHostFunc(func() { <-gate; note("a") }))
	e := newEvent(t, parts[0], false)
	must(t, sa.RecordEvent(e))
	must(t, sb.WaitEvent(e))
	must(t, sb.LaunchHostFunc(func() { note("b") }))
	if done, err := sb.Query(); err != nil || done {
		t.Fatalf("part 1 is idle before part 0's gate opened (%v, %v)", done, err)
	}
	close(gate)
	must(t, sb.Synchronize())
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "a" || order[1] != "b" {
		t.Fatalf("order = %v", order)
	}
}

func TestSplit_TheParentMayBeClosedFirst(t *testing.T) {
	parent, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU, CPUWorkerThreads: 2})
	must(t, err)
	parts, err := parent.Split([]uint32{1})
	must(t, err)
	must(t, parent.Close())
	s, err := parts[0].NewStream(qd.StreamOptions{})
	must(t, err)
	must(t, s.LaunchHostFunc(func() {}))
	must(t, s.Synchronize())
	must(t, parts[0].Close())
}

func TestSplit_AnImpossibleSplitIsRefusedAndMakesNothing(t *testing.T) {
	ctx := newContext(t)
	_, err := ctx.Split([]uint32{1, 4})
	if !errors.Is(err, qd.ErrInvalidArgument) || !strings.Contains(err.Error(), "add up to 5 workers") {
		t.Fatalf("over the worker count: %v", err)
	}
	if _, err := ctx.Split([]uint32{1, 0}); !errors.Is(err, qd.ErrInvalidArgument) {
		t.Fatalf("a count of 0: %v", err)
	}
	if _, err := ctx.Split(nil); !errors.Is(err, qd.ErrInvalidArgument) {
		t.Fatalf("no counts: %v", err)
	}
	whole := splitParts(t, ctx, 4) // the context is as it was
	if _, err := whole[0].Split([]uint32{1}); !errors.Is(err, qd.ErrInvalidOperation) {
		t.Fatalf("a part split again: %v", err)
	}
}

func TestSplit_DeviceInfoReportsTheRule(t *testing.T) {
	info, err := qd.GetDeviceInfo(qd.BackendCPU, 0)
	must(t, err)
	if info.SplitGranularity != 1 || info.SplitMinimum != 1 {
		t.Fatalf("CPU split rule = %d, %d", info.SplitGranularity, info.SplitMinimum)
	}
}
