package quorum

import (
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
)

// This file holds the commands that take nodes back from running work —
// Reclaim (a home vCluster wants its lent nodes), Preempt (higher-class
// work of a vCluster) — and Checkpoint (a checkpoint that keeps the work
// running). A stopped allocation goes RUNNING → CHECKPOINTING; its agent,
// told by the leader's dispatcher, delivers the checkpoint request, stops it
// and reports SUSPENDED (or COMPLETED if it finished meanwhile); the FSM
// then requeues it (SUSPENDED → PENDING, reason Preempted, requeue count
// +1, submit time kept) and its nodes are free for the allocation they were
// held for.

// Checkpoint reasons (Allocation.CheckpointReason). Reclaim and preempt
// stop the allocation once checkpointed; the others keep it running.
const (
	CheckpointUser      = "user"
	CheckpointProactive = "proactive"
	CheckpointSignal    = "signal"
)

// stopping reports whether a is being checkpointed in order to be stopped
// (a reclaim or a preemption), not to keep running.
func stopping(a *model.Allocation) bool {
	return a.State == model.StateCheckpointing &&
		(a.CheckpointReason == model.PreemptReclaim || a.CheckpointReason == model.PreemptClass)
}

// Stopping is stopping for readers outside the FSM (the dispatcher).
func Stopping(a *model.Allocation) bool { return stopping(a) }

// preemptAlloc starts stopping active allocation a for p. A Staging one
// never ran: it goes straight back to the queue. One already being stopped
// is left alone; a checkpoint that would have kept it running becomes a
// stop.
func (s *State) preemptAlloc(a *model.Allocation, p model.Preemption, t time.Time) {
	switch {
	case stopping(a):
		return
	case a.State == model.StateStaging:
		c := modify(a)
		c.Preemption = &p
		s.replaceAlloc(a, c)
		_ = s.updateAlloc(AllocUpdate{AllocID: a.ID, State: model.StatePending, Reason: model.ReasonPreempted}, t)
		return
	}
	c := modify(a)
	c.Preemption = &p
	c.CheckpointReason, c.CheckpointDeadline = p.Kind, p.Deadline
	if a.State == model.StateRunning {
		transition(c, model.StateCheckpointing, p.Kind, t)
	}
	s.replaceAlloc(a, c)
}

// reserve holds idle nodes for a pending allocation until until.
func (s *State) reserve(names []string, id uint64, until time.Time) {
	for _, name := range names {
		n := s.nodes[name]
		if n == nil || (n.ReservedFor == id && n.ReservedUntil.Equal(until)) {
			continue
		}
		nc := modifyNode(n)
		nc.ReservedFor, nc.ReservedUntil = id, until
		s.replaceNode(n, nc)
	}
}

// checkBeneficiary checks the pending allocation nodes are taken for.
func (s *State) checkBeneficiary(id uint64, vc string, version uint64) (*model.Allocation, *Rejection) {
	a := s.allocs[id]
	switch {
	case a == nil:
		return nil, reject(CodeNotFound, "", "allocation %d does not exist", id)
	case a.State != model.StatePending || a.EligibleTime.IsZero():
		return nil, reject(CodeConflict, "", "allocation %d is %s (reason %s), not PENDING and eligible", id, a.State, a.Reason)
	case a.VCluster != vc:
		return nil, reject(CodeConflict, "", "allocation %d belongs to vcluster %s, not %s", id, a.VCluster, vc)
	case a.ModifyVersion > version:
		return nil, reject(CodeStale, "", "allocation %d changed at version %d after proposal version %d", id, a.ModifyVersion, version)
	}
	return a, nil
}

