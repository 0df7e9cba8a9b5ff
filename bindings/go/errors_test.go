package qd_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"qd"
)

type apiDescription struct {
	Statuses []struct {
		Name        string `json:"name"`
		Value       int32  `json:"value"`
		Description string `json:"description"`
	} `json:"statuses"`
	Functions []struct {
		Name string `json:"name"`
	} `json:"functions"`
}

func readAPI(t *testing.T) apiDescription {
	t.Helper()
	inSourceTree(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "abi", "qd-api.json"))
	must(t, err)
	var api apiDescription
	must(t, json.Unmarshal(raw, &api))
	if len(api.Statuses) == 0 || len(api.Functions) == 0 {
		t.Fatal("abi/qd-api.json lists no statuses or functions")
	}
	return api
}

// sentinels lists every sentinel of status_gen.go; the test below fails if one is missing.
var sentinels = map[qd.Status]error{
	qd.StatusNotReady: qd.ErrNotReady, qd.StatusInvalidArgument: qd.ErrInvalidArgument,
	qd.StatusInvalidHandle: qd.ErrInvalidHandle, qd.StatusWrongContext: qd.ErrWrongContext,
	qd.StatusInvalidOperation: qd.ErrInvalidOperation, qd.StatusOutOfMemory: qd.ErrOutOfMemory,
	qd.StatusOverflow: qd.ErrOverflow, qd.StatusInvalidAddress: qd.ErrInvalidAddress,
	qd.StatusPoolExhausted: qd.ErrPoolExhausted, qd.StatusNotFound: qd.ErrNotFound,
	qd.StatusInvalidImage: qd.ErrInvalidImage, qd.StatusTimingDisabled: qd.ErrTimingDisabled,
	qd.StatusNotRecorded: qd.ErrNotRecorded, qd.StatusNotSupported: qd.ErrNotSupported,
	qd.StatusBackendUnavailable: qd.ErrBackendUnavailable, qd.StatusDeviceLost: qd.ErrDeviceLost,
	qd.StatusForked: qd.ErrForked, qd.StatusLaunchFailed: qd.ErrLaunchFailed,
	qd.StatusInternal: qd.ErrInternal, qd.StatusHazard: qd.ErrHazard,
}

// status_gen.go is the description's statuses (abi/gen --check keeps it so); the library under
// test must name each status as the package does, and every error status has its sentinel.
func TestStatuses_AreNamedAsLibqdNamesThem_AndEveryErrorHasItsSentinel(t *testing.T) {
	api := readAPI(t)
	errorStatuses := 0
	for _, s := range api.Statuses {
		st := qd.Status(s.Value)
		if got := qd.StatusName(st); got != st.Name() || got != s.Name {
			t.Errorf("status %d: libqd names it %q, package qd %q, qd-api.json %q", s.Value, got, st.Name(), s.Name)
		}
		if s.Value == 0 {
			continue
		}
		errorStatuses++
		sentinel, ok := sentinels[st]
		if !ok {
			t.Errorf("%s has no sentinel in this test's list", s.Name)
			continue
		}
		if e, ok := sentinel.(*qd.Error); !ok || e.Status != st {
			t.Errorf("sentinel of %s is %v", s.Name, sentinel)
		}
	}
	if errorStatuses != len(sentinels) {
		t.Errorf("qd-api.json has %d non-success statuses, the package %d sentinels", errorStatuses, len(sentinels))
	}
}

// qdgo_gen.h wraps every function, so it says nothing about what the package binds: a function
// is bound when Go code calls its wrapper (C.gq_name) or the function itself, or a hand-written
// wrapper of qdgo.h does.
func TestEveryExportedFunction_IsCalledByThePackage(t *testing.T) {
	api := readAPI(t)
	var src strings.Builder
	files, err := filepath.Glob("*.[gh]*")
	must(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "qdgo_gen.h" {
			continue
		}
		b, err := os.ReadFile(f)
		must(t, err)
		src.Write(b)
	}
	for _, fn := range api.Functions {
		wrapper := "gq_" + strings.TrimPrefix(fn.Name, "qd_")
		if !regexp.MustCompile(`\b(` + fn.Name + `|` + wrapper + `)\(`).MatchString(src.String()) {
			t.Errorf("%s (abi/qd-api.json) is not called by package qd", fn.Name)
		}
	}
}

func TestErrorsIs_MatchesTheSentinelOfItsStatusOnly(t *testing.T) {
	err := error(&qd.Error{Status: qd.StatusInvalidHandle, Message: "stream handle 0x1 was destroyed"})
	wrapped := fmt.Errorf("launching: %w", err)
	if !errors.Is(wrapped, qd.ErrInvalidHandle) || errors.Is(wrapped, qd.ErrInvalidArgument) {
		t.Fatal("errors.Is does not follow the status")
	}
	if !strings.Contains(err.Error(), "QD_ERROR_INVALID_HANDLE") || !strings.Contains(err.Error(), "was destroyed") {
		t.Fatalf("Error() = %q", err.Error())
	}
}

