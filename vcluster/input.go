package vcluster

import (
	"math"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// ReasonArrayTaskLimit holds an array task back while its array runs as many
// tasks as its %MAX allows (Slurm's JobArrayTaskLimit).
const ReasonArrayTaskLimit = "JobArrayTaskLimit"

// DefaultFairShareHalfLife is the half-life of decayed tenant usage (f3).
const DefaultFairShareHalfLife = 7 * 24 * time.Hour

// TenantLoad is what a tenant runs right now (the quorum keeps it as an index).
type TenantLoad struct {
	Nodes   int
	Running int
}

// Snapshot is the committed state one cycle of one vCluster reads. The
// production loop fills it from the quorum under a read lock; the replay
// simulator fills it from its simulated state. Both then call BuildInput, so
// both run the very same scheduling logic.
type Snapshot struct {
	Now      time.Time
	VCluster *model.VCluster
	// Lenders holds the names of vClusters whose idle nodes may be borrowed.
	Lenders map[string]bool
	// Nodes is every node in the system, in a stable order (by name).
	Nodes []*model.Node
	// Allocations maps id to every non-terminal allocation (at least: the
	// ones on Nodes and the pending ones of this vCluster).
	Allocations map[uint64]*model.Allocation
	// Pending lists this vCluster's pending allocations in id order.
	Pending []*model.Allocation
	// Tenants by name; TenantLoad by name (missing = nothing running).
	Tenants    map[string]*model.Tenant
	TenantLoad map[string]TenantLoad
	// Groups is the number of dragonfly groups in the system.
	Groups int
	// PowerHeadroomWatts: < 0 = unlimited.
	PowerHeadroomWatts int64
	// EnergyPrice normalised to [0,1] at Now; < 0 = unknown.
	EnergyPrice float64
	// FairShareHalfLife decays tenant usage; 0 = DefaultFairShareHalfLife.
	FairShareHalfLife time.Duration
}

// BuildInput turns a snapshot into the solver's input: the nodes this
// vCluster may use (its own, and idle Ready nodes of vClusters that lend when
// it may borrow), the release timeline of the work on them, its eligible
// pending allocations with holds, tenant shares and quota room.
func BuildInput(s *Snapshot) solver.Input {
	vc := s.VCluster
	in := solver.Input{
		Now:                s.Now,
		VCluster:           vc.Name,
		Type:               vc.Type,
		Weights:            vc.Weights,
		ReservationDepth:   vc.ReservationDepth,
		Groups:             s.Groups,
		PowerHeadroomWatts: s.PowerHeadroomWatts,
		EnergyPrice:        s.EnergyPrice,
		Tenants:            make(map[string]solver.Tenant, len(s.Tenants)),
	}
	seenRunning := make(map[uint64]bool)
	for _, n := range s.Nodes {
		own := n.CurrentVCluster == vc.Name
		if !own {
			// Another vCluster's node is a candidate only when it is idle,
			// Ready, its current owner is its home (no re-lending) and that
			// home lends, and this vCluster may borrow.
			if !vc.AllowBorrowing || !s.Lenders[n.HomeVCluster] || n.Borrowed() || !n.Schedulable() {
				continue
			}
		}
		sn := solver.Node{
			Name:        n.Name,
			Group:       n.Group,
			Fingerprint: n.Fingerprint,
			GPUType:     n.GPUType,
			GPUs:        n.GPUs,
			Features:    n.Features,
			IdleWatts:   n.IdleWatts,
			BusyWatts:   n.BusyWatts,
			State:       n.State,
			Own:         own,
			Allocation:  n.Allocation,
		}
		if a := s.Allocations[n.Allocation]; a != nil && n.Allocation != 0 {
			sn.FreeAt = expectedEnd(a, s.Now)
			if own && !seenRunning[a.ID] {
				seenRunning[a.ID] = true
				in.Running = append(in.Running, solver.Running{
					ID: a.ID, Tenant: a.Tenant, Nodes: len(a.Nodes), Start: a.StartTime, End: sn.FreeAt,
				})
			}
		} else if n.Allocation != 0 {
			// Busy with something the snapshot does not hold: assume it
			// frees at its walltime's upper bound, i.e. not within this plan.
			sn.FreeAt = s.Now.Add(model.MaxWalltime)
		}
		in.Nodes = append(in.Nodes, sn)
	}

	// Array concurrency: count active tasks per array.
	activeTasks := make(map[uint64]int)
	for _, a := range s.Allocations {
		if a.ArrayJobID != 0 && a.State.Active() {
			activeTasks[a.ArrayJobID]++
		}
	}
	for _, a := range s.Pending {
		if a.State != model.StatePending || a.EligibleTime.IsZero() {
			continue // waits on a dependency: not the solver's to place
		}
		j := solver.Job{
			ID:                a.ID,
			Tenant:            a.Tenant,
			NodesMin:          a.NodesMin,
			NodesMax:          a.NodesMax,
			Walltime:          a.Walltime,
			PriorityClass:     a.PriorityClass,
			SubmitTime:        a.SubmitTime,
			EligibleTime:      a.EligibleTime,
			Constraints:       a.Constraints,
			GPUType:           a.GPUType,
			GPUsPerNode:       a.GPUsPerNode,
			Checkpoint:        a.Checkpoint,
			CheckpointMinutes: a.CheckpointMinutes,
			HotDataFraction:   -1,
		}
		if a.HotDataFraction != nil {
			j.HotDataFraction = *a.HotDataFraction
		}
		if a.ArrayJobID != 0 && a.ArrayMaxConcurrent > 0 {
			if activeTasks[a.ArrayJobID] >= a.ArrayMaxConcurrent {
				j.Hold = ReasonArrayTaskLimit
			} else {
				// Later tasks of the same array see the slot as taken.
				activeTasks[a.ArrayJobID]++
			}
		}
		in.Pending = append(in.Pending, j)
	}

	// Tenants: decayed usage shares and quota room.
	halfLife := s.FairShareHalfLife
	if halfLife <= 0 {
		halfLife = DefaultFairShareHalfLife
	}
	names := make([]string, 0, len(s.Tenants))
	for name := range s.Tenants {
		names = append(names, name)
	}
	slices.Sort(names) // sum in a fixed order: the same snapshot gives the same bits
	var total float64
	decayed := make(map[string]float64, len(s.Tenants))
	for _, name := range names {
		u := DecayedUsage(s.Tenants[name], s.Now, halfLife)
		decayed[name] = u
		total += u
	}
	for _, name := range names {
		t := s.Tenants[name]
		st := solver.Tenant{FairShareTarget: t.FairShareTarget, NodesLeft: -1, RunningLeft: -1}
		if total > 0 {
			st.UsageShare = decayed[name] / total
		}
		load := s.TenantLoad[name]
		if t.MaxNodes > 0 {
			st.NodesLeft = max(0, t.MaxNodes-load.Nodes)
		}
		if t.MaxRunning > 0 {
			st.RunningLeft = max(0, t.MaxRunning-load.Running)
		}
		in.Tenants[name] = st
	}
	return in
}

// DecayedUsage is a tenant's usage decayed from its UsageTime to now.
func DecayedUsage(t *model.Tenant, now time.Time, halfLife time.Duration) float64 {
	if t.Usage <= 0 {
		return 0
	}
	dt := now.Sub(t.UsageTime)
	if dt <= 0 || t.UsageTime.IsZero() {
		return t.Usage
	}
	return t.Usage * math.Exp2(-float64(dt)/float64(halfLife))
}

// expectedEnd is when an active allocation's walltime runs out; one that has
// not started yet (Staging) is assumed to start now.
func expectedEnd(a *model.Allocation, now time.Time) time.Time {
	start := a.StartTime
	if start.IsZero() {
		start = now
	}
	end := start.Add(a.Walltime)
	if end.Before(now) {
		// Overran its walltime and is being stopped: frees imminently.
		return now
	}
	return end
}
