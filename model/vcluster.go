package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// VClusterType names the kind of workload a vCluster serves. It picks the
// default weights profile.
type VClusterType string

// vCluster types.
const (
	TypeHPCBatch    VClusterType = "hpc-batch"
	TypeMLTraining  VClusterType = "ml-training"
	TypeInteractive VClusterType = "interactive"
	TypeService     VClusterType = "service"
	TypeSensitive   VClusterType = "sensitive"
)

// VClusterTypes lists the known types.
var VClusterTypes = []VClusterType{TypeHPCBatch, TypeMLTraining, TypeInteractive, TypeService, TypeSensitive}

// NumFactors is the number of cost-function factors, f1..f9.
const NumFactors = 9

// Weights are w1..w9 of the cost function, index 0 = w1.
type Weights [NumFactors]float64

// ReservationsAll asks the backfill to protect every queued job (conservative).
const ReservationsAll = -1

// VCluster is a policy partition with its own scheduler loop.
type VCluster struct {
	Name           string       `json:"name"`
	Type           VClusterType `json:"type"`
	WeightsProfile string       `json:"weights_profile"`
	Weights        Weights      `json:"weights"`
	// CycleInterval is the scheduler's period; MinInterval bounds how often
	// submissions and completions may wake it early.
	CycleInterval time.Duration `json:"cycle_interval"`
	MinInterval   time.Duration `json:"min_interval"`
	// ReservationDepth is how many queued jobs the backfill protects with a
	// reservation: 1 = EASY, N, or ReservationsAll.
	ReservationDepth int `json:"reservation_depth"`
	// AllowLending lets other vClusters borrow this one's idle nodes;
	// AllowBorrowing lets this one borrow theirs.
	AllowLending   bool `json:"allow_lending"`
	AllowBorrowing bool `json:"allow_borrowing"`
	// PowerCapWatts bounds the estimated draw of the nodes it currently uses; 0 = none.
	PowerCapWatts int64 `json:"power_cap_watts,omitempty"`

	// Algorithm is how the loop places work (backfill, fifo, binpack,
	// sensitive); empty = the type's default (AlgorithmFor).
	Algorithm Algorithm `json:"algorithm,omitempty"`
	// MaxLendFraction bounds the share of its home nodes lent out at once,
	// in (0,1]; 0 (older states) means 1.
	MaxLendFraction float64 `json:"max_lend_fraction,omitempty"`
	// ReclaimGrace is how long a borrower's (or a preemption victim's)
	// allocation has to checkpoint before it is stopped; 0 = DefaultReclaimGrace.
	ReclaimGrace time.Duration `json:"reclaim_grace,omitempty"`
	// ReclaimBackoff is how long a node this vCluster reclaimed may not be
	// borrowed again by the vCluster it was taken from; 0 = DefaultReclaimBackoff.
	ReclaimBackoff time.Duration `json:"reclaim_backoff,omitempty"`
	// Preemption lets higher-class pending work of this vCluster preempt
	// strictly lower classes running on its nodes.
	Preemption bool `json:"preemption,omitempty"`
	// PreemptHorizon: no victim is chosen when the preemptor is expected to
	// start within this long without one; 0 = DefaultPreemptHorizon.
	PreemptHorizon time.Duration `json:"preempt_horizon,omitempty"`
	// PreemptMode is what preemption does to work that cannot checkpoint
	// (see PreemptMode); "" = DefaultPreemptMode. Preemption off wins.
	PreemptMode PreemptMode `json:"preempt_mode,omitempty"`
	// CheckpointableOnlyOnBorrowed keeps work that cannot checkpoint off
	// borrowed nodes (it could not be reclaimed without losing its progress).
	CheckpointableOnlyOnBorrowed bool `json:"checkpointable_only_on_borrowed,omitempty"`
	// FairShare is what the fair-share factor f3 ranks tenants by (see
	// FairShareMode); "" = the default (EffectiveFairShare).
	FairShare FairShareMode `json:"fair_share,omitempty"`
	// ServiceProtect gives a reservation to a pending job whose bounded
	// slowdown would take its tenant's recent average above Jain's
	// threshold x* = Σs²/Σs over the tenants' averages (vcluster,
	// docs/solver.md "Protecting the users who set Jain's index");
	// nil = the default (Protects).
	ServiceProtect *bool `json:"service_protect,omitempty"`
	// RunningEnds is when the plan expects running work to end (see
	// RunningEndsMode); "" = the default (EffectiveRunningEnds).
	RunningEnds RunningEndsMode `json:"running_ends,omitempty"`
	// PredictedStarts lets a pending job start in a hole that its
	// predicted runtime fits, not only its walltime (EASY++'s backfill;
	// the job keeps its walltime as its limit); nil = the default
	// (StartsByPrediction).
	PredictedStarts *bool `json:"predicted_starts,omitempty"`
}