// Every status the CPU backend can be made to return, through the package, with errors.Is.
// (FORKED, LAUNCH_FAILED and INTERNAL cannot be provoked from Go on the CPU backend.)
func TestErrorsIs_ForEveryStatusTheCPUBackendReturns(t *testing.T) {
	ctx := newContext(t, func(o *qd.ContextOptions) { o.StreamPoolSize = 1 })
	other := newContext(t)
	s := newStream(t, ctx)
	k := loadKernels(t, ctx)
	cases := map[string]struct {
		sentinel error
		provoke  func() error
	}{
		"invalid argument: zero-byte alloc": {qd.ErrInvalidArgument, func() error { _, err := s.Alloc(0); return err }},
		"invalid handle: kernel of an unloaded module": {qd.ErrInvalidHandle, func() error {
			m, err := ctx.LoadModule(cpuModulePath(t))
			must(t, err)
			kk, err := m.Kernel("qd_test_noop")
			must(t, err)
			must(t, m.Close())
			return s.Launch(kk, qd.LaunchConfig{})
		}},
		"wrong context": {qd.ErrWrongContext, func() error {
			e := newEvent(t, other, false)
			return s.RecordEvent(e)
		}},
		"invalid operation: join of an owned stream": {qd.ErrInvalidOperation, func() error {
			return s.Join([]*qd.Stream{newStream(t, ctx)})
		}},
		"out of memory: a host block of 2^55 bytes": {qd.ErrOutOfMemory, func() error {
			b, err := ctx.HostAlloc(1 << 55)
			if err == nil {
				b.Close()
			}
			return err
		}},
		"overflow: a copy that wraps": {qd.ErrOverflow, func() error { return s.Memcpy(16, ^qd.DevicePtr(0)-8, 64) }},
		"invalid address: double free": {qd.ErrInvalidAddress, func() error {
			b, err := s.Alloc(64)
			must(t, err)
			must(t, b.Free(s))
			return b.Free(s)
		}},
		"pool exhausted": {qd.ErrPoolExhausted, func() error {
			a, err := ctx.AcquireStream()
			must(t, err)
			defer a.Close()
			_, err = ctx.AcquireStream()
			return err
		}},
		"not found: kernel name": {qd.ErrNotFound, func() error { _, err := k.noopModule(t, ctx).Kernel("no_such_kernel"); return err }},
		"invalid image: not a shared library": {qd.ErrInvalidImage, func() error {
			path := filepath.Join(t.TempDir(), "not_a_library.so")
			must(t, os.WriteFile(path, []byte("not an ELF file"), 0o644))
			_, err := ctx.LoadModule(path)
			return err
		}},
		"timing disabled": {qd.ErrTimingDisabled, func() error {
			a, b := newEvent(t, ctx, false), newEvent(t, ctx, false)
			must(t, s.RecordEvent(a))
			must(t, s.RecordEvent(b))
			must(t, s.Synchronize())
			_, err := qd.Elapsed(a, b)
			return err
		}},
		"not recorded": {qd.ErrNotRecorded, func() error {
			_, err := qd.Elapsed(newEvent(t, ctx, true), newEvent(t, ctx, true))
			return err
		}},
		"not supported: native handle on CPU":  {qd.ErrNotSupported, func() error { _, err := s.NativeHandle(); return err }},
		"invalid argument: an unknown backend": {qd.ErrInvalidArgument, func() error { _, err := qd.DeviceCount(qd.Backend(99)); return err }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { expectIs(t, c.provoke(), c.sentinel) })
	}
	t.Run("backend unavailable: HIP", func(t *testing.T) {
		_, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendHIP})
		if err == nil {
			t.Skip("a HIP device is present")
		}
		expectIs(t, err, qd.ErrBackendUnavailable)
	})
	t.Run("device lost: a faulting kernel", func(t *testing.T) {
		lost := newContext(t)
		lk := loadKernels(t, lost)
		ls := newStream(t, lost)
		must(t, ls.Launch(lk.fault, qd.LaunchConfig{}))
		err := ls.Synchronize()
		expectIs(t, err, qd.ErrDeviceLost)
		if !strings.Contains(err.Error(), "qd_test_fault") {
			t.Fatalf("the message does not name the kernel: %v", err)
		}
		expectIs(t, ls.Launch(lk.noop, qd.LaunchConfig{}), qd.ErrDeviceLost)
	})
	t.Run("not ready: elapsed while pending", func(t *testing.T) {
		g := newGate(t, ctx)
		a, b := newEvent(t, ctx, true), newEvent(t, ctx, true)
		must(t, s.RecordEvent(a))
		g.hold(t, s)
		must(t, s.RecordEvent(b))
		_, err := qd.Elapsed(a, b)
		g.open()
		expectIs(t, err, qd.ErrNotReady)
		must(t, s.Synchronize())
	})
}

// noopModule loads the test module again (for a kernel lookup that fails).
func (testKernels) noopModule(t *testing.T, ctx *qd.Context) *qd.Module {
	m, err := ctx.LoadModule(cpuModulePath(t))
	must(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// qd's message is thread-local; a goroutine may move to another OS thread between two cgo
// calls. Many goroutines fail at once, each with its own kernel name, and every message must
// name its own failure: the message is read inside the C call that failed.
func TestErrorMessages_OfConcurrentFailures_EachNameTheirOwnFailure(t *testing.T) {
	ctx := newContext(t)
	m, err := ctx.LoadModule(cpuModulePath(t))
	must(t, err)
	defer m.Close()
	const goroutines, calls = 32, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				name := fmt.Sprintf("missing_kernel_%d_%d", g, i)
				_, err := m.Kernel(name)
				var qe *qd.Error
				if !errors.As(err, &qe) || qe.Status != qd.StatusNotFound || !strings.Contains(qe.Message, "'"+name+"'") {
					errs <- fmt.Errorf("lookup of %s: %v", name, err)
					return
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
