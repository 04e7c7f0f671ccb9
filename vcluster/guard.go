package vcluster

import (
	"cmp"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
)

// DefaultStarvationFactor is Snapshot.StarvationFactor's default: a head
// that has waited 1.25 × what EASY would have made it wait is planned with
// EASY's safe release times from then on.
const DefaultStarvationFactor = 1.25

// DefaultUserGuardFactor is Snapshot.UserGuardFactor's default: a tenant
// behind its bounds has its jobs protected once they have waited as long
// as their bounds promised.
const DefaultUserGuardFactor = 1

func (s *Snapshot) userGuardFactor() float64 {
	switch {
	case s.UserGuardFactor == 0:
		return DefaultUserGuardFactor
	case s.UserGuardFactor < 0:
		return 0
	}
	return s.UserGuardFactor
}

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
	// The per-job guard (protect): each pending job's bound, and scratch.
	jobs   map[uint64]*jobBound
	prot   map[uint64]bool
	fresh  []*model.Allocation
	events []profEvent
	// The per-user guard's ledger (protect): each tenant's recent bounded
	// slowdowns as its bounded jobs started (got), and as they would have
	// been at their bounds (ref).
	got, ref predict.Service
	cycle    uint64
	started  []uint64 // scratch
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
		forgetNotPending(g.bound, s)
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

// ownRunning walks the vCluster's own nodes: it returns how many are Ready
// and idle, and calls add once per allocation running on them (neighbouring
// nodes of one allocation counted together) with its release time by
// walltime — start + walltime, unknown when it has no start or walltime,
// never before now.
func ownRunning(s *Snapshot, unknown time.Time, add func(end time.Time, nodes int)) (free int) {
	var (
		last  uint64
		end   time.Time
		nodes int
	)
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
		if n.Allocation == last {
			nodes++
			continue
		}
		if nodes > 0 {
			add(end, nodes)
		}
		last, nodes, end = n.Allocation, 1, unknown
		if r := s.Allocations[n.Allocation]; r != nil && !r.StartTime.IsZero() && r.Walltime > 0 {
			end = r.StartTime.Add(r.Walltime)
		}
		if end.Before(s.Now) {
			end = s.Now
		}
	}
	if nodes > 0 {
		add(end, nodes)
	}
	return free
}

