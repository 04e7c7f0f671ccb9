package vcluster

import (
	"context"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/solver"
)

// TestRelativeStarvationGuard: the head's EASY start is taken when it first
// becomes the head (n1 frees at its walltime, t0+3.5h, so EASY's wait is
// 4.5 h from its eligible time t0−1h); once it has waited past factor × that,
// the cycle is planned with walltimes and without predicted starts.
func TestRelativeStarvationGuard(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	tests := []struct {
		name    string
		factor  float64
		later   time.Duration // the second cycle, after t0
		guarded bool
	}{
		{"before EASY's start", 1, 3 * time.Hour, false},
		{"past EASY's start, within the factor", 1.5, 5 * time.Hour, false},
		{"past the factor", 1.5, 6 * time.Hour, true},
		{"past EASY's start, factor 1", 1, 4 * time.Hour, true},
		{"off", -1, 100 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Builder
			s := predictionSnapshot(history...)
			on := true
			s.StarvationWait, s.StarvationFactor, s.VCluster.PredictedStarts = -1, tt.factor, &on
			s.EasyStarts = &EasyStarts{}
			s.Corrector = predict.CorrectTsafrir
			if in := b.Build(s); !in.PredictedStarts {
				t.Fatal("first cycle: predicted starts off, want on (nobody starved yet)")
			}
			s.Now = t0.Add(tt.later)
			in := b.Build(s)
			if in.PredictedStarts == tt.guarded {
				t.Errorf("PredictedStarts %v at t0+%v, want %v", in.PredictedStarts, tt.later, !tt.guarded)
			}
			// Without the memory the relative guard is off: the same
			// snapshot gives the same input.
			s.EasyStarts = nil
			if in := BuildInput(s); !in.PredictedStarts {
				t.Error("without EasyStarts: predicted starts off, want on")
			}
		})
	}
}

// TestLoopKeepsEasyStarts: the loop keeps the guard's memory from one cycle
// to the next (BuildInput alone has none).
func TestLoopKeepsEasyStarts(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	l := &Loop{Name: "batch", State: &completedState{fakeState{predictionSnapshot()}, history},
		Proposer: &fakeProposer{}, Planner: solver.Solve, Clock: func() time.Time { return t0 }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := l.easyStarts.bound[9], t0.Add(210*time.Minute); !got.Equal(want) {
		t.Errorf("the head's EASY start is %v, want %v (n1's walltime end)", got, want)
	}
}

// TestEarliestFit: the earliest start that keeps need nodes free for wall.
func TestEarliestFit(t *testing.T) {
	h := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Hour))) }
	// 2 free now; +2 at 1h; −3 at 2h (a slot) and +3 at 4h; +1 at 5h.
	events := []profEvent{{h(1), 2}, {h(2), -3}, {h(4), 3}, {h(5), 1}}
	tests := []struct {
		name string
		need int
		wall float64
		want time.Time
	}{
		{"fits now", 1, 10, t0},
		{"fits after the slot", 2, 10, h(4)},
		{"waits for the first release", 3, 0.5, h(1)},
		{"too long for the gap before the slot", 3, 2, h(4)},
		{"all five nodes", 5, 1, h(5)},
		{"never: more than the machine", 6, 1, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := earliestFit(t0, 2, events, tt.need, time.Duration(tt.wall*float64(time.Hour)))
			if !got.Equal(tt.want) {
				t.Errorf("earliestFit(need %d, wall %vh) = %v, want %v", tt.need, tt.wall, got, tt.want)
			}
		})
	}
}

// TestPerJobStarvationGuard: a pending job's bound is conservative
// backfilling's start when the guard first sees it (n1 frees at its
// walltime, t0+3.5h: a wait of 4.5 h from its eligible time t0−1h); a job
// seen after it is bounded behind its slot; once a job has waited past
// factor × its bound's wait it is Protected, and running work is planned
// with walltimes.
func TestPerJobStarvationGuard(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	tests := []struct {
		name      string
		factor    float64
		later     time.Duration // the second cycle, after t0
		protected bool
	}{
		{"within its bound", 1, 3 * time.Hour, false},
		{"past its bound, within the factor", 1.5, 5 * time.Hour, false},
		{"past the factor", 1.5, 6 * time.Hour, true},
		{"past its bound, factor 1", 1, 4 * time.Hour, true},
		{"off", 0, 100 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Builder
			s := predictionSnapshot(history...)
			s.StarvationWait, s.StarvationFactor, s.JobStarvationFactor = -1, -1, tt.factor
			s.EasyStarts = &EasyStarts{}
			if in := b.Build(s); in.Pending[0].Protected || in.Nodes[0].FreeAt.Equal(t0.Add(210*time.Minute)) {
				t.Fatalf("first cycle: protected %v, n1 free at %v; want unprotected, predicted", in.Pending[0].Protected, in.Nodes[0].FreeAt)
			}
			if tt.factor > 0 {
				if got := s.EasyStarts.jobs[9].start; !got.Equal(t0.Add(210 * time.Minute)) {
					t.Fatalf("bound %v, want t0+3h30m", got)
				}
			}
			s.Now = t0.Add(tt.later)
			// n1 now runs a job started 5 minutes ago (predicted 40 min,
			// walltime 4 h), so its planned end tells whether predictions
			// are on.
			s.Allocations[5].StartTime = s.Now.Add(-5 * time.Minute)
			in := b.Build(s)
			if got := in.Pending[0].Protected; got != tt.protected {
				t.Errorf("Protected %v at t0+%v, want %v", got, tt.later, tt.protected)
			}
			if walltimes := in.Nodes[0].FreeAt.Equal(s.Now.Add(235 * time.Minute)); walltimes != tt.protected {
				t.Errorf("n1 planned free at %v: walltimes %v, want %v", in.Nodes[0].FreeAt, walltimes, tt.protected)
			}
		})
	}
	// A held job is not bounded until it is released; then from the cycle
	// that sees it released.
	held := predictionSnapshot()
	held.JobStarvationFactor, held.EasyStarts = 1, &EasyStarts{}
	held.Pending[0].Held = model.HoldUser
	BuildInput(held)
	if b := held.EasyStarts.jobs[9]; b != nil {
		t.Errorf("held job bounded at %v, want no bound while held", b.start)
	}
	held.Pending[0].Held = ""
	held.Now = t0.Add(time.Hour)
	BuildInput(held)
	if b := held.EasyStarts.jobs[9]; b == nil || !b.start.Equal(t0.Add(210*time.Minute)) {
		t.Errorf("released job's bound %+v, want t0+3h30m", b)
	}
	// A second job, seen later, is bounded behind the first one's slot.
	s := predictionSnapshot()
	s.JobStarvationFactor, s.EasyStarts = 1.25, &EasyStarts{}
	BuildInput(s)
	second := alloc(10, "batch", model.StatePending)
	second.NodesMin, second.NodesMax = 2, 2
	s.Pending = append(s.Pending, second)
	s.Now = t0.Add(time.Minute)
	BuildInput(s)
	if got, want := s.EasyStarts.jobs[10].start, t0.Add(210*time.Minute+4*time.Hour); !got.Equal(want) {
		t.Errorf("second job's bound %v, want %v (after the first one's 4 h slot)", got, want)
	}
}
