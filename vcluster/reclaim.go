package vcluster

import (
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// PlanReclaims decides which lent nodes a home vCluster takes back this
// cycle, by its own plan rather than a heuristic: it solves again a what-if
// in which the home's lent busy nodes (home = this vCluster, current =
// another, running the borrower's work) are its own and free, without
// borrowing. Every job that starts in the what-if on lent nodes, and did
// not start in the real plan, yields a proposal: those lent nodes (the ones
// not already being returned), to be held with the rest of the what-if
// start (Reserve) until they are checkpointed, stopped and back. A job is
// skipped when all its lent nodes are already being returned, when nodes
// are already held for it (its reclaim or preemption is in progress), or
// when the real plan expects it to start within vc.Horizon() anyway. The
// borrowers' priority classes do not matter: lent nodes are the home's.
//
// real is the plan of the same snapshot; plan is the planner (its plan of
// the what-if may reuse memory: real is read before it is called). The
// proposals carry no Version: the caller sets it.
func PlanReclaims(snap *Snapshot, real *solver.Plan, plan Planner) []ReclaimProposal {
	vc := snap.VCluster
	var lent map[string]*model.Node // lent busy nodes by name
	for _, n := range snap.Nodes {
		if n.HomeVCluster == vc.Name && n.CurrentVCluster != vc.Name && n.Allocation != 0 {
			if lent == nil {
				lent = make(map[string]*model.Node)
			}
			lent[n.Name] = n
		}
	}
	if lent == nil || real == nil {
		return nil
	}
	// Lent nodes are not in the real input: a job only they could hold
	// shows BadConstraints or NodesDrained there.
	blocked := waiting(real, snap.Now.Add(vc.Horizon()), true)
	if len(blocked) == 0 {
		return nil
	}
	held := heldFor(snap)

	// The what-if: lent busy nodes at home and free, no borrowing.
	what := *snap
	home := *vc
	home.AllowBorrowing = false
	what.VCluster = &home
	what.Nodes = make([]*model.Node, len(snap.Nodes))
	for i, n := range snap.Nodes {
		if lent[n.Name] != nil {
			c := *n
			c.CurrentVCluster, c.Allocation, c.ReturnRequested = vc.Name, 0, false
			if c.State == model.NodeDraining {
				c.State = model.NodeDrained
			}
			n = &c
		}
		what.Nodes[i] = n
	}
	in := BuildInput(&what)
	wp := plan(&in)

	var out []ReclaimProposal
	for _, st := range wp.Starts {
		if !blocked[st.JobID] || held[st.JobID] {
			continue
		}
		var take []string
		uses := false
		for _, name := range st.Nodes {
			if n := lent[name]; n != nil {
				uses = true
				if !n.ReturnRequested {
					take = append(take, name)
				}
			}
		}
		if !uses || len(take) == 0 {
			continue
		}
		out = append(out, ReclaimProposal{ForAlloc: st.JobID, Nodes: take, Reserve: slices.Clone(st.Nodes)})
	}
	return out
}

// waiting lists the jobs of a plan that do not start and are not expected
// to start by horizon: they wait for nodes (Resources or Priority; with
// lent, also BadConstraints and NodesDrained, which the nodes it lent may
// lift), not for a hold, a quota, power or a dependency.
func waiting(p *solver.Plan, horizon time.Time, lent bool) map[uint64]bool {
	out := map[uint64]bool{}
	for i := range p.Explanations {
		if ex := &p.Explanations[i]; blockedBy(ex, horizon, lent) {
			out[ex.JobID] = true
		}
	}
	return out
}

// blockedBy is waiting's test of one explanation.
func blockedBy(ex *solver.Explanation, horizon time.Time, lent bool) bool {
	switch ex.Reason {
	case model.ReasonResources, model.ReasonPriority:
	case model.ReasonBadConstraints, model.ReasonNodesDrained:
		if !lent {
			return false
		}
	default:
		return false
	}
	return ex.ExpectedStart.IsZero() || ex.ExpectedStart.After(horizon)
}

// heldFor lists the allocations some node is held for now.
func heldFor(s *Snapshot) map[uint64]bool {
	var out map[uint64]bool
	for _, n := range s.Nodes {
		if n.ReservedFor != 0 && s.Now.Before(n.ReservedUntil) {
			if out == nil {
				out = map[uint64]bool{}
			}
			out[n.ReservedFor] = true
		}
	}
	return out
}

// borrowersOf names the vCluster(s) currently using nodes, for messages.
func borrowersOf(snap *Snapshot, nodes []string) string {
	return newBorrowers(snap).of(nodes)
}

// borrowers answers borrowersOf for several node lists of one snapshot
// (a cycle's reclaims each name theirs) without a scan of every node for
// each: the nodes away from home are indexed once; a name not among them
// is looked up by a scan, as borrowersOf always did.
type borrowers struct {
	snap *Snapshot
	away map[string]string // node name -> CurrentVCluster, of nodes not at home; built on first use
}

func newBorrowers(snap *Snapshot) *borrowers { return &borrowers{snap: snap} }

func (b *borrowers) of(nodes []string) string {
	if b.away == nil {
		b.away = map[string]string{}
		for _, n := range b.snap.Nodes {
			if n.CurrentVCluster != n.HomeVCluster {
				b.away[n.Name] = n.CurrentVCluster
			}
		}
	}
	var vcs []string
	add := func(vc string) {
		if !slices.Contains(vcs, vc) {
			vcs = append(vcs, vc)
		}
	}
	var rest map[string]bool
	for _, name := range nodes {
		if vc, ok := b.away[name]; ok {
			add(vc)
		} else {
			if rest == nil {
				rest = map[string]bool{}
			}
			rest[name] = true
		}
	}
	if rest != nil {
		for _, n := range b.snap.Nodes {
			if rest[n.Name] {
				add(n.CurrentVCluster)
			}
		}
	}
	slices.Sort(vcs)
	return strings.Join(vcs, ", ")
}
