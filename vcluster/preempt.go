package vcluster

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// VictimCost prices preempting a running allocation at now: the lower, the
// sooner it is chosen as a victim.
type VictimCost func(a *model.Allocation, now time.Time) float64

// DefaultCheckpointMinutes is what DefaultVictimCost assumes a checkpoint
// takes when the allocation does not say.
const DefaultCheckpointMinutes = 5

// DefaultVictimCost is the placeholder victim price until the checkpoint
// package's PreemptionCost is plugged in (Loop.VictimCost), in node-minutes:
// for checkpointable work, the time its nodes spend writing the checkpoint
// (nodes × CheckpointMinutes, DefaultCheckpointMinutes when unknown); for
// work that cannot checkpoint, the work lost (nodes × minutes run so far).
func DefaultVictimCost(a *model.Allocation, now time.Time) float64 {
	nodes := float64(max(1, len(a.Nodes)))
	if a.Checkpoint.Checkpointable() {
		m := a.CheckpointMinutes
		if !(m > 0) {
			m = DefaultCheckpointMinutes
		}
		return nodes * m
	}
	if a.StartTime.IsZero() || !a.StartTime.Before(now) {
		return 0
	}
	return nodes * now.Sub(a.StartTime).Minutes()
}

// MaxPreemptionsPerCycle bounds how many blocked jobs one cycle plans
// preemptions for.
const MaxPreemptionsPerCycle = 2

// victim is a running allocation that may be preempted, and its nodes.
type victim struct {
	a      *model.Allocation
	action model.PreemptAction // what preempting it does (model.VictimAction)
	nodes  []*model.Node       // its nodes in this vCluster that stay here when freed
	others []*model.Node       // its borrowed nodes: they go home when freed
	cost   float64
	useful int // nodes the preemptor could use
}

// preemption is the planning state of one cycle's preemptions.
type preemption struct {
	snap    *Snapshot
	plan    Planner
	busy    map[string]bool // nodes other decisions of this cycle take
	victims []*victim       // every candidate, in node order
	used    map[uint64]bool // victims already chosen this cycle
	// protected: lower-class running work the policy keeps from being
	// preempted, and why (for the explanations).
	protected []*victim
	why       map[uint64]string
}

// PlanPreemptions plans preemption by priority class inside a vCluster
// with Preemption on. For the blocked jobs of the real plan in rank order —
// at most MaxPreemptionsPerCycle, each waiting for nodes and not expected to
// start within vc.Horizon(), nodes held for none of them — it looks for
// victims among the vCluster's running allocations (RUNNING, of this
// vCluster, on its nodes) of a strictly lower priority class, never class
// 10: the cheapest first (cost; nil = DefaultVictimCost) until, with the
// idle nodes, they could hold the job by count and constraints; a what-if
// solve of the job alone with their nodes freed confirms it (topology,
// conformance, power), adding victims if it does not. Victims whose nodes
// the what-if start leaves unused are dropped, then any victim the job can
// do without (a what-if without it still starts it): the set is minimal.
// The what-if start's nodes are the proposal's Reserve.
//
// The real plan's starts and the Reserve of taken (this cycle's reclaims,
// whose jobs are skipped too) are busy in every what-if; so is each
// proposal's Reserve for the next. The proposals carry no Version.
func PlanPreemptions(snap *Snapshot, real *solver.Plan, plan Planner, cost VictimCost, taken []ReclaimProposal) []PreemptProposal {
	out, _ := PlanPreemptionsExplained(snap, real, plan, cost, taken)
	return out
}

// MaxPolicyNotes bounds how many blocked jobs a cycle explains the
// preemption policy to.
const MaxPolicyNotes = 8

