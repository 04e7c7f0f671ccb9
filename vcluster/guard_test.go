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
			s.StarvationWait, s.StarvationFactor, s.PredictedStarts = -1, tt.factor, true
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
