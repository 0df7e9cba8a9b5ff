package qd

// #include "qdgo.h"
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// LaunchConfig is the grid and block of a launch (qd_launch_config). The zero value is one
// block of one thread. Otherwise every dimension must be at least 1 (qd checks it):
// LaunchConfig{Grid: [3]uint32{64, 1, 1}, Block: [3]uint32{256, 1, 1}}, or Grid1D(64, 256).
//
// On the CPU backend a host kernel is called once per block, in row-major block order, and loops
// over the threads of its block itself; each block gets SharedMemBytes of zeroed scratch.
type LaunchConfig struct {
	Grid           [3]uint32
	Block          [3]uint32
	SharedMemBytes uint32
}

// Grid1D is a one-dimensional launch of blocks blocks of threads threads.
func Grid1D(blocks, threads uint32) LaunchConfig {
	return LaunchConfig{Grid: [3]uint32{blocks, 1, 1}, Block: [3]uint32{threads, 1, 1}}
}

// fill writes cfg into dst and returns it, or nil (qd's default) for the zero config.
func (cfg *LaunchConfig) fill(dst *C.qd_launch_config) *C.qd_launch_config {
	if *cfg == (LaunchConfig{}) {
		return nil
	}
	dst.struct_size = C.sizeof_qd_launch_config
	for i := 0; i < 3; i++ {
		dst.grid[i] = C.uint32_t(cfg.Grid[i])
		dst.block[i] = C.uint32_t(cfg.Block[i])
	}
	dst.shared_mem_bytes = C.uint32_t(cfg.SharedMemBytes)
	return dst
}

// LaunchAttrs are the launch attributes of LaunchWith and Task.Attrs (qd_launch_ex; qd.h,
// "Launch attributes"). The zero value asks for nothing. On the CPU backend a cluster runs its
// blocks as any grid, Programmatic is plain stream order, a Priority makes the worker take the
// launch's stream first when it has a choice, and the CompletionEvent completes as the launch
// starts its last block. An attribute the backend or device cannot honour is
// ErrNotSupported, naming it.
type LaunchAttrs struct {
	// Cluster is the blocks per thread-block cluster in x, y, z (each at least 1, dividing the
	// grid); all 0: no clusters.
	Cluster [3]uint32
	// Programmatic is programmatic dependent launch: the kernel may start before the previous
	// kernel of its stream has finished and waits for its grid dependency itself.
	Programmatic bool
	// Priority, when not nil, is this launch's priority (lower is more urgent).
	Priority *int32
	// CompletionEvent, when not nil, is an event of the stream's context that the launch
	// records: it completes once every block has started, possibly long before the kernel ends.
	CompletionEvent *Event
}

// fill writes the attributes given into dst and returns how many there are.
func (a *LaunchAttrs) fill(dst []C.qd_launch_attr) (int, error) {
	n := 0
	if a.Cluster != [3]uint32{} {
		dst[n] = C.qd_launch_attr{kind: C.QD_LAUNCH_ATTR_CLUSTER_DIM}
		for i := 0; i < 3; i++ {
			dst[n].cluster[i] = C.uint32_t(a.Cluster[i])
		}
		n++
	}
	if a.Programmatic {
		dst[n] = C.qd_launch_attr{kind: C.QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION, value: 1}
		n++
	}
	if a.Priority != nil {
		dst[n] = C.qd_launch_attr{kind: C.QD_LAUNCH_ATTR_PRIORITY, value: C.int32_t(*a.Priority)}
		n++
	}
	if a.CompletionEvent != nil {
		eh, err := a.CompletionEvent.handle()
		if err != nil {
			return 0, err
		}
		dst[n] = C.qd_launch_attr{kind: C.QD_LAUNCH_ATTR_COMPLETION_EVENT, event: eh}
		n++
	}
	return n, nil
}

// Launch queues kernel k on the stream with typed arguments (qd_launch): qd.Uint32(n),
// qd.Float32(x), qd.Address(buf.Ptr()), qd.Value(unsafe.Pointer(&s), unsafe.Sizeof(s)), ...
// The values are copied before Launch returns, so the caller may change them at once.
func (s *Stream) Launch(k *Kernel, cfg LaunchConfig, args ...Arg) error {
	return s.launch(k, cfg, nil, args)
}

// LaunchWith is Launch with launch attributes (qd_launch_ex). Errors besides Launch's:
// ErrInvalidArgument for a cluster dimension of 0 or one that does not divide the grid,
// ErrWrongContext for a completion event of another context, ErrNotSupported for an attribute
// the backend or device cannot honour.
func (s *Stream) LaunchWith(k *Kernel, cfg LaunchConfig, attrs LaunchAttrs, args ...Arg) error {
	return s.launch(k, cfg, &attrs, args)
}

