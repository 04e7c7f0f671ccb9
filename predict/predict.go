// Package predict learns job runtimes from completed runs, for backfilling
// and reservations (never to kill a job: a job always keeps its requested
// walltime as its limit).
//
// The model is pure and deterministic: a History is fed completed runs in
// the order they ended (Observe) and answers Predict from what it has seen,
// nothing else — no clock, no randomness, no map iteration. The vCluster
// loop rebuilds its History from the completed allocations of the committed
// state; the replay simulator feeds it as jobs end. A prediction is derived
// state and is never committed.
package predict

import (
	"slices"
	"time"
)

// Model names.
const (
	// ModelTsafrir is Tsafrir, Etsion and Feitelson's predictor (EASY++):
	// the mean of the user's last two runtimes; the requested time while
	// the user has fewer than two.
	ModelTsafrir = "tsafrir"
	// ModelLattice is the default: the mean of the last two runtimes of the
	// same (user, job name) when there are two, else of the user's; then
	// bounded by the requested time.
	ModelLattice = "lattice"
)

// Corrector names: what a running job that outlives its prediction is
// predicted to run instead.
const (
	// CorrectTsafrir raises the prediction step by step: +1 min, 5, 15,
	// 30 min, 1, 2, 5, 10, 20, 50, 100 h, then the requested time.
	CorrectTsafrir = "tsafrir"
	// CorrectReqtime raises it at once to the requested time.
	CorrectReqtime = "reqtime"
)

// tsafrirSteps are the corrector's successive increments.
var tsafrirSteps = []time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 20 * time.Hour, 50 * time.Hour, 100 * time.Hour,
}

// Correct returns the prediction of a job that has run for elapsed with
// prediction pred (pred <= elapsed: it outlived it) and been corrected
// steps times before, and the new step count. The result is bounded by
// requested and, below it, later than elapsed.
func Correct(corrector string, pred, elapsed, requested time.Duration, steps int) (time.Duration, int) {
	if corrector != CorrectTsafrir {
		return requested, steps
	}
	for pred <= elapsed {
		if steps >= len(tsafrirSteps) {
			return requested, steps
		}
		pred += tsafrirSteps[steps]
		steps++
	}
	return min(pred, requested), steps
}

// keep is how many runs a History remembers per key.
const keep = 2

// runs is a key's last runtimes, oldest first, and how much better its
// predictions did than the walltimes (trust).
type runs struct {
	n    int
	last [keep]time.Duration
	// trust is a moving average of accuracy(prediction) −
	// accuracy(walltime) over the runs observed with a known walltime;
	// trusted counts them.
	trust   float64
	trusted int
}

func (r *runs) add(d time.Duration) {
	if r.n == keep {
		copy(r.last[:], r.last[1:])
		r.last[keep-1] = d
		return
	}
	r.last[r.n] = d
	r.n++
}

func (r *runs) mean() time.Duration {
	var s time.Duration
	for _, d := range r.last[:r.n] {
		s += d
	}
	return s / time.Duration(r.n)
}

// History is what a predictor has learnt. The zero value is empty and
// predicts with ModelLattice.
type History struct {
	Model  string
	users  map[string]*runs
	byName map[[2]string]*runs
}

// NewHistory returns an empty History for model (ModelTsafrir or
// ModelLattice; "" = ModelLattice).
func NewHistory(model string) *History { return &History{Model: model} }

// TrustDecay is the weight of the past in a key's trust: the last few runs
// decide whether its predictions beat its walltimes.
const TrustDecay = 0.75

// Observe records a completed run of user's job name that requested
// requested (<= 0 = unknown). Runs must be fed in the order they ended.
func (h *History) Observe(user, name string, runtime, requested time.Duration) {
	if runtime < 0 {
		runtime = 0
	}
	if requested > 0 && h.Model != ModelTsafrir {
		// Would each key's prediction have beaten the walltime for this run?
		h.judge(h.users[user], runtime, requested)
		if name != "" {
			h.judge(h.byName[[2]string{user, name}], runtime, requested)
		}
	}
	if h.users == nil {
		h.users = map[string]*runs{}
		h.byName = map[[2]string]*runs{}
	}
	u := h.users[user]
	if u == nil {
		u = &runs{}
		h.users[user] = u
	}
	u.add(runtime)
	if name == "" || h.Model == ModelTsafrir {
		return
	}
	k := [2]string{user, name}
	r := h.byName[k]
	if r == nil {
		r = &runs{}
		h.byName[k] = r
	}
	r.add(runtime)
}

