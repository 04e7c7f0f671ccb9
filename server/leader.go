package server

import (
	"context"
	"sync"
	"time"

	"github.com/latticehpc/lattice/checkpoint"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/solver"
	"github.com/latticehpc/lattice/vcluster"
)

// leaderState is one term's leader state, which the leader-only loops
// share: one scheduler per vCluster, the dispatcher (assignments and
// cancellations to agents, agent reports to the log), node liveness and
// retention. It lives from a won election (after a barrier) until
// leadership is lost; package leader starts and stops its loops.
type leaderState struct {
	s      *Server
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the scheduler loops manageLoops started
	since  time.Time

	mu    sync.Mutex
	loops map[string]*loopHandle

	disp  *dispatcher
	live  *liveness
	steps stepRegistry     // step sessions waiting for agents' events (step_service.go)
	terms terminalRegistry // attached terminals and pty steps' input (terminal_service.go)
	power measuredPower    // draw measured by agents (measured_power.go)

	board *vcluster.Board // lenders' reservations, shared by this term's loops

	panicMu     sync.Mutex
	panicCounts map[string]int64 // recovered scheduler panics by vCluster
}

// recordPanic counts and logs a scheduling cycle that panicked and was
// recovered; the other loops keep running.
func (l *leaderState) recordPanic(vc string, v any) {
	l.panicMu.Lock()
	if l.panicCounts == nil {
		l.panicCounts = map[string]int64{}
	}
	l.panicCounts[vc]++
	l.panicMu.Unlock()
	l.s.metrics.loopPanics.WithLabelValues(vc).Inc()
}

// panics is how many cycles of vCluster vc panicked since this member leads.
func (l *leaderState) panics(vc string) int64 {
	l.panicMu.Lock()
	defer l.panicMu.Unlock()
	return l.panicCounts[vc]
}

type loopHandle struct {
	loop   *vcluster.Loop
	cancel context.CancelFunc
}

