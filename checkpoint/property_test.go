package checkpoint

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

var modes = []model.CheckpointMode{model.CheckpointNone, model.CheckpointSignal, model.CheckpointHook,
	model.CheckpointWebhook, "", "bogus"}

// randomJob is a job of any shape the broker may meet, edge cases included:
// not started, starting later, overrun, no nodes, checkpoints from an earlier
// run, nonsense estimates.
func randomJob(r *rand.Rand, id uint64) Job {
	j := Job{ID: id, Mode: modes[r.IntN(len(modes))], PriorityClass: r.IntN(15) - 2,
		OnBorrowedNodes: r.IntN(3) == 0}
	j.Nodes = []int{0, 1, 2, 16, 128, 4096}[r.IntN(6)]
	if r.IntN(2) == 0 {
		j.Nodes = 1 + r.IntN(512)
	}
	j.Walltime = time.Minute + time.Duration(r.Int64N(int64(model.MaxWalltime)))
	if r.IntN(4) == 0 {
		j.Walltime = time.Duration(1+r.IntN(48)) * time.Hour
	}
	switch r.IntN(20) {
	case 0:
		// not started
	case 1:
		j.Start = now.Add(time.Duration(r.Int64N(int64(time.Hour))) + time.Second)
	default:
		j.Start = now.Add(-time.Duration(r.Float64() * 1.2 * float64(j.Walltime)))
	}
	if r.IntN(5) < 3 && !j.Start.IsZero() {
		j.LastCheckpoint = j.Start.Add(time.Duration((r.Float64() - 0.2) * float64(now.Sub(j.Start)+time.Hour)))
	}
	switch r.IntN(6) {
	case 0:
		j.CheckpointMinutes = r.Float64() * 120
	case 1:
		j.CheckpointMinutes = math.NaN()
	case 2:
		j.CheckpointMinutes = -1
	case 3:
		j.CheckpointMinutes = math.Inf(1)
	}
	return j
}

// randomParams are valid parameters, extremes included.
func randomParams(r *rand.Rand) Params {
	rate := func() float64 {
		switch r.IntN(5) {
		case 0:
			return 0
		case 1:
			return 1e6
		}
		return r.Float64() * r.Float64()
	}
	dur := func() time.Duration {
		if r.IntN(5) == 0 {
			return 0
		}
		return time.Duration(r.Int64N(int64(48 * time.Hour)))
	}
	p := Params{
		DefaultCheckpointMinutes: []float64{1e-9, 5, 525600, 1 + r.Float64()*60}[r.IntN(4)],
		FailureRatePerNodeHour:   rate(),
		ReclaimRatePerHour:       rate(),
		PreemptRatePerHour:       rate(),
		PreemptabilityWeight:     r.Float64(),
		BacklogWeight:            r.Float64(),
		ComputeWasteFraction:     rate(),
		StorageCostNodeHours:     rate(),
		MinInterval:              dur(),
		MinRunTime:               dur(),
		EndProximityWindow:       dur(),
	}
	if r.IntN(4) == 0 {
		p = DefaultParams()
	}
	return p
}

var reasons = []string{ReasonNotCheckpointable, ReasonNotStarted, ReasonMinRunTime, ReasonMinInterval,
	ReasonEndsBeforeWrite, ReasonValueNotAboveCost, ReasonValueAboveCost}

func finiteNonNeg(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// TestEvaluateProperties checks, over random jobs, parameters and
// situations, that Evaluate and PreemptionCost are deterministic, finite and
// non-negative, that Value and Cost add up, that a checkpoint is only ever
// asked when every rule allows it, and that Proactive does not depend on the
// order of its input.
func TestEvaluateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		p := randomParams(r)
		if err := p.Validate(); err != nil {
			t.Fatalf("round %d: generator made invalid params: %v", round, err)
		}
		s := Situation{Now: now, BacklogPressure: []float64{0, 1, r.Float64(), 3, -1, math.NaN()}[r.IntN(6)]}
		jobs := make([]Job, 50)
		yes := 0
		for i := range jobs {
			j := randomJob(r, uint64(r.IntN(40))) // duplicate ids on purpose
			jobs[i] = j
			d := Evaluate(p, j, s)
			if d2 := Evaluate(p, j, s); d2 != d {
				t.Fatalf("Evaluate not deterministic for %+v: %+v then %+v", j, d, d2)
			}
			for name, v := range map[string]float64{"Value": d.Value, "Cost": d.Cost, "WorkAtRisk": d.WorkAtRisk,
				"RecomputeSaved": d.RecomputeSaved, "Preemptability": d.Preemptability, "BacklogRelief": d.BacklogRelief,
				"WriteTime": d.WriteTime, "ComputeWaste": d.ComputeWaste, "StorageCost": d.StorageCost} {
				if !finiteNonNeg(v) {
					t.Fatalf("%s = %g for job %+v, params %+v", name, v, j, p)
				}
			}
			checkSums(t, d)
			if !slices.Contains(reasons, d.Reason) {
				t.Fatalf("unknown reason %q", d.Reason)
			}
			if d.Checkpoint != (d.Reason == ReasonValueAboveCost) {
				t.Fatalf("Checkpoint %v with reason %q", d.Checkpoint, d.Reason)
			}
			if d.Checkpoint {
				yes++
				switch {
				case !(d.Value > d.Cost):
					t.Fatalf("checkpoint with Value %g <= Cost %g", d.Value, d.Cost)
				case !j.Mode.Checkpointable():
					t.Fatalf("checkpoint of mode %q", j.Mode)
				case j.Start.IsZero() || now.Sub(j.Start) < p.MinRunTime:
					t.Fatalf("checkpoint of a job that ran %v < %v", now.Sub(j.Start), p.MinRunTime)
				case !j.LastCheckpoint.IsZero() && now.Sub(j.LastCheckpoint) < p.MinInterval:
					t.Fatalf("checkpoint %v after the last one, min %v", now.Sub(j.LastCheckpoint), p.MinInterval)
				case j.Start.Add(j.Walltime).Sub(now) < CheckpointWriteTime(p, j):
					t.Fatalf("checkpoint with %v left < write %v", j.Start.Add(j.Walltime).Sub(now), CheckpointWriteTime(p, j))
				}
			}
			c := PreemptionCost(p, j, now)
			if !finiteNonNeg(c) || c != PreemptionCost(p, j, now) {
				t.Fatalf("PreemptionCost = %g for job %+v, params %+v", c, j, p)
			}
		}
		ids := Proactive(p, jobs, s, 0)
		if len(ids) != yes {
			t.Fatalf("Proactive picked %d jobs, Evaluate said yes to %d", len(ids), yes)
		}
		shuffled := slices.Clone(jobs)
		r.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if got := Proactive(p, shuffled, s, 0); !slices.Equal(got, ids) {
			t.Fatalf("Proactive depends on input order: %v vs %v", got, ids)
		}
		if limit := 1 + r.IntN(5); len(ids) > limit {
			if got := Proactive(p, jobs, s, limit); !slices.Equal(got, ids[:limit]) {
				t.Fatalf("Proactive limit %d = %v, want the first of %v", limit, got, ids)
			}
		}
	}
}
