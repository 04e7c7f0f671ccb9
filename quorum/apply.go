package quorum

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// FairShareHalfLife decays tenant usage recorded by the FSM. It is a
// constant of the log's meaning (changing it would make old logs replay
// differently), not a setting read at apply time.
const FairShareHalfLife = 7 * 24 * time.Hour

// apply runs one command against the state. It is deterministic: a function
// of the state and the command only.
func (s *State) apply(c Command) *Result {
	h := c.CommandHeader()
	if h.RequestID != "" {
		if prev, ok := s.requests[h.RequestID]; ok {
			return prev
		}
	}
	if l := NeededLevel(c); l > s.level {
		s.level = l
	}
	s.Version++
	before := s.Version
	res := s.dispatch(c)
	s.settleWaiting(h.Time)
	if res == nil {
		res = &Result{}
	}
	if !s.changedSince(before) {
		s.Version--
	}
	res.Version = s.Version
	if h.RequestID != "" {
		s.remember(h.RequestID, res)
	}
	return res
}

// changedSince is true when something was stored with the tentative version.
// Every store goes through put*/delete or sets s.dirty.
func (s *State) changedSince(v uint64) bool { return s.dirtyAt == v }

// remember records the outcome of a command with a request id, forgetting
// the oldest beyond MaxRememberedRequests. Dropping them re-slices the
// order rather than copying it: once the table is full every such command
// evicts one, and copying 50,000 ids each time cost a millisecond per
// command; append copies the live window only when it runs out of room.
func (s *State) remember(id string, r *Result) {
	s.requests[id] = r
	s.requestOrder = append(s.requestOrder, id)
	if over := len(s.requestOrder) - MaxRememberedRequests; over > 0 {
		for i, old := range s.requestOrder[:over] {
			delete(s.requests, old)
			s.requestOrder[i] = "" // let the evicted id be collected
		}
		s.requestOrder = s.requestOrder[over:]
	}
}

func (s *State) applySetMember(c *SetMember) *Result {
	s.members[c.Member.ID] = c.Member
	s.touch()
	return &Result{}
}

func (s *State) applyRemoveMember(c *RemoveMember) *Result {
	if _, ok := s.members[c.ID]; ok {
		delete(s.members, c.ID)
		s.touch()
	}
	return &Result{}
}

func (s *State) applySetDefaults(c *SetDefaults) *Result {
	if c.DefaultVCluster != "" && s.vclusters[c.DefaultVCluster] == nil {
		return &Result{Rejection: reject(CodeInvalid, "", "default vcluster %q does not exist; known: %s",
			c.DefaultVCluster, s.vclusterNames())}
	}
	s.DefaultVCluster = c.DefaultVCluster
	s.touch()
	return &Result{}
}

// touch records that the current command changed state.
func (s *State) touch() { s.dirtyAt = s.Version }

func (s *State) vclusterNames() string {
	names := make([]string, 0, len(s.vclusters))
	for _, v := range s.VClusters() {
		names = append(names, v.Name)
	}
	if len(names) == 0 {
		return "(none configured)"
	}
	return strings.Join(names, ", ")
}

// modify returns a copy of a for a command to change and store in a's
// place. Unlike Allocation.Clone it shares what the FSM never writes into:
// the request's slices and pointers (Command, Env, Constraints, DependsOn,
// Array, HotDataFraction: a request never changes once submitted), Nodes
// and ExitCode (the FSM replaces them, never writes through them). It
// copies History, with room for the transition the change is about to
// record: History is the one slice the FSM appends to. This is the hot path
// of every placement and completion.
func modify(a *model.Allocation) *model.Allocation {
	c := *a
	c.History = make([]model.Transition, len(a.History), len(a.History)+1)
	copy(c.History, a.History)
	return &c
}

// modifyNode returns a copy of n for a command to change and store in n's
// place. It shares Features, which the FSM replaces but never writes into.
func modifyNode(n *model.Node) *model.Node {
	c := *n
	return &c
}

// transition moves a (a fresh copy) to state st, recording history.
func transition(a *model.Allocation, st model.AllocState, reason string, t time.Time) {
	a.State = st
	a.Reason = reason
	a.History = append(a.History, model.Transition{State: st, Reason: reason, Time: t})
}

// --- AssignBatch ----------------------------------------------------------------------

// assignCheck is one validation layer of an assignment. The layers run in
// order — state machine, staleness, ownership, quota, power — and the first
// rejection wins; only an item that passes all of them is committed.
type assignCheck func(s *State, ctx *assignCtx) *Rejection

type assignCtx struct {
	t     time.Time
	vc    *model.VCluster
	item  AssignItem
	alloc *model.Allocation
	nodes []*model.Node
}

