package power

import (
	"fmt"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Shift is the rule that lets flexible work wait for cheaper energy.
// Flexible work is work that can checkpoint, or whose priority class is at
// most MaxClass, in a vCluster whose type shifts (ShiftsType). Such a job
// waits (pending reason EnergyPrice) while a start later — but no later
// than MaxDelay after it became eligible, its deadline — would run it at a
// mean normalised price at least MinSaving lower than a start now.
type Shift struct {
	// MaxDelay is how long past its eligible time flexible work may be held
	// for cheaper energy; 0 turns shifting off.
	MaxDelay time.Duration
	// MinSaving is the drop in mean normalised price (0..1) over the job's
	// run that is worth waiting for.
	MinSaving float64
	// MaxClass: priority classes 0..MaxClass are flexible; -1 = only
	// checkpointable work.
	MaxClass int
	// MaxStretch, when > 0, also bounds the wait by this multiple of the
	// job's walltime, so short jobs wait little (their bounded slowdown
	// would suffer most) while long ones, which hold most node-hours, move.
	MaxStretch float64
}

// Defaults of Shift.
const (
	DefaultMaxDelay  = 12 * time.Hour
	DefaultMinSaving = 0.15
	DefaultMaxClass  = 3
	// DefaultMaxStretch: by default a job waits for a price at most as long
	// as its walltime, so shifting at most doubles its turnaround.
	DefaultMaxStretch = 1.0
	// maxWindow caps the run window a start is priced over: beyond a day
	// every start averages the same prices.
	maxWindow = 24 * time.Hour
	minWindow = 15 * time.Minute
)

// DefaultShift is the rule a site gets with a price schedule and no other
// setting.
func DefaultShift() Shift {
	return Shift{MaxDelay: DefaultMaxDelay, MinSaving: DefaultMinSaving, MaxClass: DefaultMaxClass, MaxStretch: DefaultMaxStretch}
}

// Validate checks the rule's settings.
func (sh Shift) Validate() error {
	if sh.MaxDelay < 0 || sh.MaxDelay > 7*24*time.Hour {
		return &model.FieldError{Field: "energy-max-delay", Value: sh.MaxDelay.String(), Allowed: "a duration from 0 (off) to 168h"}
	}
	if !(sh.MinSaving > 0 && sh.MinSaving <= 1) {
		return &model.FieldError{Field: "energy-min-saving", Value: fmt.Sprint(sh.MinSaving), Allowed: "a fraction of the price range in (0,1]"}
	}
	if sh.MaxStretch < 0 || sh.MaxStretch > 1000 {
		return &model.FieldError{Field: "energy-max-stretch", Value: fmt.Sprint(sh.MaxStretch), Allowed: "0 (no per-job bound) or a multiple of the walltime up to 1000"}
	}
	if sh.MaxClass < -1 || sh.MaxClass > model.MaxPriorityClass {
		return &model.FieldError{Field: "energy-max-class", Value: fmt.Sprint(sh.MaxClass), Allowed: "-1 (checkpointable work only) or a priority class 0..10"}
	}
	return nil
}

// ShiftsType reports whether work of a vCluster type may be held for
// cheaper energy: batch and training work may; interactive, service and
// sensitive work never waits for a price.
func ShiftsType(t model.VClusterType) bool {
	return t == model.TypeHPCBatch || t == model.TypeMLTraining || t == ""
}

// Flexible reports whether a job may be held for cheaper energy (whether
// the rule is on or not: MaxDelay 0 holds nothing).
func (sh Shift) Flexible(class int, cp model.CheckpointMode) bool {
	return cp.Checkpointable() || class <= sh.MaxClass
}

// Delay is how long past its eligible time a job asking for walltime may
// be held: MaxDelay, or less for short jobs under MaxStretch.
func (sh Shift) Delay(walltime time.Duration) time.Duration {
	d := sh.MaxDelay
	if sh.MaxStretch > 0 {
		d = min(d, time.Duration(sh.MaxStretch*float64(max(walltime, 0))))
	}
	return max(d, 0)
}

// Defer reports whether flexible work eligible since eligible, asking for
// walltime, should wait at now for a cheaper start before its deadline
// (eligible + MaxDelay). It looks at the price changes between now and the
// deadline and compares the mean normalised price over the job's run (its
// walltime, 15 min to 24 h) at each with a start now.
func (sh Shift) Defer(s *Schedule, now, eligible time.Time, walltime time.Duration) bool {
	if s == nil || sh.MaxDelay <= 0 || s.max <= s.min {
		return false
	}
	deadline := eligible.Add(sh.Delay(walltime))
	if !now.Before(deadline) {
		return false
	}
	w := min(max(walltime, minWindow), maxWindow)
	nowMean := s.MeanNormalized(now, now.Add(w))
	if nowMean < sh.MinSaving {
		return false // nothing can be cheaper by enough
	}
	c := s.NextChange(now)
	for i := 0; i < 2000 && !c.After(deadline); i++ {
		if nowMean-s.MeanNormalized(c, c.Add(w)) >= sh.MinSaving {
			return true
		}
		c = s.NextChange(c)
	}
	return false
}