// checkReserve checks that every node of a reservation exists and is not
// held for another allocation; taking lists the nodes the command frees.
func (s *State) checkReserve(names []string, forID uint64, vc string, taking func(*model.Node) bool, t time.Time) *Rejection {
	for _, name := range names {
		n := s.nodes[name]
		switch {
		case n == nil:
			return reject(CodeNotFound, "", "node %s does not exist", name)
		case s.reservedAgainst(n, forID, t):
			return reject(CodeConflict, model.ReasonResources, "node %s is held for allocation %d", name, n.ReservedFor)
		case taking(n):
		case n.Allocation != 0:
			return reject(CodeConflict, model.ReasonResources, "node %s runs allocation %d, which this proposal does not free", name, n.Allocation)
		case n.CurrentVCluster != vc && n.HomeVCluster != vc:
			return reject(CodeConflict, model.ReasonResources, "node %s belongs to %s, not %s", name, n.CurrentVCluster, vc)
		}
	}
	return nil
}

// --- Reclaim -----------------------------------------------------------------------

func (s *State) applyReclaim(c *Reclaim) *Result {
	res := &Result{}
	for _, name := range c.Nodes {
		res.Items = append(res.Items, s.reclaimNode(name, "", c.Time))
	}
	if len(c.Items) == 0 {
		return res
	}
	home := s.vclusters[c.VCluster]
	if home == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "vcluster %q does not exist", c.VCluster)}
	}
	for _, it := range c.Items {
		res.Items = append(res.Items, s.reclaimItem(home, it, c))
	}
	return res
}

// reclaimNode gives one borrowed node back: at once when idle, else it is
// marked to go home when its allocation ends.
func (s *State) reclaimNode(name, from string, t time.Time) ItemResult {
	n := s.nodes[name]
	switch {
	case n == nil:
		return ItemResult{Rejection: reject(CodeNotFound, "", "node %s does not exist", name)}
	case !n.Borrowed():
		return ItemResult{Committed: true}
	}
	nc := modifyNode(n)
	if from != "" {
		nc.ReclaimedFrom, nc.ReclaimedAt = from, t
	}
	if n.Idle() {
		nc.CurrentVCluster = nc.HomeVCluster
		nc.ReturnRequested = false
		nc.DeriveState()
	} else {
		nc.ReturnRequested = true
	}
	if from != "" || n.Idle() || !n.ReturnRequested {
		s.replaceNode(n, nc)
		s.touch()
	}
	return ItemResult{Committed: true}
}

func (s *State) reclaimItem(home *model.VCluster, it ReclaimItem, c *Reclaim) ItemResult {
	out := ItemResult{ID: it.ForAlloc}
	if _, rej := s.checkBeneficiary(it.ForAlloc, home.Name, it.Version); rej != nil {
		out.Rejection = rej
		return out
	}
	if len(it.Nodes) == 0 {
		out.Rejection = reject(CodeInvalid, "", "reclaim for allocation %d names no nodes", it.ForAlloc)
		return out
	}
	var victims []*model.Allocation
	for _, name := range it.Nodes {
		n := s.nodes[name]
		switch {
		case n == nil:
			out.Rejection = reject(CodeNotFound, "", "node %s does not exist", name)
		case n.HomeVCluster != home.Name:
			out.Rejection = reject(CodeConflict, "", "node %s belongs to %s, not %s", name, n.HomeVCluster, home.Name)
		case !n.Borrowed():
			out.Rejection = reject(CodeConflict, "", "node %s is not lent out", name)
		case n.ModifyVersion > it.Version:
			out.Rejection = reject(CodeStale, "", "node %s changed at version %d after proposal version %d", name, n.ModifyVersion, it.Version)
		}
		if out.Rejection != nil {
			return out
		}
		if a := s.allocs[n.Allocation]; a != nil && a.State.Active() && !slices.Contains(victims, a) {
			victims = append(victims, a)
		}
	}
	if rej := s.checkReserve(it.Reserve, it.ForAlloc, home.Name, func(n *model.Node) bool { return slices.Contains(it.Nodes, n.Name) }, c.Time); rej != nil {
		out.Rejection = rej
		return out
	}
	// Commit: never blocked by the borrowers' priority class.
	for _, name := range it.Nodes {
		s.reclaimNode(name, s.nodes[name].CurrentVCluster, c.Time)
	}
	p := model.Preemption{Kind: model.PreemptReclaim, ByVCluster: home.Name, ForAlloc: it.ForAlloc, Time: c.Time, Deadline: c.Time.Add(home.Grace())}
	s.takeFor(p, victims, it.Reserve, c.ReserveUntil)
	out.Committed = true
	return out
}