var assignChecks = []assignCheck{checkAllocState, checkStale, checkOwnership, checkQuota, checkPower, checkArrayLimit}

func checkAllocState(s *State, ctx *assignCtx) *Rejection {
	a := s.allocs[ctx.item.AllocID]
	if a == nil {
		return reject(CodeNotFound, "", "allocation %d does not exist", ctx.item.AllocID)
	}
	ctx.alloc = a
	if a.State != model.StatePending {
		return reject(CodeConflict, "", "allocation %d is %s, not PENDING", a.ID, a.State)
	}
	if a.EligibleTime.IsZero() {
		return reject(CodeConflict, model.ReasonDependency, "allocation %d waits on a dependency", a.ID)
	}
	if a.VCluster != ctx.vc.Name {
		return reject(CodeConflict, "", "allocation %d belongs to vcluster %s, not %s", a.ID, a.VCluster, ctx.vc.Name)
	}
	if why := a.Waiting(ctx.t); why != "" {
		return reject(CodeConflict, why, "allocation %d may not start yet (%s)", a.ID, why)
	}
	if len(a.NodeList) > 0 || len(a.ExcludeNodes) > 0 {
		for _, name := range ctx.item.Nodes {
			if !a.NodeAllowed(name) {
				return reject(CodeConflict, model.ReasonBadConstraints, "allocation %d may not run on node %s (its --nodelist/--exclude)", a.ID, name)
			}
		}
	}
	n := len(ctx.item.Nodes)
	if n < a.NodesMin || n > a.NodesMax {
		return reject(CodeInvalid, "", "allocation %d needs %d-%d nodes, proposal has %d", a.ID, a.NodesMin, a.NodesMax, n)
	}
	return nil
}

func checkStale(s *State, ctx *assignCtx) *Rejection {
	if ctx.alloc.ModifyVersion > ctx.item.Version {
		return reject(CodeStale, "", "allocation %d changed at version %d after proposal version %d", ctx.alloc.ID, ctx.alloc.ModifyVersion, ctx.item.Version)
	}
	ctx.nodes = ctx.nodes[:0]
	var seen map[*model.Node]bool // only for long node lists; short ones are scanned
	if len(ctx.item.Nodes) > dupScanMax {
		seen = make(map[*model.Node]bool, len(ctx.item.Nodes))
	}
	for _, name := range ctx.item.Nodes {
		n := s.nodes[name]
		if n == nil {
			return reject(CodeNotFound, "", "node %s does not exist", name)
		}
		// A name listed twice is the same node object twice.
		var dup bool
		if seen != nil {
			dup, seen[n] = seen[n], true
		} else {
			dup = slices.Contains(ctx.nodes, n)
		}
		if dup {
			return reject(CodeInvalid, "", "node %s listed twice", name)
		}
		if n.ModifyVersion > ctx.item.Version {
			return reject(CodeStale, "", "node %s changed at version %d after proposal version %d", name, n.ModifyVersion, ctx.item.Version)
		}
		ctx.nodes = append(ctx.nodes, n)
	}
	return nil
}

// dupScanMax is the longest node list of an item checked for duplicates by
// scanning rather than with a set.
const dupScanMax = 16

