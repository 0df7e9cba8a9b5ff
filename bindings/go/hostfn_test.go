package qd_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"qd"
)

func TestLaunchHostFunc_RunsInStreamOrder(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	host := hostBuffer(t, ctx, 4)
	var seen []uint32
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(5)))
	must(t, s.LaunchHostFunc(func() { seen = append(seen, u32At(host, 0)) }))
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(6)))
	must(t, s.LaunchHostFunc(func() { seen = append(seen, u32At(host, 0)) }))
	must(t, s.Synchronize())
	if len(seen) != 2 || seen[0] != 5 || seen[1] != 6 {
		t.Fatalf("callbacks saw %v, want [5 6]", seen)
	}
	expectIs(t, s.LaunchHostFunc(nil), qd.ErrInvalidArgument)
}

func TestBlockingCall_InsideAHostCallback_IsInvalidOperation(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	var inner error
	must(t, s.LaunchHostFunc(func() { inner = s.Synchronize() }))
	must(t, s.Synchronize())
	expectIs(t, inner, qd.ErrInvalidOperation)
	var closeErr error
	must(t, s.LaunchHostFunc(func() { closeErr = ctx.Close() }))
	must(t, s.Synchronize())
	expectIs(t, closeErr, qd.ErrInvalidOperation) // and the context is still open:
	must(t, s.Synchronize())
}

func TestHostCallbackPanic_IsRecoveredAndMakesTheContextLost(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	ran := false
	must(t, s.LaunchHostFunc(func() { panic("callback boom") }))
	must(t, s.LaunchHostFunc(func() { ran = true }))
	err := s.Synchronize()
	expectIs(t, err, qd.ErrDeviceLost)
	if !strings.Contains(err.Error(), "callback boom") {
		t.Fatalf("the error does not quote the panic: %v", err)
	}
	if !ran {
		t.Fatal("the callback after the panicking one did not run") // qd never saw the panic
	}
	expectIs(t, s.LaunchHostFunc(func() {}), qd.ErrDeviceLost)
	_, err = ctx.NewStream(qd.StreamOptions{})
	expectIs(t, err, qd.ErrDeviceLost)
	expectIs(t, ctx.Err(), qd.ErrDeviceLost)
	if _, err := ctx.Stats(); err != nil { // bookkeeping stays readable, as in C
		t.Fatalf("Stats on a lost context: %v", err)
	}
}

func TestGoHostKernelPanic_IsRecoveredAndFaultsTheContext(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	k, err := ctx.NewHostKernel("exploding", func(b *qd.HostBlock) error { panic("kernel boom") })
	must(t, err)
	must(t, s.Launch(k, qd.LaunchConfig{}))
	err = s.Synchronize()
	expectIs(t, err, qd.ErrDeviceLost)
	if !strings.Contains(err.Error(), "kernel boom") || !strings.Contains(err.Error(), "exploding") {
		t.Fatalf("the error does not name the kernel and the panic: %v", err)
	}
	expectIs(t, s.Launch(k, qd.LaunchConfig{}), qd.ErrDeviceLost)
}

func TestGoHostKernelError_FaultsTheContextLikeANonZeroReturn(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	k, err := ctx.NewHostKernel("failing", func(b *qd.HostBlock) error { return errors.New("bad block") })
	must(t, err)
	must(t, s.Launch(k, qd.Grid1D(4, 1)))
	err = s.Synchronize()
	expectIs(t, err, qd.ErrDeviceLost)
	if !strings.Contains(err.Error(), "bad block") {
		t.Fatalf("the error does not carry the kernel's error: %v", err)
	}
}

func TestGoHostKernel_MisreadArgument_FaultsInsteadOfCrashing(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	k, err := ctx.NewHostKernel("misread", func(b *qd.HostBlock) error {
		_ = b.Uint64(0) // argument 0 has 4 bytes
		return nil
	})
	must(t, err)
	must(t, s.Launch(k, qd.LaunchConfig{}, qd.Uint32(1)))
	err = s.Synchronize()
	expectIs(t, err, qd.ErrDeviceLost)
	if !strings.Contains(err.Error(), "argument 0 has 4 bytes") {
		t.Fatalf("the error does not say what was misread: %v", err)
	}
}

func TestGoHostKernel_SeesBlockIndicesAndSharedMemory(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	var mu sync.Mutex
	blocks := map[[3]uint32]bool{}
	k, err := ctx.NewHostKernel("blocks", func(b *qd.HostBlock) error {
		if len(b.Shared) != 64 || b.Shared[0] != 0 || b.BlockDim != [3]uint32{8, 1, 1} || b.GridDim != [3]uint32{2, 3, 1} {
			return errors.New("unexpected block shape or shared memory")
		}
		b.Shared[0] = 1 // each block gets fresh zeroed scratch
		mu.Lock()
		blocks[b.BlockIdx] = true
		mu.Unlock()
		return nil
	})
	must(t, err)
	cfg := qd.LaunchConfig{Grid: [3]uint32{2, 3, 1}, Block: [3]uint32{8, 1, 1}, SharedMemBytes: 64}
	must(t, s.Launch(k, cfg))
	must(t, s.Synchronize())
	if len(blocks) != 6 {
		t.Fatalf("%d distinct blocks ran, want 6", len(blocks))
	}
}

func TestNewHostKernel_NilFunction_IsInvalidArgument(t *testing.T) {
	ctx := newContext(t)
	_, err := ctx.NewHostKernel("nil", nil)
	expectIs(t, err, qd.ErrInvalidArgument)
}
