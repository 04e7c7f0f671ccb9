package vcluster

import (
	"fmt"
	"math"
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
		AllowBorrowing: r.IntN(2) == 0, CheckpointableOnlyOnBorrowed: r.IntN(3) == 0,
		Algorithm: []model.Algorithm{"", model.AlgorithmFIFO, model.AlgorithmBinpack, model.AlgorithmSensitive}[r.IntN(4)],
		// The reference predates the fair share of service (on by default
		// for backfill): TestServiceProtect and TestLoopServiceSettings
		// cover it.
		FairShare: model.FairShareUsage, ServiceProtect: new(bool)}
	s := &Snapshot{Now: t0, VCluster: vc, Lenders: map[string]bool{}, Allocations: map[uint64]*model.Allocation{},
		Tenants: map[string]*model.Tenant{}, TenantLoad: map[string]TenantLoad{}, Groups: 4,
		PowerHeadroomWatts: -1, EnergyPrice: -1}
	withPolicy := r.IntN(2) == 0 // VClusters, not Lenders
	if withPolicy {
		s.VClusters = map[string]*model.VCluster{}
		s.LendLimits = map[string]map[string]time.Time{}
	}
	for _, v := range vcs {
		lends := r.IntN(2) == 0
		if withPolicy {
			x := &model.VCluster{Name: v, Type: model.TypeHPCBatch, AllowLending: lends,
				MaxLendFraction: []float64{0, 0.1, 0.3, 1}[r.IntN(4)], ReclaimBackoff: time.Duration(r.IntN(3)) * time.Hour}
			if v == vc.Name {
				x = vc
			}
			s.VClusters[v] = x
			s.LendLimits[v] = map[string]time.Time{}
		} else if lends {
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
				Walltime: time.Duration(r.IntN(5)) * time.Hour, PriorityClass: r.IntN(3),
				Checkpoint: []model.CheckpointMode{model.CheckpointNone, model.CheckpointSignal}[r.IntN(2)]}}
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
		if r.IntN(8) == 0 {
			n.ReclaimedFrom, n.ReclaimedAt = vcs[r.IntN(3)], t0.Add(-time.Duration(r.IntN(120))*time.Minute)
		}
		if r.IntN(8) == 0 {
			n.ReservedFor, n.ReservedUntil = uint64(1+r.IntN(40)), t0.Add(time.Duration(r.IntN(20)-5)*time.Minute)
		}
		if r.IntN(8) == 0 {
			n.ReturnRequested = true
		}
		if s.LendLimits != nil && r.IntN(4) == 0 {
			s.LendLimits[home][n.Name] = t0.Add(time.Duration(r.IntN(300)-30) * time.Minute)
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

// referenceBuildInput is BuildInput written the plain way, without the
// Builder's memory and shortcuts: the oracle of TestBuilderMatchesReference.
func referenceBuildInput(s *Snapshot) solver.Input {
	vc := s.VCluster
	in := solver.Input{
		Now:                s.Now,
		VCluster:           vc.Name,
		Type:               vc.Type,
		Algorithm:          vc.EffectiveAlgorithm(),
		Weights:            vc.Weights,
		ReservationDepth:   vc.ReservationDepth,
		Groups:             s.Groups,
		PowerHeadroomWatts: s.PowerHeadroomWatts,
		EnergyPrice:        s.EnergyPrice,
		Tenants:            make(map[string]solver.Tenant, len(s.Tenants)),
	}
	live := func(id uint64) bool {
		a, ok := s.Allocations[id]
		return !ok || a.State == model.StatePending
	}
	// Lending: which homes lend, their back-off, their room.
	homeNodes, lent := map[string]int{}, map[string]int{}
	for _, n := range s.Nodes {
		homeNodes[n.HomeVCluster]++
		if n.Borrowed() {
			lent[n.HomeVCluster]++
		}
	}
	policy := func(home string) (lends bool, backoff time.Duration, room int) {
		if s.VClusters == nil {
			return s.Lenders[home], model.DefaultReclaimBackoff, math.MaxInt
		}
		h := s.VClusters[home]
		if h == nil {
			return false, 0, 0
		}
		return h.Lends(), h.Backoff(), max(0, h.MaxLendable(homeNodes[home])-lent[home])
	}
	type cand struct {
		n     *model.Node
		limit time.Time
	}
	cands := map[string][]cand{}
	for _, n := range s.Nodes {
		if n.CurrentVCluster == vc.Name || !vc.Borrows() {
			continue
		}
		lends, backoff, _ := policy(n.HomeVCluster)
		if !lends || n.Borrowed() || !n.Schedulable() ||
			n.ReclaimedFrom == vc.Name && s.Now.Before(n.ReclaimedAt.Add(backoff)) ||
			n.ReservedFor != 0 && s.Now.Before(n.ReservedUntil) && live(n.ReservedFor) {
			continue
		}
		lim, ok := s.LendLimits[n.HomeVCluster][n.Name]
		if ok && !s.Now.Before(lim) {
			continue
		}
		cands[n.HomeVCluster] = append(cands[n.HomeVCluster], cand{n, lim})
	}
	offered := map[*model.Node]time.Time{}
	for home, cs := range cands {
		_, _, room := policy(home)
		// Unlimited first, then the latest limits, then node order.
		slices.SortStableFunc(cs, func(x, y cand) int {
			if x.limit.IsZero() != y.limit.IsZero() {
				if x.limit.IsZero() {
					return -1
				}
				return 1
			}
			return y.limit.Compare(x.limit)
		})
		for _, c := range cs[:min(room, len(cs))] {
			offered[c.n] = c.limit
		}
	}

	seenRunning := make(map[uint64]bool)
	runUsage := map[string]float64{}
	var unlisted float64
	for k := 0; k < len(s.Nodes); {
		// A run of neighbouring nodes of one allocation.
		id := s.Nodes[k].Allocation
		m := k + 1
		for id != 0 && m < len(s.Nodes) && s.Nodes[m].Allocation == id {
			m++
		}
		if a := s.Allocations[id]; id != 0 && a != nil && a.State.Active() && !a.StartTime.IsZero() && a.StartTime.Before(s.Now) {
			u := float64(m-k) * s.Now.Sub(a.StartTime).Seconds()
			if _, ok := s.Tenants[a.Tenant]; ok {
				runUsage[a.Tenant] += u
			} else {
				unlisted += u
			}
		}
		k = m
	}
	for _, n := range s.Nodes {
		own := n.CurrentVCluster == vc.Name
		limit, ok := offered[n]
		if !own && !ok {
			continue
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
			LendUntil:   limit,
		}
		if own && n.ReservedFor != 0 && s.Now.Before(n.ReservedUntil) && live(n.ReservedFor) {
			sn.ReservedFor, sn.ReservedUntil = n.ReservedFor, n.ReservedUntil
		}
		if a := s.Allocations[n.Allocation]; a != nil && n.Allocation != 0 {
			sn.FreeAt = expectedEnd(a, s.Now, nil, "")
			if own && !seenRunning[a.ID] {
				seenRunning[a.ID] = true
				in.Running = append(in.Running, solver.Running{
					ID: a.ID, Tenant: a.Tenant, Nodes: len(a.Nodes), Start: a.StartTime, End: sn.FreeAt,
				})
			}
		} else if n.Allocation != 0 {
			sn.FreeAt = s.Now.Add(model.MaxWalltime)
		}
		if own && n.Allocation != 0 && n.ReturnRequested && n.Borrowed() {
			sn.FreeAt = time.Time{}
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
			OwnNodesOnly:      vc.CheckpointableOnlyOnBorrowed && !a.Checkpoint.Checkpointable(),
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

	// Tenants: decayed usage plus running usage, shares and quota room.
	halfLife := s.FairShareHalfLife
	if halfLife <= 0 {
		halfLife = DefaultFairShareHalfLife
	}
	names := make([]string, 0, len(s.Tenants))
	for name := range s.Tenants {
		names = append(names, name)
	}
	slices.Sort(names) // sum in a fixed order: the same snapshot gives the same bits
	total := unlisted
	usage := make(map[string]float64, len(s.Tenants))
	for _, name := range names {
		u := DecayedUsage(s.Tenants[name], s.Now, halfLife) + runUsage[name]
		usage[name] = u
		total += u
	}
	for _, name := range names {
		t := s.Tenants[name]
		st := solver.Tenant{FairShareTarget: t.FairShareTarget, NodesLeft: -1, RunningLeft: -1}
		if total > 0 {
			st.UsageShare = usage[name] / total
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

// An Immutable Builder reuses what it derived from the allocations of the
// last snapshot that are still there; over a run of snapshots, each the
// last one changed the way the quorum changes its state (allocations
// started or cancelled, replaced by changed copies — held, released, a
// begin time, another class, eligible at last —, new ones, requeued ones
// back in the middle, the clock moving on, the predictor and the vCluster's
// borrowing rule changing), it builds exactly the input BuildInput builds.
func TestImmutableBuilderMatchesBuildInput(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 77))
		s := randomSnapshot(r)
		b := Builder{Immutable: true}
		var gone []*model.Allocation
		done := []*model.Allocation{}
		var easy EasyStarts
		for step := range 30 {
			next := *s
			next.Now = s.Now.Add(time.Duration(r.IntN(600)) * time.Second)
			var pending []*model.Allocation
			for _, a := range s.Pending {
				switch k := r.IntN(20); {
				case k == 0: // started or cancelled
					gone = append(gone, a)
					continue
				case k == 1: // changed: a new copy
					c := *a
					switch r.IntN(5) {
					case 0:
						c.Held = []string{"", model.HoldUser, model.HoldAdmin}[r.IntN(3)]
					case 1:
						c.BeginTime = next.Now.Add(time.Duration(r.IntN(1200)-600) * time.Second)
					case 2:
						c.PriorityClass = r.IntN(6)
					case 3:
						c.EligibleTime = next.Now.Add(-time.Minute)
					default:
						c.ArrayJobID, c.ArrayMaxConcurrent = 1, 1+r.IntN(3)
					}
					a = &c
				}
				pending = append(pending, a)
			}
			if len(gone) > 0 && r.IntN(3) == 0 { // requeued: back in the middle, as a new copy
				c := *gone[0]
				gone = gone[1:]
				pending = append(pending, &c)
			}
			for range r.IntN(4) { // submitted
				id := uint64(900000 + step*10 + len(pending)%10)
				pending = append(pending, &model.Allocation{ID: id, State: model.StatePending,
					Request:    model.Request{Tenant: "t0", NodesMin: 1, NodesMax: 1, Walltime: time.Hour, Checkpoint: model.CheckpointNone},
					SubmitTime: next.Now, EligibleTime: next.Now})
			}
			SortByID(pending)
			pending = slices.CompactFunc(pending, func(x, y *model.Allocation) bool { return x.ID == y.ID })
			next.Pending = pending
			if r.IntN(4) == 0 { // another predictor
				done = append(done, &model.Allocation{ID: uint64(800000 + step), State: model.StateCompleted,
					Request:   model.Request{Tenant: "t0", Name: "job", Walltime: 2 * time.Hour},
					StartTime: next.Now.Add(-time.Hour), EndTime: next.Now.Add(-time.Duration(r.IntN(50)) * time.Minute)})
				next.Predictor = LearnCompleted(slices.Clone(done))
			}
			if r.IntN(8) == 0 { // the borrowing rule changed
				vc := *next.VCluster
				vc.CheckpointableOnlyOnBorrowed = !vc.CheckpointableOnlyOnBorrowed
				next.VCluster = &vc
			}
			if r.IntN(2) == 0 {
				next.EasyStarts = &easy
			}
			s = &next
			want := BuildInput(s)
			if got := b.Build(s); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: the Immutable Builder\n got %+v\nwant %+v", seed, step, got, want)
			}
		}
	}
}
