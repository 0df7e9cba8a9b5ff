package qd_test

import (
	"testing"

	"qd"
)

func TestStreamClose_OfEveryKind_IsIdempotentAndInvalidatesTheStream(t *testing.T) {
	ctx := newContext(t)
	owned, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	leased, err := ctx.AcquireStream()
	must(t, err)
	def, err := ctx.DefaultStream()
	must(t, err)
	for _, s := range []*qd.Stream{owned, leased, def} {
		must(t, s.Close())
		must(t, s.Close())
	}
	for _, s := range []*qd.Stream{owned, leased} {
		_, err := s.Query()
		expectIs(t, err, qd.ErrInvalidHandle)
	}
	if owned.Kind() != qd.StreamOwned || leased.Kind() != qd.StreamLeased || def.Kind() != qd.StreamDefault {
		t.Fatalf("kinds: %v %v %v", owned.Kind(), leased.Kind(), def.Kind())
	}
	// The default stream lives as long as the context: its Close does nothing.
	def2, err := ctx.DefaultStream()
	must(t, err)
	if _, err := def2.Query(); err != nil {
		t.Fatalf("default stream after Close: %v", err)
	}
	stats, err := ctx.Stats()
	must(t, err)
	if stats.StreamPoolLeased != 0 {
		t.Fatalf("leases held after Close: %d", stats.StreamPoolLeased)
	}
}

func TestChildClose_AfterContextClose_ReturnsNil(t *testing.T) {
	ctx, err := qd.NewContext(qd.ContextOptions{})
	must(t, err)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	lease, err := ctx.AcquireStream()
	must(t, err)
	e, err := ctx.NewEvent(false)
	must(t, err)
	k, err := ctx.NewHostKernel("noop", func(*qd.HostBlock) error { return nil })
	must(t, err)
	buf, err := s.Alloc(64)
	must(t, err)
	host, err := ctx.HostAlloc(64)
	must(t, err)
	must(t, ctx.Close())
	must(t, ctx.Close())
	for _, c := range []interface{ Close() error }{buf, host, s, lease, e, k} {
		if err := c.Close(); err != nil {
			t.Fatalf("%T.Close after the context's: %v", c, err)
		}
	}
	_, err = ctx.NewStream(qd.StreamOptions{})
	expectIs(t, err, qd.ErrInvalidHandle)
}

func TestAcquireStream_WhenThePoolIsFull_FailsAtOnceWithPoolExhausted(t *testing.T) {
	ctx := newContext(t, func(o *qd.ContextOptions) { o.StreamPoolSize = 2 })
	a, err := ctx.AcquireStream()
	must(t, err)
	b, err := ctx.AcquireStream()
	must(t, err)
	_, err = ctx.AcquireStream()
	expectIs(t, err, qd.ErrPoolExhausted)
	must(t, a.Close())
	c, err := ctx.AcquireStream()
	must(t, err)
	if c.Handle() == a.Handle() {
		t.Fatal("a new lease reuses the released handle")
	}
	must(t, b.Close())
	must(t, c.Close())
}

func TestStreamQuery_WhileWorkIsPending_ReportsNotDone(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	g := newGate(t, ctx)
	g.hold(t, s)
	done, err := s.Query()
	must(t, err)
	if done {
		t.Fatal("Query reports done while the gate holds the stream")
	}
	g.open()
	must(t, s.Synchronize())
	done, err = s.Query()
	must(t, err)
	if !done {
		t.Fatal("Query reports pending work after Synchronize")
	}
}

func TestStreamPriority_IsClampedToTheBackendRange(t *testing.T) {
	ctx := newContext(t)
	least, greatest, err := ctx.PriorityRange()
	must(t, err)
	if least != 0 || greatest != -2 {
		t.Fatalf("CPU priority range: %d..%d", least, greatest)
	}
	s, err := ctx.NewStream(qd.StreamOptions{Priority: -100, NonBlocking: true})
	must(t, err)
	defer s.Close()
	p, err := s.Priority()
	must(t, err)
	if p != greatest {
		t.Fatalf("priority %d, want %d", p, greatest)
	}
	h, err := s.ContextHandle()
	must(t, err)
	if h != ctx.Handle() {
		t.Fatalf("ContextHandle %#x, want %#x", h, ctx.Handle())
	}
}

func TestImportAndNativeHandle_OnCPU_AreNotSupported(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	_, err := s.NativeHandle()
	expectIs(t, err, qd.ErrNotSupported)
	_, err = ctx.ImportStream(0x1234)
	expectIs(t, err, qd.ErrNotSupported)
}

func TestStreamClose_WithPendingWork_ReturnsAtOnceAndTheWorkCompletes(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	g := newGate(t, ctx)
	host := hostBuffer(t, ctx, 4)
	g.hold(t, s)
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(9)))
	must(t, s.Close()) // returns although the gate still holds the stream
	g.open()
	must(t, ctx.Synchronize())
	if got := u32At(host, 0); got != 9 {
		t.Fatalf("work queued before Close wrote %d, want 9", got)
	}
}
