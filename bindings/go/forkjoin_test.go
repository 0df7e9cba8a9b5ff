package qd_test

import (
	"testing"

	"qd"
)

func TestForkAndJoin_ChildrenWaitForTheParentAndTheParentWaitsForThem(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	parent := newStream(t, ctx)
	g := newGate(t, ctx)
	const n = 3
	host := hostBuffer(t, ctx, 4*(2+n)) // [0] parent's value, [1] the parent's sum after the join, [2..] children
	g.hold(t, parent)
	must(t, parent.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()), qd.Uint32(100)))
	children, err := parent.Fork(n)
	must(t, err)
	for i, c := range children {
		if c.Kind() != qd.StreamLeased {
			t.Fatalf("child %d is %v", i, c.Kind())
		}
		must(t, c.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(host.Ptr().Add(uint64(8+4*i))), qd.Address(host.Ptr()), qd.Uint32(uint32(i+1))))
	}
	must(t, parent.Join(children))
	// After the join the parent sees the children's results: copy child 2's value to [1].
	must(t, parent.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(host.Ptr().Add(4)), qd.Address(host.Ptr().Add(8+4*(n-1))), qd.Uint32(0)))
	g.open()
	must(t, parent.Synchronize())
	for i := 0; i < n; i++ {
		if got := u32At(host, 2+i); got != uint32(101+i) {
			t.Fatalf("child %d computed %d: it did not wait for the parent (want %d)", i, got, 101+i)
		}
	}
	if got := u32At(host, 1); got != 100+n {
		t.Fatalf("the parent read %d after the join, want %d", got, 100+n)
	}
	for _, c := range children {
		must(t, c.Close()) // released by the join already: a no-op
	}
	stats, err := ctx.Stats()
	must(t, err)
	if stats.StreamPoolLeased != 0 {
		t.Fatalf("%d leases held after the join", stats.StreamPoolLeased)
	}
}

func TestJoin_WithAnInvalidChild_ChangesNothing(t *testing.T) {
	ctx := newContext(t)
	parent := newStream(t, ctx)
	children, err := parent.Fork(2)
	must(t, err)
	owned := newStream(t, ctx)
	expectIs(t, parent.Join(append(children[:1:1], owned)), qd.ErrInvalidOperation)
	expectIs(t, parent.Join([]*qd.Stream{children[0], children[0]}), qd.ErrInvalidArgument)
	expectIs(t, parent.Join(nil), qd.ErrInvalidArgument)
	_, err = parent.Fork(0)
	expectIs(t, err, qd.ErrInvalidArgument)
	must(t, parent.Join(children)) // both children are still leased and joinable
}

func TestFork_BeyondThePool_IsPoolExhaustedAndLeasesNothing(t *testing.T) {
	ctx := newContext(t, func(o *qd.ContextOptions) { o.StreamPoolSize = 2 })
	parent := newStream(t, ctx)
	_, err := parent.Fork(3)
	expectIs(t, err, qd.ErrPoolExhausted)
	stats, err := ctx.Stats()
	must(t, err)
	if stats.StreamPoolLeased != 0 {
		t.Fatalf("%d leases held after a failed fork", stats.StreamPoolLeased)
	}
}

func TestLaunchParallel_GroupsRunInOrderAfterTheStreamAndTheStreamWaits(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	g := newGate(t, ctx)
	const groups, perGroup = 4, 5
	logs := hostBuffer(t, ctx, 4*groups*(1+perGroup)) // one log per group: [count, values...]
	flag := hostBuffer(t, ctx, 8)                     // [0] written before, [1] copied after
	logAt := func(gr int) qd.DevicePtr { return logs.Ptr().Add(uint64(4 * gr * (1 + perGroup))) }
	packed, err := qd.PackArgs(qd.Address(logAt(groups-1)), qd.Uint32(99))
	must(t, err)
	defer packed.Close()
	g.hold(t, s)
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(flag.Ptr()), qd.Uint32(7)))
	var tasks []qd.Task
	for i := 0; i < perGroup-1; i++ {
		for gr := 0; gr < groups; gr++ {
			tasks = append(tasks, qd.Task{Group: uint32(gr), Kernel: k.appendLog,
				Args: []qd.Arg{qd.Address(logAt(gr)), qd.Uint32(uint32(10*gr + i))}})
		}
	}
	tasks = append(tasks, qd.Task{Group: groups - 1, Kernel: k.appendLog, Packed: packed})
	// Task 0's group also copies the flag written before the launch: it must see 7.
	tasks = append(tasks, qd.Task{Group: 0, Kernel: k.addValue, Config: qd.Grid1D(1, 1),
		Args: []qd.Arg{qd.Address(flag.Ptr().Add(4)), qd.Address(flag.Ptr()), qd.Uint32(1)}})
	must(t, s.LaunchParallel(tasks))
	// The stream waits for every task: this reads group 1's count after it is final.
	must(t, s.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(flag.Ptr()), qd.Address(logAt(1)), qd.Uint32(0)))
	g.open()
	must(t, s.Synchronize())
	for gr := 0; gr < groups; gr++ {
		base := gr * (1 + perGroup)
		want := perGroup - 1
		if gr == groups-1 {
			want = perGroup
		}
		if got := int(u32At(logs, base)); got != want {
			t.Fatalf("group %d logged %d tasks, want %d", gr, got, want)
		}
		for i := 0; i < perGroup-1; i++ {
			if got := u32At(logs, base+1+i); got != uint32(10*gr+i) {
				t.Fatalf("group %d entry %d is %d: tasks of a group ran out of order", gr, i, got)
			}
		}
	}
	if got := u32At(logs, (groups-1)*(1+perGroup)+perGroup); got != 99 {
		t.Fatalf("the packed task logged %d, want 99", got)
	}
	if got := u32At(flag, 1); got != 8 {
		t.Fatalf("a task read %d: it started before the stream's earlier work (want 8)", got)
	}
	if got := u32At(flag, 0); got != perGroup-1 {
		t.Fatalf("the stream read %d after the parallel launch: it did not wait (want %d)", got, perGroup-1)
	}
	must(t, s.LaunchParallel(nil)) // no tasks: a no-op
}

func TestLaunchParallel_OfGoHostKernels_PassesEachTaskItsArguments(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	out := hostBuffer(t, ctx, 4*8)
	k, err := ctx.NewHostKernel("store", func(b *qd.HostBlock) error {
		dst := (*uint32)(b.Pointer(0))
		*dst = b.Uint32(1) * 3
		return nil
	})
	must(t, err)
	var tasks []qd.Task
	for i := 0; i < 8; i++ {
		tasks = append(tasks, qd.Task{Group: uint32(i % 3), Kernel: k,
			Args: []qd.Arg{qd.Address(out.Ptr().Add(uint64(4 * i))), qd.Uint32(uint32(i + 1))}})
	}
	must(t, s.LaunchParallel(tasks))
	must(t, s.Synchronize())
	for i := 0; i < 8; i++ {
		if got := u32At(out, i); got != uint32(3*(i+1)) {
			t.Fatalf("task %d stored %d, want %d", i, got, 3*(i+1))
		}
	}
}