// checkOwnership enforces I1 (one allocation per node), I2 (ownership and
// lending), I7 (only Ready nodes take work), node reservations, and the
// vCluster policies: lending limits and back-off, checkpointable work only
// on borrowed nodes, one conformance group for sensitive work.
func checkOwnership(s *State, ctx *assignCtx) *Rejection {
	var lending map[string]int // nodes this item borrows, by home
	for _, n := range ctx.nodes {
		if n.Allocation != 0 {
			return reject(CodeConflict, model.ReasonResources, "node %s already runs allocation %d", n.Name, n.Allocation)
		}
		if n.State != model.NodeReady {
			return reject(CodeConflict, model.ReasonNodesDrained, "node %s is %s", n.Name, n.State)
		}
		if s.suspendHolds(n, ctx.alloc.ID) {
			return reject(CodeConflict, model.ReasonResources, "node %s keeps the frozen processes of allocation %d, suspended for another allocation", n.Name, n.SuspendedAlloc)
		}
		if s.reservedAgainst(n, ctx.alloc.ID, ctx.t) {
			return reject(CodeConflict, model.ReasonResources, "node %s is held for allocation %d until %s", n.Name, n.ReservedFor, n.ReservedUntil.Format(time.RFC3339))
		}
		if n.CurrentVCluster == ctx.vc.Name {
			continue
		}
		// Borrowing: only an idle node at home, whose home lends, for a
		// vCluster that may borrow, within the home's lending limit.
		home := s.vclusters[n.HomeVCluster]
		switch {
		case n.Borrowed():
			return reject(CodeConflict, model.ReasonResources, "node %s is lent to %s", n.Name, n.CurrentVCluster)
		case !ctx.vc.Borrows():
			return reject(CodeConflict, model.ReasonResources, "node %s belongs to %s and vcluster %s does not borrow", n.Name, n.CurrentVCluster, ctx.vc.Name)
		case home == nil || !home.Lends():
			return reject(CodeConflict, model.ReasonResources, "node %s belongs to %s, which does not lend", n.Name, n.HomeVCluster)
		case n.ReclaimedFrom == ctx.vc.Name && ctx.t.Before(n.ReclaimedAt.Add(home.Backoff())):
			return reject(CodeConflict, model.ReasonResources, "node %s was reclaimed from %s at %s; it may not be borrowed back before %s",
				n.Name, ctx.vc.Name, n.ReclaimedAt.Format(time.RFC3339), n.ReclaimedAt.Add(home.Backoff()).Format(time.RFC3339))
		case ctx.vc.CheckpointableOnlyOnBorrowed && !ctx.alloc.Checkpoint.Checkpointable():
			return reject(CodeConflict, model.ReasonResources, "allocation %d cannot checkpoint (--checkpoint %s) and vcluster %s runs only checkpointable work on borrowed nodes",
				ctx.alloc.ID, ctx.alloc.Checkpoint, ctx.vc.Name)
		}
		if lending == nil {
			lending = map[string]int{}
		}
		lending[home.Name]++
		if limit := home.MaxLendable(s.idx.homeCount[home.Name]); s.Lent(home.Name)+lending[home.Name] > limit {
			return reject(CodeConflict, model.ReasonResources, "vcluster %s lends at most %d of its %d nodes (max_lend_fraction %.2f)",
				home.Name, limit, s.idx.homeCount[home.Name], home.LendFraction())
		}
	}
	if ctx.vc.Sensitive() {
		for _, n := range ctx.nodes[1:] {
			if n.Fingerprint != ctx.nodes[0].Fingerprint {
				return reject(CodeConflict, model.ReasonBadConstraints, "sensitive vcluster %s runs an allocation on one conformance group; nodes %s and %s differ",
					ctx.vc.Name, ctx.nodes[0].Name, n.Name)
			}
		}
	}
	return nil
}

// reservedAgainst reports whether n is held at t for a pending allocation
// other than id, or keeps the frozen processes of an allocation a
// preemption suspended for another than id (suspendHolds). A reservation for an allocation that is no longer pending
// (it started elsewhere, was cancelled) or is held holds nothing.
func (s *State) reservedAgainst(n *model.Node, id uint64, t time.Time) bool {
	if s.suspendHolds(n, id) {
		return true
	}
	if !n.ReservedAgainst(id, t) {
		return false
	}
	r := s.allocs[n.ReservedFor]
	return r != nil && r.State == model.StatePending && r.Held == "" // a held one holds no nodes
}

// checkQuota enforces I4.
func checkQuota(s *State, ctx *assignCtx) *Rejection {
	t := s.tenants[ctx.alloc.Tenant]
	if t == nil {
		return nil
	}
	run := s.idx.tenantRun[ctx.alloc.Tenant]
	if t.MaxRunning > 0 && run.Allocations+1 > t.MaxRunning {
		return reject(CodeQuota, model.ReasonQuotaMaxRunning, "tenant %s runs %d allocations, quota %d", t.Name, run.Allocations, t.MaxRunning)
	}
	if t.MaxNodes > 0 && run.Nodes+len(ctx.nodes) > t.MaxNodes {
		return reject(CodeQuota, model.ReasonQuotaMaxNodes, "tenant %s uses %d nodes, +%d exceeds quota %d", t.Name, run.Nodes, len(ctx.nodes), t.MaxNodes)
	}
	return nil
}

