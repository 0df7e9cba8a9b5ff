package qd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"qd"
)

// memsetBytes lists the byte counts of the memset slices in a trace file, sorted.
func memsetBytes(t *testing.T, path string) []int {
	t.Helper()
	raw, err := os.ReadFile(path)
	must(t, err)
	var data struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Cat  string         `json:"cat"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	must(t, json.Unmarshal(raw, &data))
	var out []int
	for _, e := range data.TraceEvents {
		if e.Ph == "X" && e.Cat == "memset" {
			out = append(out, int(e.Args["bytes"].(float64)))
		}
	}
	sort.Ints(out)
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTrace_StartStop_FileHoldsExactlyTheWindowsWork(t *testing.T) {
	ctx := newContext(t)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	defer s.Close()
	buf, err := s.Alloc(64)
	must(t, err)
	path := filepath.Join(t.TempDir(), "t.json")
	must(t, s.Memset(buf.Ptr(), 1, 11))
	must(t, ctx.StartTrace(path))
	must(t, s.Memset(buf.Ptr(), 1, 22))
	must(t, s.Memset(buf.Ptr(), 1, 23))
	must(t, ctx.FlushTrace())
	if got := memsetBytes(t, path); !equalInts(got, []int{22, 23}) {
		t.Fatalf("after flush: %v", got)
	}
	must(t, s.Memset(buf.Ptr(), 1, 24))
	must(t, ctx.StopTrace())
	must(t, s.Memset(buf.Ptr(), 1, 33))
	must(t, s.Synchronize())
	if got := memsetBytes(t, path); !equalInts(got, []int{22, 23, 24}) {
		t.Fatalf("the window's memsets: %v", got)
	}
	must(t, buf.Free(s))
}

func TestTrace_Misuse_ReturnsTheSentinelOfItsStatus(t *testing.T) {
	ctx := newContext(t)
	dir := t.TempDir()
	expectIs(t, ctx.StopTrace(), qd.ErrInvalidOperation)
	expectIs(t, ctx.FlushTrace(), qd.ErrInvalidOperation)
	expectIs(t, ctx.StartTrace(filepath.Join(dir, "missing", "t.json")), qd.ErrInvalidArgument)
	expectIs(t, ctx.StartTrace(dir), qd.ErrInvalidArgument)
	expectIs(t, ctx.StartTrace(""), qd.ErrInvalidArgument)
	must(t, ctx.StartTrace(filepath.Join(dir, "t.json")))
	expectIs(t, ctx.StartTrace(filepath.Join(dir, "u.json")), qd.ErrInvalidOperation)
	must(t, ctx.StopTrace())
	expectIs(t, ctx.StopTrace(), qd.ErrInvalidOperation)
}

func TestTrace_CloseWhileTraced_WritesTheFile(t *testing.T) {
	ctx, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU})
	must(t, err)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	buf, err := s.Alloc(64)
	must(t, err)
	path := filepath.Join(t.TempDir(), "t.json")
	must(t, ctx.StartTrace(path))
	for i := 0; i < 3; i++ {
		must(t, s.Memset(buf.Ptr(), 1, 7))
	}
	must(t, ctx.Close())
	if got := memsetBytes(t, path); !equalInts(got, []int{7, 7, 7}) {
		t.Fatalf("memsets after close: %v", got)
	}
	expectIs(t, ctx.StopTrace(), qd.ErrInvalidHandle)
}

// Many goroutines queue work while the trace starts, flushes and stops (run with -race by the
// test hook): every call succeeds and the file holds whole operations only.
func TestTrace_ConcurrentWorkAndControl(t *testing.T) {
	ctx := newContext(t)
	path := filepath.Join(t.TempDir(), "t.json")
	must(t, ctx.StartTrace(path))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := ctx.NewStream(qd.StreamOptions{})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			buf, err := s.Alloc(64)
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < 50; i++ {
				if err := s.Memset(buf.Ptr(), 1, 5); err != nil {
					errs <- err
					return
				}
			}
			if err := buf.Free(s); err != nil {
				errs <- err
			}
		}()
	}
	must(t, ctx.FlushTrace())
	wg.Wait()
	must(t, ctx.StopTrace())
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := memsetBytes(t, path); len(got) != 200 {
		t.Fatalf("want the 200 memsets queued while traced, got %d", len(got))
	}
}
