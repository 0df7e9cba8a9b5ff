package qd_test

import (
	"strings"
	"sync"
	"testing"

	"qd"
)

// Launch attributes (qd.h, "Launch attributes") through LaunchWith and Task.Attrs, on the CPU
// backend: each with its CPU meaning, and a refusal names the attribute.

func TestLaunchWith_AttributesRunWithTheirCPUMeanings(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	done := newEvent(t, ctx, false)
	var mu sync.Mutex
	type seen struct {
		block uint32
		ready bool
	}
	var log []seen
	k, err := ctx.NewHostKernel("k", func(b *qd.HostBlock) error {
		ready, err := done.Query()
		mu.Lock()
		log = append(log, seen{b.BlockIdx[0], ready && err == nil})
		mu.Unlock()
		return nil
	})
	must(t, err)
	prio := int32(-1)
	attrs := qd.LaunchAttrs{Cluster: [3]uint32{2, 1, 1}, Programmatic: true, Priority: &prio, CompletionEvent: done}
	must(t, s.LaunchWith(k, qd.Grid1D(4, 1), attrs))
	must(t, s.Synchronize())
	want := []seen{{0, false}, {1, false}, {2, false}, {3, true}}
	if len(log) != len(want) {
		t.Fatalf("blocks %v, want %v", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("blocks %v, want %v: the completion event completes as the last block starts", log, want)
		}
	}
}

func TestLaunchWith_Refusals_NameTheAttribute(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	k, err := ctx.NewHostKernel("k", func(*qd.HostBlock) error { return nil })
	must(t, err)
	err = s.LaunchWith(k, qd.Grid1D(3, 1), qd.LaunchAttrs{Cluster: [3]uint32{2, 1, 1}})
	expectIs(t, err, qd.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "does not divide grid") {
		t.Errorf("message %q", err)
	}
	other := newContext(t)
	foreign := newEvent(t, other, false)
	err = s.LaunchWith(k, qd.LaunchConfig{}, qd.LaunchAttrs{CompletionEvent: foreign})
	expectIs(t, err, qd.ErrWrongContext)
	if !strings.Contains(err.Error(), "attrs[0]") {
		t.Errorf("message %q", err)
	}
}

func TestLaunchParallel_TaskAttrs_ReachEachTask(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	k, err := ctx.NewHostKernel("k", func(*qd.HostBlock) error { return nil })
	must(t, err)
	err = s.LaunchParallel([]qd.Task{{Kernel: k, Config: qd.Grid1D(3, 1), Attrs: qd.LaunchAttrs{Cluster: [3]uint32{2, 1, 1}}}})
	expectIs(t, err, qd.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "tasks[0].attrs[0]") {
		t.Errorf("message %q", err)
	}
	must(t, s.LaunchParallel([]qd.Task{{Kernel: k, Config: qd.Grid1D(4, 1), Attrs: qd.LaunchAttrs{Programmatic: true}}}))
	must(t, s.Synchronize())
}
