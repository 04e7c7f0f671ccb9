package vcluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// replayScaleSnapshot is one decision of the replay simulator's benchmark:
// 1,152 nodes in groups of 32, ~80 % of them running ~100 allocations, a
// queue of pending allocations and 300 tenants with decayed usage.
func replayScaleSnapshot(pending int) *Snapshot {
	r := rand.New(rand.NewPCG(3, 1))
	vc := &model.VCluster{Name: "replay", Type: model.TypeHPCBatch, ReservationDepth: 1}
	s := &Snapshot{Now: t0, VCluster: vc, Lenders: map[string]bool{}, Allocations: map[uint64]*model.Allocation{},
		Tenants: map[string]*model.Tenant{}, TenantLoad: map[string]TenantLoad{}, Groups: 36,
		PowerHeadroomWatts: -1, EnergyPrice: -1}
	for k := range 300 {
		name := fmt.Sprintf("u%d", k)
		s.Tenants[name] = &model.Tenant{Name: name, FairShareTarget: 1.0 / 300,
			Usage: r.Float64() * 1e7, UsageTime: t0.Add(-time.Duration(r.Int64N(int64(30 * 24 * time.Hour))))}
	}
	id := uint64(1)
	for i := 0; i < 1152; {
		n := &model.Node{Name: fmt.Sprintf("n%07d", i), HomeVCluster: "replay", CurrentVCluster: "replay",
			Group: i / 32, Fingerprint: "replay", State: model.NodeReady}
		s.Nodes = append(s.Nodes, n)
		i++
		if r.Float64() < 0.2 {
			continue
		}
		size := 1 + r.IntN(16)
		a := &model.Allocation{ID: id, State: model.StateRunning, StartTime: t0.Add(-time.Hour),
			Request: model.Request{VCluster: "replay", Tenant: fmt.Sprintf("u%d", r.IntN(300)), NodesMin: size,
				NodesMax: size, Walltime: time.Duration(1+r.IntN(48)) * time.Hour}}
		id++
		s.Allocations[a.ID] = a
		n.Allocation = a.ID
		a.Nodes = append(a.Nodes, n.Name)
		for ; size > 1 && i < 1152; size-- {
			m := &model.Node{Name: fmt.Sprintf("n%07d", i), HomeVCluster: "replay", CurrentVCluster: "replay",
				Group: i / 32, Fingerprint: "replay", State: model.NodeReady, Allocation: a.ID}
			s.Nodes = append(s.Nodes, m)
			a.Nodes = append(a.Nodes, m.Name)
			i++
		}
	}
	for _, t := range s.Tenants {
		s.TenantsByName = append(s.TenantsByName, t)
	}
	slices.SortFunc(s.TenantsByName, func(a, b *model.Tenant) int { return strings.Compare(a.Name, b.Name) })
	for range pending {
		a := &model.Allocation{ID: id, State: model.StatePending, SubmitTime: t0.Add(-time.Hour),
			EligibleTime: t0.Add(-time.Hour), Request: model.Request{VCluster: "replay",
				Tenant: fmt.Sprintf("u%d", r.IntN(300)), NodesMin: 4, NodesMax: 4, Walltime: time.Hour,
				Checkpoint: model.CheckpointNone}}
		id++
		s.Allocations[a.ID] = a
		s.Pending = append(s.Pending, a)
	}
	return s
}

// BenchmarkBuildInputReplayScale builds one replay decision's solver input
// with a Builder kept from decision to decision, as the replay does.
func BenchmarkBuildInputReplayScale(b *testing.B) {
	for _, q := range []int{10, 200} {
		b.Run(fmt.Sprintf("pending=%d", q), func(b *testing.B) {
			s := replayScaleSnapshot(q)
			var bld Builder
			b.ReportAllocs()
			for b.Loop() {
				in := bld.Build(s)
				if len(in.Nodes) != 1152 {
					b.Fatal(len(in.Nodes))
				}
			}
		})
	}
}
