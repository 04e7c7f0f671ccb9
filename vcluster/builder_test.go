package vcluster

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// randomSnapshot draws a snapshot of three vClusters with what BuildInput
// has to get right: borrowed and lent nodes, nodes in every state, running
// allocations on scattered nodes and on runs of neighbouring ones, nodes
// busy with allocations the snapshot does not hold, staging and overrun
// allocations, arrays with a concurrency limit, pending allocations waiting
// on dependencies, tenants with usage and quotas.
func randomSnapshot(r *rand.Rand) *Snapshot {
	vcs := []string{"a", "b", "c"}
	vc := &model.VCluster{Name: vcs[r.IntN(3)], Type: model.TypeHPCBatch, ReservationDepth: 1,
		AllowBorrowing: r.IntN(2) == 0}
	s := &Snapshot{Now: t0, VCluster: vc, Lenders: map[string]bool{}, Allocations: map[uint64]*model.Allocation{},
		Tenants: map[string]*model.Tenant{}, TenantLoad: map[string]TenantLoad{}, Groups: 4,
		PowerHeadroomWatts: -1, EnergyPrice: -1}
	for _, v := range vcs {
		if r.IntN(2) == 0 {
			s.Lenders[v] = true
		}
	}
	nTen := r.IntN(8)
	for k := range nTen {
		name := "t" + strconv.Itoa(k)
		t := &model.Tenant{Name: name, FairShareTarget: r.Float64(), Usage: r.Float64() * 1e6 * float64(r.IntN(2)),
			UsageTime: t0.Add(-time.Duration(r.Int64N(int64(100 * time.Hour))))}
		if r.IntN(3) == 0 {
			t.MaxNodes = r.IntN(20)
		}
		if r.IntN(3) == 0 {
			t.MaxRunning = r.IntN(5)
		}
		s.Tenants[name] = t
		if r.IntN(2) == 0 {
			s.TenantLoad[name] = TenantLoad{Nodes: r.IntN(30), Running: r.IntN(6)}
		}
	}
	tenant := func() string { return "t" + strconv.Itoa(r.IntN(nTen+1)) } // sometimes unknown
	switch r.IntN(4) {
	case 0: // right
		for _, t := range s.Tenants {
			s.TenantsByName = append(s.TenantsByName, t)
		}
		slices.SortFunc(s.TenantsByName, func(a, b *model.Tenant) int { return strings.Compare(a.Name, b.Name) })
	case 1: // unsorted, short or long: ignored
		for _, t := range s.Tenants {
			s.TenantsByName = append(s.TenantsByName, t)
		}
		slices.SortFunc(s.TenantsByName, func(a, b *model.Tenant) int { return strings.Compare(b.Name, a.Name) })
		switch {
		case len(s.TenantsByName) > 1 && r.IntN(2) == 0:
			// Descending: ignored.
		case len(s.TenantsByName) > 0 && r.IntN(2) == 0:
			s.TenantsByName = s.TenantsByName[1:]
		default:
			s.TenantsByName = append(s.TenantsByName, &model.Tenant{Name: "zz", Usage: 5})
		}
	}
	id := uint64(1)
	newAlloc := func(st model.AllocState) *model.Allocation {
		size := 1 + r.IntN(4)
		a := &model.Allocation{ID: id, State: st, SubmitTime: t0.Add(-time.Duration(r.IntN(10)) * time.Hour),
			Request: model.Request{VCluster: vc.Name, Tenant: tenant(), NodesMin: size, NodesMax: size + r.IntN(2),
				Walltime: time.Duration(r.IntN(5)) * time.Hour, PriorityClass: r.IntN(3), Checkpoint: model.CheckpointNone}}
		id++
		if st.Active() && r.IntN(6) != 0 {
			a.StartTime = t0.Add(-time.Duration(r.IntN(6)) * time.Hour)
		}
		if r.IntN(5) == 0 {
			a.ArrayJobID, a.ArrayMaxConcurrent = uint64(1000+r.IntN(3)), r.IntN(3)
		}
		if st == model.StatePending && r.IntN(5) != 0 {
			a.EligibleTime = a.SubmitTime
		}
		if r.IntN(4) == 0 {
			f := r.Float64()
			a.HotDataFraction = &f
		}
		s.Allocations[a.ID] = a
		return a
	}
	var run *model.Allocation
	for i := range r.IntN(60) {
		home := vcs[r.IntN(3)]
		n := &model.Node{Name: fmt.Sprintf("n%03d", i), HomeVCluster: home, CurrentVCluster: home, Group: i / 8,
			Fingerprint: "f" + strconv.Itoa(r.IntN(2)), State: model.NodeReady}
		if r.IntN(8) == 0 {
			n.CurrentVCluster = vcs[r.IntN(3)]
		}
		if r.IntN(10) == 0 {
			n.State = []model.NodeState{model.NodeDrained, model.NodeDown, model.NodeDegraded}[r.IntN(3)]
		}
		switch u := r.IntN(10); {
		case u < 3: // idle
		case u < 6 && run != nil: // the same allocation as the previous node
			n.Allocation = run.ID
			run.Nodes = append(run.Nodes, n.Name)
		case u < 8:
			run = newAlloc([]model.AllocState{model.StateRunning, model.StateStaging, model.StateCheckpointing}[r.IntN(3)])
			n.Allocation = run.ID
			run.Nodes = append(run.Nodes, n.Name)
		case u < 9 && len(s.Allocations) > 0: // an earlier allocation, scattered
			k := uint64(1 + r.IntN(int(id-1)))
			if a := s.Allocations[k]; a.State.Active() {
				n.Allocation = k
				a.Nodes = append(a.Nodes, n.Name)
			}
		default: // unknown to the snapshot
			n.Allocation = 100000 + uint64(r.IntN(3))
		}
		s.Nodes = append(s.Nodes, n)
	}
	for range r.IntN(30) {
		st := model.StatePending
		if r.IntN(10) == 0 {
			st = model.StateCancelled
		}
		s.Pending = append(s.Pending, newAlloc(st))
	}
	return s
}

// TestBuilderMatchesReference: on random snapshots, BuildInput and a
// Builder reused across all of them give exactly what BuildInput gave
// before it learnt to reuse memory (referenceBuildInput, kept verbatim).
func TestBuilderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 5))
	var b Builder
	for i := range 3000 {
		s := randomSnapshot(r)
		want := referenceBuildInput(s)
		if got := BuildInput(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("snapshot %d: BuildInput\n got %+v\nwant %+v", i, got, want)
		}
		if got := b.Build(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("snapshot %d: a reused Builder\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// referenceBuildInput is BuildInput as it was before Builder: the oracle of
// TestBuilderMatchesReference.
func referenceBuildInput(s *Snapshot) solver.Input {
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
