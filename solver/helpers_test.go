package solver

import (
	"fmt"
	"time"

	"github.com/latticehpc/lattice/model"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// nodeB builds a test node: Own, Ready, idle, 100/400 W, fingerprint "fpA".
type nodeB struct{ n Node }

func node(name string, group int) *nodeB {
	return &nodeB{Node{Name: name, Group: group, Fingerprint: "fpA", IdleWatts: 100, BusyWatts: 400,
		State: model.NodeReady, Own: true}}
}
func (b *nodeB) busy(alloc uint64, freeIn time.Duration) *nodeB {
	b.n.Allocation, b.n.FreeAt = alloc, t0.Add(freeIn)
	return b
}
func (b *nodeB) state(s model.NodeState) *nodeB { b.n.State = s; return b }
func (b *nodeB) foreign() *nodeB                { b.n.Own = false; return b }
func (b *nodeB) fp(f string) *nodeB             { b.n.Fingerprint = f; return b }
func (b *nodeB) gpu(t string, n int) *nodeB     { b.n.GPUType, b.n.GPUs = t, n; return b }
func (b *nodeB) features(f ...string) *nodeB    { b.n.Features = f; return b }
func (b *nodeB) watts(idle, busy int) *nodeB    { b.n.IdleWatts, b.n.BusyWatts = idle, busy; return b }
func (b *nodeB) build() Node                    { return b.n }

// groups builds free nodes named gGnNN: counts[g] nodes in group g.
func groups(counts ...int) []Node {
	var out []Node
	for g, c := range counts {
		for i := 0; i < c; i++ {
			out = append(out, node(fmt.Sprintf("g%dn%02d", g, i), g).build())
		}
	}
	return out
}

// jobB builds a test job: 1 node, 1h walltime, eligible 10 minutes ago.
type jobB struct{ j Job }

func jobN(id uint64, nodes int) *jobB {
	return &jobB{Job{ID: id, Tenant: "t", NodesMin: nodes, NodesMax: nodes, Walltime: time.Hour,
		SubmitTime: t0.Add(-10 * time.Minute), HotDataFraction: -1}}
}
func (b *jobB) wall(d time.Duration) *jobB    { b.j.Walltime = d; return b }
func (b *jobB) elastic(min, max int) *jobB    { b.j.NodesMin, b.j.NodesMax = min, max; return b }
func (b *jobB) prio(p int) *jobB              { b.j.PriorityClass = p; return b }
func (b *jobB) waited(d time.Duration) *jobB  { b.j.SubmitTime = t0.Add(-d); return b }
func (b *jobB) tenant(t string) *jobB         { b.j.Tenant = t; return b }
func (b *jobB) hold(r string) *jobB           { b.j.Hold = r; return b }
func (b *jobB) gpu(t string, n int) *jobB     { b.j.GPUType, b.j.GPUsPerNode = t, n; return b }
func (b *jobB) constraints(c ...string) *jobB { b.j.Constraints = c; return b }
func (b *jobB) build() Job                    { return b.j }

// input builds an input with FCFS-like weights (only f1 and f2 count), EASY
// reservations and unlimited power.
func input(nodes []Node, jobs ...*jobB) *Input {
	in := &Input{Now: t0, VCluster: "vc", Type: model.TypeHPCBatch, ReservationDepth: 1,
		Weights: model.Weights{0.5, 0.5}, Nodes: nodes, PowerHeadroomWatts: -1, EnergyPrice: -1,
		Tenants: map[string]Tenant{}}
	for _, j := range jobs {
		in.Pending = append(in.Pending, j.build())
	}
	return in
}

func (p *Plan) start(id uint64) *Start {
	for i := range p.Starts {
		if p.Starts[i].JobID == id {
			return &p.Starts[i]
		}
	}
	return nil
}

func (p *Plan) reservation(id uint64) *Reservation {
	for i := range p.Reservations {
		if p.Reservations[i].JobID == id {
			return &p.Reservations[i]
		}
	}
	return nil
}

func (p *Plan) explain(id uint64) *Explanation {
	for i := range p.Explanations {
		if p.Explanations[i].JobID == id {
			return &p.Explanations[i]
		}
	}
	return nil
}

func (b *jobB) ownOnly() *jobB { b.j.OwnNodesOnly = true; return b }
