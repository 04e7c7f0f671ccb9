package replay

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/predict"
)

// Baseline policies with runtime prediction (see docs/replay.md).
const (
	// PolicySJBF is EASY with the backfill candidates in shortest-estimate
	// order.
	PolicySJBF = "sjbf"
	// PolicyEASYPP is Tsafrir, Etsion and Feitelson's EASY++: runtimes
	// predicted from the user's last two jobs replace the estimates for the
	// head's reservation and the backfill test, candidates in
	// shortest-prediction order, overruns corrected by Config.Corrector.
	PolicyEASYPP = "easy++"
)

// ValidPolicy checks a policy name: one of Policies, or easy++:CORRECTOR
// (easy++ with that corrector, for comparing both in one run).
func ValidPolicy(p string) error {
	base, c, hasC := strings.Cut(p, ":")
	if !slices.Contains(Policies, base) || (hasC && base != PolicyEASYPP) {
		return fmt.Errorf("policy %q: allowed %s, or %s:CORRECTOR", p, strings.Join(Policies, ", "), PolicyEASYPP)
	}
	if hasC && !slices.Contains(Correctors, c) {
		return fmt.Errorf("policy %q: corrector %q: allowed %s", p, c, strings.Join(Correctors, ", "))
	}
	return nil
}

// Correctors lists Config.Corrector's values.
var Correctors = []string{predict.CorrectTsafrir, predict.CorrectReqtime}

// backfill is EASY with a choice of backfill order and of the runtime the
// scheduler plans with (the estimate, or a prediction corrected when a job
// outlives it). With neither it is exactly easy.
type backfill struct {
	shortest bool
	// hist predicts; nil = plan with estimates.
	hist      *predict.History
	corrector string
	pred      []time.Duration // per job: its prediction when it became eligible
	cur       []time.Duration // per job: its current prediction (corrected)
	steps     []uint8         // per job: tsafrir steps taken so far
	ends      []int32         // scratch
	cands     []int32         // scratch
}

func newBackfill(s *sim, shortest, predicted bool) *backfill {
	b := &backfill{shortest: shortest, corrector: s.cfg.Corrector}
	if b.corrector == "" {
		b.corrector = predict.CorrectTsafrir
	}
	if predicted {
		b.hist = predict.NewHistory(predict.ModelTsafrir)
		b.pred = make([]time.Duration, len(s.tr.Jobs))
		b.cur = make([]time.Duration, len(s.tr.Jobs))
		b.steps = make([]uint8, len(s.tr.Jobs))
	}
	return b
}

// length is what the scheduler believes job j runs before it starts: its
// estimate, or its prediction in whole seconds (Tsafrir's mean of two
// runtimes is an integer division; the reference figures depend on it).
func (b *backfill) length(s *sim, j int32) time.Duration {
	if b.hist == nil {
		return s.tr.Jobs[j].Estimate
	}
	if b.pred[j] == 0 {
		job := &s.tr.Jobs[j]
		p := max(b.hist.Predict(job.Tenant, "", job.Estimate).Truncate(time.Second), time.Second)
		// At most the requested time, even a zero one (a job of no
		// runtime without a request: predicted 0, recomputed when asked).
		p = min(p, job.Estimate)
		b.pred[j], b.cur[j] = p, p
	}
	return b.pred[j]
}

// end is when running job j is believed to end; a job that has outlived its
// prediction is corrected first.
func (b *backfill) end(s *sim, j int32) time.Duration {
	if b.hist == nil {
		return s.estEnd(j)
	}
	start := s.jobs[j].start
	b.length(s, j)
	if start+b.cur[j] <= s.now {
		b.cur[j], b.steps[j] = correct(b.corrector, b.pred[j], s.now-start, s.tr.Jobs[j].Estimate, b.steps[j])
	}
	return start + b.cur[j]
}

// tsafrirSteps are the tsafrir corrector's steps beyond the first prediction.
var tsafrirSteps = [...]time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 20 * time.Hour, 50 * time.Hour, 100 * time.Hour,
}

// correct returns the new prediction of a running job first predicted to
// run first, which has run for elapsed (past its current prediction) and
// has taken steps tsafrir steps, and the steps taken then.
// reqtime: the requested time. tsafrir: the first prediction plus the first
// step not yet outlived (1 min, 5, 15, 30 min, 1, 2, 5, 10, 20, 50, 100 h;
// predictsim's corrector of Gaussier et al., SC'15: each correction replaces
// the previous step, the steps do not add up), at most the requested time;
// past the last step, the requested time.
func correct(corrector string, first, elapsed, requested time.Duration, steps uint8) (time.Duration, uint8) {
	if corrector != predict.CorrectTsafrir {
		return requested, steps
	}
	k := int(steps)
	for k < len(tsafrirSteps) && first+tsafrirSteps[k] <= elapsed {
		k++
	}
	if k == len(tsafrirSteps) {
		return requested, uint8(k)
	}
	return min(first+tsafrirSteps[k], requested), uint8(k + 1)
}

func (b *backfill) predicted(s *sim, j int) time.Duration {
	if b.hist == nil {
		return 0
	}
	return b.length(s, int32(j))
}

// arrived predicts j's runtime from the runs completed before it became
// eligible.
func (b *backfill) arrived(s *sim, j int) {
	if b.hist != nil {
		b.length(s, int32(j))
	}
}

func (b *backfill) finished(s *sim, j int) {
	if b.hist != nil {
		job := &s.tr.Jobs[j]
		b.hist.Observe(job.Tenant, "", job.Runtime, job.Estimate)
	}
}

func (b *backfill) schedule(s *sim, p int) error {
	pl := &s.pools[p]
	q := pl.queue
	i := startFitting(s, pl, q)
	if i >= len(q) {
		return nil
	}
	shadow, extra := b.shadow(s, pl, s.tr.Jobs[q[i]].Size)
	length := func(j int32) time.Duration { return b.length(s, j) }
	cands := q[i+1:]
	if b.shortest {
		b.cands = append(b.cands[:0], cands...)
		slices.SortStableFunc(b.cands, func(x, y int32) int { return cmp.Compare(length(x), length(y)) })
		cands = b.cands
	}
	backfillPass(s, pl, cands, shadow, extra, length)
	return nil
}

// shadow is easy.shadow with the believed ends.
func (b *backfill) shadow(s *sim, pl *pool, size int) (time.Duration, int) {
	b.ends = append(b.ends[:0], pl.running...)
	for _, r := range b.ends {
		b.end(s, r)
	}
	return shadowTime(s, pl.free, size, b.ends, func(r int32) time.Duration { return b.end(s, r) })
}
