package qd_test

import (
	"testing"

	"qd"
)

func TestMemory_CopySetAndKernel_RunInStreamOrder(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	const n = 256
	in, out := hostBuffer(t, ctx, 4*n), hostBuffer(t, ctx, 4*n)
	for i := 0; i < n; i++ {
		putU32(in, i, uint32(i))
	}
	dev, err := s.Alloc(4 * n)
	must(t, err)
	must(t, s.Memcpy(dev.Ptr(), in.Ptr(), 4*n))
	must(t, s.Memset(dev.Ptr(), 0, 4*16)) // the first 16 elements become 0
	must(t, s.Launch(k.addOne, qd.Grid1D(4, 64), qd.Address(dev.Ptr()), qd.Uint32(n)))
	must(t, s.Memcpy(out.Ptr(), dev.Ptr(), 4*n))
	must(t, dev.Free(s))
	must(t, s.Synchronize())
	for i := 0; i < n; i++ {
		want := uint32(i) + 1
		if i < 16 {
			want = 1
		}
		if got := u32At(out, i); got != want {
			t.Fatalf("element %d is %d, want %d", i, got, want)
		}
	}
	stats, err := ctx.Stats()
	must(t, err)
	if stats.LiveAllocations != 0 || stats.HostBytesAllocated != 8*n {
		t.Fatalf("stats after the free: %d live blocks, %d host bytes", stats.LiveAllocations, stats.HostBytesAllocated)
	}
	must(t, dev.Close()) // freed already: a no-op
}

func TestDeviceBuffer_FreedTwice_IsInvalidAddress(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	b, err := s.Alloc(64)
	must(t, err)
	must(t, b.Close())
	must(t, b.Close())
	if b.Ptr() != 0 {
		t.Fatal("Ptr after Close is not 0")
	}
	expectIs(t, b.Free(s), qd.ErrInvalidAddress)
}

func TestMemcpy_PastTheEndOfAnAllocation_IsInvalidAddress(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	b, err := s.Alloc(64)
	must(t, err)
	defer b.Close()
	h := hostBuffer(t, ctx, 128)
	expectIs(t, s.Memcpy(b.Ptr(), h.Ptr(), 65), qd.ErrInvalidAddress)
	expectIs(t, s.Memcpy(h.Ptr(), b.Ptr().Add(64), 1), qd.ErrInvalidAddress)
	must(t, s.Memcpy(b.Ptr(), h.Ptr(), 0)) // zero bytes: a no-op
}

func TestDeviceBuffer_CloseAfterItsStreamClosed_SaysToFreeOnAnotherStream(t *testing.T) {
	ctx := newContext(t)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	b, err := s.Alloc(64)
	must(t, err)
	must(t, s.Close())
	expectIs(t, b.Close(), qd.ErrInvalidHandle)
	other := newStream(t, ctx)
	must(t, b.Free(other))
	must(t, b.Close())
}

func TestHostBuffer_Close_IsIdempotentAndEmptiesTheSlice(t *testing.T) {
	ctx := newContext(t)
	b, err := ctx.HostAlloc(32)
	must(t, err)
	if len(b.Bytes()) != 32 || b.Ptr() == 0 {
		t.Fatalf("a 32-byte buffer has %d bytes at %#x", len(b.Bytes()), b.Ptr())
	}
	must(t, b.Close())
	must(t, b.Close())
	if b.Bytes() != nil || b.Ptr() != 0 {
		t.Fatal("a closed buffer still hands out its memory")
	}
	_, err = ctx.HostAlloc(0)
	expectIs(t, err, qd.ErrInvalidArgument)
}