func (s *State) applyAssignBatch(c *AssignBatch) *Result {
	vc := s.vclusters[c.VCluster]
	if vc == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "vcluster %q does not exist", c.VCluster)}
	}
	res := &Result{Items: make([]ItemResult, len(c.Items))}
	// The node lists of the committed allocations are cut from one array
	// (each clipped to its length), and hold the nodes' own names rather
	// than the command's.
	var names []string
	ctx := &assignCtx{vc: vc, t: c.Time}
	for i, item := range c.Items {
		ctx.item, ctx.alloc = item, nil
		var rej *Rejection
		for _, check := range assignChecks {
			if rej = check(s, ctx); rej != nil {
				break
			}
		}
		res.Items[i] = ItemResult{ID: item.AllocID, Committed: rej == nil, Rejection: rej}
		if rej != nil {
			continue
		}
		if names == nil {
			total := 0
			for _, it := range c.Items[i:] {
				total += len(it.Nodes)
			}
			names = make([]string, 0, total)
		}
		start := len(names)
		for _, n := range ctx.nodes {
			nc := modifyNode(n)
			nc.CurrentVCluster = vc.Name // a borrow when it was another's
			nc.Allocation = item.AllocID
			if nc.ReservedFor != 0 {
				nc.ReservedFor, nc.ReservedUntil = 0, time.Time{}
			}
			nc.DeriveState()
			s.replaceNode(n, nc)
			names = append(names, n.Name)
		}
		a := modify(ctx.alloc)
		a.Nodes = names[start:len(names):len(names)]
		a.CancelRequested = false
		transition(a, model.StateStaging, "", c.Time)
		s.replaceAlloc(ctx.alloc, a)
		s.touch()
	}
	return res
}

// --- UpdateAllocs ----------------------------------------------------------------------

func (s *State) applyUpdateAllocs(c *UpdateAllocs) *Result {
	res := &Result{Items: make([]ItemResult, len(c.Updates))}
	for i, u := range c.Updates {
		rej := s.updateAlloc(u, c.Time)
		res.Items[i] = ItemResult{ID: u.AllocID, Committed: rej == nil, Rejection: rej}
	}
	return res
}

func (s *State) updateAlloc(u AllocUpdate, t time.Time) *Rejection {
	a := s.allocs[u.AllocID]
	if a == nil {
		return reject(CodeNotFound, "", "allocation %d does not exist", u.AllocID)
	}
	if u.Run > 0 && u.Run-1 != a.RequeueCount {
		return reject(CodeStale, "", "report of run %d of allocation %d, which is on run %d", u.Run-1, a.ID, a.RequeueCount)
	}
	if a.State == u.State {
		return nil // a repeated report: idempotent
	}
	if !model.CanTransition(a.State, u.State) || (a.State == model.StateRunning && u.State == model.StateSuspended) ||
		(a.State == model.StateSuspended && u.State == model.StateRunning) {
		// (Running → Suspended is the FSM's own step when a node of a
		// --requeue allocation fails or a preemption suspends it, and
		// Suspended → Running its resume: never a report.)
		return reject(CodeConflict, "", "allocation %d cannot go from %s to %s", a.ID, a.State, u.State)
	}
	if a.State == model.StateCheckpointing && u.State == model.StateRunning && stopping(a) {
		// A late answer to a checkpoint that would have kept it running:
		// the reclaim or preemption since then stops it; its report follows.
		return nil
	}
	c := modify(a)
	reason := u.Reason
	if a.RequeueRequested && a.State.Active() && (u.State == model.StateFailed || u.State == model.StateCancelled || u.State == model.StateSuspended) {
		s.requeueStopped(c, t) // a user's requeue: the stop it asked for is done
		s.replaceAlloc(a, c)
		s.touch()
		return nil
	}
	if a.CancelRequested && (u.State == model.StateFailed || u.State == model.StateCancelled || u.State == model.StateSuspended) {
		u.State, reason = model.StateCancelled, model.ReasonCancelled
		if a.CancelReason != "" {
			reason = a.CancelReason // the leader's own cancel (IdleTimeout)
		}
	}
	if u.State == model.StateFailed && reason == model.ReasonNodeFailure && requeuesOnLoss(a) {
		s.requeueLost(c, t) // --requeue: back to the queue, not failed
		s.replaceAlloc(a, c)
		s.touch()
		return nil
	}
	switch u.State {
	case model.StateRunning:
		at := t
		if c.StartTime.IsZero() {
			at = reportedStart(c, u.StartTime, t)
			c.StartTime = at
			c.SuspendedAt, c.SuspendedFor = time.Time{}, 0 // a new run
		}
		transition(c, model.StateRunning, reason, at)
		if a.State == model.StateCheckpointing {
			s.checkpointEnded(c, reason, t)
		}
	case model.StateCheckpointing:
		transition(c, model.StateCheckpointing, reason, t)
	case model.StateSuspended:
		transition(c, model.StateSuspended, reason, t)
		wasStopping := stopping(a)
		s.checkpointEnded(c, reason, t)
		if !c.StartTime.IsZero() && len(c.Nodes) > 0 {
			s.chargeUsage(c.Tenant, float64(len(c.Nodes))*t.Sub(c.StartTime).Seconds(), t)
		}
		s.releaseNodes(c, t)
		c.Nodes = nil
		c.StartTime = time.Time{} // the run ended; the next one starts afresh
		if wasStopping {
			// Reclaimed or preempted: back to the queue at once, keeping its
			// submit and eligible times (its wait counts from then).
			transition(c, model.StatePending, model.ReasonPreempted, t)
			c.RequeueCount++
			c.CancelRequested = false
		}
	case model.StatePending: // back to the queue: from Staging or Suspended
		transition(c, model.StatePending, reason, t)
		if a.State == model.StateStaging {
			s.releaseNodes(c, t)
			c.Nodes = nil
		}
		c.RequeueCount++
		c.CancelRequested = false
	case model.StateCompleted, model.StateFailed, model.StateCancelled:
		s.finishAt(c, u.State, reason, u.ExitCode, reportedEnd(c, u.EndTime, t), t)
	default:
		return reject(CodeInvalid, "", "state %s cannot be reported", u.State)
	}
	if u.Usage != nil && (u.State.Terminal() || u.State == model.StateSuspended) {
		v := *u.Usage
		c.Usage = &v
	}
	s.replaceAlloc(a, c)
	s.touch()
	if c.State == model.StateRunning || c.State.Terminal() {
		s.dependencyChanged(c.ID, t)
	}
	return nil
}

