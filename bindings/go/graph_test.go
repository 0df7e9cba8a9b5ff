package qd_test

import (
	"errors"
	"testing"

	"qd"
)

func TestGraph_CaptureReplayUpdate(t *testing.T) {
	ctx := newContext(t)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	defer s.Close()
	must(t, s.BeginCapture())
	if err := s.Synchronize(); !errors.Is(err, qd.ErrInvalidOperation) {
		t.Fatalf("Synchronize during a capture: %v", err)
	}
	kids, err := s.Fork(2)
	must(t, err)
	must(t, s.Join(kids))
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	must(t, s.BeginCapture())
	g2, err := s.EndCapture()
	must(t, err)
	if err := g.Update(g2); !errors.Is(err, qd.ErrInvalidOperation) {
		t.Fatalf("Update of another shape: %v", err)
	}
	must(t, g2.Close())
	must(t, g2.Close())
	if err := g2.Launch(s); err == nil {
		t.Fatal("Launch of a closed graph succeeded")
	}
}

func TestGraph_SetKernelArgs_LaterReplaysRunTheNewValues(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	host := hostBuffer(t, ctx, 16)
	must(t, s.BeginCapture())
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(1)))
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()+4), qd.Uint32(2)))
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	n, err := g.KernelNodeCount()
	must(t, err)
	if n != 2 {
		t.Fatalf("KernelNodeCount: %d, want 2", n)
	}
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	if u32At(host, 0) != 1 || u32At(host, 1) != 2 {
		t.Fatalf("first replay wrote %d, %d", u32At(host, 0), u32At(host, 1))
	}
	must(t, g.SetKernelArgs(1, k.writeValue, qd.Address(host.Ptr()+8), qd.Uint32(30)))
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	if u32At(host, 1) != 2 || u32At(host, 2) != 30 {
		t.Fatalf("after the rebind: words 1, 2 are %d, %d; want 2, 30", u32At(host, 1), u32At(host, 2))
	}
	// Refused, nothing changed: a node past the last, another argument count or size.
	expectIs(t, g.SetKernelArgs(2, k.writeValue, qd.Address(host.Ptr()), qd.Uint32(0)), qd.ErrInvalidArgument)
	expectIs(t, g.SetKernelArgs(0, k.writeValue, qd.Address(host.Ptr())), qd.ErrInvalidArgument)
	expectIs(t, g.SetKernelArgs(0, k.writeValue, qd.Address(host.Ptr()), qd.Uint64(0)), qd.ErrInvalidArgument)
	if err := g.SetKernelArgs(0, nil); err == nil {
		t.Fatal("SetKernelArgs with a nil kernel succeeded")
	}
	must(t, g.Close())
	if _, err := g.KernelNodeCount(); err == nil {
		t.Fatal("KernelNodeCount of a closed graph succeeded")
	}
}

func TestGraph_SetKernelArgs_OfAGoHostKernelsNode_IsNotSupported(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	gk, err := ctx.NewHostKernel("noop", func(*qd.HostBlock) error { return nil })
	must(t, err)
	must(t, s.BeginCapture())
	must(t, s.Launch(gk, qd.LaunchConfig{}, qd.Uint32(1)))
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	expectIs(t, g.SetKernelArgs(0, gk, qd.Uint32(2)), qd.ErrNotSupported)
}
