package qd_test

import (
	"errors"
	"testing"

	"qd"
)

func TestGraph_CaptureReplayUpdate(t *testing.T) {
	ctx := newContext(t)
	s, err := ctx.NewStream(qd.StreamOptions{})
	must(t, err)
	defer s.Close()
	must(t, s.BeginCapture())
	if err := s.Synchronize(); !errors.Is(err, qd.ErrInvalidOperation) {
		t.Fatalf("Synchronize during a capture: %v", err)
	}
	kids, err := s.Fork(2)
	must(t, err)
	must(t, s.Join(kids))
	g, err := s.EndCapture()
	must(t, err)
	defer g.Close()
	must(t, g.Launch(s))
	must(t, s.Synchronize())
	must(t, s.BeginCapture())
	g2, err := s.EndCapture()
	must(t, err)
	if err := g.Update(g2); !errors.Is(err, qd.ErrInvalidOperation) {
		t.Fatalf("Update of another shape: %v", err)
	}
	must(t, g2.Close())
	must(t, g2.Close())
	if err := g2.Launch(s); err == nil {
		t.Fatal("Launch of a closed graph succeeded")
	}
}
