package checkpoint

import (
	"math"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Why a Decision is what it is, for logs and `explain`. Evaluate checks them
// in this order and reports the first that holds.
const (
	ReasonNotCheckpointable = "not_checkpointable" // its mode is none (or unknown)
	ReasonNotStarted        = "not_started"        // no start time, or it starts after now
	ReasonMinRunTime        = "min_run_time"       // it has run less than Params.MinRunTime
	ReasonMinInterval       = "min_interval"       // its last checkpoint is less than Params.MinInterval old
	ReasonEndsBeforeWrite   = "ends_before_write"  // less walltime is left than one checkpoint takes
	ReasonValueNotAboveCost = "value_not_above_cost"
	ReasonValueAboveCost    = "value_above_cost" // the only reason with Checkpoint true
)

// Decision is Evaluate's answer for one job, with every term of the model so
// that it can be explained and logged. All amounts are in node-hours; the
// terms are computed even when a rule forbids the checkpoint.
type Decision struct {
	ID         uint64  `json:"id"`
	Checkpoint bool    `json:"checkpoint"`
	Reason     string  `json:"reason"`
	Value      float64 `json:"value"` // RecomputeSaved + Preemptability + BacklogRelief
	Cost       float64 `json:"cost"`  // WriteTime + ComputeWaste + StorageCost

	// WorkAtRisk is the work since the last checkpoint (or the start):
	// what a failure or a stop would lose now.
	WorkAtRisk     float64 `json:"work_at_risk"`
	RecomputeSaved float64 `json:"recompute_saved"`
	Preemptability float64 `json:"preemptability"`
	BacklogRelief  float64 `json:"backlog_relief"`
	WriteTime      float64 `json:"write_time"`
	ComputeWaste   float64 `json:"compute_waste"`
	StorageCost    float64 `json:"storage_cost"`
}

// Evaluate weighs a checkpoint of j now. With W the work at risk (node-hours
// since the later of the start and the last checkpoint), n the nodes, R the
// hours of walltime left and w the write time in hours:
//
//	RecomputeSaved = W · (1 − exp(−FailureRatePerNodeHour·n·R))
//	Preemptability = PreemptabilityWeight · W · (1 − exp(−ρ·R)),
//	                 ρ = ReclaimRatePerHour on borrowed nodes,
//	                 else PreemptRatePerHour·(10 − class)/10
//	BacklogRelief  = BacklogWeight · BacklogPressure · W
//	WriteTime      = w · n
//	ComputeWaste   = ComputeWasteFraction · w · n
//	StorageCost    = StorageCostNodeHours · n
//
// It checkpoints when Value > Cost, unless the mode is not checkpointable,
// the job has not started or has run less than MinRunTime, its last
// checkpoint is more recent than MinInterval, or less walltime is left than
// the write takes. p should be valid (Params.Validate); then every term is
// finite and >= 0.
func Evaluate(p Params, j Job, s Situation) Decision {
	nodes := float64(max(j.Nodes, 0))
	write := CheckpointWriteTime(p, j)
	writeH := write.Hours()
	left := remaining(j, s.Now)
	leftH := max(left.Hours(), 0)
	risk := workAtRisk(j, s.Now, nodes)

	d := Decision{ID: j.ID, WorkAtRisk: risk}
	d.RecomputeSaved = risk * probability(p.FailureRatePerNodeHour*nodes*leftH)
	d.Preemptability = p.PreemptabilityWeight * risk * probability(preemptRate(p, j)*leftH)
	d.BacklogRelief = p.BacklogWeight * clamp01(s.BacklogPressure) * risk
	d.WriteTime = writeH * nodes
	d.ComputeWaste = p.ComputeWasteFraction * writeH * nodes
	d.StorageCost = p.StorageCostNodeHours * nodes
	d.Value = d.RecomputeSaved + d.Preemptability + d.BacklogRelief
	d.Cost = d.WriteTime + d.ComputeWaste + d.StorageCost

	switch {
	case !j.Mode.Checkpointable():
		d.Reason = ReasonNotCheckpointable
	case !started(j, s.Now):
		d.Reason = ReasonNotStarted
	case s.Now.Sub(j.Start) < p.MinRunTime:
		d.Reason = ReasonMinRunTime
	case !j.LastCheckpoint.IsZero() && s.Now.Sub(j.LastCheckpoint) < p.MinInterval:
		d.Reason = ReasonMinInterval
	case left < write:
		d.Reason = ReasonEndsBeforeWrite
	case !(d.Value > d.Cost):
		d.Reason = ReasonValueNotAboveCost
	default:
		d.Checkpoint = true
		d.Reason = ReasonValueAboveCost
	}
	return d
}

// CheckpointWriteTime is how long one checkpoint of j takes to write: the
// user's estimate when it is a positive number, else
// p.DefaultCheckpointMinutes; at most 365 days.
func CheckpointWriteTime(p Params, j Job) time.Duration {
	minutes := j.CheckpointMinutes
	if !(minutes > 0) || math.IsInf(minutes, 1) {
		minutes = p.DefaultCheckpointMinutes
	}
	if !(minutes > 0) {
		return 0
	}
	minutes = min(minutes, maxMinutes)
	return time.Duration(minutes * float64(time.Minute))
}

// started reports whether j's run has begun by now.
func started(j Job, now time.Time) bool {
	return !j.Start.IsZero() && !now.Before(j.Start)
}

// remaining is the walltime j has left at now (negative once overrun); its
// whole walltime before it starts.
func remaining(j Job, now time.Time) time.Duration {
	if !started(j, now) {
		return j.Walltime
	}
	return j.Walltime - now.Sub(j.Start)
}

// workAtRisk is the node-hours j has computed since the later of its start
// and its last checkpoint.
func workAtRisk(j Job, now time.Time, nodes float64) float64 {
	if !started(j, now) {
		return 0
	}
	from := j.Start
	if j.LastCheckpoint.After(from) {
		from = j.LastCheckpoint
	}
	if !now.After(from) {
		return 0
	}
	return now.Sub(from).Hours() * nodes
}

// preemptRate is the rate, per hour, at which j's nodes are taken from it:
// a reclaim on borrowed nodes, higher-class work on its own.
func preemptRate(p Params, j Job) float64 {
	if j.OnBorrowedNodes {
		return p.ReclaimRatePerHour
	}
	class := min(max(j.PriorityClass, 0), model.MaxPriorityClass)
	return p.PreemptRatePerHour * float64(model.MaxPriorityClass-class) / model.MaxPriorityClass
}

// probability is 1 − exp(−x): the chance that a Poisson event of expected
// count x happens; 0 for x <= 0 or NaN.
func probability(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return -math.Expm1(-x)
}
