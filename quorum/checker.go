package quorum

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/latticehpc/lattice/model"
)

// CheckInvariants reads a state and lists every violation of the invariants
// of DESIGN.md (I1–I5, I7) and every derived index that is out of step with
// the objects. An empty list means the state is sound. It is used by the
// tests, by `quorum verify`, and can be run against a live member.
func CheckInvariants(s *State) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }

	// I1: a node runs at most one allocation, and node and allocation agree.
	holder := map[string]uint64{}
	for _, a := range s.Allocations() {
		if !a.State.Active() {
			if len(a.Nodes) > 0 && !a.State.Terminal() {
				bad("I1: allocation %d is %s but lists nodes %v", a.ID, a.State, a.Nodes)
			}
			continue
		}
		if len(a.Nodes) < a.NodesMin || len(a.Nodes) > a.NodesMax {
			bad("I1: allocation %d holds %d nodes, asked %d-%d", a.ID, len(a.Nodes), a.NodesMin, a.NodesMax)
		}
		for _, name := range a.Nodes {
			if other, dup := holder[name]; dup {
				bad("I1: node %s held by allocations %d and %d", name, other, a.ID)
			}
			holder[name] = a.ID
			n := s.nodes[name]
			if n == nil {
				bad("I1: allocation %d holds unknown node %s", a.ID, name)
			} else if n.Allocation != a.ID {
				bad("I1: allocation %d holds node %s, which says it runs %d", a.ID, name, n.Allocation)
			}
		}
	}
	for _, n := range s.Nodes() {
		if n.Allocation != 0 && holder[n.Name] != n.Allocation {
			bad("I1: node %s says it runs %d, which does not hold it", n.Name, n.Allocation)
		}
		// I2: ownership.
		if n.HomeVCluster == "" || n.CurrentVCluster == "" {
			bad("I2: node %s has home %q current %q", n.Name, n.HomeVCluster, n.CurrentVCluster)
		}
		if s.vclusters[n.HomeVCluster] == nil {
			bad("I2: node %s has unknown home vcluster %s", n.Name, n.HomeVCluster)
		}
		if s.vclusters[n.CurrentVCluster] == nil {
			bad("I2: node %s has unknown current vcluster %s", n.Name, n.CurrentVCluster)
		}
		if n.Borrowed() && n.Idle() {
			bad("I2: node %s is lent to %s but idle (it should have gone home)", n.Name, n.CurrentVCluster)
		}
		if a := s.allocs[n.Allocation]; a != nil && n.Allocation != 0 && a.VCluster != n.CurrentVCluster {
			bad("I2: node %s runs %d of vcluster %s but is current in %s", n.Name, a.ID, a.VCluster, n.CurrentVCluster)
		}
		// I7: drained and down nodes hold no work.
		if (n.State == model.NodeDrained || n.State == model.NodeDown) && n.Allocation != 0 {
			bad("I7: node %s is %s but runs %d", n.Name, n.State, n.Allocation)
		}
		want := *n
		want.DeriveState()
		if want.State != n.State {
			bad("node %s state %s, derived %s", n.Name, n.State, want.State)
		}
	}

	// I3: power.
	if b := s.PowerBudgetWatts; b > 0 && s.idx.drawWatts > b {
		bad("I3: estimated draw %d W exceeds the system budget %d W", s.idx.drawWatts, b)
	}
	for _, vc := range s.VClusters() {
		if vc.PowerCapWatts > 0 && s.idx.vclusterDraw[vc.Name] > vc.PowerCapWatts {
			bad("I3: vcluster %s draws %d W, cap %d W", vc.Name, s.idx.vclusterDraw[vc.Name], vc.PowerCapWatts)
		}
	}
	// I4: quotas.
	for _, t := range s.Tenants() {
		run := s.idx.tenantRun[t.Name]
		if t.MaxNodes > 0 && run.Nodes > t.MaxNodes {
			bad("I4: tenant %s uses %d nodes, quota %d", t.Name, run.Nodes, t.MaxNodes)
		}
		if t.MaxRunning > 0 && run.Allocations > t.MaxRunning {
			bad("I4: tenant %s runs %d allocations, quota %d", t.Name, run.Allocations, t.MaxRunning)
		}
	}
	// I5: every history follows the state machine.
	for _, a := range s.Allocations() {
		if len(a.History) == 0 || a.History[0].State != model.StatePending {
			bad("I5: allocation %d history does not start PENDING", a.ID)
			continue
		}
		for i := 1; i < len(a.History); i++ {
			if !model.CanTransition(a.History[i-1].State, a.History[i].State) {
				bad("I5: allocation %d went %s -> %s", a.ID, a.History[i-1].State, a.History[i].State)
			}
		}
		if last := a.History[len(a.History)-1].State; last != a.State {
			bad("I5: allocation %d is %s but its history ends %s", a.ID, a.State, last)
		}
		if a.ID >= s.NextID {
			bad("allocation %d at or above next id %d", a.ID, s.NextID)
		}
	}

	// Derived indexes must equal a fresh computation.
	fresh := &State{nodes: s.nodes, nodeNames: s.nodeNames, allocs: s.allocs}
	fresh.rebuildIndexes()
	if !slices.Equal(fresh.nodeList, s.nodeList) {
		bad("the node list is out of step with the nodes")
	}
	if !reflect.DeepEqual(normalizeIdx(fresh.idx), normalizeIdx(s.idx)) {
		bad("derived indexes out of step with the objects")
	}
	v = append(v, checkDependencies(s, fresh)...)
	return v
}

