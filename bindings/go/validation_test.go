package qd_test

import (
	"errors"
	"testing"

	"qd"
)

// The validation mode (qd.h, "Validation"): ValidateFail refuses a call that would race with
// an error matching ErrHazard; an event orders it; Stats counts the reports.
func TestValidateFail_RefusesAnUnorderedWrite_AndAnEventOrdersIt(t *testing.T) {
	ctx, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU, Validate: true, ValidateFail: true})
	must(t, err)
	defer ctx.Close()
	on, err := ctx.Validating()
	must(t, err)
	if !on {
		t.Fatal("Validating() is false on a context created with Validate")
	}
	a, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	b, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	buf, err := a.Alloc(64)
	must(t, err)
	err = b.Memset(buf.Ptr(), 0, 64)
	if !errors.Is(err, qd.ErrHazard) {
		t.Fatalf("an unordered memset on another stream: %v, want ErrHazard", err)
	}
	ev, err := ctx.NewEvent(false)
	must(t, err)
	must(t, a.RecordEvent(ev))
	must(t, b.WaitEvent(ev))
	must(t, b.Memset(buf.Ptr(), 0, 64))
	must(t, b.Synchronize())
	must(t, buf.Free(b))
	st, err := ctx.Stats()
	must(t, err)
	if st.HazardsReported != 1 {
		t.Fatalf("HazardsReported = %d, want 1", st.HazardsReported)
	}
}

func TestValidating_IsFalseByDefault(t *testing.T) {
	ctx, err := qd.NewContext(qd.ContextOptions{Backend: qd.BackendCPU})
	must(t, err)
	defer ctx.Close()
	on, err := ctx.Validating()
	must(t, err)
	if on {
		t.Fatal("validation is on without Validate")
	}
}