// easyStart is the start EASY's head rule would give a now: the earliest
// time at which NodesMin own Ready nodes are free if every running
// allocation ends at its start + walltime; zero when they never are.
func (g *EasyStarts) easyStart(s *Snapshot, a *model.Allocation) time.Time {
	need := max(1, a.NodesMin)
	g.ends = g.ends[:0]
	free := ownRunning(s, s.Now, func(end time.Time, nodes int) { g.ends = append(g.ends, easyEnd{end, nodes}) })
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

// forgetNotPending deletes from m the jobs no longer pending in s.
func forgetNotPending[V any](m map[uint64]V, s *Snapshot) {
	keep := make(map[uint64]bool, len(s.Pending))
	for _, a := range s.Pending {
		if a != nil {
			keep[a.ID] = true
		}
	}
	for id := range m {
		if !keep[id] {
			delete(m, id)
		}
	}
}

// jobBound is the per-job guard's memory of one pending job: the start
// conservative backfilling gave it (with walltimes) when the guard first
// saw it, and the deadline past which it is protected.
type jobBound struct {
	start    time.Time // zero: it never fit
	nodes    int
	wall     time.Duration
	deadline time.Time // eligible + factor × (start − eligible)
	// The per-user guard's: when its wait counts from, when it is due
	// (eligible + userFactor × (start − eligible)), its tenant, its
	// vCluster, and the last cycle that saw it pending.
	elig, due time.Time
	tenant    string
	vc        string
	seen      uint64
}

// profEvent changes the number of free own nodes at a time.
type profEvent struct {
	at    time.Time
	delta int
}

// protect runs the per-job and the per-user starvation guards. Each
// pending job, when the guards first see it, is given a bound: the start
// conservative backfilling would promise it then — the earliest time enough
// own nodes are free for its walltime if every running allocation ends at
// its walltime and every job already bounded keeps the slot of its own bound
// (EASY promises this only to the head; conservative backfilling to every
// job, and never later).
//
// The per-job guard (factor > 0): a job that has waited longer than factor ×
// that wait is protected, and strict is set (the cycle then plans running
// work with walltimes).
//
// The per-user guard (userFactor > 0) keeps each tenant's record against
// those bounds: as each bounded job starts, its bounded slowdown and the one
// its bound promised are added to the tenant's decayed means (each with
// predict.UnknownLength of its walltime as its length: the run is not known
// yet). A tenant whose mean is above its bounds' is behind, and its jobs
// that have waited longer than userFactor × their bound's wait are
// protected too; they do not set strict.
//
// Protected jobs get a reservation before the others are decided
// (solver.Job.Protected). It returns them (valid until the next call), nil
// when none.
func (g *EasyStarts) protect(s *Snapshot, factor, userFactor float64) (prot map[uint64]bool, strict bool) {
	if (factor <= 0 && userFactor <= 0) || len(s.Pending) == 0 {
		return nil, false
	}
	if g.jobs == nil {
		g.jobs = make(map[uint64]*jobBound)
		g.got.HalfLife, g.ref.HalfLife = DefaultFairShareHalfLife, DefaultFairShareHalfLife
	}
	g.cycle++
	clear(g.prot)
	g.fresh = g.fresh[:0]
	g.events = g.events[:0]
	mark := func(id uint64) {
		if g.prot == nil {
			g.prot = make(map[uint64]bool)
		}
		g.prot[id] = true
	}
	for _, a := range s.Pending {
		if a == nil {
			continue
		}
		b := g.jobs[a.ID]
		if b != nil {
			b.seen = g.cycle
		}
		if a.State != model.StatePending || a.EligibleTime.IsZero() || a.Waiting(s.Now) != "" {
			continue
		}
		if b == nil {
			g.fresh = append(g.fresh, a)
			continue
		}
		if b.start.IsZero() {
			continue
		}
		if factor > 0 && s.Now.After(b.deadline) {
			mark(a.ID)
			strict = true
		} else if userFactor > 0 && s.Now.After(b.due) && g.behind(b.tenant, s.Now) {
			mark(a.ID)
		}
	}
	if userFactor > 0 {
		g.learnStarts(s)
	} else if len(g.jobs) > 2*len(s.Pending)+64 {
		forgetNotPending(g.jobs, s)
	}
	if len(g.fresh) > 0 {
		// The slots of the jobs bounded before, for the profile.
		for _, a := range s.Pending {
			b := g.jobs[a.ID]
			if b == nil || b.start.IsZero() {
				continue
			}
			from := b.start
			if from.Before(s.Now) {
				from = s.Now // overdue: it would start now
			}
			g.events = append(g.events, profEvent{from, -b.nodes}, profEvent{from.Add(b.wall), b.nodes})
		}
		g.boundFresh(s, factor, userFactor)
	}
	if len(g.prot) == 0 {
		return nil, false
	}
	return g.prot, strict
}

// behind tells whether tenant's recent bounded slowdowns are above what
// its jobs' bounds promised (the per-user guard).
func (g *EasyStarts) behind(tenant string, now time.Time) bool {
	got, w := g.got.Tenant(tenant, now)
	if w <= 0 {
		return false
	}
	ref, _ := g.ref.Tenant(tenant, now)
	return got > ref
}

// learnStarts adds to the per-user ledger the bounded jobs of s's vCluster
// that left the queue since the last cycle and started, in id order, and
// forgets every bounded job of s's vCluster no longer pending.
func (g *EasyStarts) learnStarts(s *Snapshot) {
	g.started = g.started[:0]
	for id, b := range g.jobs {
		if b.seen == g.cycle || b.vc != s.VCluster.Name {
			continue
		}
		if a := s.Allocations[id]; a != nil && !a.StartTime.IsZero() && !b.start.IsZero() {
			g.started = append(g.started, id)
		} else {
			delete(g.jobs, id)
		}
	}
	slices.Sort(g.started)
	for _, id := range g.started {
		b, a := g.jobs[id], s.Allocations[id]
		length := predict.UnknownLength(b.wall)
		g.got.Observe(b.tenant, s.Now, max(0, a.StartTime.Sub(b.elig)), length)
		g.ref.Observe(b.tenant, s.Now, max(0, b.start.Sub(b.elig)), length)
		delete(g.jobs, id)
	}
}

// boundFresh gives each fresh job (g.fresh) its conservative start, in eligible
// order, over the profile of running work and the slots of the jobs
// already bounded (g.events).
func (g *EasyStarts) boundFresh(s *Snapshot, factor, userFactor float64) {
	slices.SortFunc(g.fresh, func(x, y *model.Allocation) int {
		if c := eligible(x).Compare(eligible(y)); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	if len(g.fresh) > maxBoundPerCycle {
		g.fresh = g.fresh[:maxBoundPerCycle] // the others next cycle
	}
	free := ownRunning(s, s.Now.Add(model.MaxWalltime), func(end time.Time, nodes int) { g.events = append(g.events, profEvent{end, nodes}) })
	slices.SortFunc(g.events, func(x, y profEvent) int { return x.at.Compare(y.at) })
	for _, a := range g.fresh {
		need, wall := max(1, a.NodesMin), a.Walltime
		if wall <= 0 {
			wall = model.MaxWalltime
		}
		start := earliestFit(s.Now, free, g.events, need, wall)
		b := &jobBound{start: start, nodes: need, wall: wall, tenant: a.Tenant, vc: s.VCluster.Name, seen: g.cycle}
		if !start.IsZero() {
			e := eligible(a)
			if a.BeginTime.After(e) {
				e = a.BeginTime // its wait counts from its begin time, as the solver's does
			}
			wait := max(0, start.Sub(e))
			b.elig = e
			b.deadline = e.Add(time.Duration(factor * float64(wait)))
			b.due = e.Add(time.Duration(userFactor * float64(wait)))
			g.events = insertEvent(g.events, profEvent{start, -need})
			g.events = insertEvent(g.events, profEvent{start.Add(wall), need})
		}
		g.jobs[a.ID] = b
	}
}

// maxBoundPerCycle is how many new jobs the guards bound in one cycle, the
// longest-waiting first: each costs a pass over the profile, so a queue
// that arrives at once (a new leader's first cycle, a large array) is
// bounded over several cycles instead of stalling one.
const maxBoundPerCycle = 256

// insertEvent inserts e into events, sorted by time, after the events at
// the same time (earliestFit reads events of one time together, so their
// order does not matter).
func insertEvent(events []profEvent, e profEvent) []profEvent {
	i, _ := slices.BinarySearchFunc(events, e.at, func(x profEvent, at time.Time) int {
		if x.at.After(at) {
			return 1
		}
		return -1
	})
	return slices.Insert(events, i, e)
}

// earliestFit is the earliest time from now at which need nodes stay free
// for wall, given free nodes now and the changes in events (sorted by
// time); zero when never.
func earliestFit(now time.Time, free int, events []profEvent, need int, wall time.Duration) time.Time {
	level := free
	var cand time.Time
	have := false
	i := 0
	for i < len(events) && !events[i].at.After(now) {
		level += events[i].delta
		i++
	}
	at := now
	for {
		if level >= need {
			if !have {
				cand, have = at, true
			}
		} else {
			have = false
		}
		if i == len(events) {
			if have {
				return cand
			}
			return time.Time{}
		}
		next := events[i].at
		if have && next.Sub(cand) >= wall {
			return cand
		}
		for i < len(events) && events[i].at.Equal(next) {
			level += events[i].delta
			i++
		}
		at = next
	}
}