// BeginTerm implements leader.Member: after a won election and its
// barrier it builds this term's leader state and names every leader-only
// loop; the lifecycle (package leader) runs them and cancels them when
// leadership is lost.
func (s *Server) BeginTerm(ctx context.Context) []leader.Loop {
	// A backup staged by `latticectl quorum restore` is installed before
	// anything else can touch the state.
	if restored, err := s.q.ApplyPendingRestore(); err != nil {
		s.log.Error("restoring the staged backup failed; the cluster keeps its state", "err", err)
	} else if restored {
		s.log.Info("restored the staged backup")
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &leaderState{s: s, ctx: ctx, cancel: cancel, since: time.Now(), loops: map[string]*loopHandle{}, board: &vcluster.Board{}}
	l.disp = newDispatcher(l)
	l.live = newLiveness(l)
	s.mu.Lock()
	s.leader = l
	s.mu.Unlock()
	l.ensureConfig()
	return []leader.Loop{
		{Name: "dispatcher", Run: l.disp.run},
		{Name: "reports", Run: l.disp.batchReports},
		{Name: "liveness", Run: l.live.run},
		{Name: "schedulers", Run: l.manageLoops},
		{Name: "prune", Run: l.prune},
		{Name: "broker", Run: l.broker},
		{Name: "walltime-backstop", Run: l.walltimeBackstop},
		{Name: "measured-power", Run: l.commitMeasuredPower},
		{Name: "idle-interactive", Run: l.endIdleInteractive},
		{Name: "resume-suspended", Run: l.resumeSuspended},
		{Name: "services", Run: l.serviceLoop},
		{Name: "cluster-id", Run: l.nameCluster},
	}
}

// EndTerm implements leader.Member: the term's loops were cancelled; the
// agents' streams close (they reconnect to the next leader).
func (s *Server) EndTerm() {
	s.mu.Lock()
	l := s.leader
	s.leader = nil
	s.mu.Unlock()
	if l == nil {
		return
	}
	l.cancel()
	l.disp.closeAll()
}

// Changed implements leader.Member.
func (s *Server) Changed(leading bool) {
	s.metrics.isLeader.Set(boolFloat(leading))
	if !leading {
		s.contract.clearWaiting()
		s.metrics.clearPrediction()
	}
}

// ensureConfig writes what a fresh cluster needs: this member's addresses,
// the initial vClusters, the default vCluster and power budget.
func (l *leaderState) ensureConfig() {
	s := l.s
	var haveMember bool
	var vcCount int
	var defaultVC string
	var budget int64
	var missingTenants []string
	s.view(func(st *quorum.State) {
		for _, t := range s.cfg.Tenants {
			if st.Tenant(t) == nil {
				missingTenants = append(missingTenants, t)
			}
		}
		m, ok := st.Member(s.cfg.ID)
		haveMember = ok && m.APIAddr == s.APIAddr() && m.RaftAddr == s.q.RaftAddr()
		vcCount = len(st.VClusters())
		defaultVC = st.DefaultVCluster
		budget = st.PowerBudgetWatts
	})
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	if !haveMember {
		_, err := s.propose(ctx, &quorum.SetMember{Member: quorum.Member{ID: s.cfg.ID, RaftAddr: s.q.RaftAddr(), APIAddr: s.APIAddr()}})
		if err != nil {
			s.log.Warn("publish member addresses", "err", err)
		}
	}
	if vcCount == 0 {
		for _, vc := range s.cfg.VClusters {
			if r, err := s.propose(ctx, &quorum.SetVCluster{VCluster: vc}); err != nil || r.Rejection != nil {
				s.log.Error("create vcluster", "vcluster", vc.Name, "err", err, "rejection", r)
			}
		}
	}
	if s.cfg.DefaultVCluster != "" && defaultVC != s.cfg.DefaultVCluster && vcCount == 0 {
		_, _ = s.propose(ctx, &quorum.SetDefaults{DefaultVCluster: s.cfg.DefaultVCluster})
	}
	for _, t := range missingTenants {
		if r, err := s.propose(ctx, &quorum.SetTenant{Tenant: model.Tenant{Name: t}}); err != nil || r.Rejection != nil {
			s.log.Warn("create tenant", "tenant", t, "err", err, "rejection", r)
		}
	}
	if s.cfg.PowerBudgetWatts > 0 && budget == 0 {
		if r, err := s.propose(ctx, &quorum.SetPowerBudget{Watts: s.cfg.PowerBudgetWatts}); err != nil || r.Rejection != nil {
			s.log.Warn("set power budget", "err", err, "rejection", r)
		}
	}
}

// manageLoops keeps one scheduler loop per vCluster in state.
func (l *leaderState) manageLoops(ctx context.Context) {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	defer l.wg.Wait() // its loops end with it
	for {
		var names []string
		l.s.view(func(st *quorum.State) {
			for _, v := range st.VClusters() {
				names = append(names, v.Name)
			}
		})
		l.mu.Lock()
		for _, name := range names {
			if l.loops[name] != nil {
				continue
			}
			lctx, cancel := context.WithCancel(ctx)
			loop := &vcluster.Loop{
				Name: name, State: l.s, Proposer: l.s, // Planner nil: solver.Solve, with reused solvers
				Clock: l.s.cfg.Clock, Log: l.s.log, OnCycle: l.s.observeCycle,
				Board: l.board, VictimCost: l.s.victimCost, OnPanic: l.recordPanic,
				ImmutableState: true, // committed objects are never changed in place
				MaxStarts:      l.s.cfg.MaxStartsPerCycle,
			}
			l.loops[name] = &loopHandle{loop: loop, cancel: cancel}
			procs := l.s.cfg.LoopProcs
			if procs {
				loopProcs.add(1)
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				if procs {
					defer loopProcs.add(-1)
				}
				loop.Run(lctx)
			}()
			loop.Wake()
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (l *leaderState) loop(name string) *vcluster.Loop {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.loops[name]; h != nil {
		return h.loop
	}
	return nil
}

func (l *leaderState) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.loops {
		h.loop.Wake()
	}
}

// onApply wakes the loops that care about a committed command.
func (l *leaderState) onApply(c quorum.Command, r *quorum.Result) {
	switch c.(type) {
	case *quorum.Submit, *quorum.UpdateAllocs, *quorum.Cancel, *quorum.SetNodeState,
		*quorum.RegisterNodes, *quorum.SetVCluster, *quorum.SetTenant, *quorum.SetPowerBudget:
		l.wakeAll()
	}
}

// prune moves ended allocations older than the retention period into the
// replicated history of ended jobs, and drops history older than the
// history retention (quorum.ArchiveEnded; history.go).
func (l *leaderState) prune(ctx context.Context) {
	tick := time.NewTicker(l.s.cfg.PruneInterval)
	defer tick.Stop()
	for {
		l.archiveEnded(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// archiveEnded proposes ArchiveEnded commands until nothing is past
// retention (at most quorum.MaxArchivePerCommand ids each).
func (l *leaderState) archiveEnded(ctx context.Context) {
	for ctx.Err() == nil {
		now := l.s.cfg.Clock()
		before, dropBefore := now.Add(-l.s.cfg.Retention), now.Add(-l.s.cfg.HistoryRetention)
		var ended quorum.AllocView
		var drop bool
		l.s.view(func(st *quorum.State) {
			ended = st.EndedShared()
			oldest := st.HistoryOldestEnd()
			drop = !oldest.IsZero() && oldest.Before(dropBefore)
		})
		cmd := &quorum.ArchiveEnded{}
		for a := range ended.All { // after the lock
			if !a.EndTime.IsZero() && a.EndTime.Before(before) {
				cmd.IDs = append(cmd.IDs, a.ID)
				if len(cmd.IDs) == quorum.MaxArchivePerCommand {
					break
				}
			}
		}
		if drop {
			cmd.DropBefore = dropBefore
		}
		if len(cmd.IDs) == 0 && !drop {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := l.s.propose(pctx, cmd)
		cancel()
		if err != nil {
			l.s.log.Warn("move ended allocations to the history", "count", len(cmd.IDs), "err", err)
			return
		}
		l.s.log.Info("moved ended allocations to the history", "count", len(r.IDs), "before", before, "history_drop_before", cmd.DropBefore)
		if len(cmd.IDs) < quorum.MaxArchivePerCommand || len(r.IDs) == 0 {
			return
		}
	}
}

// Snapshot implements vcluster.StateReader over committed state. Under
// the read lock it takes only what the state shares without copying —
// the node list, the vCluster's pending allocations and the active ones
// as views (quorum.AllocView) — and the few small things (vClusters,
// tenants, holds); the per-allocation work (the pending list, the map of
// active allocations) is done after the lock, so Apply never waits for a
// copy of 100,000 allocations.
func (s *Server) Snapshot(name string, now time.Time) (*vcluster.Snapshot, uint64, bool) {
	var snap *vcluster.Snapshot
	var version uint64
	var pending, active quorum.AllocView
	var held []*model.Allocation // allocations idle nodes are held for that are not active
	s.view(func(st *quorum.State) {
		vc := st.VCluster(name)
		if vc == nil {
			return
		}
		version = st.Version
		snap = &vcluster.Snapshot{
			Now:         now,
			VCluster:    vc,
			VClusters:   map[string]*model.VCluster{},
			Lenders:     map[string]bool{},
			Nodes:       st.NodesShared(),
			Tenants:     map[string]*model.Tenant{},
			TenantLoad:  map[string]vcluster.TenantLoad{},
			Groups:      st.Groups(),
			EnergyPrice: -1,
		}
		pending, active = st.PendingShared(name), st.ActiveShared()
		snap.Reservations = st.Reservations(now)
		for _, v := range st.VClusters() {
			snap.VClusters[v.Name] = v
			if v.Lends() {
				snap.Lenders[v.Name] = true
			}
		}
		// The allocations nodes are held for, so that a hold of one that is
		// no longer pending (cancelled, started elsewhere) holds nothing.
		for _, id := range st.HeldFor() {
			if a := st.Allocation(id); a != nil && !a.State.Active() {
				held = append(held, a)
			}
		}
		// Allocations a preemption suspended (their nodes wait for them)
		// and the QOS entries that set a preemption mode.
		held = append(held, st.SuspendedByPreemption()...)
		snap.QOS = preemptQOS(st)
		for _, t := range st.Tenants() {
			snap.Tenants[t.Name] = t
			run := st.TenantRunning(t.Name)
			snap.TenantLoad[t.Name] = vcluster.TenantLoad{Nodes: run.Nodes, Running: run.Allocations}
		}
		s.powerSnapshot(st, vc, snap)
	})
	if snap == nil {
		return nil, 0, false
	}
	snap.Pending = pending.AppendTo(nil)
	snap.Allocations = make(map[uint64]*model.Allocation, active.Len()+len(held))
	for a := range active.All {
		snap.Allocations[a.ID] = a
	}
	for _, a := range held {
		snap.Allocations[a.ID] = a
	}
	return snap, version, true
}

// Settings implements vcluster.StateReader: a vCluster's definition and its
// pending count, without building a snapshot.
func (s *Server) Settings(name string) (*model.VCluster, int, bool) {
	var vc *model.VCluster
	var pending int
	s.view(func(st *quorum.State) {
		vc = st.VCluster(name)
		pending = st.PendingCount(name)
	})
	return vc, pending, vc != nil
}

// maxAssignSlice is the most starts one AssignBatch entry carries. A cycle
// that places more (a backlog meeting thousands of idle nodes: 3,000–5,000
// starts in one cycle at 10,000 nodes) proposes them in slices, one after
// the other, so that every member applies a few milliseconds at a time and
// the Submits that arrive meanwhile commit between the slices instead of
// behind one entry of them all. Each item is checked against the cycle's
// snapshot version on its own, so a slice decides exactly as the whole.
const maxAssignSlice = 256

// DefaultMaxStartsPerCycle is latticed's --max-starts-per-cycle. At
// 10,000 nodes a cycle that meets thousands of idle nodes (the first after
// a backlog, or after a wave of completions) otherwise starts 3,000–5,000
// allocations at once; every member applies them, every agent reports
// them, and their completions come back as one wave again. Measured
// (docs/scale.md, "Pacing the fill"): 500 took the p99 of the submissions
// sent during the fill from 76–250 ms to 24 ms on tmpfs; 200 made more
// cycles than it saved. A site of a few hundred nodes never reaches it.
const DefaultMaxStartsPerCycle = 500

// AssignBatch implements vcluster.Proposer: one Raft entry per cycle, or
// per maxAssignSlice starts of a larger one. The outcomes are in the order
// of items; on an error, those of the slices committed before it.
func (s *Server) AssignBatch(ctx context.Context, vc string, items []vcluster.Assignment) ([]vcluster.Outcome, error) {
	onReject := func(r *quorum.Rejection) { s.metrics.assignRejected.WithLabelValues(string(r.Code)).Inc() }
	var out []vcluster.Outcome
	for len(items) > 0 {
		part := items[:min(maxAssignSlice, len(items))]
		items = items[len(part):]
		cmd := &quorum.AssignBatch{VCluster: vc, Items: make([]quorum.AssignItem, len(part))}
		for i, it := range part {
			cmd.Items[i] = quorum.AssignItem{AllocID: it.AllocID, Nodes: it.Nodes, Version: it.Version}
		}
		o, err := s.proposeItems(ctx, cmd, onReject)
		if err != nil {
			return out, err
		}
		out = append(out, o...)
	}
	return out, nil
}

// newVCluster returns a vCluster of type t with that type's defaults.
func newVCluster(name string, t model.VClusterType) model.VCluster {
	profile := solver.ProfileForType(t)
	w, _ := solver.Profile(profile)
	vc := model.VCluster{
		Name: name, Type: t, WeightsProfile: profile, Weights: w,
		CycleInterval: model.DefaultCycleInterval, MinInterval: model.DefaultMinInterval,
		ReservationDepth: model.DefaultReservationDepth,
		Algorithm:        model.AlgorithmFor(t), MaxLendFraction: 1,
		ReclaimGrace: model.DefaultReclaimGrace, ReclaimBackoff: model.DefaultReclaimBackoff,
		PreemptHorizon: model.DefaultPreemptHorizon,
	}
	switch t {
	case model.TypeSensitive:
		// Sensitive nodes are never lent, sensitive work never borrows and
		// is never preempted.
	default:
		// Lent nodes come back through reclaim (checkpoint, then stop and
		// requeue), so every other type lends its idle nodes; only work
		// that can checkpoint runs on borrowed ones.
		vc.AllowLending, vc.AllowBorrowing = true, true
		vc.Preemption, vc.CheckpointableOnlyOnBorrowed = true, true
	}
	if t == model.TypeInteractive {
		vc.ReclaimGrace = 30 * time.Second // interactive users wait for their nodes
	}
	return vc
}

// reserveUntil is how long the nodes of a reclaim or a preemption are held
// for the allocation they were freed for: the victims' checkpoint grace,
// the agent's kill grace, and a minute for the stop to be reported and the
// next cycle to place it.
func (s *Server) reserveUntil(grace time.Duration) time.Time {
	return s.cfg.Clock().Add(grace + s.cfg.KillGrace + time.Minute)
}

// maxGrace is the reclaim grace of vCluster name (and of any vCluster, when
// the reclaim takes nodes from several borrowers, the home's is what counts).
func (s *Server) graceOf(name string) time.Duration {
	grace := model.DefaultReclaimGrace
	s.view(func(st *quorum.State) {
		if vc := st.VCluster(name); vc != nil {
			grace = vc.Grace()
		}
	})
	return grace
}

// Reclaim implements vcluster.Proposer: one Raft entry with every reclaim
// of a home vCluster's cycle.
func (s *Server) Reclaim(ctx context.Context, vc string, items []vcluster.ReclaimProposal) ([]vcluster.Outcome, error) {
	cmd := &quorum.Reclaim{VCluster: vc, ReserveUntil: s.reserveUntil(s.graceOf(vc))}
	from := make([]string, len(items)) // the borrower, for the metrics
	s.view(func(st *quorum.State) {
		for i, it := range items {
			if len(it.Nodes) > 0 {
				if n := st.Node(it.Nodes[0]); n != nil {
					from[i] = n.CurrentVCluster
				}
			}
		}
	})
	for _, it := range items {
		cmd.Items = append(cmd.Items, quorum.ReclaimItem{ForAlloc: it.ForAlloc, Nodes: it.Nodes, Reserve: it.Reserve, Version: it.Version})
	}
	out, err := s.proposeItems(ctx, cmd, nil)
	for i, o := range out {
		if o.Committed && i < len(from) {
			s.metrics.reclaims.WithLabelValues(vc, from[i]).Inc()
			s.log.Info("reclaim", "vcluster", vc, "from", from[i], "for_alloc", o.AllocID, "nodes", items[i].Nodes)
		}
	}
	return out, err
}

// Preempt implements vcluster.Proposer.
func (s *Server) Preempt(ctx context.Context, vc string, items []vcluster.PreemptProposal) ([]vcluster.Outcome, error) {
	cmd := &quorum.Preempt{VCluster: vc, ReserveUntil: s.reserveUntil(s.graceOf(vc))}
	for _, it := range items {
		cmd.Items = append(cmd.Items, quorum.PreemptItem{ForAlloc: it.ForAlloc, Victims: it.Victims, Actions: it.Actions, Reserve: it.Reserve, Version: it.Version})
	}
	out, err := s.proposeItems(ctx, cmd, nil)
	for i, o := range out {
		if o.Committed {
			s.metrics.preemptions.WithLabelValues(vc).Add(float64(len(items[i].Victims)))
			s.log.Info("preemption", "vcluster", vc, "for_alloc", o.AllocID, "victims", items[i].Victims)
		}
	}
	return out, err
}

// proposeItems proposes a batch command and turns its per-item results
// into outcomes; onReject, when set, sees each rejected item.
func (s *Server) proposeItems(ctx context.Context, cmd quorum.Command, onReject func(*quorum.Rejection)) ([]vcluster.Outcome, error) {
	r, err := s.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if r.Rejection != nil {
		return nil, r.Rejection
	}
	out := make([]vcluster.Outcome, len(r.Items))
	for i, it := range r.Items {
		out[i] = vcluster.Outcome{AllocID: it.ID, Committed: it.Committed}
		if it.Rejection != nil {
			out[i].Reason, out[i].Message = it.Rejection.Reason, it.Rejection.Message
			s.log.Debug(cmd.Type().String()+" item rejected", "alloc", it.ID, "why", it.Rejection.Message)
			if onReject != nil {
				onReject(it.Rejection)
			}
		}
	}
	return out, nil
}

// victimCost prices preempting a running allocation now (node-hours), by
// the checkpoint cost model: the loops choose the cheapest victims.
func (s *Server) victimCost(a *model.Allocation, now time.Time) float64 {
	return checkpoint.PreemptionCost(s.cfg.Checkpoint, checkpoint.JobFromAllocation(a, false), now)
}