// RunningEndsMode is when the plan expects running work to end.
type RunningEndsMode string

// Running-ends modes.
const (
	// RunningEndsPredicted: at start + the runtime predicted from the
	// user's recent runs (corrected once outlived), at most the walltime
	// (the default of fifo, binpack and sensitive vClusters).
	RunningEndsPredicted RunningEndsMode = "predicted"
	// RunningEndsWalltime: at start + walltime, EASY's and Slurm's
	// reservations (the default of backfill vClusters).
	RunningEndsWalltime RunningEndsMode = "walltime"
)

// RunningEndsModes lists the running-ends modes.
var RunningEndsModes = []RunningEndsMode{RunningEndsPredicted, RunningEndsWalltime}

// ParseRunningEnds accepts a known running-ends mode in any letter case.
func ParseRunningEnds(s string) (RunningEndsMode, error) {
	return parseMode("running-ends", s, RunningEndsModes)
}

// EffectiveRunningEnds is RunningEnds with its default: walltime for the
// backfill algorithm (with StartsByPrediction: measured on the published
// traces, docs/quality.md), predicted for the others.
func (v *VCluster) EffectiveRunningEnds() RunningEndsMode {
	if v.RunningEnds != "" {
		return v.RunningEnds
	}
	return forBackfill(v, RunningEndsWalltime, RunningEndsPredicted)
}

// StartsByPrediction is PredictedStarts with its default: on for the
// backfill algorithm, off for the others.
func (v *VCluster) StartsByPrediction() bool {
	if v.PredictedStarts != nil {
		return *v.PredictedStarts
	}
	return forBackfill(v, true, false)
}

// forBackfill is a setting's default: backfill for the backfill
// algorithm, other for the others.
func forBackfill[T any](v *VCluster, backfill, other T) T {
	if v.EffectiveAlgorithm() == AlgorithmBackfill {
		return backfill
	}
	return other
}

// FairShareMode is what f3 ranks tenants by.
type FairShareMode string

// Fair-share modes.
const (
	// FairShareUsage: a tenant behind its share of decayed node-seconds
	// ranks up (the default of fifo, binpack and sensitive vClusters).
	FairShareUsage FairShareMode = "usage"
	// FairShareService: also a tenant whose recent average bounded
	// slowdown is above everyone's.
	FairShareService FairShareMode = "service"
	// FairShareJobService: also a job whose wait would take its tenant's
	// recent average bounded slowdown above everyone's, job by job (the
	// default of backfill vClusters).
	FairShareJobService FairShareMode = "job-service"
)

// FairShareModes lists the fair-share modes.
var FairShareModes = []FairShareMode{FairShareUsage, FairShareService, FairShareJobService}

// ParseFairShare accepts a known fair-share mode in any letter case.
func ParseFairShare(s string) (FairShareMode, error) {
	return parseMode("fair-share", s, FairShareModes)
}

// EffectiveFairShare is FairShare with its default: job-service for the
// backfill algorithm (measured on the published traces, docs/quality.md),
// usage for the others.
func (v *VCluster) EffectiveFairShare() FairShareMode {
	if v.FairShare != "" {
		return v.FairShare
	}
	return forBackfill(v, FairShareJobService, FairShareUsage)
}

// Protects is ServiceProtect with its default: on for the backfill
// algorithm, off for the others.
func (v *VCluster) Protects() bool {
	if v.ServiceProtect != nil {
		return *v.ServiceProtect
	}
	return forBackfill(v, true, false)
}

// Algorithm is a vCluster's placement behaviour.
type Algorithm string

// Algorithms.
const (
	// AlgorithmBackfill: score order with a head reservation and backfill
	// (GreedyTopologyAwareBackfill); hpc-batch and ml-training.
	AlgorithmBackfill Algorithm = "backfill"
	// AlgorithmFIFO: strict order, nothing starts past a blocked head
	// (interactive).
	AlgorithmFIFO Algorithm = "fifo"
	// AlgorithmBinpack: fill the busiest dragonfly group first, keep whole
	// groups free (service).
	AlgorithmBinpack Algorithm = "binpack"
	// AlgorithmSensitive: one conformance group per allocation (hard), never
	// lends, never borrows, never preempted.
	AlgorithmSensitive Algorithm = "sensitive"
)

// Algorithms lists the algorithms.
var Algorithms = []Algorithm{AlgorithmBackfill, AlgorithmFIFO, AlgorithmBinpack, AlgorithmSensitive}

