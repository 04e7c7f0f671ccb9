package checkpoint

import (
	"time"

	"github.com/latticehpc/lattice/model"
)

// Job is what the cost model needs to know about one running allocation.
type Job struct {
	ID    uint64
	Nodes int // nodes it holds
	Mode  model.CheckpointMode
	// CheckpointMinutes is the user's estimate of one checkpoint's write
	// time; 0 (or anything not a finite positive number) = unknown, and
	// Params.DefaultCheckpointMinutes is used.
	CheckpointMinutes float64
	Start             time.Time // when this run started; zero = not started
	// LastCheckpoint is when its latest checkpoint was acknowledged; zero =
	// never. One from an earlier run (before Start) is what this run
	// resumed from.
	LastCheckpoint time.Time
	Walltime       time.Duration
	// OnBorrowedNodes says it runs on nodes borrowed from another vCluster,
	// which their home may reclaim.
	OnBorrowedNodes bool
	PriorityClass   int // 0..10
}

// JobFromAllocation describes a for the cost model. Nodes is the number of
// nodes assigned, or NodesMin before any are; an empty checkpoint mode is
// none. onBorrowed says whether any of its nodes is borrowed (the caller
// knows the nodes' home vClusters).
func JobFromAllocation(a *model.Allocation, onBorrowed bool) Job {
	if a == nil {
		return Job{}
	}
	nodes := len(a.Nodes)
	if nodes == 0 {
		nodes = a.NodesMin
	}
	mode := a.Checkpoint
	if mode == "" {
		mode = model.CheckpointNone
	}
	return Job{
		ID:                a.ID,
		Nodes:             nodes,
		Mode:              mode,
		CheckpointMinutes: a.CheckpointMinutes,
		Start:             a.StartTime,
		LastCheckpoint:    a.LastCheckpointAt,
		Walltime:          a.Walltime,
		OnBorrowedNodes:   onBorrowed,
		PriorityClass:     a.PriorityClass,
	}
}

// Candidate reports whether the broker should consider a for a proactive
// checkpoint or the lead-time signal: it is Running (not already
// checkpointing), not being cancelled, and its mode is checkpointable.
// Victims for PreemptionCost are any running allocation, checkpointable or
// not.
func Candidate(a *model.Allocation) bool {
	return a != nil && a.State == model.StateRunning && !a.CancelRequested && a.Checkpoint.Checkpointable()
}

// Situation is the system around the jobs at one broker cycle.
type Situation struct {
	Now time.Time
	// BacklogPressure is the solver's f6 signal, 0..1: queued node-hours /
	// remaining running node-hours, capped at 1 (see BacklogPressure).
	// Values outside 0..1 are clamped; NaN counts as 0.
	BacklogPressure float64
}

// BacklogPressure is f6 (model.BacklogPressure), for callers of the broker.
func BacklogPressure(queuedNodeHours, runningNodeHours float64) float64 {
	return model.BacklogPressure(queuedNodeHours, runningNodeHours)
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
