package qd_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"qd"
)

// exampleContext is a CPU context for the examples below; each closes it.
func exampleContext(opts qd.ContextOptions) *qd.Context {
	opts.Backend = qd.BackendCPU
	ctx, err := qd.NewContext(opts)
	if err != nil {
		panic(err)
	}
	return ctx
}

// fill is a Go host kernel: argument 0 is a buffer of uint32, argument 1 the value each of
// its block's threads writes at its own index.
func fill(ctx *qd.Context) *qd.Kernel {
	k, err := ctx.NewHostKernel("fill", func(b *qd.HostBlock) error {
		n := b.GridDim[0] * b.BlockDim[0]
		data := unsafe.Slice((*uint32)(b.Pointer(0)), n)
		for t := uint32(0); t < b.BlockDim[0]; t++ {
			data[b.BlockIdx[0]*b.BlockDim[0]+t] = b.Uint32(1)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return k
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

// Tasks of one group run in order on one pooled stream; groups run concurrently; the stream
// waits for all of them.
func ExampleStream_LaunchParallel() {
	ctx := exampleContext(qd.ContextOptions{})
	defer ctx.Close()
	k := fill(ctx)
	s, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	host, err := ctx.HostAlloc(4 * 8)
	check(err)
	defer host.Close()
	half := host.Ptr().Add(4 * 4)
	check(s.LaunchParallel([]qd.Task{
		{Group: 0, Kernel: k, Config: qd.Grid1D(1, 4), Args: []qd.Arg{qd.Address(host.Ptr()), qd.Uint32(1)}},
		{Group: 1, Kernel: k, Config: qd.Grid1D(1, 4), Args: []qd.Arg{qd.Address(half), qd.Uint32(2)}},
	}))
	check(s.Synchronize())
	for i := 0; i < 8; i++ {
		fmt.Print(binary.LittleEndian.Uint32(host.Bytes()[4*i:]), " ")
	}
	fmt.Println()
	// Output: 1 1 1 1 2 2 2 2
}

// Fork leases streams that start after the parent's work; Join makes the parent wait for them
// and gives them back.
func ExampleStream_Fork() {
	ctx := exampleContext(qd.ContextOptions{})
	defer ctx.Close()
	k := fill(ctx)
	parent, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	host, err := ctx.HostAlloc(4 * 2)
	check(err)
	defer host.Close()
	children, err := parent.Fork(2)
	check(err)
	for i, child := range children {
		check(child.Launch(k, qd.Grid1D(1, 1), qd.Address(host.Ptr().Add(uint64(4*i))), qd.Uint32(uint32(10+i))))
	}
	check(parent.Join(children))
	check(parent.Synchronize())
	fmt.Println(binary.LittleEndian.Uint32(host.Bytes()), binary.LittleEndian.Uint32(host.Bytes()[4:]))
	// Output: 10 11
}

// Work queued while a stream captures is recorded into a graph, which replays it; a host
// callback is captured too and runs on every replay.
func ExampleStream_BeginCapture() {
	ctx := exampleContext(qd.ContextOptions{})
	defer ctx.Close()
	k := fill(ctx)
	s, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	host, err := ctx.HostAlloc(4)
	check(err)
	defer host.Close()
	check(s.BeginCapture())
	check(s.Launch(k, qd.Grid1D(1, 1), qd.Address(host.Ptr()), qd.Uint32(7)))
	check(s.LaunchHostFunc(func() { fmt.Println("replayed") }))
	g, err := s.EndCapture()
	check(err)
	defer g.Close()
	check(g.Launch(s))
	check(g.Launch(s))
	check(s.Synchronize())
	fmt.Println(binary.LittleEndian.Uint32(host.Bytes()))
	// Output:
	// replayed
	// replayed
	// 7
}

// A trace records every operation of the context's streams into a Chrome trace JSON file.
func ExampleContext_StartTrace() {
	dir, err := os.MkdirTemp("", "qd-trace")
	check(err)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "trace.json")
	ctx := exampleContext(qd.ContextOptions{})
	defer ctx.Close()
	s, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	check(ctx.StartTrace(path))
	buf, err := s.Alloc(64)
	check(err)
	check(s.Memset(buf.Ptr(), 0, 64))
	check(buf.Free(s))
	check(ctx.StopTrace()) // waits for the traced work, then writes the file
	info, err := os.Stat(path)
	check(err)
	fmt.Println("trace written:", info.Size() > 0)
	// Output: trace written: true
}

// The validation mode checks that streams touching the same memory are ordered; with
// ValidateFail the offending call returns ErrHazard and queues nothing.
func ExampleContextOptions_validate() {
	ctx := exampleContext(qd.ContextOptions{Validate: true, ValidateFail: true})
	defer ctx.Close()
	a, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	b, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	buf, err := a.Alloc(64) // written by a's allocation
	check(err)
	err = b.Memset(buf.Ptr(), 0, 64) // b is not ordered after a
	fmt.Println("unordered:", errors.Is(err, qd.ErrHazard))
	ready, err := ctx.NewEvent(false)
	check(err)
	check(a.RecordEvent(ready))
	check(b.WaitEvent(ready))
	fmt.Println("ordered:", b.Memset(buf.Ptr(), 0, 64))
	check(b.Synchronize())
	// Output:
	// unordered: true
	// ordered: <nil>
}

// A wait that gives up: SynchronizeContext returns ctx.Err() when ctx is done, while the
// synchronize itself goes on in the background.
func ExampleStream_SynchronizeContext() {
	ctx := exampleContext(qd.ContextOptions{})
	defer ctx.Close()
	s, err := ctx.NewStream(qd.StreamOptions{})
	check(err)
	release := make(chan struct{})
	check(s.LaunchHostFunc(func() { <-release }))
	timeout, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	fmt.Println(s.SynchronizeContext(timeout))
	close(release)
	fmt.Println(s.SynchronizeContext(context.Background()))
	// Output:
	// context deadline exceeded
	// <nil>
}
