package qd_test

import (
	"os"
	"strings"
	"testing"
)

// README.md's quick start is Example_quickStart, which go test runs: keep the two equal.
func TestReadmeQuickStart_IsExampleQuickStart(t *testing.T) {
	inSourceTree(t)
	readme, err := os.ReadFile("README.md")
	must(t, err)
	src, err := os.ReadFile("example_test.go")
	must(t, err)
	body := string(src)
	start := strings.Index(body, "func Example_quickStart() {")
	end := strings.Index(body[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("example_test.go has no Example_quickStart")
	}
	example := body[start : start+end+3]
	marker := "<!-- example: Example_quickStart (example_test.go) -->\n```go\n"
	i := strings.Index(string(readme), marker)
	if i < 0 {
		t.Fatal("README.md has no quick start block after its example marker")
	}
	rest := string(readme)[i+len(marker):]
	block := rest[:strings.Index(rest, "```")]
	if block != example {
		t.Fatal("README.md's quick start differs from Example_quickStart in example_test.go: copy the function over")
	}
}
