package checkpoint

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Params are the knobs of the cost model. Every Value and Cost term is in
// node-hours, so no currency or price enters the model. In the latticed
// config file they sit under the `checkpoint:` key with the same snake_case
// names; durations are written as Go durations ("1h", "30m") in YAML and as
// nanoseconds in JSON. Use DefaultParams and override what differs.
type Params struct {
	// DefaultCheckpointMinutes is how long, in minutes, one checkpoint
	// takes to write when the user gave no estimate (--checkpoint-minutes).
	// Default 5; allowed > 0 and at most a year.
	DefaultCheckpointMinutes float64 `yaml:"default_checkpoint_minutes" json:"default_checkpoint_minutes"`

	// FailureRatePerNodeHour is the rate, in failures per node-hour, at
	// which a node fails and takes every allocation running on it down.
	// A job on n nodes with R hours left loses its unsaved work with
	// probability 1 − exp(−rate·n·R). Default 1e-4 (a node MTBF of
	// 10,000 hours); allowed >= 0.
	FailureRatePerNodeHour float64 `yaml:"failure_rate_per_node_hour" json:"failure_rate_per_node_hour"`

	// ReclaimRatePerHour is the rate, per hour, at which the home vCluster
	// of borrowed nodes takes them back. Default 0.02 (a reclaim every 50
	// hours on average); allowed >= 0.
	ReclaimRatePerHour float64 `yaml:"reclaim_rate_per_hour" json:"reclaim_rate_per_hour"`

	// PreemptRatePerHour is the rate, per hour, at which higher-class work
	// preempts a job of priority class 0 on its own vCluster's nodes; a job
	// of class c is preempted at rate·(10 − c)/10 (class 10 never).
	// Default 0.005 (every 200 hours); allowed >= 0.
	PreemptRatePerHour float64 `yaml:"preempt_rate_per_hour" json:"preempt_rate_per_hour"`

	// PreemptabilityWeight is the share, 0..1, of its unsaved work a job
	// loses in expectation when it is preempted or reclaimed without a
	// fresh checkpoint: its preemption checkpoint may miss the deadline,
	// and a fresh one lets it be stopped at once. Default 0.25.
	PreemptabilityWeight float64 `yaml:"preemptability_weight" json:"preemptability_weight"`

	// BacklogWeight is the share, 0..1, of its unsaved work credited to a
	// checkpoint when the backlog pressure is 1 (scaled down linearly to 0
	// with no backlog): a deep queue makes the broker more aggressive, so
	// that running work can give way cheaply. Default 0.02.
	BacklogWeight float64 `yaml:"backlog_weight" json:"backlog_weight"`

	// ComputeWasteFraction is the compute lost around a checkpoint, as a
	// fraction of its write time on every node of the job: reaching a
	// consistent point before the write, and warming caches, buffers and
	// collectives up after it. Default 0.2; allowed >= 0.
	ComputeWasteFraction float64 `yaml:"compute_waste_fraction" json:"compute_waste_fraction"`

	// StorageCostNodeHours is the cost of keeping one checkpoint, in
	// node-hour equivalents per node of the job (a checkpoint's size grows
	// with its node count). Default 0.01; allowed >= 0.
	StorageCostNodeHours float64 `yaml:"storage_cost_node_hours" json:"storage_cost_node_hours"`

	// MinInterval is the least time between two proactive checkpoints of
	// one allocation. Default 1h; allowed 0..365 days.
	MinInterval time.Duration `yaml:"min_interval" json:"min_interval"`

	// MinRunTime is how long an allocation must have run before its first
	// proactive checkpoint. Default 30m; allowed 0..365 days.
	MinRunTime time.Duration `yaml:"min_run_time" json:"min_run_time"`

	// EndProximityWindow sets how steeply PreemptionCost grows as a job
	// nears the end of its walltime: the term is nodes·window·exp(−R/window)
	// node-hours for R left, so a job about to free its nodes anyway is a
	// poor victim. Default 1h; 0 turns the term off; allowed 0..365 days.
	EndProximityWindow time.Duration `yaml:"end_proximity_window" json:"end_proximity_window"`
}

// DefaultParams returns the defaults documented on each field of Params.
func DefaultParams() Params {
	return Params{
		DefaultCheckpointMinutes: 5,
		FailureRatePerNodeHour:   1e-4,
		ReclaimRatePerHour:       0.02,
		PreemptRatePerHour:       0.005,
		PreemptabilityWeight:     0.25,
		BacklogWeight:            0.02,
		ComputeWasteFraction:     0.2,
		StorageCostNodeHours:     0.01,
		MinInterval:              time.Hour,
		MinRunTime:               30 * time.Minute,
		EndProximityWindow:       time.Hour,
	}
}

// maxMinutes bounds DefaultCheckpointMinutes: the longest walltime.
const maxMinutes = float64(model.MaxWalltime / time.Minute)

// Validate reports every field out of its allowed range, one
// *model.FieldError each (joined), naming the field as the config file spells
// it ("checkpoint.min_interval") and what is allowed. NaN and infinities are
// never allowed.
func (p Params) Validate() error {
	var errs []error
	num := func(field string, v, lo, hi float64, loOpen bool, allowed string) {
		bad := math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi || (loOpen && v == lo)
		if bad {
			errs = append(errs, &model.FieldError{Field: "checkpoint." + field,
				Value: strconv.FormatFloat(v, 'g', -1, 64), Allowed: allowed})
		}
	}
	dur := func(field string, d time.Duration) {
		if d < 0 || d > model.MaxWalltime {
			errs = append(errs, &model.FieldError{Field: "checkpoint." + field, Value: d.String(),
				Allowed: "a duration from 0 to 365 days (e.g. 30m, 1h)"})
		}
	}
	const rate = "a finite rate >= 0 "
	num("default_checkpoint_minutes", p.DefaultCheckpointMinutes, 0, maxMinutes, true,
		"a number of minutes > 0 and at most 525600 (365 days)")
	num("failure_rate_per_node_hour", p.FailureRatePerNodeHour, 0, math.MaxFloat64, false, rate+"(failures per node-hour)")
	num("reclaim_rate_per_hour", p.ReclaimRatePerHour, 0, math.MaxFloat64, false, rate+"(reclaims per hour)")
	num("preempt_rate_per_hour", p.PreemptRatePerHour, 0, math.MaxFloat64, false, rate+"(preemptions per hour)")
	num("preemptability_weight", p.PreemptabilityWeight, 0, 1, false, "a fraction from 0 to 1")
	num("backlog_weight", p.BacklogWeight, 0, 1, false, "a fraction from 0 to 1")
	num("compute_waste_fraction", p.ComputeWasteFraction, 0, math.MaxFloat64, false, "a finite fraction of the write time >= 0")
	num("storage_cost_node_hours", p.StorageCostNodeHours, 0, math.MaxFloat64, false, "a finite number of node-hours per node >= 0")
	dur("min_interval", p.MinInterval)
	dur("min_run_time", p.MinRunTime)
	dur("end_proximity_window", p.EndProximityWindow)
	return errors.Join(errs...)
}