// reportedEnd is when a run ended: the agent's end time when it has one,
// kept between the allocation's start (and its latest transition, so its
// history stays in order) and t, the command's time; else t.
// reportedStart is when a run started: the agent's start time, clamped
// between its latest transition (its assignment) and the command's time t.
func reportedStart(c *model.Allocation, start, t time.Time) time.Time {
	if start.IsZero() || !start.Before(t) {
		return t
	}
	if n := len(c.History); n > 0 && start.Before(c.History[n-1].Time) {
		return c.History[n-1].Time
	}
	return start
}

func reportedEnd(c *model.Allocation, end, t time.Time) time.Time {
	if end.IsZero() || !end.Before(t) {
		return t
	}
	floor := c.StartTime
	if n := len(c.History); n > 0 && c.History[n-1].Time.After(floor) {
		floor = c.History[n-1].Time
	}
	if end.Before(floor) {
		return floor
	}
	return end
}

// checkpointEnded records the end of a checkpoint request on c (a copy
// being changed): an acknowledged one is counted.
func (s *State) checkpointEnded(c *model.Allocation, reason string, t time.Time) {
	if reason == model.ReasonCheckpointed {
		c.CheckpointCount++
		c.LastCheckpointAt = t
	}
	c.CheckpointReason, c.CheckpointDeadline = "", time.Time{}
}

// finish ends c (a copy being changed): end time, exit code, nodes freed,
// tenant usage charged.
func (s *State) finish(c *model.Allocation, st model.AllocState, reason string, exit *int, t time.Time) {
	s.finishAt(c, st, reason, exit, t, t)
}

// finishAt is finish for a run that ended at end (≤ t, the command's
// time): its record and its usage end then; its nodes are freed now.
func (s *State) finishAt(c *model.Allocation, st model.AllocState, reason string, exit *int, end, t time.Time) {
	transition(c, st, reason, end)
	c.EndTime = end
	if exit != nil {
		e := *exit
		c.ExitCode = &e
	}
	if !c.StartTime.IsZero() && len(c.Nodes) > 0 {
		s.chargeUsage(c.Tenant, float64(len(c.Nodes))*end.Sub(c.StartTime).Seconds(), t)
	}
	s.releaseNodes(c, t)
	c.CancelRequested, c.RequeueRequested = false, false
	c.CheckpointReason, c.CheckpointDeadline = "", time.Time{}
}

// chargeUsage adds node-seconds to a tenant's decayed usage.
func (s *State) chargeUsage(tenant string, nodeSeconds float64, t time.Time) {
	if nodeSeconds <= 0 {
		return
	}
	old := s.tenants[tenant]
	var nt model.Tenant
	if old != nil {
		nt = *old
	} else {
		nt = model.Tenant{Name: tenant}
	}
	if nt.Usage > 0 && !nt.UsageTime.IsZero() && t.After(nt.UsageTime) {
		nt.Usage *= math.Exp2(-float64(t.Sub(nt.UsageTime)) / float64(FairShareHalfLife))
	}
	nt.Usage += nodeSeconds
	nt.UsageTime = t
	s.tenants[tenant] = &nt
}

// releaseNodes frees the nodes a holds. A borrowed node goes back to its
// home vCluster as soon as it is idle.
func (s *State) releaseNodes(a *model.Allocation, _ time.Time) {
	for _, name := range a.Nodes {
		n := s.nodes[name]
		if n == nil || n.Allocation != a.ID {
			continue
		}
		nc := modifyNode(n)
		nc.Allocation = 0
		if nc.Borrowed() {
			nc.CurrentVCluster = nc.HomeVCluster
			nc.ReturnRequested = false
		}
		nc.DeriveState()
		s.replaceNode(n, nc)
	}
}