// PlanPreemptionsExplained is PlanPreemptions, and it also says, for the
// first blocked jobs it found no victims for (at most MaxPolicyNotes),
// when running work of a lower class on nodes the job could use would have
// let it start but the preemption policy keeps it (model.VictimAction:
// preemption off, work that cannot checkpoint under mode checkpoint, a
// QOS with mode off): a sentence for `explain`, by job id.
func PlanPreemptionsExplained(snap *Snapshot, real *solver.Plan, plan Planner, cost VictimCost, taken []ReclaimProposal) ([]PreemptProposal, map[uint64]string) {
	vc := snap.VCluster
	if vc.Sensitive() || real == nil {
		return nil, nil
	}
	if cost == nil {
		cost = DefaultVictimCost
	}
	blocked := waiting(real, snap.Now.Add(vc.Horizon()), false)
	if len(blocked) == 0 {
		return nil, nil
	}
	held := heldFor(snap)
	skip := map[uint64]bool{}
	pm := &preemption{snap: snap, plan: plan, busy: map[string]bool{}, used: map[uint64]bool{}}
	for _, st := range real.Starts {
		for _, n := range st.Nodes {
			pm.busy[n] = true
		}
	}
	for _, r := range taken {
		skip[r.ForAlloc] = true
		for _, n := range r.Reserve {
			pm.busy[n] = true
		}
	}
	pm.findVictims(cost)
	if len(pm.victims) == 0 && len(pm.protected) == 0 {
		return nil, nil
	}
	pending := make(map[uint64]*model.Allocation, len(snap.Pending))
	for _, a := range snap.Pending {
		pending[a.ID] = a
	}
	order := make([]uint64, 0, len(real.Explanations))
	for _, ex := range real.Explanations {
		order = append(order, ex.JobID)
	}

	var out []PreemptProposal
	var notes map[uint64]string
	for _, id := range order {
		if len(out) >= MaxPreemptionsPerCycle || len(pm.victims) == 0 && len(notes) >= MaxPolicyNotes {
			break
		}
		a := pending[id]
		if a == nil || !blocked[id] || held[id] || skip[id] {
			continue
		}
		var victims []*victim
		var start *solver.Start
		if len(pm.victims) > 0 {
			victims, start = pm.choose(a)
		}
		if start == nil {
			if note := pm.policyNote(a); note != "" && len(notes) < MaxPolicyNotes {
				if notes == nil {
					notes = map[uint64]string{}
				}
				notes[id] = note
			}
			continue
		}
		p := PreemptProposal{ForAlloc: id, Reserve: slices.Clone(start.Nodes)}
		slices.SortFunc(victims, func(x, y *victim) int { return cmp.Compare(x.a.ID, y.a.ID) })
		for _, v := range victims {
			p.Victims = append(p.Victims, v.a.ID)
			p.Actions = append(p.Actions, v.action)
			pm.used[v.a.ID] = true
		}
		slices.Sort(p.Reserve)
		for _, n := range p.Reserve {
			pm.busy[n] = true
		}
		out = append(out, p)
	}
	return out, notes
}

// policyNote says why a, blocked, waits although lower-class work runs on
// enough nodes it could use: the policy keeps that work from being
// preempted. "" when the protected work would not be enough anyway.
func (pm *preemption) policyNote(a *model.Allocation) string {
	s, vc := pm.snap, pm.snap.VCluster
	free := 0
	for _, n := range s.Nodes {
		if n.CurrentVCluster == vc.Name && n.Allocation == 0 && pm.usable(a, n) {
			free++
		}
	}
	for _, v := range pm.victims {
		if !pm.used[v.a.ID] && v.a.PriorityClass < a.PriorityClass {
			for _, n := range v.nodes {
				if pm.usable(a, n) {
					free++
				}
			}
		}
	}
	var kept []*victim
	total := free
	for _, v := range pm.protected {
		if v.a.PriorityClass >= a.PriorityClass {
			continue
		}
		useful := 0
		for _, n := range v.nodes {
			if pm.usable(a, n) {
				useful++
			}
		}
		if useful > 0 {
			kept = append(kept, v)
			total += useful
		}
	}
	if len(kept) == 0 || total < max(1, a.NodesMin) {
		return ""
	}
	slices.SortFunc(kept, func(x, y *victim) int { return cmp.Compare(x.a.ID, y.a.ID) })
	_, why := model.VictimAction(vc, s.qosOf(kept[0].a), kept[0].a)
	if why == "" { // suspension ruled out by where it runs
		why = "it would be suspended, but it runs on borrowed nodes or is suspended by an admin"
	}
	ids := make([]string, 0, min(len(kept), 3))
	for _, v := range kept[:min(len(kept), 3)] {
		ids = append(ids, v.a.DisplayID())
	}
	more := ""
	if len(kept) > 3 {
		more = fmt.Sprintf(" and %d more", len(kept)-3)
	}
	return fmt.Sprintf("waits although lower-class work runs on nodes it could use (allocation %s%s): it is not preempted, %s (latticectl vcluster set %s --preempt-mode, or the QOS's)",
		strings.Join(ids, ", "), more, why, vc.Name)
}

