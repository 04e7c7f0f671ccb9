package vcluster

import (
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
)

// DefaultStarvationFactor is Snapshot.StarvationFactor's default: a head
// that has waited 1.25 × what EASY would have made it wait is planned with
// EASY's safe release times from then on.
const DefaultStarvationFactor = 1.25

func (s *Snapshot) starvationFactor() float64 {
	if s.StarvationFactor == 0 {
		return DefaultStarvationFactor
	}
	return s.StarvationFactor
}

// EasyStarts is the relative starvation guard's memory from one cycle to the
// next (Snapshot.EasyStarts): for each job that has been the head of the
// queue, the start EASY's head-of-queue reservation gave it when it became
// the head — the time enough own nodes are free if every running
// allocation ends at its walltime (EASY's release times; nothing started
// later can delay a reservation). The caller keeps one per vCluster (the
// Loop and the replay do); derived state, never committed. The zero value
// is ready to use; not safe for concurrent use.
type EasyStarts struct {
	bound map[uint64]time.Time // job → EASY's start for it; zero = none known
	ends  []easyEnd
}

type easyEnd struct {
	at    time.Time
	nodes int
}

// starved reports whether head, the head of s's queue (the longest-waiting
// job of the highest priority class, waiting since headElig; nil = none),
// has waited longer than factor × the wait EASY's reservation would have
// given it when it became the head. Then the cycle is planned with
// walltimes (EASY's safe release times), so the head's reservation cannot
// be pushed back by running work that outlives its prediction. The Builder
// finds the head (Builder.queueHead).
func (g *EasyStarts) starved(s *Snapshot, head *model.Allocation, headElig time.Time, factor float64) bool {
	if factor <= 0 || len(s.Pending) == 0 || head == nil {
		return false
	}
	if g.bound == nil {
		g.bound = make(map[uint64]time.Time)
	}
	if len(g.bound) > 2*len(s.Pending)+64 {
		g.prune(s)
	}
	bound, ok := g.bound[head.ID]
	if !ok {
		bound = g.easyStart(s, head)
		g.bound[head.ID] = bound
	}
	if bound.IsZero() || !s.Now.After(bound) {
		return false
	}
	easyWait := bound.Sub(headElig)
	return float64(s.Now.Sub(headElig)) > factor*float64(easyWait)
}

func eligible(a *model.Allocation) time.Time {
	if !a.EligibleTime.IsZero() {
		return a.EligibleTime
	}
	return a.SubmitTime
}

// easyStart is the start EASY's head rule would give a now: the earliest
// time at which NodesMin own Ready nodes are free if every running
// allocation ends at its start + walltime; zero when they never are.
func (g *EasyStarts) easyStart(s *Snapshot, a *model.Allocation) time.Time {
	need := max(1, a.NodesMin)
	free := 0
	g.ends = g.ends[:0]
	var last uint64
	for _, n := range s.Nodes {
		if n.CurrentVCluster != s.VCluster.Name {
			continue
		}
		if n.Allocation == 0 {
			if n.State == model.NodeReady {
				free++
			}
			continue
		}
		at := s.Now
		if r := s.Allocations[n.Allocation]; r != nil && !r.StartTime.IsZero() && r.Walltime > 0 {
			at = r.StartTime.Add(r.Walltime)
		}
		if at.Before(s.Now) {
			at = s.Now
		}
		if k := len(g.ends); k > 0 && n.Allocation == last {
			g.ends[k-1].nodes++
			continue
		}
		last = n.Allocation
		g.ends = append(g.ends, easyEnd{at, 1})
	}
	if free >= need {
		return s.Now
	}
	slices.SortFunc(g.ends, func(x, y easyEnd) int { return x.at.Compare(y.at) })
	for _, e := range g.ends {
		free += e.nodes
		if free >= need {
			return e.at
		}
	}
	return time.Time{}
}

// prune forgets the jobs no longer pending.
func (g *EasyStarts) prune(s *Snapshot) {
	keep := make(map[uint64]bool, len(s.Pending))
	for _, a := range s.Pending {
		if a != nil {
			keep[a.ID] = true
		}
	}
	for id := range g.bound {
		if !keep[id] {
			delete(g.bound, id)
		}
	}
}