// --- Cancel / Requeue -------------------------------------------------------------------

func (s *State) applyCancel(c *Cancel) *Result {
	res := &Result{Items: make([]ItemResult, len(c.IDs))}
	reason := c.Reason
	if reason == "" {
		reason = model.ReasonCancelled
	}
	for i, id := range c.IDs {
		res.Items[i] = ItemResult{ID: id}
		a := s.allocs[id]
		switch {
		case a == nil:
			res.Items[i].Rejection = reject(CodeNotFound, "", "allocation %d does not exist", id)
			continue
		case a.State.Terminal():
			res.Items[i].Rejection = reject(CodeConflict, "", "allocation %d already ended %s", id, a.State)
			continue
		}
		cp := modify(a)
		if a.State.Active() {
			if a.CancelRequested && !a.RequeueRequested {
				res.Items[i].Committed = true
				continue
			}
			cp.CancelRequested, cp.RequeueRequested = true, false
			cp.CancelReason = c.Reason
		} else {
			s.finish(cp, model.StateCancelled, reason, nil, c.Time)
		}
		s.replaceAlloc(a, cp)
		s.touch()
		res.Items[i].Committed = true
		if cp.State.Terminal() {
			s.dependencyChanged(id, c.Time)
		}
	}
	return res
}

func (s *State) applyRequeue(c *Requeue) *Result {
	res := &Result{Items: make([]ItemResult, len(c.IDs))}
	reason := c.Reason
	if reason == "" {
		reason = model.ReasonRequeued
	}
	for i, id := range c.IDs {
		res.Items[i] = ItemResult{ID: id}
		a := s.allocs[id]
		if a == nil {
			res.Items[i].Rejection = reject(CodeNotFound, "", "allocation %d does not exist", id)
			continue
		}
		if a.State != model.StateStaging && a.State != model.StateSuspended {
			res.Items[i].Rejection = reject(CodeConflict, "", "allocation %d is %s; only STAGING or SUSPENDED allocations can be requeued (a running one is checkpointed first)", id, a.State)
			continue
		}
		res.Items[i].Rejection = s.updateAlloc(AllocUpdate{AllocID: id, State: model.StatePending, Reason: reason}, c.Time)
		res.Items[i].Committed = res.Items[i].Rejection == nil
	}
	return res
}

// --- Nodes --------------------------------------------------------------------------------

func (s *State) applyRegisterNodes(c *RegisterNodes) *Result {
	if len(c.Nodes) == 0 {
		return &Result{Rejection: reject(CodeInvalid, "", "registration has no nodes")}
	}
	var drawDelta int64
	vcDelta := map[string]int64{} // per current vCluster, for the caps
	fresh := make([]*model.Node, len(c.Nodes))
	for i := range c.Nodes {
		in := c.Nodes[i]
		if err := model.ValidateNode(&in); err != nil {
			return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
		}
		if s.vclusters[in.HomeVCluster] == nil {
			return &Result{Rejection: reject(CodeInvalid, "", "node %s: invalid home vcluster %q: allowed %s", in.Name, in.HomeVCluster, s.vclusterNames())}
		}
		old := s.nodes[in.Name]
		var n *model.Node
		if old == nil {
			n = &model.Node{Name: in.Name, HomeVCluster: in.HomeVCluster, CurrentVCluster: in.HomeVCluster}
		} else {
			n = modifyNode(old)
			if n.Idle() && !n.Borrowed() {
				n.HomeVCluster, n.CurrentVCluster = in.HomeVCluster, in.HomeVCluster
			}
			drawDelta -= int64(old.Watts())
			vcDelta[old.CurrentVCluster] -= int64(old.Watts())
		}
		n.Group = in.Group
		if old != nil && old.Fingerprint != "" && in.Fingerprint != old.Fingerprint {
			s.drift(n, in.Fingerprint, "registered again with another fingerprint")
		}
		n.Fingerprint = in.Fingerprint
		n.GPUType = in.GPUType
		n.GPUs = in.GPUs
		n.CPUs, n.MemoryMB = in.CPUs, in.MemoryMB
		n.Features = model.NormalizeFeatures(slices.Clone(in.Features))
		n.IdleWatts, n.BusyWatts = in.IdleWatts, in.BusyWatts
		n.Agent = c.Agent
		n.FenceAfter = in.FenceAfter
		n.Health = model.NodeReady
		n.DeriveState()
		drawDelta += int64(n.Watts())
		vcDelta[n.CurrentVCluster] += int64(n.Watts())
		fresh[i] = n
	}
	if b := s.PowerBudgetWatts; b > 0 && drawDelta > 0 && s.idx.drawWatts+drawDelta > b {
		return &Result{Rejection: reject(CodePower, model.ReasonPowerBudget,
			"registering these nodes raises the estimated draw to %d W, above the system budget %d W", s.idx.drawWatts+drawDelta, b)}
	}
	// A vCluster's cap holds as the system budget does (I3): a node that
	// comes home to it, or whose figures rise, must fit under it.
	for _, name := range slices.Sorted(maps.Keys(vcDelta)) {
		d := vcDelta[name]
		if vc := s.vclusters[name]; vc != nil && vc.PowerCapWatts > 0 && d > 0 && s.idx.vclusterDraw[name]+d > vc.PowerCapWatts {
			return &Result{Rejection: reject(CodePower, model.ReasonPowerBudget,
				"registering these nodes raises vcluster %s's estimated draw to %d W, above its cap %d W", name, s.idx.vclusterDraw[name]+d, vc.PowerCapWatts)}
		}
	}
	for _, n := range fresh {
		s.putNode(n)
	}
	s.touch()
	return &Result{}
}

