package model

import (
	"fmt"
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
}

// Defaults for vCluster settings.
const (
	DefaultCycleInterval    = 5 * time.Second
	DefaultMinInterval      = 500 * time.Millisecond
	DefaultReservationDepth = 1
)

// Validate checks a vCluster definition.
func (v *VCluster) Validate() error {
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

// Validate checks a tenant definition.
func (t *Tenant) Validate() error {
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
