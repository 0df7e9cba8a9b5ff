package qd_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// RELIABILITY category 12: a Go program that exits with live objects and pending work exits 0,
// 100 times out of 100, with nothing on stderr (internal/exitwithwork). Built once, run 100
// times.
func TestProgram_ExitingWithLiveObjectsAndPendingWork_Exits0(t *testing.T) {
	inSourceTree(t) // go build needs the module's sources
	if testing.Short() {
		t.Skip("-short: the 100 runs are skipped")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Skip("no Go toolchain here to build internal/exitwithwork (a prebuilt test binary on a machine without Go)")
		}
	}
	prog := filepath.Join(t.TempDir(), "exitwithwork")
	// The build inherits this process's environment: CGO_* flags, PKG_CONFIG_PATH and GOFLAGS
	// (build tags), as set by bindings/go/test.
	build := exec.Command(goTool, "build", "-buildvcs=false", "-o", prog, "./internal/exitwithwork")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/exitwithwork: %v\n%s", err, out)
	}
	module := cpuModulePath(t)
	for i := 0; i < 100; i++ {
		cmd := exec.Command(prog)
		cmd.Env = append(os.Environ(), "QD_TEST_CPU_MODULE="+module)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil || stderr.Len() > 0 || stdout.Len() > 0 {
			t.Fatalf("run %d of 100: %v\nstdout: %s\nstderr: %s", i+1, err, stdout.String(), stderr.String())
		}
	}
}
