package replay

import (
	"testing"
	"time"

	"github.com/latticehpc/lattice/predict"
)

// TestCorrect: easy++'s correctors. tsafrir replaces the step, it does not
// add the steps up: a job first predicted 10 min is predicted 11, 15, 25,
// 40 min… as it outlives each (predictsim's corrector, which reproduces the
// reference figures; 10 + 1 + 5 = 16 min would be the cumulative reading).
func TestCorrect(t *testing.T) {
	const m, h = time.Minute, time.Hour
	tests := []struct {
		name                      string
		corrector                 string
		first, elapsed, requested time.Duration
		steps                     uint8
		want                      time.Duration
		wantSteps                 uint8
	}{
		{"reqtime: the requested time at once", predict.CorrectReqtime, 10 * m, 10 * m, 5 * h, 0, 5 * h, 0},
		{"tsafrir: first + 1 min", predict.CorrectTsafrir, 10 * m, 10 * m, 5 * h, 0, 11 * m, 1},
		{"tsafrir: then first + 5 min", predict.CorrectTsafrir, 10 * m, 11 * m, 5 * h, 1, 15 * m, 2},
		{"tsafrir: then first + 15 min", predict.CorrectTsafrir, 10 * m, 15 * m, 5 * h, 2, 25 * m, 3},
		{"tsafrir: late, the first step not yet outlived", predict.CorrectTsafrir, 10 * m, 30 * m, 5 * h, 0, 40 * m, 4},
		{"tsafrir: at most the requested time", predict.CorrectTsafrir, 50 * m, 51 * m, 52 * m, 0, 52 * m, 2},
		{"tsafrir: past 100 h, the requested time", predict.CorrectTsafrir, h, 101 * h, 300 * h, 3, 300 * h, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, steps := correct(tt.corrector, tt.first, tt.elapsed, tt.requested, tt.steps)
			if got != tt.want || steps != tt.wantSteps {
				t.Errorf("correct = %v after %d steps, want %v after %d", got, steps, tt.want, tt.wantSteps)
			}
			if got <= tt.elapsed && got < tt.requested {
				t.Errorf("corrected prediction %v not past the elapsed %v", got, tt.elapsed)
			}
		})
	}
}

// TestEASYPPPredictions: after the user's runs of 100 and 101 s, a job
// requesting 500 s is predicted 100 s (their mean in whole seconds), one
// requesting 60 s its request, and one of no runtime and no request 0 s
// (at most the requested time, even zero), never the user's mean.
func TestEASYPPPredictions(t *testing.T) {
	tr := tinyTrace(2,
		tj{id: 1, submit: 0, run: 100, est: 100, size: 1, tenant: "u"},
		tj{id: 2, submit: 0, run: 101, est: 101, size: 1, tenant: "u"},
		tj{id: 3, submit: 200, run: 50, est: 500, size: 1, tenant: "u"},
		tj{id: 4, submit: 200, run: 50, est: 60, size: 1, tenant: "u"},
		tj{id: 5, submit: 300, run: 0, est: 0, size: 1, tenant: "u"},
	)
	s, err := newSim(tr, Config{Policy: PolicyEASYPP})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	b := s.policy.(*backfill)
	for id, want := range map[int32]time.Duration{2: 100 * time.Second, 3: 60 * time.Second, 4: 0} {
		if got := b.length(s, id); got != want {
			t.Errorf("job %d predicted %v, want %v", tr.Jobs[id].ID, got, want)
		}
	}
}

// TestPerEventArrivalsFirst: deciding per event, a job arriving when two
// runs of its user end is predicted before they count (arrivals first, as
// the SC'15 authors' simulator orders them): the requested time, where one
// decision per distinct time, after the completions, predicts their mean.
func TestPerEventArrivalsFirst(t *testing.T) {
	tr := tinyTrace(4,
		tj{id: 1, submit: 0, run: 10, est: 100, size: 1, tenant: "u"},
		tj{id: 2, submit: 0, run: 20, est: 100, size: 1, tenant: "u"},
		tj{id: 3, submit: 10, run: 30, est: 100, size: 1, tenant: "u"},
		tj{id: 4, submit: 20, run: 30, est: 100, size: 1, tenant: "u"})
	for _, tt := range []struct {
		perEvent bool
		want     time.Duration // job 4's prediction
	}{{false, 15 * time.Second}, {true, 100 * time.Second}} {
		s, err := newSim(tr, Config{Policy: PolicyEASYPP, PerEvent: tt.perEvent})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		// Job 3 arrives with job 1 ending: one run by then per distinct
		// time, none per event; either way the requested time.
		if got := s.jobs[2].predicted; got != 100*time.Second {
			t.Errorf("per event %v: job 3 predicted %v, want 100s", tt.perEvent, got)
		}
		if got := s.jobs[3].predicted; got != tt.want {
			t.Errorf("per event %v: job 4 predicted %v, want %v", tt.perEvent, got, tt.want)
		}
	}
	if _, err := Run(tr, Config{Policy: PolicyEASY, PerEvent: true, Cycle: time.Minute}); err == nil {
		t.Error("per event with a cycle: no error")
	}
}