func (s *State) applySetNodeState(c *SetNodeState) *Result {
	res := &Result{Items: make([]ItemResult, len(c.Nodes))}
	for i, name := range c.Nodes {
		res.Items[i] = ItemResult{}
		n := s.nodes[name]
		if n == nil {
			res.Items[i].Rejection = reject(CodeNotFound, "", "node %s does not exist", name)
			continue
		}
		nc := modifyNode(n)
		switch c.Action {
		case ActionDrain:
			nc.Drain = true
			nc.StateReason = c.Reason
			nc.ReasonBy, nc.ReasonAt = c.By, c.Time
		case ActionUndrain:
			// The admin's word also ends a cleanup the agent never confirmed.
			nc.Drain = false
			nc.Cleanup = 0
			nc.StateReason = ""
			nc.ReasonBy, nc.ReasonAt = "", time.Time{}
		case ActionCleaned:
			if c.Allocation == 0 || nc.Cleanup == c.Allocation {
				nc.Cleanup = 0
			}
		case ActionDegraded:
			if nc.Health == model.NodeReady {
				nc.Health = model.NodeDegraded
			}
		case ActionDown:
			nc.Health = model.NodeDown
			if c.Reason != "" {
				nc.StateReason = c.Reason
				nc.ReasonBy, nc.ReasonAt = c.By, c.Time
			}
		case ActionUp:
			if nc.Health == model.NodeNotResponding && !nc.Drain {
				nc.StateReason = "" // the hold's explanation
			}
			nc.Health = model.NodeReady
		case ActionNotResponding:
			if nc.Health != model.NodeDown {
				nc.Health = model.NodeNotResponding
				nc.StateReason = c.Reason
			}
		default:
			res.Items[i].Rejection = reject(CodeInvalid, "", "invalid node action %q: allowed drain, undrain, degraded, notresponding, down, up, cleaned", c.Action)
			continue
		}
		nc.DeriveState()
		res.Items[i].Committed = true
		if nc.State == n.State && nc.Drain == n.Drain && nc.Health == n.Health && nc.StateReason == n.StateReason && nc.Cleanup == n.Cleanup {
			continue
		}
		s.putNode(nc)
		s.touch()
		if nc.Health == model.NodeDown && nc.Allocation != 0 {
			// The node is lost: its allocation fails; its other nodes are freed
			// and their agents are told to stop it. Its processes may still
			// run (an agent cut off, not dead): every node it held stays in
			// Cleanup until its agent confirms they are gone.
			a := s.allocs[nc.Allocation]
			if a != nil {
				defer s.markCleanup(a.ID, slices.Clone(a.Nodes))
			}
			if a != nil && a.State == model.StateStaging {
				// Nothing ran yet: back to the queue.
				_ = s.updateAlloc(AllocUpdate{AllocID: a.ID, State: model.StatePending, Reason: model.ReasonNodeFailure}, c.Time)
			} else if a != nil && stopping(a) {
				// It was being stopped to be requeued anyway.
				_ = s.updateAlloc(AllocUpdate{AllocID: a.ID, State: model.StateSuspended, Reason: model.ReasonNodeFailure}, c.Time)
			} else if a != nil && a.RequeueRequested && a.State.Active() {
				ac := modify(a)
				s.requeueStopped(ac, c.Time)
				s.putAlloc(ac)
			} else if a != nil && requeuesOnLoss(a) {
				ac := modify(a)
				s.requeueLost(ac, c.Time)
				s.putAlloc(ac)
			} else if a != nil && a.State.Active() {
				ac := modify(a)
				s.finish(ac, model.StateFailed, model.ReasonNodeFailure, nil, c.Time)
				s.putAlloc(ac)
				s.dependencyChanged(ac.ID, c.Time)
			}
		}
	}
	return res
}

