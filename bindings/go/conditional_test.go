package qd_test

import (
	"errors"
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

func TestConditional_Funcs_BuildEachKindAndDecideAtEachReplay(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	word := hostBuffer(t, ctx, 8)
	out := hostBuffer(t, ctx, 16)
	write := func(slot int, v uint32) func() error {
		return func() error {
			return s.Launch(k.writeValue, qd.LaunchConfig{}, qd.Address(out.Ptr()+qd.DevicePtr(4*slot)), qd.Uint32(v))
		}
	}
	must(t, s.BeginCapture())
	must(t, s.If(word.Ptr(), write(0, 10)))
	must(t, s.IfElse(word.Ptr(), write(1, 11), write(1, 21)))
	must(t, s.Switch(word.Ptr(), write(2, 30), write(2, 31)))
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	for _, c := range []struct{ word, if_, ifElse, sw uint32 }{{0, 0, 21, 30}, {1, 10, 11, 31}} {
		for i := 0; i < 3; i++ {
			putU32(out, i, 0)
		}
		putU32(word, 0, c.word)
		must(t, g.Launch(s))
		must(t, s.Synchronize())
		got := []uint32{u32At(out, 0), u32At(out, 1), u32At(out, 2)}
		if got[0] != c.if_ || got[1] != c.ifElse || got[2] != c.sw {
			t.Fatalf("word %d: If/IfElse/Switch wrote %v, want [%d %d %d]", c.word, got, c.if_, c.ifElse, c.sw)
		}
	}
}

func TestConditional_WhileFunc_LoopsUntilTheBodyZeroesTheWord(t *testing.T) {
	ctx := newContext(t)
	k := loadKernels(t, ctx)
	s := newStream(t, ctx)
	word := hostBuffer(t, ctx, 8)
	must(t, s.BeginCapture())
	must(t, s.While(word.Ptr(), func() error {
		// word -= 1 (add_value with 0xFFFFFFFF)
		return s.Launch(k.addValue, qd.LaunchConfig{}, qd.Address(word.Ptr()), qd.Address(word.Ptr()), qd.Uint32(0xFFFFFFFF))
	}))
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	putU32(word, 0, 5)
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	if got := u32At(word, 0); got != 0 {
		t.Fatalf("word after the loop = %d, want 0", got)
	}
}

func TestConditional_Funcs_ABodysErrorClosesTheConditionalAndIsReturned(t *testing.T) {
	ctx := newContext(t)
	s := newStream(t, ctx)
	word := hostBuffer(t, ctx, 8)
	must(t, s.BeginCapture())
	failure := errors.New("body failed")
	if err := s.If(word.Ptr(), func() error { return failure }); !errors.Is(err, failure) {
		t.Fatalf("If returned %v, want the body's error", err)
	}
	// Closed: no conditional is open any more, and the capture ends.
	expectIs(t, s.EndConditional(), qd.ErrInvalidOperation)
	expectIs(t, s.Switch(word.Ptr()), qd.ErrInvalidArgument)
	expectIs(t, s.If(word.Ptr(), nil), qd.ErrInvalidArgument)
	g, err := s.EndCapture()
	must(t, err)
	must(t, g.Close())
}