// findVictims lists the running allocations of the vCluster that could be
// preempted by some class, with their nodes and prices.
func (pm *preemption) findVictims(cost VictimCost) {
	s, vc := pm.snap, pm.snap.VCluster
	byID := map[uint64]*victim{}
	for _, n := range s.Nodes {
		if n.Allocation == 0 || n.CurrentVCluster != vc.Name {
			continue
		}
		v := byID[n.Allocation]
		if v == nil {
			a := s.Allocations[n.Allocation]
			if a == nil || a.VCluster != vc.Name || a.State != model.StateRunning {
				continue
			}
			v = &victim{a: a}
			byID[a.ID] = v
			v.action, _ = model.VictimAction(vc, s.qosOf(a), a)
			if v.action == "" {
				pm.protected = append(pm.protected, v)
			} else {
				v.cost = cost(a, s.Now)
				pm.victims = append(pm.victims, v)
			}
		}
		if n.HomeVCluster == vc.Name {
			v.nodes = append(v.nodes, n)
		} else {
			v.others = append(v.others, n)
		}
	}
	// A suspended allocation waits on its nodes: only one wholly on the
	// vCluster's own nodes, running and not suspended by an admin, can be.
	kept := pm.victims[:0]
	for _, v := range pm.victims {
		if v.action == model.ActionSuspend && (len(v.others) > 0 || !v.a.SuspendedAt.IsZero()) {
			pm.protected = append(pm.protected, v)
			continue
		}
		kept = append(kept, v)
	}
	pm.victims = kept
}

// qosOf is a's QOS entry, nil when it has none in the table.
func (s *Snapshot) qosOf(a *model.Allocation) *model.QOS {
	if a.QOS == "" || s.QOS == nil {
		return nil
	}
	return s.QOS[a.QOS]
}

