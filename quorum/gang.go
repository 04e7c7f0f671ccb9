package quorum

import (
	"cmp"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Preemption by suspension (model.PreemptSuspend, gang-style, without
// time-slicing). A Preempt item whose action for a victim is
// ActionSuspend moves it RUNNING → SUSPENDED at once: its nodes are freed
// (Allocation 0, I1 holds: a suspended allocation runs nowhere) and marked
// with Node.SuspendedAlloc, and it keeps their names in SuspendedOn. Its
// agent freezes its processes (the leader's dispatcher sends the freeze
// before anything else may start there); its memory stays on the nodes. A
// marked node takes only the allocation the victim was suspended for
// (reservedAgainst). Once none of its nodes runs anything and the
// preemptor holds none of them — it ended, or never started —, the leader
// proposes ResumeSuspended: the victim goes SUSPENDED → RUNNING on the same
// nodes, the marks are dropped, its suspended time is added to
// SuspendedFor (its walltime does not count it), and its agent thaws it. A
// victim whose nodes can no longer take it (down, drained) is requeued by
// the same command instead. Command numbers 110–114.

// ResumeSuspended resumes allocations a preemption suspended, on the nodes
// they were suspended on (Requeue false), or sends them back to the queue
// (Requeue true: their nodes cannot take them again; their agents end the
// frozen runs).
type ResumeSuspended struct {
	Header
	IDs     []uint64 `json:"ids"`
	Requeue bool     `json:"requeue,omitempty"`
}

func (s *State) applyResumeSuspended(c *ResumeSuspended) *Result {
	res := &Result{Items: make([]ItemResult, len(c.IDs))}
	for i, id := range c.IDs {
		res.Items[i] = ItemResult{ID: id}
		var rej *Rejection
		if c.Requeue {
			rej = s.requeueSuspended(id, c.Time)
		} else {
			rej = s.resumeSuspended(id, c.Time)
		}
		res.Items[i].Rejection = rej
		res.Items[i].Committed = rej == nil
	}
	return res
}

// gangSuspend suspends running allocation a for preemption p.
func (s *State) gangSuspend(a *model.Allocation, p model.Preemption, t time.Time) {
	c := modify(a)
	c.Preemption = &p
	c.SuspendedOn = a.Nodes
	c.SuspendedAt = t
	transition(c, model.StateSuspended, model.ReasonPreempted, t)
	s.releaseNodes(c, t)
	c.Nodes = nil
	for _, name := range c.SuspendedOn {
		if n := s.nodes[name]; n != nil {
			nc := modifyNode(n)
			nc.SuspendedAlloc = a.ID
			s.replaceNode(n, nc)
		}
	}
	s.replaceAlloc(a, c)
}

// ResumeBlocker says why gang-suspended allocation a cannot resume now
// ("" = it can): a node of it runs something, is held for its preemptor,
// or cannot take work. requeue reports that it never can (a node is gone,
// down or drained): it should be requeued.
func (s *State) ResumeBlocker(a *model.Allocation, t time.Time) (why string, requeue bool) {
	for _, name := range a.SuspendedOn {
		n := s.nodes[name]
		switch {
		case n == nil:
			return "node " + name + " no longer exists", true
		case n.State == model.NodeDown || n.State == model.NodeDrained || n.Drain || n.Health == model.NodeDown:
			return "node " + name + " is " + string(n.State), true
		}
	}
	for _, name := range a.SuspendedOn {
		n := s.nodes[name]
		switch {
		case n.Allocation != 0:
			return "node " + name + " runs another allocation", false
		case s.reservedAgainst(n, a.ID, t):
			return "node " + name + " is held for the allocation it was suspended for", false
		case n.State != model.NodeReady:
			return "node " + name + " is " + string(n.State), false
		}
	}
	return "", false
}

func (s *State) resumeSuspended(id uint64, t time.Time) *Rejection {
	a := s.allocs[id]
	switch {
	case a == nil:
		return reject(CodeNotFound, "", "allocation %d does not exist", id)
	case !a.GangSuspended():
		return reject(CodeConflict, "", "allocation %d is %s, not suspended by a preemption", id, a.State)
	}
	if why, _ := s.ResumeBlocker(a, t); why != "" {
		return reject(CodeConflict, model.ReasonResources, "allocation %d cannot resume: %s", id, why)
	}
	vc := s.vclusters[a.VCluster]
	if vc == nil {
		return reject(CodeNotFound, "", "vcluster %q does not exist", a.VCluster)
	}
	ctx := &assignCtx{t: t, vc: vc, alloc: a}
	for _, name := range a.SuspendedOn {
		ctx.nodes = append(ctx.nodes, s.nodes[name])
	}
	if rej := checkQuota(s, ctx); rej != nil {
		return rej
	}
	if rej := checkPower(s, ctx); rej != nil {
		return rej
	}
	c := modify(a)
	c.Nodes, c.SuspendedOn = a.SuspendedOn, nil
	if d := t.Sub(a.SuspendedAt); d > 0 {
		c.SuspendedFor += d
	}
	c.SuspendedAt = time.Time{}
	transition(c, model.StateRunning, "", t)
	for _, n := range ctx.nodes {
		nc := modifyNode(n)
		nc.Allocation, nc.SuspendedAlloc = id, 0
		nc.CurrentVCluster = vc.Name
		nc.DeriveState()
		s.replaceNode(n, nc)
	}
	s.replaceAlloc(a, c)
	s.touch()
	return nil
}

func (s *State) requeueSuspended(id uint64, t time.Time) *Rejection {
	a := s.allocs[id]
	switch {
	case a == nil:
		return reject(CodeNotFound, "", "allocation %d does not exist", id)
	case !a.GangSuspended():
		return reject(CodeConflict, "", "allocation %d is %s, not suspended by a preemption", id, a.State)
	}
	if !a.StartTime.IsZero() {
		s.chargeUsage(a.Tenant, float64(len(a.SuspendedOn))*max(0, a.SuspendedAt.Sub(a.StartTime).Seconds()), t)
	}
	c := modify(a)
	c.StartTime, c.SuspendedAt, c.SuspendedFor = time.Time{}, time.Time{}, 0
	transition(c, model.StatePending, model.ReasonPreempted, t)
	c.RequeueCount++
	c.CancelRequested = false
	s.replaceAlloc(a, c) // drops the marks (dropSuspendMarks)
	s.touch()
	return nil
}

// dropSuspendMarks clears the marks of old, an allocation that was
// suspended by a preemption and no longer is (resumed, requeued,
// cancelled): called by replaceAlloc, whatever command moved it.
func (s *State) dropSuspendMarks(old, a *model.Allocation) {
	for _, name := range old.SuspendedOn {
		if n := s.nodes[name]; n != nil && n.SuspendedAlloc == old.ID {
			nc := modifyNode(n)
			nc.SuspendedAlloc = 0
			s.replaceNode(n, nc)
		}
	}
	if a.State != model.StateSuspended {
		a.SuspendedOn = nil
	}
}

// suspendHolds reports whether node n, marked by a suspended allocation,
// may not take allocation id: only the allocation it was suspended for
// (and the suspended one itself, resuming) may.
func (s *State) suspendHolds(n *model.Node, id uint64) bool {
	if n.SuspendedAlloc == 0 || n.SuspendedAlloc == id {
		return false
	}
	v := s.allocs[n.SuspendedAlloc]
	if v == nil || !v.GangSuspended() {
		return false
	}
	return v.Preemption == nil || v.Preemption.ForAlloc != id
}

// SuspendedByPreemption lists the allocations a preemption suspended, by
// id, from the marks on the nodes: a few at most.
func (s *State) SuspendedByPreemption() []*model.Allocation {
	var out []*model.Allocation
	seen := map[uint64]bool{}
	for _, n := range s.nodeList {
		if n.SuspendedAlloc == 0 || seen[n.SuspendedAlloc] {
			continue
		}
		seen[n.SuspendedAlloc] = true
		if a := s.allocs[n.SuspendedAlloc]; a != nil && a.GangSuspended() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y *model.Allocation) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// Level is the feature level a member needs to apply c: Level1 when an
// item cancels or suspends a victim (only this release does). Items whose
// actions are all checkpoint or requeue do what every release does (stop
// and requeue), and the policy checks Apply adds for them can only refuse
// what a leader of a mixed cluster never proposes: the modes that would
// make them differ (preempt_mode of a vCluster or a QOS) are Level1
// settings themselves.
func (c *Preempt) Level() Level {
	for _, it := range c.Items {
		for _, a := range it.Actions {
			if a == model.ActionCancel || a == model.ActionSuspend {
				return Level1
			}
		}
	}
	return LevelBase
}

// Level is the feature level a member needs to apply c: Level1 when the
// QOS sets a preemption mode.
func (c *SetQOS) Level() Level {
	if c.QOS.PreemptMode != "" {
		return Level1
	}
	return LevelBase
}
