package qd_test

import (
	"fmt"
	"sync"
	"testing"

	"qd"
)

// 16 goroutines share one context: each makes its own streams (owned and leased), events,
// memory and launches, and orders its work against a stream shared by all through events.
func TestSixteenGoroutines_SharingOneContext_EachGetTheirOwnResults(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	shared := newStream(t, ctx)
	const goroutines, rounds, n = 16, 20, 64
	counter := hostBuffer(t, ctx, 4)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			if err := worker(ctx, k, shared, counter, g, rounds, n); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", g, err)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	must(t, shared.Synchronize())
	// Every goroutine's increments went through the one shared stream, in order.
	if got := u32At(counter, 0); got != goroutines*rounds {
		t.Fatalf("the shared counter is %d, want %d", got, goroutines*rounds)
	}
	stats, err := ctx.Stats()
	must(t, err)
	if stats.StreamPoolLeased != 0 || stats.LiveAllocations != 0 {
		t.Fatalf("left behind: %d leases, %d blocks", stats.StreamPoolLeased, stats.LiveAllocations)
	}
}

func worker(ctx *qd.Context, k testKernels, shared *qd.Stream, counter *qd.HostBuffer, g, rounds, n int) error {
	var s *qd.Stream
	var err error
	if g%2 == 0 {
		s, err = ctx.NewStream(qd.StreamOptions{})
	} else {
		s, err = ctx.AcquireStream()
	}
	if err != nil {
		return err
	}
	defer s.Close()
	host, err := ctx.HostAlloc(uint64(4 * n))
	if err != nil {
		return err
	}
	defer host.Close()
	e, err := ctx.NewEvent(false)
	if err != nil {
		return err
	}
	defer e.Close()
	dev, err := s.Alloc(uint64(4 * n))
	if err != nil {
		return err
	}
	if err := s.Memset(dev.Ptr(), 0, uint64(4*n)); err != nil {
		return err
	}
	for r := 0; r < rounds; r++ {
		if err := s.Launch(k.addOne, qd.Grid1D(2, 32), qd.Address(dev.Ptr()), qd.Uint32(uint32(n))); err != nil {
			return err
		}
		// The shared stream increments the counter after this goroutine's launch.
		if err := s.RecordEvent(e); err != nil {
			return err
		}
		if err := shared.WaitEvent(e); err != nil {
			return err
		}
		if err := shared.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(counter.Ptr()), qd.Address(counter.Ptr()), qd.Uint32(1)); err != nil {
			return err
		}
	}
	if err := s.Memcpy(host.Ptr(), dev.Ptr(), uint64(4*n)); err != nil {
		return err
	}
	if err := dev.Free(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if got := u32At(host, i); got != uint32(rounds) {
			return fmt.Errorf("element %d is %d, want %d", i, got, rounds)
		}
	}
	return nil
}