// takeFor commits a reclaim or preemption: every victim starts being
// stopped (p records why, for whom, until when) and the nodes of reserve
// are held for p.ForAlloc until until.
func (s *State) takeFor(p model.Preemption, victims []*model.Allocation, reserve []string, until time.Time) {
	for _, v := range victims {
		s.preemptAlloc(s.allocs[v.ID], p, p.Time)
	}
	s.reserve(reserve, p.ForAlloc, until)
	s.touch()
}

// --- Preempt -----------------------------------------------------------------------

func (s *State) applyPreempt(c *Preempt) *Result {
	vc := s.vclusters[c.VCluster]
	if vc == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "vcluster %q does not exist", c.VCluster)}
	}
	res := &Result{Items: make([]ItemResult, len(c.Items))}
	for i, it := range c.Items {
		res.Items[i] = s.preemptItem(vc, it, c)
	}
	return res
}

func (s *State) preemptItem(vc *model.VCluster, it PreemptItem, c *Preempt) ItemResult {
	out := ItemResult{ID: it.ForAlloc}
	if !vc.Preempts() {
		out.Rejection = reject(CodeConflict, "", "vcluster %s does not allow preemption", vc.Name)
		return out
	}
	p, rej := s.checkBeneficiary(it.ForAlloc, vc.Name, it.Version)
	if rej != nil {
		out.Rejection = rej
		return out
	}
	if len(it.Victims) == 0 {
		out.Rejection = reject(CodeInvalid, "", "preemption for allocation %d names no victims", it.ForAlloc)
		return out
	}
	if len(it.Actions) != 0 && len(it.Actions) != len(it.Victims) {
		out.Rejection = reject(CodeInvalid, "", "preemption for allocation %d has %d actions for %d victims", it.ForAlloc, len(it.Actions), len(it.Victims))
		return out
	}
	victims := make([]*model.Allocation, 0, len(it.Victims))
	for i, id := range it.Victims {
		v := s.allocs[id]
		switch {
		case v == nil:
			out.Rejection = reject(CodeNotFound, "", "allocation %d does not exist", id)
		case !v.State.Active():
			out.Rejection = reject(CodeConflict, "", "allocation %d is %s, not running", id, v.State)
		case v.VCluster != vc.Name:
			out.Rejection = reject(CodeConflict, "", "allocation %d belongs to vcluster %s, not %s", id, v.VCluster, vc.Name)
		case v.PriorityClass >= model.MaxPriorityClass:
			out.Rejection = reject(CodeConflict, "", "allocation %d has priority class %d, which is never preempted", id, v.PriorityClass)
		case v.PriorityClass >= p.PriorityClass:
			out.Rejection = reject(CodeConflict, "", "allocation %d has priority class %d, not below the preemptor's %d", id, v.PriorityClass, p.PriorityClass)
		case v.ModifyVersion > it.Version:
			out.Rejection = reject(CodeStale, "", "allocation %d changed at version %d after proposal version %d", id, v.ModifyVersion, it.Version)
		case slices.Contains(victims, v):
			out.Rejection = reject(CodeInvalid, "", "allocation %d listed twice", id)
		case len(it.Actions) != 0:
			out.Rejection = s.checkAction(vc, v, it.Actions[i])
		}
		if out.Rejection != nil {
			return out
		}
		victims = append(victims, v)
	}
	taking := func(n *model.Node) bool {
		return slices.ContainsFunc(victims, func(v *model.Allocation) bool { return n.Allocation == v.ID })
	}
	if rej := s.checkReserve(it.Reserve, it.ForAlloc, vc.Name, taking, c.Time); rej != nil {
		out.Rejection = rej
		return out
	}
	pr := model.Preemption{Kind: model.PreemptClass, ByVCluster: vc.Name, ForAlloc: it.ForAlloc, Time: c.Time, Deadline: c.Time.Add(vc.Grace())}
	if len(it.Actions) == 0 {
		s.takeFor(pr, victims, it.Reserve, c.ReserveUntil)
		out.Committed = true
		return out
	}
	for i, v := range victims {
		p := pr
		p.Action = it.Actions[i]
		switch p.Action {
		case model.ActionSuspend:
			s.gangSuspend(v, p, c.Time)
		case model.ActionCancel:
			cp := modify(v)
			cp.Preemption = &p
			cp.CancelRequested, cp.RequeueRequested, cp.CancelReason = true, false, model.ReasonPreempted
			s.replaceAlloc(v, cp)
		default:
			s.preemptAlloc(v, p, c.Time)
		}
	}
	s.reserve(it.Reserve, it.ForAlloc, c.ReserveUntil)
	s.touch()
	out.Committed = true
	return out
}

