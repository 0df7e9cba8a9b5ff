package qd_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"qd"
)

// The quick start of README.md (TestReadmeQuickStart_IsExampleQuickStart keeps the two equal):
// two streams ordered by an event, a Go host kernel launched with typed arguments and
// pre-packed, stream-ordered memory through a pinned host buffer, a host callback, and timing.
func Example_quickStart() {
	const n = 1024
	ctx, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU})
	if err != nil {
		panic(err)
	}
	defer ctx.Close() // drains all work, then destroys everything made from ctx

	// A CPU kernel written in Go, called once per block: it loops over its block's threads.
	scale, err := ctx.NewHostKernel("scale", func(b *qd.HostBlock) error {
		data := unsafe.Slice((*float32)(b.Pointer(0)), n) // argument 0: a device address
		factor := b.Float32(1)                            // argument 1: a float32
		first := int(b.BlockIdx[0] * b.BlockDim[0])
		for t := 0; t < int(b.BlockDim[0]); t++ {
			data[first+t] *= factor
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	a, err := ctx.NewStream(qd.StreamOptions{})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := ctx.AcquireStream() // a lease from the context's stream pool
	if err != nil {
		panic(err)
	}
	defer b.Close() // back to the pool

	// Asynchronous copies take pinned host memory, never Go memory: fill it from Go.
	host, err := ctx.HostAlloc(4 * n)
	if err != nil {
		panic(err)
	}
	defer host.Close()
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(host.Bytes()[4*i:], math.Float32bits(float32(i)))
	}

	buf, err := a.Alloc(4 * n) // every call that schedules work names its stream
	if err != nil {
		panic(err)
	}
	start, _ := ctx.NewEvent(true)
	end, _ := ctx.NewEvent(true)
	ready, _ := ctx.NewEvent(false)
	check := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	check(a.Memcpy(buf.Ptr(), host.Ptr(), 4*n))
	check(a.RecordEvent(start))
	check(a.Launch(scale, qd.Grid1D(n/256, 256), qd.Address(buf.Ptr()), qd.Float32(2)))
	check(a.RecordEvent(ready))

	check(b.WaitEvent(ready)) // b waits for a's kernel; the host does not
	halve, err := qd.PackArgs(qd.Address(buf.Ptr()), qd.Float32(0.5))
	check(err)
	defer halve.Close()
	check(b.LaunchPacked(scale, qd.Grid1D(n/256, 256), halve)) // pre-packed: no argument copying
	check(b.LaunchHostFunc(func() { fmt.Println("callback: the kernels have run") }))
	check(b.RecordEvent(end))
	check(b.Memcpy(host.Ptr(), buf.Ptr(), 4*n))
	check(buf.Free(b))

	check(b.Synchronize()) // everything queued on b (and, through the event, on a) is done
	for i := 0; i < n; i++ {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(host.Bytes()[4*i:])); v != float32(i) {
			panic(fmt.Sprintf("element %d is %v", i, v))
		}
	}
	ms, err := qd.Elapsed(start, end)
	check(err)
	fmt.Printf("ok: %d floats through 2 streams (%v)\n", n, ms >= 0)
	// Output:
	// callback: the kernels have run
	// ok: 1024 floats through 2 streams (true)
}

// Errors are *qd.Error values with one sentinel per status, for errors.Is.
func ExampleError() {
	ctx, err := qd.NewContext(qd.ContextOptions{})
	if err != nil {
		panic(err)
	}
	defer ctx.Close()
	_, err = ctx.HostAlloc(0)
	var qe *qd.Error
	if errors.As(err, &qe) {
		fmt.Println(qe.Status, errors.Is(err, qd.ErrInvalidArgument))
	}
	// Output: QD_ERROR_INVALID_ARGUMENT true
}

// WithActiveStream is for code that reads qd's thread-local active stream (for example C code
// called from Go); plain Go code passes streams explicitly.
func ExampleContext_WithActiveStream() {
	ctx, err := qd.NewContext(qd.ContextOptions{})
	if err != nil {
		panic(err)
	}
	defer ctx.Close()
	s, err := ctx.NewStream(qd.StreamOptions{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	err = ctx.WithActiveStream(s, func() error {
		h, err := ctx.ActiveStreamHandle() // same OS thread for the whole scope
		fmt.Println(h == s.Handle())
		return err
	})
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}
