package qd_test

import (
	"testing"

	"qd"
)

func TestConditional_If_RunsItsBodyOnlyWhenTheWordIsNotZero(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	word := hostBuffer(t, ctx, 8)
	out := hostBuffer(t, ctx, 8)
	must(t, s.BeginCapture())
	must(t, s.BeginConditional(qd.Conditional{Kind: qd.ConditionalIf, Condition: word.Ptr()}))
	if _, err := s.ConditionalHandle(); err == nil {
		t.Fatal("ConditionalHandle on a CPU capture succeeded")
	} else {
		expectIs(t, err, qd.ErrNotSupported)
	}
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(out.Ptr()), qd.Uint32(7)))
	must(t, s.EndConditional())
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	putU32(word, 0, 0)
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	if got := u32At(out, 0); got != 0 {
		t.Fatalf("word 0: the body ran (out = %d)", got)
	}
	putU32(word, 0, 1)
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	if got := u32At(out, 0); got != 7 {
		t.Fatalf("word 1: out = %d, want 7", got)
	}
}

func TestConditional_IfElse_RunsOneOfItsTwoBodies(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	word := hostBuffer(t, ctx, 8)
	out := hostBuffer(t, ctx, 8)
	must(t, s.BeginCapture())
	must(t, s.BeginConditional(qd.Conditional{Kind: qd.ConditionalIfElse, Condition: word.Ptr()}))
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(out.Ptr()), qd.Uint32(1)))
	must(t, s.NextBranch())
	must(t, s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(out.Ptr()), qd.Uint32(2)))
	expectIs(t, s.NextBranch(), qd.ErrInvalidOperation) // an IF_ELSE has two bodies
	must(t, s.EndConditional())
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	for _, c := range []struct{ word, want uint32 }{{5, 1}, {0, 2}} {
		putU32(word, 0, c.word)
		must(t, g.Launch(s))
		must(t, s.Synchronize())
		if got := u32At(out, 0); got != c.want {
			t.Fatalf("word %d: out = %d, want %d", c.word, got, c.want)
		}
	}
}

func TestConditional_Misuse_IsRefused(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	word := hostBuffer(t, ctx, 8)
	// Not capturing.
	expectIs(t, s.BeginConditional(qd.Conditional{Kind: qd.ConditionalIf, Condition: word.Ptr()}), qd.ErrInvalidOperation)
	expectIs(t, s.NextBranch(), qd.ErrInvalidOperation)
	expectIs(t, s.EndConditional(), qd.ErrInvalidOperation)
	if _, err := s.ConditionalHandle(); err == nil {
		t.Fatal("ConditionalHandle outside a conditional succeeded")
	}
	must(t, s.BeginCapture())
	expectIs(t, s.BeginConditional(qd.Conditional{Kind: 99, Condition: word.Ptr()}), qd.ErrInvalidArgument)
	expectIs(t, s.BeginConditional(qd.Conditional{Kind: qd.ConditionalSwitch, Condition: word.Ptr()}), qd.ErrInvalidArgument)
	expectIs(t, s.BeginConditional(qd.Conditional{Kind: qd.ConditionalIf, Condition: word.Ptr() + 1}), qd.ErrInvalidArgument)
	expectIs(t, s.EndConditional(), qd.ErrInvalidOperation) // none open
	g, err := s.EndCapture()
	must(t, err)
	must(t, g.Close())
}