// --- Checkpoint --------------------------------------------------------------------

func (s *State) applyCheckpoint(c *Checkpoint) *Result {
	res := &Result{Items: make([]ItemResult, len(c.Items))}
	for i, it := range c.Items {
		res.Items[i] = ItemResult{ID: it.AllocID}
		a := s.allocs[it.AllocID]
		var rej *Rejection
		switch {
		case a == nil:
			rej = reject(CodeNotFound, "", "allocation %d does not exist", it.AllocID)
		case a.State == model.StateCheckpointing:
			res.Items[i].Committed = true // one is in progress already
			continue
		case a.State != model.StateRunning:
			rej = reject(CodeConflict, "", "allocation %d is %s; only a RUNNING allocation can checkpoint", it.AllocID, a.State)
		case !a.Checkpoint.Checkpointable():
			rej = reject(CodeInvalid, "", "allocation %d was submitted with --checkpoint %s; allowed for signal, hook or webhook", it.AllocID, a.Checkpoint)
		case a.CancelRequested:
			rej = reject(CodeConflict, "", "allocation %d is being cancelled", it.AllocID)
		case it.Reason != CheckpointUser && it.Reason != CheckpointProactive && it.Reason != CheckpointSignal:
			rej = reject(CodeInvalid, "", "invalid checkpoint reason %q: allowed user, proactive, signal", it.Reason)
		}
		if rej != nil {
			res.Items[i].Rejection = rej
			continue
		}
		cp := modify(a)
		cp.CheckpointReason, cp.CheckpointDeadline = it.Reason, it.Deadline
		transition(cp, model.StateCheckpointing, it.Reason, c.Time)
		s.replaceAlloc(a, cp)
		s.touch()
		res.Items[i].Committed = true
	}
	return res
}

// checkAction checks that action is what the policy in force does to
// victim v (model.VictimAction): a proposal planned under another policy
// is stale. A suspension also needs v RUNNING (not being checkpointed or
// stopped), not suspended by an admin, and on nodes of the vCluster only
// (its borrowed nodes could not wait for it at their home).
func (s *State) checkAction(vc *model.VCluster, v *model.Allocation, action model.PreemptAction) *Rejection {
	var q *model.QOS
	if e, ok := s.QOS(v.QOS); ok && v.QOS != "" {
		q = &e
	}
	want, why := model.VictimAction(vc, q, v)
	switch {
	case want == "":
		return reject(CodeConflict, "", "allocation %d may not be preempted: %s", v.ID, why)
	case want != action:
		return reject(CodeStale, "", "allocation %d would be preempted by %s now, not %s (the policy changed)", v.ID, want, action)
	case action != model.ActionSuspend:
		return nil
	case v.State != model.StateRunning || v.CancelRequested || v.RequeueRequested:
		return reject(CodeConflict, "", "allocation %d is %s (being stopped or cancelled); only a RUNNING allocation can be suspended", v.ID, v.State)
	case !v.SuspendedAt.IsZero():
		return reject(CodeConflict, "", "allocation %d is suspended by an admin", v.ID)
	}
	for _, name := range v.Nodes {
		if n := s.nodes[name]; n == nil || n.HomeVCluster != vc.Name || n.CurrentVCluster != vc.Name {
			return reject(CodeConflict, "", "allocation %d runs on node %s, which is not vcluster %s's own: it cannot wait there suspended", v.ID, name, vc.Name)
		}
	}
	return nil
}
