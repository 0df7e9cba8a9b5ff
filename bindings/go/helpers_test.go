package qd_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"qd"
)

// newContext is a CPU context closed at the end of the test. Four workers, so that a test that
// holds one or two of them in a gate kernel never starves the streams it waits for.
func newContext(t testing.TB, opts ...func(*qd.ContextOptions)) *qd.Context {
	t.Helper()
	o := qd.ContextOptions{Backend: qd.BackendCPU, CPUWorkerThreads: 4}
	for _, f := range opts {
		f(&o)
	}
	ctx, err := qd.NewContext(o)
	if err != nil {
		t.Fatalf("NewContext: %v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("Context.Close: %v", err)
		}
	})
	return ctx
}

// inSourceTree skips a test that reads the package's sources (README, abi/qd-api.json) when
// the test binary runs outside bindings/go, e.g. built with go test -c and copied elsewhere;
// go test always runs it in bindings/go.
func inSourceTree(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("example_test.go"); err != nil {
		t.Skip("not run from bindings/go (a copied test binary): the package's sources are not here")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func expectIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got %v, want an error matching %v", err, target)
	}
	var qe *qd.Error
	if !errors.As(err, &qe) || qe.Message == "" {
		t.Fatalf("%v: want a *qd.Error with a message", err)
	}
}

func newStream(t testing.TB, ctx *qd.Context) *qd.Stream {
	t.Helper()
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newEvent(t testing.TB, ctx *qd.Context, timing bool) *qd.Event {
	t.Helper()
	e, err := ctx.NewEvent(timing)
	must(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// hostBuffer is a zeroed pinned buffer freed at the end of the test (after the context's
// Close has drained the work, since cleanups run in reverse order).
func hostBuffer(t testing.TB, ctx *qd.Context, bytes uint64) *qd.HostBuffer {
	t.Helper()
	b, err := ctx.HostAlloc(bytes)
	must(t, err)
	for i := range b.Bytes() {
		b.Bytes()[i] = 0
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func u32At(b *qd.HostBuffer, i int) uint32 { return binary.LittleEndian.Uint32(b.Bytes()[4*i:]) }

func putU32(b *qd.HostBuffer, i int, v uint32) { binary.LittleEndian.PutUint32(b.Bytes()[4*i:], v) }

// cpuModulePath is the CPU test module (tests/cpu_module): $QD_TEST_CPU_MODULE, else
// $QD_BUILD_DIR/tests/qd_test_kernels.so, else <repo>/build/tests/qd_test_kernels.so.
func cpuModulePath(t testing.TB) string {
	t.Helper()
	path := os.Getenv("QD_TEST_CPU_MODULE")
	if path == "" {
		build := os.Getenv("QD_BUILD_DIR")
		if build == "" {
			build = filepath.Join("..", "..", "build")
		}
		path = filepath.Join(build, "tests", "qd_test_kernels.so")
	}
	abs, err := filepath.Abs(path)
	must(t, err)
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no CPU test module at %s: build it (ninja -C <build>) and set QD_TEST_CPU_MODULE or QD_BUILD_DIR, or run bindings/go/test", abs)
	}
	return abs
}

// testKernels are the kernels of the CPU test module (tests/support/test_kernels.h).
type testKernels struct {
	noop, addOne, writeValue, spin, addValue, appendLog, checkBlob, fault *qd.Kernel
}

func loadKernels(t testing.TB, ctx *qd.Context) testKernels {
	t.Helper()
	m, err := ctx.LoadModule(cpuModulePath(t))
	must(t, err)
	get := func(name string) *qd.Kernel {
		k, err := m.Kernel(name)
		must(t, err)
		return k
	}
	return testKernels{
		noop: get("qd_test_noop"), addOne: get("qd_test_add_one"),
		writeValue: get("qd_test_write_value"), spin: get("qd_test_spin"),
		addValue: get("qd_test_add_value"), appendLog: get("qd_test_append_log"),
		checkBlob: get("qd_test_check_blob"), fault: get("qd_test_fault"),
	}
}

// gate is a Go host kernel that holds its stream until open is called: the tests use it to
// keep work pending for as long as they need, without sleeping.
type gate struct {
	kernel *qd.Kernel
	ch     chan struct{}
	opened bool
}

func newGate(t testing.TB, ctx *qd.Context) *gate {
	t.Helper()
	g := &gate{ch: make(chan struct{})}
	k, err := ctx.NewHostKernel("gate", func(*qd.HostBlock) error { <-g.ch; return nil })
	must(t, err)
	g.kernel = k
	// Opened before the context's Close drains (cleanups run last-registered first).
	t.Cleanup(g.open)
	return g
}

func (g *gate) hold(t testing.TB, s *qd.Stream) {
	t.Helper()
	must(t, s.Launch(g.kernel, qd.LaunchConfig{}))
}

func (g *gate) open() {
	if !g.opened {
		g.opened = true
		close(g.ch)
	}
}