// usable reports whether the preemptor a could run on node n once it is
// free: Ready, meets a's constraints, held for no other allocation, not
// taken by another decision of this cycle.
func (pm *preemption) usable(a *model.Allocation, n *model.Node) bool {
	s := pm.snap
	if n.State != model.NodeReady || pm.busy[n.Name] || !n.HasFeatures(a.Constraints) || n.GPUs < a.GPUsPerNode || !a.NodeAllowed(n.Name) {
		return false
	}
	if a.GPUType != "" && !equalFold(n.GPUType, a.GPUType) {
		return false
	}
	if n.SuspendedAlloc != 0 {
		if id, ok := suspendedFor(s, n.SuspendedAlloc); ok && id != a.ID {
			return false
		}
	}
	return !(n.ReservedFor != 0 && n.ReservedFor != a.ID && s.Now.Before(n.ReservedUntil) && holdLive(s, n.ReservedFor))
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// choose picks the victims for preemptor a and the what-if start they
// give it, or nil.
func (pm *preemption) choose(a *model.Allocation) ([]*victim, *solver.Start) {
	s, vc := pm.snap, pm.snap.VCluster
	need := max(1, a.NodesMin)
	free := 0
	for _, n := range s.Nodes {
		if n.CurrentVCluster == vc.Name && n.Allocation == 0 && pm.usable(a, n) {
			free++
		}
	}
	var cands []*victim
	total := free
	for _, v := range pm.victims {
		if pm.used[v.a.ID] || v.a.PriorityClass >= a.PriorityClass {
			continue
		}
		v.useful = 0
		for _, n := range v.nodes {
			if pm.usable(a, n) {
				v.useful++
			}
		}
		if v.useful > 0 {
			cands = append(cands, v)
			total += v.useful
		}
	}
	if total < need {
		return nil, nil
	}
	// Cheapest first; then the most useful nodes, then the lowest id.
	slices.SortStableFunc(cands, func(x, y *victim) int {
		if c := cmp.Compare(x.cost, y.cost); c != 0 {
			return c
		}
		if x.useful != y.useful {
			return y.useful - x.useful
		}
		return cmp.Compare(x.a.ID, y.a.ID)
	})
	count, k := free, 0
	for k < len(cands) && count < need {
		count += cands[k].useful
		k++
	}
	set := slices.Clone(cands[:k])
	start := pm.whatIf(a, set)
	// Topology, conformance or power may want more: one more at a time.
	for tries := 0; start == nil && k < len(cands) && tries < 8; tries++ {
		set = append(set, cands[k])
		k++
		start = pm.whatIf(a, set)
	}
	if start == nil {
		return nil, nil
	}
	set = usedBy(set, start)
	// Minimal: drop, the dearest first, every victim the job can do without.
	for i := len(set) - 1; i >= 0 && len(set) > 0; i-- {
		if i >= len(set) {
			continue
		}
		rest := make([]*victim, 0, len(set)-1)
		n := free
		for j, v := range set {
			if j != i {
				rest = append(rest, v)
				n += v.useful
			}
		}
		if n < need {
			continue
		}
		if st := pm.whatIf(a, rest); st != nil {
			set, start = usedBy(rest, st), st
			i = len(set) // start over: the dearest left first
		}
	}
	if st := pm.whatIf(a, set); st != nil {
		start = st
	} else {
		return nil, nil
	}
	return set, start
}

// usedBy keeps the victims some node of which start uses.
func usedBy(set []*victim, start *solver.Start) []*victim {
	out := set[:0:0]
	for _, v := range set {
		for _, n := range v.nodes {
			if slices.Contains(start.Nodes, n.Name) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// whatIf solves the preemptor a alone on the vCluster's nodes with the
// victims' nodes freed (their borrowed ones gone home) and this cycle's
// other decisions' nodes busy, without borrowing, and returns its start
// (with copied slices) or nil.
func (pm *preemption) whatIf(a *model.Allocation, victims []*victim) *solver.Start {
	s := pm.snap
	vc := *s.VCluster
	vc.AllowBorrowing = false
	freed := map[string]bool{}
	home := map[string]bool{}
	for _, v := range victims {
		for _, n := range v.nodes {
			freed[n.Name] = true
		}
		for _, n := range v.others {
			home[n.Name] = true
		}
	}
	what := *s
	what.VCluster = &vc
	what.Pending = []*model.Allocation{a}
	what.Nodes = make([]*model.Node, len(s.Nodes))
	for i, n := range s.Nodes {
		switch {
		case freed[n.Name] || home[n.Name]:
			c := *n
			c.Allocation, c.ReturnRequested = 0, false
			if home[n.Name] {
				c.CurrentVCluster = c.HomeVCluster
			}
			if c.State == model.NodeDraining {
				c.State = model.NodeDrained
			}
			n = &c
		case pm.busy[n.Name] && n.Allocation == 0:
			c := *n
			c.Allocation = math.MaxUint64 // taken this cycle: busy for the plan
			n = &c
		}
		what.Nodes[i] = n
	}
	in := BuildInput(&what)
	p := pm.plan(&in)
	for _, st := range p.Starts {
		if st.JobID == a.ID {
			st.Nodes = slices.Clone(st.Nodes)
			st.Borrowed = nil
			return &st
		}
	}
	return nil
}
