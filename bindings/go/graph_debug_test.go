package qd_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qd"
)

// forkedWrites captures a fork into two children, each writing value+i into word i of host,
// joined back.
func forkedWrites(t *testing.T, s *qd.Stream, k testKernels, host *qd.HostBuffer, value uint32) *qd.Graph {
	t.Helper()
	must(t, s.BeginCapture())
	kids, err := s.Fork(2)
	must(t, err)
	for i, kid := range kids {
		must(t, kid.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(host.Ptr()+qd.DevicePtr(4*i)),
			qd.Uint32(value+uint32(i))))
	}
	must(t, s.Join(kids))
	g, err := s.EndCapture()
	must(t, err)
	return g
}

func TestGraph_DebugDot_WritesEachOperationAndTheForkAndJoinEdges(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	host := hostBuffer(t, ctx, 8)
	g := forkedWrites(t, s, k, host, 1)
	defer g.Close()
	path := filepath.Join(t.TempDir(), "g.dot")
	must(t, g.DebugDot(path, false))
	data, err := os.ReadFile(path)
	must(t, err)
	text := string(data)
	if !strings.HasPrefix(text, "digraph qd_graph {") {
		t.Fatalf("not a digraph:\n%s", text)
	}
	nodes := 0
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "n") && strings.Contains(line, " [label=") {
			nodes++
		}
	}
	// The fork's record and 2 waits, 2 launches, the join's 2 records and 2 waits.
	if nodes != 9 || strings.Count(text, `label="fork"`) != 2 ||
		strings.Count(text, `label="join"`) != 2 ||
		strings.Count(text, `qd_test_write_value\ngrid (1,1,1) block (1,1,1)`) != 2 {
		t.Fatalf("%d nodes, or not 2 fork, 2 join edges and 2 launches:\n%s", nodes, text)
	}
	must(t, g.DebugDot(path, true))
	data, err = os.ReadFile(path)
	must(t, err)
	if strings.Count(string(data), "args 8, 4 B") != 2 {
		t.Fatalf("verbose labels lack the argument sizes:\n%s", data)
	}
	for _, bad := range []string{"", t.TempDir(), filepath.Join(t.TempDir(), "no", "g.dot")} {
		if err := g.DebugDot(bad, false); !errors.Is(err, qd.ErrInvalidArgument) {
			t.Fatalf("DebugDot(%q): %v", bad, err)
		}
	}
}

func TestGraph_Upload_ThenLaunchGivesTheLaunchResults_ACapturingStreamRefusesIt(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	host := hostBuffer(t, ctx, 8)
	g := forkedWrites(t, s, k, host, 7)
	defer g.Close()
	must(t, g.Upload(s))
	must(t, g.Upload(s))
	other := newStream(t, ctx)
	must(t, g.Launch(other))
	must(t, other.Synchronize())
	if u32At(host, 0) != 7 || u32At(host, 1) != 8 {
		t.Fatalf("the replay after the upload wrote %d, %d", u32At(host, 0), u32At(host, 1))
	}
	capturing := newStream(t, ctx)
	must(t, capturing.BeginCapture())
	if err := g.Upload(capturing); !errors.Is(err, qd.ErrInvalidOperation) {
		t.Fatalf("Upload on a capturing stream: %v", err)
	}
	must(t, capturing.Launch(k.noop, qd.LaunchConfig{}))
	captured, err := capturing.EndCapture()
	must(t, err)
	defer captured.Close()
	if n, err := captured.KernelNodeCount(); err != nil || n != 1 {
		t.Fatalf("the capture after the refused upload has %d kernel nodes (%v)", n, err)
	}
}
