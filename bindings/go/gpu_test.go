package qd_test

//go:generate nvcc -ptx -arch=compute_75 testdata/gpu_kernels.cu -o testdata/gpu_kernels.ptx

import (
	_ "embed"
	"os"
	"testing"
	"time"

	"qd"
)

// gpuKernelsPTX is testdata/gpu_kernels.ptx, embedded so that a test binary built here runs on
// a GPU machine without nvcc. $QD_TEST_PTX names another image with the same kernels.
//
//go:embed testdata/gpu_kernels.ptx
var gpuKernelsPTX []byte

// cudaContext is a CUDA context, or a visible skip with the reason there is none.
func cudaContext(t *testing.T) *qd.Context {
	t.Helper()
	n, err := qd.DeviceCount(qd.BackendCUDA)
	if err != nil {
		t.Skipf("no qd CUDA backend: %v", err)
	}
	if n == 0 {
		t.Skip("no CUDA device")
	}
	return newContext(t, func(o *qd.ContextOptions) { o.Backend = qd.BackendCUDA; o.CPUWorkerThreads = 0 })
}

func gpuKernels(t *testing.T, ctx *qd.Context) (addOne, spin *qd.Kernel) {
	t.Helper()
	image := gpuKernelsPTX
	if path := os.Getenv("QD_TEST_PTX"); path != "" {
		var err error
		image, err = os.ReadFile(path)
		must(t, err)
	}
	m, err := ctx.LoadModuleImage(image)
	must(t, err)
	t.Cleanup(func() { _ = m.Close() })
	addOne, err = m.Kernel("qd_test_add_one")
	must(t, err)
	spin, err = m.Kernel("qd_test_spin")
	must(t, err)
	return addOne, spin
}

func TestGPU_PTXKernel_RunsInStreamOrderWithTimedEvents(t *testing.T) {
	ctx := cudaContext(t)
	addOne, spin := gpuKernels(t, ctx)
	s := newStream(t, ctx)
	const n = 1 << 16
	host := hostBuffer(t, ctx, 4*n)
	for i := 0; i < n; i++ {
		putU32(host, i, uint32(i))
	}
	dev, err := s.Alloc(4 * n)
	must(t, err)
	start, end := newEvent(t, ctx, true), newEvent(t, ctx, true)
	must(t, s.Memcpy(dev.Ptr(), host.Ptr(), 4*n))
	must(t, s.RecordEvent(start))
	must(t, s.Launch(spin, qd.LaunchConfig{}, qd.Uint64(2000))) // at least 2 ms on the GPU's timer
	must(t, s.RecordEvent(end))
	for i := 0; i < 2; i++ {
		must(t, s.Launch(addOne, qd.Grid1D(n/256, 256), qd.Address(dev.Ptr()), qd.Uint32(n)))
	}
	must(t, s.Memcpy(host.Ptr(), dev.Ptr(), 4*n))
	must(t, dev.Free(s))
	must(t, s.Synchronize())
	for i := 0; i < n; i++ {
		if got := u32At(host, i); got != uint32(i+2) {
			t.Fatalf("element %d is %d, want %d", i, got, i+2)
		}
	}
	ms, err := qd.Elapsed(start, end)
	must(t, err)
	if ms < 1900*time.Microsecond {
		t.Fatalf("elapsed %v across a kernel that spins 2 ms", ms)
	}
}

func TestGPU_ForkJoinAndParallelLaunch_OrderPTXKernels(t *testing.T) {
	ctx := cudaContext(t)
	addOne, _ := gpuKernels(t, ctx)
	s := newStream(t, ctx)
	const n = 4096
	host := hostBuffer(t, ctx, 4*n)
	dev, err := s.Alloc(4 * n)
	must(t, err)
	must(t, s.Memset(dev.Ptr(), 0, 4*n))
	children, err := s.Fork(2)
	must(t, err)
	for i, c := range children { // each child adds one to its half
		must(t, c.Launch(addOne, qd.Grid1D(8, 128), qd.Address(dev.Ptr().Add(uint64(4*i*n/2))), qd.Uint32(n/2)))
	}
	must(t, s.Join(children))
	var tasks []qd.Task
	for g := 0; g < 4; g++ { // four groups of three launches over the whole buffer
		for r := 0; r < 3; r++ {
			tasks = append(tasks, qd.Task{Group: uint32(g), Kernel: addOne, Config: qd.Grid1D(16, 256),
				Args: []qd.Arg{qd.Address(dev.Ptr().Add(uint64(4 * g * n / 4))), qd.Uint32(n / 4)}})
		}
	}
	must(t, s.LaunchParallel(tasks))
	must(t, s.Memcpy(host.Ptr(), dev.Ptr(), 4*n))
	must(t, dev.Free(s))
	must(t, s.Synchronize())
	for i := 0; i < n; i++ {
		if got := u32At(host, i); got != 4 {
			t.Fatalf("element %d is %d, want 4", i, got)
		}
	}
}

func TestGPU_ImportedNativeStream_IsBorrowedAndNeverDestroyed(t *testing.T) {
	ctx := cudaContext(t)
	addOne, _ := gpuKernels(t, ctx)
	owner := newStream(t, ctx)
	native, err := owner.NativeHandle()
	must(t, err)
	if native == 0 {
		t.Fatal("a CUDA stream has native handle 0")
	}
	borrowed, err := ctx.ImportStream(native)
	must(t, err)
	if borrowed.Kind() != qd.StreamBorrowed {
		t.Fatalf("an imported stream is %v", borrowed.Kind())
	}
	host := hostBuffer(t, ctx, 4*256)
	must(t, borrowed.Launch(addOne, qd.Grid1D(1, 256), qd.Address(host.Ptr()), qd.Uint32(256)))
	must(t, borrowed.Close()) // forgets the handle; the native stream stays
	must(t, owner.Launch(addOne, qd.Grid1D(1, 256), qd.Address(host.Ptr()), qd.Uint32(256)))
	must(t, owner.Synchronize())
	if got := u32At(host, 255); got != 2 {
		t.Fatalf("element 255 is %d, want 2", got)
	}
}

func TestGPU_GoHostKernel_IsNotSupportedOnCUDA(t *testing.T) {
	ctx := cudaContext(t)
	_, err := ctx.NewHostKernel("go", func(*qd.HostBlock) error { return nil })
	expectIs(t, err, qd.ErrNotSupported)
}
