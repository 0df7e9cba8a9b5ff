package qd_test

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"qd"
)

// params is a struct argument: fixed-size fields, laid out as C lays them out.
type params struct {
	Scale  float32
	Offset int32
	Count  uint64
}

func TestLaunch_PassesTypedArgumentsToTheKernel(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	out := hostBuffer(t, ctx, 64)
	k, err := ctx.NewHostKernel("echo", func(b *qd.HostBlock) error {
		dst := unsafe.Slice((*byte)(b.Pointer(0)), 64)
		binary.LittleEndian.PutUint32(dst[0:], uint32(b.Arg(1)[0]))                                        // uint8
		binary.LittleEndian.PutUint32(dst[4:], uint32(int32(int16(binary.LittleEndian.Uint16(b.Arg(2)))))) // int16
		binary.LittleEndian.PutUint32(dst[8:], b.Uint32(3))
		binary.LittleEndian.PutUint64(dst[16:], uint64(b.Int64(4)))
		binary.LittleEndian.PutUint32(dst[24:], math.Float32bits(b.Float32(5)))
		binary.LittleEndian.PutUint64(dst[32:], math.Float64bits(b.Float64(6)))
		p := (*params)(unsafe.Pointer(&b.Arg(7)[0]))
		binary.LittleEndian.PutUint32(dst[40:], math.Float32bits(p.Scale))
		binary.LittleEndian.PutUint32(dst[44:], uint32(p.Offset))
		binary.LittleEndian.PutUint64(dst[48:], p.Count)
		binary.LittleEndian.PutUint32(dst[56:], uint32(b.NumArgs()))
		return nil
	})
	must(t, err)
	in := params{Scale: 1.5, Offset: -7, Count: 1 << 40}
	must(t, s.Launch(k, qd.LaunchConfig{}, qd.Address(out.Ptr()), qd.Uint8(200), qd.Int16(-300),
		qd.Uint32(0xdeadbeef), qd.Int64(-1<<50), qd.Float32(2.5), qd.Float64(math.Pi),
		qd.Value(unsafe.Pointer(&in), unsafe.Sizeof(in))))
	must(t, s.Synchronize())
	b := out.Bytes()
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != 200 || int32(le.Uint32(b[4:])) != -300 || le.Uint32(b[8:]) != 0xdeadbeef ||
		int64(le.Uint64(b[16:])) != -1<<50 || math.Float32frombits(le.Uint32(b[24:])) != 2.5 ||
		math.Float64frombits(le.Uint64(b[32:])) != math.Pi || math.Float32frombits(le.Uint32(b[40:])) != 1.5 ||
		int32(le.Uint32(b[44:])) != -7 || le.Uint64(b[48:]) != 1<<40 || le.Uint32(b[56:]) != 8 {
		t.Fatalf("the kernel saw other values: % x", b)
	}
}

func TestLaunch_OfAModuleKernel_RunsEveryBlock(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	const n = 1000
	host := hostBuffer(t, ctx, 4*n)
	dev, err := s.Alloc(4 * n)
	must(t, err)
	must(t, s.Memset(dev.Ptr(), 0, 4*n))
	for i := 0; i < 3; i++ {
		must(t, s.Launch(k.addOne, qd.Grid1D(8, 32), qd.Address(dev.Ptr()), qd.Uint32(n)))
	}
	must(t, s.Memcpy(host.Ptr(), dev.Ptr(), 4*n))
	must(t, dev.Close())
	must(t, s.Synchronize())
	for i := 0; i < n; i++ {
		if got := u32At(host, i); got != 3 {
			t.Fatalf("element %d is %d, want 3", i, got)
		}
	}
}