// ParseAlgorithm accepts a known algorithm name in any letter case.
func ParseAlgorithm(s string) (Algorithm, error) {
	return parseMode("algorithm", s, Algorithms)
}

// exactMode checks a stored mode: empty (the default) or one of modes,
// spelt as it is.
func exactMode[S ~string](field string, v S, modes []S) error {
	if v != "" && !slices.Contains(modes, v) {
		return fieldErr(field, string(v), joinStates(modes))
	}
	return nil
}

// parseMode accepts one of modes in any letter case, with the spaces
// around it trimmed; otherwise the error names field and the allowed
// values.
func parseMode[S ~string](field, s string, modes []S) (S, error) {
	for _, m := range modes {
		if strings.EqualFold(strings.TrimSpace(s), string(m)) {
			return m, nil
		}
	}
	return "", fieldErr(field, s, joinStates(modes))
}

// AlgorithmFor is a type's default algorithm.
func AlgorithmFor(t VClusterType) Algorithm {
	switch t {
	case TypeInteractive:
		return AlgorithmFIFO
	case TypeService:
		return AlgorithmBinpack
	case TypeSensitive:
		return AlgorithmSensitive
	}
	return AlgorithmBackfill
}

// EffectiveAlgorithm is the algorithm the loop runs.
func (v *VCluster) EffectiveAlgorithm() Algorithm {
	if v.Algorithm != "" {
		return v.Algorithm
	}
	return AlgorithmFor(v.Type)
}

// Sensitive reports whether the vCluster follows the sensitive rules: one
// conformance group, no lending, no borrowing, no preemption of its work.
func (v *VCluster) Sensitive() bool { return v.EffectiveAlgorithm() == AlgorithmSensitive }

// Lends reports whether other vClusters may borrow its idle nodes.
func (v *VCluster) Lends() bool { return v.AllowLending && !v.Sensitive() }

// Borrows reports whether it may borrow other vClusters' idle nodes.
func (v *VCluster) Borrows() bool { return v.AllowBorrowing && !v.Sensitive() }

// Preempts reports whether its higher-class work may preempt lower classes.
func (v *VCluster) Preempts() bool { return v.Preemption && !v.Sensitive() }

// LendFraction is MaxLendFraction with its default.
func (v *VCluster) LendFraction() float64 {
	if v.MaxLendFraction <= 0 || v.MaxLendFraction > 1 {
		return 1
	}
	return v.MaxLendFraction
}

// Grace is ReclaimGrace with its default.
func (v *VCluster) Grace() time.Duration {
	if v.ReclaimGrace > 0 {
		return v.ReclaimGrace
	}
	return DefaultReclaimGrace
}

// Backoff is ReclaimBackoff with its default.
func (v *VCluster) Backoff() time.Duration {
	if v.ReclaimBackoff > 0 {
		return v.ReclaimBackoff
	}
	return DefaultReclaimBackoff
}

// Horizon is PreemptHorizon with its default.
func (v *VCluster) Horizon() time.Duration {
	if v.PreemptHorizon > 0 {
		return v.PreemptHorizon
	}
	return DefaultPreemptHorizon
}

// MaxLendable is how many of homeNodes may be lent at once.
func (v *VCluster) MaxLendable(homeNodes int) int {
	if !v.Lends() {
		return 0
	}
	return int(math.Floor(v.LendFraction()*float64(homeNodes) + 1e-9))
}

// Defaults for vCluster settings.
const (
	DefaultCycleInterval    = 5 * time.Second
	DefaultMinInterval      = 500 * time.Millisecond
	DefaultReservationDepth = 1
	// DefaultReclaimGrace is how long a reclaimed or preempted allocation
	// has to checkpoint before it is stopped.
	DefaultReclaimGrace = 60 * time.Second
	// DefaultReclaimBackoff keeps a reclaimed node from going back to the
	// vCluster it was taken from (anti-thrash).
	DefaultReclaimBackoff = 5 * time.Minute
	// DefaultPreemptHorizon: no preemption for work expected to start this soon anyway.
	DefaultPreemptHorizon = 2 * time.Minute
)

// Validate checks a vCluster definition before it is proposed.
func (v *VCluster) Validate() error { return v.ValidateLevel0() }