func (s *Stream) launch(k *Kernel, cfg LaunchConfig, attrs *LaunchAttrs, args []Arg) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	kh, err := k.handle()
	if err != nil {
		return err
	}
	var list [C.QD_MAX_LAUNCH_ATTRS]C.qd_launch_attr
	nattrs := 0
	if attrs != nil {
		if nattrs, err = attrs.fill(list[:]); err != nil {
			return err
		}
	}
	b := argBlobs.Get().(*argBlob)
	defer argBlobs.Put(b)
	n, err := b.pack(k, args)
	if err != nil {
		return err
	}
	config := cfg.fill(&b.config)
	goHeader := C.uint32_t(0)
	if k.goKernel != nil {
		goHeader = 1
	}
	k.launching()
	err = k.launched(C.gq_launch_blob(h, kh, config, &list[0], C.uint32_t(nattrs), (*C.uint8_t)(unsafe.Pointer(&b.data[0])), &b.sizes[0], C.uint32_t(n), goHeader, s.ctx.mayCapture()))
	runtime.KeepAlive(s)
	runtime.KeepAlive(k)
	if attrs != nil {
		runtime.KeepAlive(attrs.CompletionEvent)
	}
	return err
}

// LaunchPacked queues k with arguments packed once by PackArgs (qd_launch): no Go value is
// copied at the launch.
func (s *Stream) LaunchPacked(k *Kernel, cfg LaunchConfig, p *PackedArgs) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	kh, err := k.handle()
	if err != nil {
		return err
	}
	if p == nil {
		return newError(StatusInvalidArgument, "packed arguments are nil")
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	entries, err := p.entries()
	if err != nil {
		return err
	}
	b := argBlobs.Get().(*argBlob)
	defer argBlobs.Put(b)
	config := cfg.fill(&b.config)
	var lead unsafe.Pointer
	leadSize := uint32(0)
	if k.goFn != 0 {
		if p.n+1 > C.QD_MAX_ARGS {
			return newError(StatusInvalidArgument, "%d arguments: at most %d for a Go host kernel", p.n, C.QD_MAX_ARGS-1)
		}
		leadSize = goKernelHeaderSize(p.n)
		putGoKernelHeader(b.data[:leadSize], k, func(i int) uint32 { return p.sizes[i] }, p.n)
		lead = unsafe.Pointer(&b.data[0])
	}
	k.launching()
	err = k.launched(C.gq_launch_packed(h, kh, config, lead, C.uint32_t(leadSize), entries, C.uint32_t(p.n), s.ctx.mayCapture()))
	runtime.KeepAlive(s)
	runtime.KeepAlive(k)
	return err
}

// Task is one task of LaunchParallel (qd_task): tasks of one Group run in order on one pooled
// stream, different groups run concurrently. Its arguments are Args, or Packed when set.
type Task struct {
	Group  uint32
	Kernel *Kernel
	Config LaunchConfig
	Args   []Arg
	Packed *PackedArgs
	// Attrs are the task's launch attributes (qd_task.attrs), as LaunchWith's.
	Attrs LaunchAttrs
}