// Predict returns the predicted runtime of user's job name that requests
// requested (its walltime; <= 0 = unknown, then the prediction is unbounded
// and 0 when nothing is known). The prediction is at most requested, and
// requested itself while too little is known.
//
// ModelLattice predicts only for keys whose predictions have beaten their
// walltimes over their last runs (trust > 0): where a user's runtimes do not
// repeat, the walltime is the better guess.
func (h *History) Predict(user, name string, requested time.Duration) time.Duration {
	if h.Model == ModelTsafrir || requested <= 0 {
		p, _ := h.raw(user, name, requested)
		return p
	}
	if name != "" {
		if r := h.byName[[2]string{user, name}]; r.usable() {
			return bound(r.mean(), requested)
		}
	}
	if u := h.users[user]; u.usable() {
		return bound(u.mean(), requested)
	}
	return requested
}

// usable: enough runs, and its predictions beat the walltimes lately.
func (r *runs) usable() bool {
	return r != nil && r.n == keep && r.trusted > 0 && r.trust > 0
}

// judge updates r's trust with a run of runtime that requested requested.
func (h *History) judge(r *runs, runtime, requested time.Duration) {
	if r == nil || r.n < keep {
		return
	}
	d := accuracy(bound(r.mean(), requested), runtime) - accuracy(requested, runtime)
	r.trust = TrustDecay*r.trust + (1-TrustDecay)*d
	r.trusted++
}

// raw is the prediction before trust, and the runs it comes from (nil: too
// little is known, p = requested).
func (h *History) raw(user, name string, requested time.Duration) (time.Duration, *runs) {
	if h.Model != ModelTsafrir && name != "" {
		if r := h.byName[[2]string{user, name}]; r != nil && r.n == keep {
			return bound(r.mean(), requested), r
		}
	}
	if u := h.users[user]; u != nil && u.n == keep {
		return bound(u.mean(), requested), u
	}
	return requested, nil
}

// accuracy is min(p, r) / max(p, r), both at least a second.
func accuracy(p, r time.Duration) float64 {
	p, r = max(p, time.Second), max(r, time.Second)
	return float64(min(p, r)) / float64(max(p, r))
}

func bound(p, requested time.Duration) time.Duration {
	if requested > 0 && p > requested {
		return requested
	}
	return max(p, time.Second)
}

// Run is a completed run, for Replay.
type Run struct {
	User, Name string
	End        time.Time
	ID         uint64 // ties on End
	Runtime    time.Duration
	Requested  time.Duration // its walltime (0 = unknown)
}

// Learn returns a History of model fed with runs in the order they ended
// (ties by ID), whatever their order in the slice — the vCluster loop's
// way from the committed state's completed allocations to predictions.
func Learn(model string, done []Run) *History {
	h, _ := LearnScored(model, done)
	return h
}

// Accuracy is how a predictor did on completed runs, each predicted from
// the runs that ended before it.
type Accuracy struct {
	// Runs counts the runs with a known walltime; the rest are means over
	// them.
	Runs int
	// Prediction and Walltime are the mean accuracy, min(p, r)/max(p, r),
	// of the prediction and of the walltime; Underpredicted is the share of
	// runs that outlived their prediction.
	Prediction, Walltime, Underpredicted float64
}

// Scores accumulates an Accuracy, run by run. The measure is Tsafrir's,
// min(p, r)/max(p, r), with runs and predictions under τ counted as τ (the
// replay's prediction metrics use it too).
type Scores struct {
	runs              int
	pred, wall, under float64
}

// Add scores one run of runtime that was predicted predicted and requested
// walltime.
func (s *Scores) Add(predicted, walltime, runtime time.Duration) {
	s.runs++
	s.pred += score(predicted, runtime)
	s.wall += score(walltime, runtime)
	if runtime > predicted {
		s.under++
	}
}

// Accuracy is the means over the runs added (zero without any).
func (s *Scores) Accuracy() Accuracy {
	if s.runs == 0 {
		return Accuracy{}
	}
	n := float64(s.runs)
	return Accuracy{Runs: s.runs, Prediction: s.pred / n, Walltime: s.wall / n, Underpredicted: s.under / n}
}

// score is min(p, r)/max(p, r), both at least τ.
func score(p, r time.Duration) float64 {
	p, r = max(p, BoundedSlowdownTau), max(r, BoundedSlowdownTau)
	return min(p, r).Seconds() / max(p, r).Seconds()
}

// LearnScored is Learn, and how its predictions did on done: each run with
// a known walltime is predicted just before the History learns it.
func LearnScored(model string, done []Run) (*History, Accuracy) {
	done = slices.Clone(done)
	slices.SortFunc(done, func(a, b Run) int {
		if c := a.End.Compare(b.End); c != 0 {
			return c
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	h := NewHistory(model)
	var sc Scores
	for _, r := range done {
		if r.Requested > 0 {
			sc.Add(h.Predict(r.User, r.Name, r.Requested), r.Requested, r.Runtime)
		}
		h.Observe(r.User, r.Name, r.Runtime, r.Requested)
	}
	return h, sc.Accuracy()
}
