package qd_test

import (
	"strconv"
	"testing"

	"qd"
)

func TestBackendString_IsTheLibrarysNameOfEveryBackend(t *testing.T) {
	want := map[qd.Backend]string{
		qd.BackendDefault: "default",
		qd.BackendCPU:     "cpu",
		qd.BackendCUDA:    "cuda",
		qd.BackendHIP:     "hip",
	}
	for b, name := range want {
		if got := b.String(); got != name {
			t.Errorf("Backend(%d).String() = %q, want %q", uint32(b), got, name)
		}
	}
}

func TestBackendString_OfAValueThatNamesNoBackend_SaysItsNumber(t *testing.T) {
	for _, b := range []qd.Backend{4, 99, 0x7fffffff, 0xffffffff} {
		want := "backend(" + strconv.FormatUint(uint64(b), 10) + ")"
		if got := b.String(); got != want {
			t.Errorf("Backend(%d).String() = %q, want %q", uint32(b), got, want)
		}
	}
}
