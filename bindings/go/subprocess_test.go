package qd_test

import (
	"os"
	"os/exec"
	"testing"
)

// A test whose failure would kill the process (a fault, or a fatal error Go raises itself) runs
// its body in a copy of the test binary: inSubprocess runs body there and returns its combined
// output and exit error; in that copy it runs body and returns nil.
const subprocessEnv = "QD_GO_TEST_SUBPROCESS"

func inSubprocess(t *testing.T, body func()) (output string, exitErr error, inChild bool) {
	t.Helper()
	if os.Getenv(subprocessEnv) == t.Name() {
		body()
		return "", nil, true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), subprocessEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	return string(out), err, false
}