// ValidateLevel0 is Validate's rules of feature level 0.
// It is frozen: the Raft log's entries of feature level 0 are applied
// with exactly these rules (quorum Apply), on every member, forever.
// Tighten or loosen a rule in Validate instead, which is checked before a
// proposal (TestLevel0RulesAreFrozen pins this function's verdicts).
func (v *VCluster) ValidateLevel0() error {
	if !validName(v.Name) {
		return fieldErr("vcluster.name", v.Name, "letters, digits, '.', '-' and '_'")
	}
	if _, err := ParseVClusterType(string(v.Type)); err != nil {
		return err
	}
	for i, w := range v.Weights {
		if w < 0 || w > 1 {
			return fieldErr(fmt.Sprintf("weight f%d", i+1), fmt.Sprint(w), "a number between 0 and 1")
		}
	}
	if v.CycleInterval < 0 || v.CycleInterval > time.Hour {
		return fieldErr("cycle", v.CycleInterval.String(), "a duration between 0 (default) and 1h")
	}
	if v.ReservationDepth < ReservationsAll {
		return fieldErr("reservation-depth", itoa(v.ReservationDepth), "0 (none), N >= 1, or all")
	}
	if v.PowerCapWatts < 0 {
		return fieldErr("power-cap", fmt.Sprint(v.PowerCapWatts), "watts >= 0 (0 = no cap)")
	}
	if v.Algorithm != "" {
		if _, err := ParseAlgorithm(string(v.Algorithm)); err != nil {
			return err
		}
	}
	if err := cmp.Or(exactMode("fair-share", v.FairShare, FairShareModes),
		exactMode("running-ends", v.RunningEnds, RunningEndsModes),
		exactMode("preempt-mode", v.PreemptMode, PreemptModes)); err != nil {
		return err
	}
	if v.MaxLendFraction < 0 || v.MaxLendFraction > 1 {
		return fieldErr("max-lend-fraction", fmt.Sprint(v.MaxLendFraction), "a fraction between 0 and 1")
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"reclaim-grace", v.ReclaimGrace}, {"reclaim-backoff", v.ReclaimBackoff}, {"preempt-horizon", v.PreemptHorizon}} {
		if d.v < 0 || d.v > 24*time.Hour {
			return fieldErr(d.field, d.v.String(), "a duration between 0 (default) and 24h")
		}
	}
	return nil
}

// ParseVClusterType accepts a known type name.
func ParseVClusterType(s string) (VClusterType, error) {
	for _, t := range VClusterTypes {
		if strings.EqualFold(s, string(t)) {
			return t, nil
		}
	}
	return "", fieldErr("vcluster.type", s, joinStates(VClusterTypes))
}

// TypeForName guesses a vCluster's type from its name: a name that is a type
// ("ml-training") or starts with one ("ml-training-a100") gets that type; any
// other name is hpc-batch.
func TypeForName(name string) VClusterType {
	for _, t := range VClusterTypes {
		if strings.HasPrefix(strings.ToLower(name), string(t)) {
			return t
		}
	}
	return TypeHPCBatch
}

// Tenant is an account that owns allocations: hard quotas (I4) and a
// fair-share target.
type Tenant struct {
	Name string `json:"name"`
	// MaxNodes and MaxRunning are hard quotas; 0 = unlimited.
	MaxNodes   int `json:"max_nodes,omitempty"`
	MaxRunning int `json:"max_running,omitempty"`
	// FairShareTarget is the tenant's contracted share of the machine, 0..1;
	// 0 means no contract (f3 is then neutral).
	FairShareTarget float64 `json:"fair_share_target,omitempty"`
	// Usage is node-seconds decayed by the fair-share half-life, as of UsageTime.
	Usage     float64   `json:"usage,omitempty"`
	UsageTime time.Time `json:"usage_time,omitzero"`
}

// Validate checks a tenant definition before it is proposed.
func (t *Tenant) Validate() error { return t.ValidateLevel0() }

// ValidateLevel0 is Validate's rules of feature level 0.
// It is frozen: the Raft log's entries of feature level 0 are applied
// with exactly these rules (quorum Apply), on every member, forever.
// Tighten or loosen a rule in Validate instead, which is checked before a
// proposal (TestLevel0RulesAreFrozen pins this function's verdicts).
func (t *Tenant) ValidateLevel0() error {
	if !validName(t.Name) {
		return fieldErr("tenant", t.Name, "letters, digits, '.', '-' and '_'")
	}
	if t.MaxNodes < 0 {
		return fieldErr("max-nodes", itoa(t.MaxNodes), "a count >= 0 (0 = unlimited)")
	}
	if t.MaxRunning < 0 {
		return fieldErr("max-running", itoa(t.MaxRunning), "a count >= 0 (0 = unlimited)")
	}
	if t.FairShareTarget < 0 || t.FairShareTarget > 1 {
		return fieldErr("fair-share", fmt.Sprint(t.FairShareTarget), "a share between 0 and 1")
	}
	return nil
}
