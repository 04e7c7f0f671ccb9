package vcluster

import (
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
)

// TestPerUserGuard: the pending job's bound is conservative backfilling's
// start when the guard first sees it (t0+3h30m, a wait of 4.5 h from its
// eligible time t0−1h). It is protected only when its tenant is behind its
// bounds (its recent jobs started later than theirs) and it has waited past
// factor × its bound's wait; unlike the per-job guard, that leaves running
// work planned by prediction.
func TestPerUserGuard(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	// ledger seeds the tenant's record: a job that waited got against a
	// bound's wait of ref.
	ledger := func(g *EasyStarts, got, ref time.Duration) {
		l := predict.UnknownLength(4 * time.Hour)
		g.got.Observe("t", t0.Add(-2*time.Hour), got, l)
		g.ref.Observe("t", t0.Add(-2*time.Hour), ref, l)
	}
	tests := []struct {
		name      string
		factor    float64
		got, ref  time.Duration // the seeded record; 0, 0 = none
		later     time.Duration
		protected bool
	}{
		{"no record", 0, 0, 0, 6 * time.Hour, false},
		{"behind, past its bound", 0, 3 * time.Hour, time.Hour, 5 * time.Hour, true},
		{"behind, within its bound", 0, 3 * time.Hour, time.Hour, 3 * time.Hour, false},
		{"behind, past its bound, within the factor", 2, 3 * time.Hour, time.Hour, 7 * time.Hour, false},
		{"behind, past the factor", 2, 3 * time.Hour, time.Hour, 9 * time.Hour, true},
		{"ahead of its bounds", 0, time.Hour, 3 * time.Hour, 6 * time.Hour, false},
		{"off", -1, 3 * time.Hour, time.Hour, 6 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Builder
			s := predictionSnapshot(history...)
			s.StarvationWait, s.StarvationFactor, s.UserGuardFactor = -1, -1, tt.factor
			s.EasyStarts = &EasyStarts{}
			b.Build(s)
			if tt.factor >= 0 {
				if got := s.EasyStarts.jobs[9].start; !got.Equal(t0.Add(210 * time.Minute)) {
					t.Fatalf("bound %v, want t0+3h30m", got)
				}
			}
			if tt.got > 0 {
				ledger(s.EasyStarts, tt.got, tt.ref)
			}
			s.Now = t0.Add(tt.later)
			s.Allocations[5].StartTime = s.Now.Add(-5 * time.Minute)
			in := b.Build(s)
			if got := in.Pending[0].Protected; got != tt.protected {
				t.Errorf("Protected %v at t0+%v, want %v", got, tt.later, tt.protected)
			}
			if in.Nodes[0].FreeAt.Equal(s.Now.Add(235 * time.Minute)) {
				t.Errorf("n1 planned free at its walltime: the per-user guard must not plan with walltimes")
			}
		})
	}
}

// TestPerUserGuardLearns: a bounded job that starts adds its wait and its
// bound's to its tenant's record, once, and is forgotten; a tenant whose job
// started after its bound is behind, one whose job started before is not.
func TestPerUserGuardLearns(t *testing.T) {
	for _, tt := range []struct {
		name   string
		start  time.Duration // after t0; the bound is t0+3h30m
		behind bool
	}{
		{"started after its bound", 5 * time.Hour, true},
		{"started before its bound", time.Hour, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := predictionSnapshot(done(1, 40*time.Minute, t0.Add(-5*time.Hour)))
			s.EasyStarts = &EasyStarts{}
			BuildInput(s)
			// Job 9 starts; another job of the tenant stays pending.
			started := s.Pending[0]
			started.State, started.StartTime = model.StateRunning, t0.Add(tt.start)
			s.Allocations[9] = started
			other := alloc(10, "batch", model.StatePending)
			s.Pending = []*model.Allocation{other}
			s.Now = t0.Add(tt.start + time.Minute)
			BuildInput(s)
			if _, w := s.EasyStarts.got.Tenant("t", s.Now); w != 1 {
				t.Fatalf("record weight %v, want 1 (one start learnt)", w)
			}
			if s.EasyStarts.jobs[9] != nil {
				t.Error("the started job's bound is kept")
			}
			if got := s.EasyStarts.behind("t", s.Now); got != tt.behind {
				t.Errorf("behind %v, want %v", got, tt.behind)
			}
			s.Now = s.Now.Add(time.Minute)
			BuildInput(s)
			if _, w := s.EasyStarts.got.Tenant("t", s.Now); w > 1 {
				t.Errorf("record weight %v: the start was learnt twice", w)
			}
		})
	}
}

// TestGuardBoundsInSteps: a queue that arrives at once is bounded at most
// maxBoundPerCycle jobs a cycle, the longest-waiting first, so one cycle
// never pays for all of it; the others are bounded in the next cycles.
func TestGuardBoundsInSteps(t *testing.T) {
	s := predictionSnapshot(done(1, 40*time.Minute, t0.Add(-5*time.Hour)))
	s.Pending = nil
	n := maxBoundPerCycle + 44
	for i := range n {
		a := alloc(uint64(100+i), "batch", model.StatePending)
		a.EligibleTime = t0.Add(-time.Duration(n-i) * time.Second) // the first ones waited longest
		s.Pending = append(s.Pending, a)
	}
	s.EasyStarts = &EasyStarts{}
	BuildInput(s)
	if got := len(s.EasyStarts.jobs); got != maxBoundPerCycle {
		t.Fatalf("%d jobs bounded in the first cycle, want %d", got, maxBoundPerCycle)
	}
	if s.EasyStarts.jobs[100] == nil || s.EasyStarts.jobs[uint64(100+n-1)] != nil {
		t.Error("not the longest-waiting first")
	}
	s.Now = s.Now.Add(time.Second)
	BuildInput(s)
	if got := len(s.EasyStarts.jobs); got != n {
		t.Errorf("%d jobs bounded after the second cycle, want %d", got, n)
	}
}