// normalizeIdx drops empty entries and orders slices so that two index sets
// built in different orders compare equal.
func normalizeIdx(x indexes) indexes {
	out := newIndexes()
	out.drawWatts, out.ended = x.drawWatts, flatList(x.ended)
	for k, u := range x.groupUsage {
		if u != (Usage{}) {
			out.groupUsage[k] = u
		}
	}
	for k, u := range x.vclusterUsage {
		if u != (Usage{}) {
			out.vclusterUsage[k] = u
		}
	}
	for k, c := range x.homeCount {
		if c != 0 {
			out.homeCount[k] = c
		}
	}
	for k, w := range x.vclusterDraw {
		if w != 0 {
			out.vclusterDraw[k] = w
		}
	}
	for k, r := range x.tenantRun {
		if r != (TenantRun{}) {
			out.tenantRun[k] = r
		}
	}
	for k, c := range x.borrowed {
		if c != 0 {
			out.borrowed[k] = c
		}
	}
	for k, c := range x.groupNodes {
		if c != 0 {
			out.groupNodes[k] = c
		}
	}
	for k, c := range x.heldFor {
		if c != 0 {
			out.heldFor[k] = c
		}
	}
	// The lists compare by what they hold (their chunks differ with the
	// order of the changes that built them).
	for k, l := range x.pending {
		if l.Len() > 0 {
			out.pending[k] = flatList(l)
		}
	}
	out.active = flatList(x.active)
	out.staging, out.cancelling, out.checkpointing = x.staging, x.cancelling, x.checkpointing
	for k, ids := range x.dependents {
		if len(ids) > 0 {
			c := slices.Clone(ids)
			slices.Sort(c)
			out.dependents[k] = c
		}
	}
	return out
}

// flatList is l's allocations in one chunk, so that two lists holding the
// same allocations compare equal.
func flatList(l *allocList) *allocList {
	all := l.Share().AppendTo(nil)
	out := newAllocList()
	if len(all) > 0 {
		c := &allocChunkData{allocs: all}
		for _, a := range all {
			c.ids = append(c.ids, a.ID)
		}
		out.chunks, out.n = []*allocChunkData{c}, len(all)
	}
	return out
}