// fnv1a is the test module's checksum of a qd_test_check_blob argument (test_kernels.h).
func fnv1a(b []byte) uint64 {
	h := uint64(1469598103934665603)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// qd copies argument values before Launch returns: the caller may overwrite them at once, even
// while the kernel is still queued behind other work.
func TestLaunch_ArgumentsMayBeOverwrittenAsSoonAsItReturns(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	g := newGate(t, ctx)
	const launches = 64
	out := hostBuffer(t, ctx, 8*launches)
	g.hold(t, s) // every launch below stays queued until all of them were made
	blob := make([]byte, 256)
	want := make([]uint64, launches)
	for i := 0; i < launches; i++ {
		for j := range blob {
			blob[j] = byte(i*7 + j)
		}
		want[i] = fnv1a(blob) ^ uint64(i)
		must(t, s.Launch(k.checkBlob, qd.LaunchConfig{}, qd.Address(out.Ptr()), qd.Uint32(uint32(i)), qd.Bytes(blob)))
	}
	for j := range blob {
		blob[j] = 0xff // overwritten before any kernel ran
	}
	g.open()
	must(t, s.Synchronize())
	for i := 0; i < launches; i++ {
		if got := binary.LittleEndian.Uint64(out.Bytes()[8*i:]); got != want[i] {
			t.Fatalf("launch %d saw other argument bytes (checksum %#x, want %#x)", i, got, want[i])
		}
	}
}

func TestLaunchPacked_ReusesArgumentsPackedOnce(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	const n = 64
	host := hostBuffer(t, ctx, 4*n)
	packed, err := qd.PackArgs(qd.Address(host.Ptr()), qd.Uint32(n))
	must(t, err)
	goKernel, err := ctx.NewHostKernel("add_two", func(b *qd.HostBlock) error {
		data := unsafe.Slice((*int32)(b.Pointer(0)), b.Uint32(1))
		for i := range data {
			data[i] += 2
		}
		return nil
	})
	must(t, err)
	for i := 0; i < 5; i++ {
		must(t, s.LaunchPacked(k.addOne, qd.LaunchConfig{}, packed))
		must(t, s.LaunchPacked(goKernel, qd.LaunchConfig{}, packed))
	}
	must(t, s.Synchronize())
	for i := 0; i < n; i++ {
		if got := u32At(host, i); got != 15 {
			t.Fatalf("element %d is %d, want 15", i, got)
		}
	}
	must(t, packed.Close())
	must(t, packed.Close())
	expectIs(t, s.LaunchPacked(k.addOne, qd.LaunchConfig{}, packed), qd.ErrInvalidArgument)
}

func TestLaunch_BadInput_GetsAClearErrorAndQueuesNothing(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	goKernel, err := ctx.NewHostKernel("noop", func(*qd.HostBlock) error { return nil })
	must(t, err)
	many := make([]qd.Arg, qd.MaxArgs+1)
	for i := range many {
		many[i] = qd.Uint32(1)
	}
	cases := map[string]struct {
		err  error
		call func() error
	}{
		"zero Arg":            {qd.ErrInvalidArgument, func() error { return s.Launch(k.noop, qd.LaunchConfig{}, qd.Arg{}) }},
		"empty Bytes":         {qd.ErrInvalidArgument, func() error { return s.Launch(k.noop, qd.LaunchConfig{}, qd.Bytes(nil)) }},
		"nil Value":           {qd.ErrInvalidArgument, func() error { return s.Launch(k.noop, qd.LaunchConfig{}, qd.Value(nil, 8)) }},
		"65 arguments":        {qd.ErrInvalidArgument, func() error { return s.Launch(k.noop, qd.LaunchConfig{}, many...) }},
		"64 for a Go kernel":  {qd.ErrInvalidArgument, func() error { return s.Launch(goKernel, qd.LaunchConfig{}, many[:qd.MaxArgs]...) }},
		"5000 argument bytes": {qd.ErrOverflow, func() error { return s.Launch(k.noop, qd.LaunchConfig{}, qd.Bytes(make([]byte, 5000))) }},
		"nil kernel":          {qd.ErrInvalidHandle, func() error { return s.Launch(nil, qd.LaunchConfig{}) }},
		"zero grid dimension": {qd.ErrInvalidArgument, func() error { return s.Launch(k.noop, qd.LaunchConfig{Block: [3]uint32{1, 1, 1}}) }},
		"grid overflow": {qd.ErrOverflow, func() error {
			return s.Launch(k.noop, qd.LaunchConfig{Grid: [3]uint32{1 << 20, 1 << 20, 1}, Block: [3]uint32{1, 1, 1}})
		}},
		"pack of 65": {qd.ErrInvalidArgument, func() error { _, err := qd.PackArgs(many...); return err }},
		"a 4 GiB Value in a task": {qd.ErrOverflow, func() error {
			var x byte
			return s.LaunchParallel([]qd.Task{{Kernel: k.noop, Args: []qd.Arg{qd.Value(unsafe.Pointer(&x), 1<<32-1)}}})
		}},
		"nil pack":        {qd.ErrInvalidArgument, func() error { return s.LaunchPacked(k.noop, qd.LaunchConfig{}, nil) }},
		"nil task kernel": {qd.ErrInvalidHandle, func() error { return s.LaunchParallel([]qd.Task{{Group: 0}}) }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { expectIs(t, c.call(), c.err) })
	}
	must(t, s.Synchronize())
	stats, err := ctx.Stats()
	must(t, err)
	if stats.StreamPoolLeased != 0 {
		t.Fatalf("%d leases held after failed launches", stats.StreamPoolLeased)
	}
}
