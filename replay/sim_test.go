package replay

import (
	"context"
	"errors"
	"testing"
)

// Tests of the event loop itself (sim.go).

// TestRunContextCancelled: a replay whose context is done stops with the
// context's error (latticectl's Ctrl-C).
func TestRunContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr := loadTrace(t, "hpc2n.swf")
	for _, p := range []string{PolicyEASY, PolicyLattice} {
		if res, err := RunContext(ctx, tr, Config{Policy: p}); !errors.Is(err, context.Canceled) || res != nil {
			t.Errorf("%s: %v, %v; want context.Canceled and no result", p, res, err)
		}
	}
	if _, err := RunContext(context.Background(), tr.First(100), Config{Policy: PolicyEASY}); err != nil {
		t.Errorf("not cancelled: %v", err)
	}
}

// TestGroupsSpanned: a start counts the distinct dragonfly groups of its
// nodes, beyond 64 groups too (group size 1: one group per node).
func TestGroupsSpanned(t *testing.T) {
	tr := tinyTrace(200, tj{id: 1, submit: 0, run: 10, est: 10, size: 150}, tj{id: 2, submit: 0, run: 10, est: 10, size: 1},
		tj{id: 3, submit: 0, run: 10, est: 10, size: 49})
	s, err := newSim(tr, Config{Policy: PolicyEASY, GroupSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int16{150, 1, 49} {
		if got := s.jobs[i].groups; got != want {
			t.Errorf("job %d spans %d groups, want %d", tr.Jobs[i].ID, got, want)
		}
	}
}
