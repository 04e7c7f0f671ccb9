package vcluster

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/latticehpc/lattice/solver"
)

// maxStartedExplanations bounds how many start explanations a loop keeps.
const maxStartedExplanations = 4096

// startedExplanations keeps, for the allocations a loop started most
// recently, the explanation they started with: their score factor by
// factor, their rank, and how their nodes were chosen. `explain` of a
// running allocation shows it. It is the leader's memory: after a failover
// the allocations started before are explained without it.
type startedExplanations struct {
	mu    sync.Mutex
	byID  map[uint64]*Explanation
	order []uint64 // oldest first
}

// recordStarts keeps the explanations of the starts the quorum committed.
func (e *Explanations) recordStarts(plan *solver.Plan, outcomes []Outcome, snap *Snapshot, now time.Time) {
	pos := make(map[uint64]*solver.Start, len(plan.Starts))
	for i := range plan.Starts {
		pos[plan.Starts[i].JobID] = &plan.Starts[i]
	}
	st := &e.started
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, o := range outcomes {
		s := pos[o.AllocID]
		if !o.Committed || s == nil || s.Position < 1 || s.Position > len(plan.Explanations) {
			continue
		}
		x := &Explanation{Explanation: plan.Explanations[s.Position-1], Computed: now, Profile: snap.VCluster.WeightsProfile}
		x.Nodes = slices.Clone(s.Nodes)
		x.Message = startSentence(s, snap)
		if st.byID == nil {
			st.byID = map[uint64]*Explanation{}
		}
		if _, ok := st.byID[o.AllocID]; !ok {
			st.order = append(st.order, o.AllocID)
		}
		st.byID[o.AllocID] = x
		for len(st.order) > maxStartedExplanations {
			delete(st.byID, st.order[0])
			st.order = st.order[1:]
		}
	}
}

// Started returns the explanation allocation id started with, when this
// loop started it recently. The caller owns it.
func (e *Explanations) Started(id uint64) (*Explanation, bool) {
	st := &e.started
	st.mu.Lock()
	defer st.mu.Unlock()
	x, ok := st.byID[id]
	if !ok {
		return nil, false
	}
	c := *x
	c.Nodes = slices.Clone(x.Nodes)
	return &c, true
}

// startSentence says how a start was decided: its rank, whether it was
// backfilled, and where its nodes are.
func startSentence(s *solver.Start, snap *Snapshot) string {
	groups := map[int]bool{}
	for _, name := range s.Nodes {
		i := sort.Search(len(snap.Nodes), func(i int) bool { return snap.Nodes[i].Name >= name })
		if i < len(snap.Nodes) && snap.Nodes[i].Name == name {
			groups[snap.Nodes[i].Group] = true
		}
	}
	how := "started in score order"
	if s.Backfilled {
		how = "backfilled: started ahead of a higher-scored allocation that waits for nodes, without delaying its reserved start"
	}
	where := fmt.Sprintf("on %d node(s) in %d dragonfly group(s) (the placement packs a job into as few groups as it can, f4)", len(s.Nodes), len(groups))
	if len(s.Borrowed) > 0 {
		where += fmt.Sprintf(", %d of them borrowed from another vCluster", len(s.Borrowed))
	}
	return fmt.Sprintf("%s at rank %d with score %.3f, %s", how, s.Position, s.Score, where)
}
