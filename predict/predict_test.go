package predict

import (
	"math"
	"testing"
	"time"
)

const (
	min_ = time.Minute
	hour = time.Hour
)

func TestPredict(t *testing.T) {
	type run struct {
		user, name    string
		runtime, wall time.Duration
	}
	tests := []struct {
		name      string
		model     string
		runs      []run
		user, job string
		requested time.Duration
		want      time.Duration
	}{
		{"nothing known: the walltime", ModelLattice, nil, "u", "", hour, hour},
		{"one run is not enough", ModelTsafrir, []run{{"u", "", 10 * min_, hour}}, "u", "", hour, hour},
		{"tsafrir: mean of the last two", ModelTsafrir,
			[]run{{"u", "", 50 * min_, hour}, {"u", "", 10 * min_, hour}, {"u", "", 20 * min_, hour}}, "u", "", hour, 15 * min_},
		{"bounded by the walltime", ModelTsafrir,
			[]run{{"u", "", 3 * hour, 4 * hour}, {"u", "", 3 * hour, 4 * hour}}, "u", "", hour, hour},
		{"other users do not count", ModelTsafrir,
			[]run{{"v", "", min_, hour}, {"v", "", min_, hour}}, "u", "", hour, hour},
		{"lattice: trusted once it beat the walltime", ModelLattice,
			[]run{{"u", "", 10 * min_, hour}, {"u", "", 10 * min_, hour}, {"u", "", 12 * min_, hour}}, "u", "", hour, 11 * min_},
		{"lattice: not trusted where the walltime was better", ModelLattice,
			[]run{{"u", "", 10 * min_, hour}, {"u", "", 50 * min_, hour}, {"u", "", 58 * min_, hour}}, "u", "", hour, hour},
		{"lattice: by job name first", ModelLattice,
			[]run{{"u", "a", 10 * min_, hour}, {"u", "a", 10 * min_, hour}, {"u", "a", 10 * min_, hour},
				{"u", "b", 40 * min_, hour}, {"u", "b", 40 * min_, hour}}, "u", "a", hour, 10 * min_},
		{"lattice: falls back to the user", ModelLattice,
			[]run{{"u", "a", 10 * min_, hour}, {"u", "a", 10 * min_, hour}, {"u", "a", 10 * min_, hour}}, "u", "c", hour, 10 * min_},
		{"unknown walltime: unbounded", ModelTsafrir,
			[]run{{"u", "", 2 * hour, 0}, {"u", "", 4 * hour, 0}}, "u", "", 0, 3 * hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory(tt.model)
			for _, r := range tt.runs {
				h.Observe(r.user, r.name, r.runtime, r.wall)
			}
			if got := h.Predict(tt.user, tt.job, tt.requested); got != tt.want {
				t.Errorf("Predict = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCorrect(t *testing.T) {
	tests := []struct {
		name                     string
		corrector                string
		pred, elapsed, requested time.Duration
		steps                    int
		want                     time.Duration
		wantSteps                int
	}{
		{"reqtime: the walltime at once", CorrectReqtime, 10 * min_, 10 * min_, 5 * hour, 0, 5 * hour, 0},
		{"tsafrir: +1 min", CorrectTsafrir, 10 * min_, 10 * min_, 5 * hour, 0, 11 * min_, 1},
		{"tsafrir: then +5 min", CorrectTsafrir, 11 * min_, 11 * min_, 5 * hour, 1, 16 * min_, 2},
		{"tsafrir: several steps when late", CorrectTsafrir, 10 * min_, 20 * min_, 5 * hour, 0, 31 * min_, 3},
		{"tsafrir: bounded by the walltime", CorrectTsafrir, 50 * min_, 50 * min_, 55 * min_, 3, 55 * min_, 4},
		{"tsafrir: past the last step, the walltime", CorrectTsafrir, 200 * hour, 200 * hour, 300 * hour, 11, 300 * hour, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, steps := Correct(tt.corrector, tt.pred, tt.elapsed, tt.requested, tt.steps)
			if got != tt.want || steps != tt.wantSteps {
				t.Errorf("Correct = %v after %d steps, want %v after %d", got, steps, tt.want, tt.wantSteps)
			}
			if got <= tt.elapsed && got < tt.requested {
				t.Errorf("corrected prediction %v not past the elapsed %v", got, tt.elapsed)
			}
		})
	}
}

// TestLearnOrder: Learn feeds runs in the order they ended, whatever the
// order given, so the same completed set always gives the same predictor.
func TestLearnOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runs := []Run{
		{User: "u", End: t0.Add(3 * hour), ID: 3, Runtime: 30 * min_, Requested: hour},
		{User: "u", End: t0.Add(1 * hour), ID: 1, Runtime: 10 * min_, Requested: hour},
		{User: "u", End: t0.Add(2 * hour), ID: 2, Runtime: 20 * min_, Requested: hour},
	}
	a := Learn(ModelTsafrir, runs).Predict("u", "", hour)
	b := Learn(ModelTsafrir, []Run{runs[1], runs[2], runs[0]}).Predict("u", "", hour)
	if a != b || a != 25*min_ {
		t.Errorf("predictions %v and %v, want 25m both", a, b)
	}
}

// TestLearnScored: each run with a known walltime is predicted from the runs
// that ended before it (Tsafrir's model: the mean of the user's last two,
// the walltime before that); runs without a walltime are learnt but not
// scored; the History is Learn's.
func TestLearnScored(t *testing.T) {
	m := time.Minute
	at := func(i int) time.Time { return time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC) }
	done := []Run{
		{User: "a", End: at(4), ID: 4, Runtime: 20 * m, Requested: 60 * m}, // predicted 10 m: outlived
		{User: "a", End: at(1), ID: 1, Runtime: 10 * m, Requested: 60 * m}, // the walltime, 60 m
		{User: "a", End: at(2), ID: 2, Runtime: 10 * m, Requested: 0},      // not scored
		{User: "a", End: at(3), ID: 3, Runtime: 10 * m, Requested: 60 * m}, // the mean of 10 and 10
	}
	h, acc := LearnScored(ModelTsafrir, done)
	want := Accuracy{Runs: 3, Prediction: (1.0/6 + 1 + 0.5) / 3, Walltime: (1.0/6 + 1.0/6 + 1.0/3) / 3, Underpredicted: 1.0 / 3}
	if acc.Runs != want.Runs || math.Abs(acc.Prediction-want.Prediction) > 1e-12 ||
		math.Abs(acc.Walltime-want.Walltime) > 1e-12 || math.Abs(acc.Underpredicted-want.Underpredicted) > 1e-12 {
		t.Errorf("accuracy %+v, want %+v", acc, want)
	}
	if got, ref := h.Predict("a", "", 60*m), Learn(ModelTsafrir, done).Predict("a", "", 60*m); got != ref || got != 15*m {
		t.Errorf("LearnScored's History predicts %v, Learn's %v, want 15m", got, ref)
	}
	if _, acc := LearnScored(ModelLattice, nil); acc != (Accuracy{}) {
		t.Errorf("no runs: %+v", acc)
	}
}
