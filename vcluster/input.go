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
	// TenantsByName, when set, holds the values of Tenants sorted by name
	// (a tenant's Name is its key in Tenants), so that a cycle need neither
	// sort nor look them up (the replay keeps it). Optional: when its length
	// differs from Tenants' or its names are not strictly ascending, it is
	// ignored.
	TenantsByName []*model.Tenant
	// Groups is the number of dragonfly groups in the system.
	Groups int
	// PowerHeadroomWatts: < 0 = unlimited.
	PowerHeadroomWatts int64
	// EnergyPrice normalised to [0,1] at Now; < 0 = unknown.
	EnergyPrice float64
	// Energy is the price schedule and shifting rule; nil = none.
	Energy *solver.Energy
	// FairShareHalfLife decays tenant usage; 0 = DefaultFairShareHalfLife.
	FairShareHalfLife time.Duration
}

// BuildInput turns a snapshot into the solver's input: the nodes this
// vCluster may use (its own, and idle Ready nodes of vClusters that lend when
// it may borrow), the release timeline of the work on them, its eligible
// pending allocations with holds, tenant shares and quota room. It is a
// Builder used once.
func BuildInput(s *Snapshot) solver.Input {
	var b Builder
	return b.Build(s)
}

// Builder builds solver inputs exactly like BuildInput — the same snapshot
// gives the same Input — but keeps its memory from one call to the next, for
// callers that build an input every cycle (the replay simulator). The Input
// it returns, its slices and its Tenants map are valid only until the next
// call of Build on the same Builder. A Builder is not safe for concurrent
// use; the zero value is ready to use.
type Builder struct {
	nodes       []solver.Node
	running     []solver.Running
	pending     []solver.Job
	tenants     map[string]solver.Tenant
	seenRunning map[uint64]bool
	activeTasks map[uint64]int
	names       []string
	tenantList  []*model.Tenant
	decayed     []float64
}

