// Command exitwithwork is the program of RELIABILITY category 12 (shutdown) for the Go
// binding: it returns from main with live contexts, streams of every kind, events, kernels,
// modules, memory and pending work, including a Go host kernel that is still running and Go host
// callbacks queued behind it. It must exit 0 with nothing on stderr, every time
// (TestProgram_ExitingWithLiveObjectsAndPendingWork_Exits0).
package main

import (
	"fmt"
	"os"
	"runtime"

	"qd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "exitwithwork:", err)
		os.Exit(1)
	}
	// Return with everything alive. Nothing is closed; no finalizer drains a context.
}

func run() error {
	ctx, err := qd.NewContext(qd.ContextOptions{CPUWorkerThreads: 3})
	if err != nil {
		return err
	}
	forever := make(chan struct{}) // never closed: the gate kernel is still running at exit
	gate, err := ctx.NewHostKernel("gate", func(*qd.HostBlock) error { <-forever; return nil })
	if err != nil {
		return err
	}
	add, err := ctx.NewHostKernel("add", func(b *qd.HostBlock) error {
		*(*uint32)(b.Pointer(0)) += b.Uint32(1)
		return nil
	})
	if err != nil {
		return err
	}
	owned, err := ctx.NewStream(qd.StreamOptions{})
	if err != nil {
		return err
	}
	leased, err := ctx.AcquireStream()
	if err != nil {
		return err
	}
	def, err := ctx.DefaultStream()
	if err != nil {
		return err
	}
	host, err := ctx.HostAlloc(64)
	if err != nil {
		return err
	}
	dev, err := owned.Alloc(1 << 20)
	if err != nil {
		return err
	}
	if err := owned.Launch(gate, qd.LaunchConfig{}); err != nil {
		return err
	}
	for i := 0; i < 100; i++ { // queued behind the gate: never runs
		if err := owned.Launch(add, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(1)); err != nil {
			return err
		}
		if err := owned.LaunchHostFunc(func() { runtime.GC() }); err != nil {
			return err
		}
	}
	if err := owned.Memset(dev.Ptr(), 1, dev.Size()); err != nil {
		return err
	}
	e, err := ctx.NewEvent(true)
	if err != nil {
		return err
	}
	if err := owned.RecordEvent(e); err != nil {
		return err
	}
	for _, s := range []*qd.Stream{leased, def} { // these wait for the gated stream
		if err := s.WaitEvent(e); err != nil {
			return err
		}
		if err := s.LaunchHostFunc(func() {}); err != nil {
			return err
		}
	}
	children, err := def.Fork(2)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := c.Launch(add, qd.Grid1D(4, 1), qd.Address(host.Ptr()), qd.Uint32(2)); err != nil {
			return err
		}
	}
	// Work that is running, not just queued, at exit: a busy stream of Go kernels and callbacks.
	busy, err := ctx.NewStream(qd.StreamOptions{})
	if err != nil {
		return err
	}
	started := make(chan struct{})
	if err := busy.LaunchHostFunc(func() { close(started) }); err != nil {
		return err
	}
	for i := 0; i < 1000; i++ {
		if err := busy.Launch(add, qd.LaunchConfig{}, qd.Address(host.Ptr().Add(8)), qd.Uint32(1)); err != nil {
			return err
		}
	}
	<-started
	// Garbage: streams, events and kernels left to their finalizers while the program exits.
	for i := 0; i < 50; i++ {
		s, err := ctx.NewStream(qd.StreamOptions{})
		if err != nil {
			return err
		}
		if err := s.LaunchHostFunc(func() {}); err != nil {
			return err
		}
		if _, err := ctx.NewEvent(false); err != nil {
			return err
		}
	}
	runtime.GC()
	// A second context, with C kernels from the test module when one is given.
	other, err := qd.NewContext(qd.ContextOptions{})
	if err != nil {
		return err
	}
	if path := os.Getenv("QD_TEST_CPU_MODULE"); path != "" {
		m, err := other.LoadModule(path)
		if err != nil {
			return err
		}
		spin, err := m.Kernel("qd_test_spin")
		if err != nil {
			return err
		}
		s, err := other.AcquireStream()
		if err != nil {
			return err
		}
		for i := 0; i < 10; i++ {
			if err := s.Launch(spin, qd.LaunchConfig{}, qd.Uint64(1000)); err != nil {
				return err
			}
		}
	}
	return nil
}