func (s *State) applyReturnNodes(c *ReturnNodes) *Result {
	res := &Result{Items: make([]ItemResult, len(c.Nodes))}
	for i, name := range c.Nodes {
		n := s.nodes[name]
		switch {
		case n == nil:
			res.Items[i].Rejection = reject(CodeNotFound, "", "node %s does not exist", name)
		case !n.Borrowed():
			res.Items[i].Committed = true // already home
		case !n.Idle():
			res.Items[i].Rejection = reject(CodeConflict, "", "node %s runs allocation %d; reclaim it instead", name, n.Allocation)
		default:
			nc := modifyNode(n)
			nc.CurrentVCluster = nc.HomeVCluster
			nc.ReturnRequested = false
			s.putNode(nc)
			s.touch()
			res.Items[i].Committed = true
		}
	}
	return res
}

// --- Configuration ----------------------------------------------------------------------

func (s *State) applySetVCluster(c *SetVCluster) *Result {
	v := c.VCluster
	if err := v.ValidateLevel0(); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	if v.PowerCapWatts > 0 && s.idx.vclusterDraw[v.Name] > v.PowerCapWatts {
		return &Result{Rejection: reject(CodePower, model.ReasonPowerBudget,
			"vcluster %s draws an estimated %d W now, above the requested cap %d W", v.Name, s.idx.vclusterDraw[v.Name], v.PowerCapWatts)}
	}
	s.vclusters[v.Name] = &v
	if s.DefaultVCluster == "" {
		s.DefaultVCluster = v.Name
	}
	s.touch()
	return &Result{}
}

func (s *State) applySetTenant(c *SetTenant) *Result {
	t := c.Tenant
	if err := t.ValidateLevel0(); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	run := s.idx.tenantRun[t.Name]
	if t.MaxNodes > 0 && run.Nodes > t.MaxNodes {
		return &Result{Rejection: reject(CodeQuota, model.ReasonQuotaMaxNodes,
			"tenant %s uses %d nodes now, more than the requested quota %d; lower it once they end", t.Name, run.Nodes, t.MaxNodes)}
	}
	if t.MaxRunning > 0 && run.Allocations > t.MaxRunning {
		return &Result{Rejection: reject(CodeQuota, model.ReasonQuotaMaxRunning,
			"tenant %s runs %d allocations now, more than the requested quota %d", t.Name, run.Allocations, t.MaxRunning)}
	}
	if old := s.tenants[t.Name]; old != nil {
		t.Usage, t.UsageTime = old.Usage, old.UsageTime
	} else {
		t.Usage, t.UsageTime = 0, time.Time{}
	}
	s.tenants[t.Name] = &t
	s.touch()
	return &Result{}
}

func (s *State) applySetPowerBudget(c *SetPowerBudget) *Result {
	if c.Watts < 0 {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid budget %d W: allowed >= 0 (0 = none)", c.Watts)}
	}
	if c.VCluster != "" {
		v := s.vclusters[c.VCluster]
		if v == nil {
			return &Result{Rejection: reject(CodeNotFound, "", "vcluster %q does not exist; known: %s", c.VCluster, s.vclusterNames())}
		}
		nv := *v
		nv.PowerCapWatts = c.Watts
		return s.applySetVCluster(&SetVCluster{Header: c.Header, VCluster: nv})
	}
	if c.Watts > 0 && s.idx.drawWatts > c.Watts {
		return &Result{Rejection: reject(CodePower, model.ReasonPowerBudget,
			"the system draws an estimated %d W now, above the requested budget %d W", s.idx.drawWatts, c.Watts)}
	}
	s.PowerBudgetWatts = c.Watts
	s.touch()
	return &Result{}
}

func (s *State) applyPrune(c *Prune) *Result {
	s.pruned = nil // only the last Prune's, if nobody took them
	var pruned []uint64
	for _, id := range s.allocIDs() {
		a := s.allocs[id]
		if a.State.Terminal() && !a.EndTime.IsZero() && a.EndTime.Before(c.Before) {
			pruned = append(pruned, id)
		}
	}
	for _, id := range pruned {
		s.pruned = append(s.pruned, s.allocs[id])
		s.deleteAlloc(id)
	}
	if len(pruned) > 0 {
		s.touch()
	}
	return &Result{IDs: pruned}
}