// Build turns a snapshot into the solver's input; see BuildInput.
func (b *Builder) Build(s *Snapshot) solver.Input {
	vc := s.VCluster
	if b.tenants == nil {
		b.tenants = make(map[string]solver.Tenant, len(s.Tenants))
	}
	clear(b.tenants)
	in := solver.Input{
		Now:                s.Now,
		VCluster:           vc.Name,
		Type:               vc.Type,
		Weights:            vc.Weights,
		ReservationDepth:   vc.ReservationDepth,
		Groups:             s.Groups,
		PowerHeadroomWatts: s.PowerHeadroomWatts,
		EnergyPrice:        s.EnergyPrice,
		Energy:             s.Energy,
		Nodes:              slices.Grow(b.nodes[:0], len(s.Nodes)),
		Running:            b.running[:0],
		Pending:            slices.Grow(b.pending[:0], len(s.Pending)),
		Tenants:            b.tenants,
	}
	if b.seenRunning == nil {
		b.seenRunning = make(map[uint64]bool)
	}
	seenRunning := b.seenRunning
	clear(seenRunning)
	// Neighbouring nodes mostly run the same allocation: look it up, and
	// compute its expected end, once per run of nodes.
	var (
		lastID     uint64
		lastAlloc  *model.Allocation
		lastEnd    time.Time
		listed     bool   // an own busy node was seen: lastListed is in Running
		lastListed uint64 // the allocation of the last own busy node
	)
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
		k := len(in.Nodes)
		in.Nodes = in.Nodes[:k+1] // capacity for every node is there
		sn := &in.Nodes[k]
		// Field by field: cheaper than a composite literal's copy. Every
		// field is written, FreeAt below (the buffer holds old nodes).
		sn.Name = n.Name
		sn.Group = n.Group
		sn.Fingerprint = n.Fingerprint
		sn.GPUType = n.GPUType
		sn.GPUs = n.GPUs
		sn.Features = n.Features
		sn.IdleWatts = n.IdleWatts
		sn.BusyWatts = n.BusyWatts
		sn.State = n.State
		sn.Own = own
		sn.Allocation = n.Allocation
		sn.FreeAt = time.Time{}
		if n.Allocation == 0 {
			continue
		}
		if n.Allocation != lastID || lastAlloc == nil {
			lastID, lastAlloc = n.Allocation, s.Allocations[n.Allocation]
			if lastAlloc != nil {
				lastEnd = expectedEnd(lastAlloc, s.Now)
			}
		}
		if a := lastAlloc; a != nil {
			sn.FreeAt = lastEnd
			if own && !(listed && a.ID == lastListed) && !seenRunning[a.ID] {
				seenRunning[a.ID] = true
				in.Running = append(in.Running, solver.Running{
					ID: a.ID, Tenant: a.Tenant, Nodes: len(a.Nodes), Start: a.StartTime, End: sn.FreeAt,
				})
			}
			if own {
				listed, lastListed = true, a.ID
			}
		} else {
			// Busy with something the snapshot does not hold: assume it
			// frees at its walltime's upper bound, i.e. not within this plan.
			sn.FreeAt = s.Now.Add(model.MaxWalltime)
		}
	}

	// Array concurrency: count active tasks per array, when a pending
	// allocation has a limit to check.
	var activeTasks map[uint64]int
	for _, a := range s.Pending {
		if a.ArrayJobID != 0 && a.ArrayMaxConcurrent > 0 {
			if b.activeTasks == nil {
				b.activeTasks = make(map[uint64]int)
			}
			activeTasks = b.activeTasks
			clear(activeTasks)
			for _, a := range s.Allocations {
				if a.ArrayJobID != 0 && a.State.Active() {
					activeTasks[a.ArrayJobID]++
				}
			}
			break
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
	names, tenants := b.sortedTenants(s)
	var total float64
	decayed := slices.Grow(b.decayed[:0], len(names))
	for _, t := range tenants {
		u := DecayedUsage(t, s.Now, halfLife)
		decayed = append(decayed, u)
		total += u // in name order: the same snapshot gives the same bits
	}
	b.decayed = decayed
	for i, name := range names {
		t := tenants[i]
		st := solver.Tenant{FairShareTarget: t.FairShareTarget, NodesLeft: -1, RunningLeft: -1}
		if total > 0 {
			st.UsageShare = decayed[i] / total
		}
		if t.MaxNodes > 0 || t.MaxRunning > 0 {
			load := s.TenantLoad[name]
			if t.MaxNodes > 0 {
				st.NodesLeft = max(0, t.MaxNodes-load.Nodes)
			}
			if t.MaxRunning > 0 {
				st.RunningLeft = max(0, t.MaxRunning-load.Running)
			}
		}
		in.Tenants[name] = st
	}
	b.nodes, b.running, b.pending = in.Nodes, in.Running, in.Pending
	// Nothing listed is a nil slice, as it always was.
	if len(in.Nodes) == 0 {
		in.Nodes = nil
	}
	if len(in.Running) == 0 {
		in.Running = nil
	}
	if len(in.Pending) == 0 {
		in.Pending = nil
	}
	return in
}

// sortedTenants lists the tenants of s in name order, and their names:
// s.TenantsByName when it is usable, else the keys of s.Tenants sorted here.
func (b *Builder) sortedTenants(s *Snapshot) ([]string, []*model.Tenant) {
	names := slices.Grow(b.names[:0], len(s.Tenants))
	if list := s.TenantsByName; len(list) == len(s.Tenants) {
		for i, t := range list {
			if i > 0 && list[i-1].Name >= t.Name {
				break
			}
			names = append(names, t.Name)
		}
		if len(names) == len(list) {
			b.names = names
			return names, list
		}
		names = names[:0]
	}
	for name := range s.Tenants {
		names = append(names, name)
	}
	slices.Sort(names)
	tenants := slices.Grow(b.tenantList[:0], len(names))
	for _, name := range names {
		tenants = append(tenants, s.Tenants[name])
	}
	b.names, b.tenantList = names, tenants
	return names, tenants
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