// LaunchParallel queues tasks on pooled streams (qd_launch_parallel): every task starts after
// the work already queued on s, and s waits for all of them, without host synchronisation.
// Every task is checked before anything is queued. No tasks is a successful no-op.
//
// The qd_task array points at argument arrays, so it is built in C memory (cgo forbids passing
// C a Go array that holds Go pointers) and freed before LaunchParallel returns.
func (s *Stream) LaunchParallel(tasks []Task) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if len(tasks) == 0 {
		err = resultError(C.gq_launch_parallel(h, nil, 0))
		runtime.KeepAlive(s)
		return err
	}
	if uint64(len(tasks)) > 1<<32-1 {
		return newError(StatusInvalidArgument, "%d tasks: too many", len(tasks))
	}
	// Size the C block: tasks, then each task's qd_arg array, then each task's values.
	var nargs, nbytes uintptr
	var locked []*PackedArgs
	defer func() {
		for _, p := range locked {
			p.mu.RUnlock()
		}
	}()
	for i := range tasks {
		t := &tasks[i]
		if _, err := t.Kernel.handle(); err != nil {
			return taskError(i, err)
		}
		lead := 0
		if t.Kernel.goFn != 0 {
			lead = 1
		}
		if t.Packed != nil {
			if !containsPack(locked, t.Packed) { // a pack used twice is read-locked once
				t.Packed.mu.RLock()
				locked = append(locked, t.Packed)
			}
			if _, err := t.Packed.entries(); err != nil {
				return taskError(i, err)
			}
			if t.Packed.n+lead > C.QD_MAX_ARGS {
				return taskError(i, newError(StatusInvalidArgument, "%d arguments: at most %d for a Go host kernel", t.Packed.n, C.QD_MAX_ARGS-1))
			}
			nargs += uintptr(t.Packed.n + lead)
			if lead == 1 {
				nbytes += uintptr(goKernelHeaderSize(t.Packed.n)+7) &^ 7
			}
			continue
		}
		if err := validateArgs(t.Args, lead); err != nil {
			return taskError(i, err)
		}
		nargs += uintptr(len(t.Args) + lead)
		if lead == 1 {
			nbytes += uintptr(goKernelHeaderSize(len(t.Args))+7) &^ 7
		}
		for _, a := range t.Args {
			nbytes += (uintptr(a.size) + 7) &^ 7
		}
	}
	goTasks := 0
	for i := range tasks {
		if tasks[i].Kernel.goKernel != nil {
			goTasks++
		}
	}
	taskBytes := uintptr(len(tasks)) * C.sizeof_qd_task
	attrBytes := uintptr(len(tasks)) * C.QD_MAX_LAUNCH_ATTRS * C.sizeof_qd_launch_attr
	headerBytes := uintptr(goTasks) * unsafe.Sizeof(unsafe.Pointer(nil))
	mem := C.calloc(1, C.size_t(taskBytes+attrBytes+headerBytes+nargs*C.sizeof_qd_arg+nbytes+8))
	if mem == nil {
		return newError(StatusOutOfMemory, "no memory for %d tasks", len(tasks))
	}
	defer C.free(mem)
	ctasks := unsafe.Slice((*C.qd_task)(mem), len(tasks))
	cattrs := unsafe.Slice((*C.qd_launch_attr)(unsafe.Add(mem, taskBytes)), len(tasks)*C.QD_MAX_LAUNCH_ATTRS)
	headers := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(mem, taskBytes+attrBytes)), goTasks)
	headers = headers[:0]
	argp := unsafe.Add(mem, taskBytes+attrBytes+headerBytes)
	datap := unsafe.Add(argp, nargs*C.sizeof_qd_arg)
	put := func(size uint32) unsafe.Pointer { // the next value slot, 8-byte aligned
		p := datap
		datap = unsafe.Add(datap, (uintptr(size)+7)&^7)
		return p
	}
	for i := range tasks {
		t, ct := &tasks[i], &ctasks[i]
		ct.struct_size = C.sizeof_qd_task
		ct.group = C.uint32_t(t.Group)
		ct.kernel = C.qd_kernel(t.Kernel.h.Load())
		ct.config.struct_size = C.sizeof_qd_launch_config
		cfg := t.Config
		if cfg == (LaunchConfig{}) {
			cfg = Grid1D(1, 1)
		}
		cfg.fill(&ct.config)
		own := cattrs[i*C.QD_MAX_LAUNCH_ATTRS : (i+1)*C.QD_MAX_LAUNCH_ATTRS]
		nattrs, err := t.Attrs.fill(own)
		if err != nil {
			return taskError(i, err)
		}
		if nattrs > 0 {
			ct.attrs = &own[0]
			ct.num_attrs = C.uint32_t(nattrs)
		}
		entries := (*C.qd_arg)(argp)
		n := 0
		add := func(data unsafe.Pointer, size uint32) {
			e := (*C.qd_arg)(unsafe.Add(argp, uintptr(n)*C.sizeof_qd_arg))
			e.data = data
			e.size = C.uint64_t(size)
			n++
		}
		count, size := len(t.Args), func(j int) uint32 { return t.Args[j].size }
		if t.Packed != nil {
			count, size = t.Packed.n, func(j int) uint32 { return t.Packed.sizes[j] }
		}
		if t.Kernel.goFn != 0 {
			hs := goKernelHeaderSize(count)
			slot := put(hs)
			putGoKernelHeader(unsafe.Slice((*byte)(slot), hs), t.Kernel, size, count)
			add(slot, hs)
			headers = append(headers, slot)
		}
		if t.Packed != nil {
			packed := unsafe.Slice((*C.qd_arg)(t.Packed.mem), t.Packed.n)
			for _, e := range packed {
				add(e.data, uint32(e.size))
			}
		} else {
			for _, a := range t.Args {
				slot := put(a.size)
				copyArg(unsafe.Slice((*byte)(slot), a.size), a)
				add(slot, a.size)
			}
		}
		if n > 0 {
			ct.args = entries
		}
		ct.num_args = C.uint32_t(n)
		argp = unsafe.Add(argp, uintptr(n)*C.sizeof_qd_arg)
	}
	var headerp *unsafe.Pointer
	if goTasks > 0 {
		headerp = &headers[0]
	}
	for i := range tasks {
		tasks[i].Kernel.launching()
	}
	r := C.gq_launch_parallel_marking_headers(h, &ctasks[0], C.uint32_t(len(tasks)), headerp, C.uint32_t(goTasks), s.ctx.mayCapture())
	for i := range tasks {
		if k := tasks[i].Kernel; k.goKernel != nil {
			_ = k.launched(C.gq_result{status: r.status, captured: r.captured}) // r.msg is read once, below
		}
	}
	err = nil
	if r.status != 0 {
		err = statusError(r.status, r.msg)
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(tasks)
	return err
}

func containsPack(packs []*PackedArgs, p *PackedArgs) bool {
	for _, q := range packs {
		if q == p {
			return true
		}
	}
	return false
}

func taskError(i int, err error) error {
	if e, ok := err.(*Error); ok {
		return &Error{Status: e.Status, Message: "task " + strconv.Itoa(i) + ": " + e.Message}
	}
	return err
}
