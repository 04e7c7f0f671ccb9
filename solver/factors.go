package solver

import (
	"math"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Constants of the cost function. Every factor is clamped to [0,1]; where
// its input is unknown it takes a neutral value, so missing data neither
// rewards nor punishes a job.
const (
	// WaitReference is f2's reference wait (the seed's reference_wait).
	WaitReference = time.Hour
	// WaitSaturation is the wait at which f2's wait part reaches 1.
	WaitSaturation = 7 * 24 * time.Hour
	// WaitShare is the part of f2 that grows with the wait; the rest rewards
	// short expected runs (ShortReference: the length that scores best).
	WaitShare      = 0.3
	ShortReference = time.Minute
	// ShortHorizon is the expected length at which f2's length part
	// reaches 0 (the wait part's horizon).
	ShortHorizon = WaitSaturation

	// NeutralFairShare is f3 for a tenant without a fair-share target.
	NeutralFairShare = 0.5
	// NeutralDataReady is f5 when the hot-tier fraction is unknown.
	NeutralDataReady = 0.5
	// NeutralEnergy is f7 when the energy price is unknown.
	NeutralEnergy = 0.5
	// NeutralCheckpoint is f8 for a checkpointable job whose checkpoint
	// time is unknown.
	NeutralCheckpoint = 0.5
)

// Factor describes one term of the cost function, for `explain` and the API.
type Factor struct {
	Name    string // f1..f9
	Title   string // short name, also accepted by ParseWeightOverride
	Rewards string // what a high value rewards
	Formula string // how it is computed, with its neutral value
}

// Factors is the catalog of f1..f9 in order (index 0 = f1). Treat it as
// read-only.
var Factors = [model.NumFactors]Factor{
	{"f1", "priority", "jobs in a higher priority class (0..10)",
		"priority_class / 10"},
	{"f2", "wait_time", "jobs that have waited long since they became eligible, and jobs expected to run briefly (shortest first)",
		"0.3·min(1, ln(1 + wait/1h) / ln(1 + 7d/1h)) + 0.7·(1 − ln(1 + length/1min) / ln(1 + 7d/1min)) (the fifo algorithm: the wait part alone, min(1, ln(1 + wait/1h) / ln(1 + 7d/1h))); wait from the eligible time (end of dependencies), else the submit time, 0 when unknown; length = the predicted runtime, else the walltime"},
	{"f3", "fair_share", "tenants that have used less than their contracted share",
		"max(0, target - usage_share) / target, usage decayed by a half-life (with the fair share of service, the larger of that and 1 - S/s, s the tenant's average bounded slowdown and S everyone's); 0.5 when the tenant has no target"},
	{"f4", "topology", "jobs that fit in few dragonfly groups",
		"1 - groups_needed / groups_in_system, groups_needed = fewest groups whose free nodes hold the job (all usable nodes if the free ones cannot)"},
	{"f5", "data_ready", "jobs whose input data is already on the hot tier",
		"fraction of the input on the hot tier; 0.5 when unknown"},
	{"f6", "backlog", "every job alike when the queue is deep (a system-wide urgency signal)",
		"min(1, queued node-hours / remaining running node-hours); 1 when nothing runs and work is queued, 0 when nothing is queued"},
	{"f7", "energy", "every job alike when energy is cheap",
		"1 - normalised energy price now; 0.5 when unknown"},
	{"f8", "checkpoint", "jobs that checkpoint quickly (cheap to preempt or reclaim)",
		"1 / (1 + checkpoint minutes); 0 when not checkpointable; 0.5 when checkpointable with unknown time"},
	{"f9", "conformance", "jobs whose nodes can share one conformance fingerprint",
		"min(1, largest conformance group among the nodes that can run the job — free or busy, Ready, own or borrowable — / requested nodes)"},
}

// clamp01 limits x to [0,1]; NaN becomes 0.
func clamp01(x float64) float64 {
	switch {
	case x > 1:
		return 1
	case x >= 0:
		return x
	default: // negative or NaN
		return 0
	}
}

// fPriority is f1.
func fPriority(class int) float64 {
	return clamp01(float64(class) / model.MaxPriorityClass)
}

// fWait is f2 for a wait (negative waits count as none) of a job expected
// to run length: WaitShare of it grows with the wait (log, saturating at
// WaitSaturation), the rest rewards short expected runs (the SJBF lesson:
// log of the length between a minute and model.MaxWalltime).
// A negative length leaves the length out (the fifo algorithm: first in,
// first out): f2 is then the wait part alone, scaled to [0,1].
func fWait(wait, length time.Duration) float64 {
	w := 0.0
	if wait > 0 {
		w = clamp01(math.Log1p(float64(wait)/float64(WaitReference)) / waitScale)
	}
	if length < 0 {
		return w
	}
	return clamp01(WaitShare*w + (1-WaitShare)*fShort(length))
}

// fShort is 1 for a job expected to run at most a minute, 0 for one expected
// to run model.MaxWalltime or more (or unknown), log-linear between.
func fShort(length time.Duration) float64 {
	if length <= 0 {
		return 0
	}
	return clamp01(1 - math.Log1p(float64(length)/float64(ShortReference))/shortScale)
}

// The denominators of f2's two parts, computed once (the same bits as
// computing them per job, which 100,000 pending jobs made a tenth of the
// scoring time).
var (
	waitScale  = math.Log1p(float64(WaitSaturation) / float64(WaitReference))
	shortScale = math.Log1p(float64(ShortHorizon) / float64(ShortReference))
)

// fFairShare is f3 for a tenant's target and usage shares.
func fFairShare(target, usage float64) float64 {
	if !(target > 0) { // zero, negative or NaN: no contract
		return NeutralFairShare
	}
	if math.IsNaN(usage) {
		return NeutralFairShare
	}
	return clamp01(math.Max(0, target-usage) / target)
}

// fTopology is f4: groupsNeeded < 0 means no set of usable nodes holds the
// job at all (it cannot run, so it gets 0).
func fTopology(groupsNeeded, groupsInSystem int) float64 {
	if groupsNeeded < 0 || groupsInSystem <= 0 {
		return 0
	}
	return clamp01(1 - float64(groupsNeeded)/float64(groupsInSystem))
}

// fDataReady is f5; a negative or NaN fraction is unknown.
func fDataReady(frac float64) float64 {
	if !(frac >= 0) {
		return NeutralDataReady
	}
	return clamp01(frac)
}

// fBacklog is f6 from queued and running node-hours.
func fBacklog(queued, running float64) float64 { return model.BacklogPressure(queued, running) }

// fEnergy is f7; a negative or NaN price is unknown.
func fEnergy(price float64) float64 {
	if !(price >= 0) {
		return NeutralEnergy
	}
	return 1 - clamp01(price)
}

// fCheckpoint is f8.
func fCheckpoint(mode model.CheckpointMode, minutes float64) float64 {
	if mode == "" || mode == model.CheckpointNone {
		return 0
	}
	if !(minutes > 0) { // 0 = unknown; negative or NaN are nonsense
		return NeutralCheckpoint
	}
	return clamp01(1 / (1 + minutes))
}

// fConformance is f9: the largest conformance group among the free
// candidate nodes against the requested node count.
func fConformance(largest, requested int) float64 {
	if requested <= 0 {
		requested = 1
	}
	return clamp01(float64(largest) / float64(requested))
}

// score is Σ wᵢ·fᵢ, summed in index order (the same inputs give the same bits).
func score(w *model.Weights, f *[model.NumFactors]float64) float64 {
	s := 0.0
	for i := range f {
		s += w[i] * f[i]
	}
	return s
}
