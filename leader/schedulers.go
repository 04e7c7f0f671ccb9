package leader

import (
	"context"
	"sync"
	"time"

	"github.com/latticehpc/lattice/checkpoint"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/vcluster"
)

// schedulers is the term's scheduler loops, one per vCluster in state; the
// Term is their vcluster.StateReader (with CompletedReader) and
// vcluster.Proposer.
type schedulers struct {
	t     *Term
	wg    sync.WaitGroup // the loops manage started
	mu    sync.Mutex
	loops map[string]*loopHandle
	board *vcluster.Board // lenders' reservations, shared by this term's loops
}

type loopHandle struct {
	loop   *vcluster.Loop
	cancel context.CancelFunc
}

func newSchedulers(t *Term) *schedulers {
	return &schedulers{t: t, loops: map[string]*loopHandle{}, board: &vcluster.Board{}}
}

// manage keeps one scheduler loop per vCluster in state.
func (sc *schedulers) manage(ctx context.Context) {
	t := sc.t
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	defer sc.wg.Wait() // its loops end with it
	for {
		var names []string
		t.view(func(st *quorum.State) {
			for _, v := range st.VClusters() {
				names = append(names, v.Name)
			}
		})
		sc.mu.Lock()
		for _, name := range names {
			if sc.loops[name] != nil {
				continue
			}
			lctx, cancel := context.WithCancel(ctx)
			loop := &vcluster.Loop{
				Name: name, State: t, Proposer: t, // Planner nil: solver.Solve, with reused solvers
				Clock: t.cfg.Clock, Log: t.log, OnCycle: t.cfg.OnCycle,
				Board: sc.board, VictimCost: t.victimCost, OnPanic: t.recordPanic,
				ImmutableState: true, // committed objects are never changed in place
				MaxStarts:      t.cfg.MaxStartsPerCycle,
			}
			sc.loops[name] = &loopHandle{loop: loop, cancel: cancel}
			procs := t.cfg.LoopProcs
			if procs {
				loopProcs.add(1)
			}
			sc.wg.Add(1)
			go func() {
				defer sc.wg.Done()
				if procs {
					defer loopProcs.add(-1)
				}
				loop.Run(lctx)
			}()
			loop.Wake()
		}
		sc.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (sc *schedulers) loop(name string) *vcluster.Loop {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if h := sc.loops[name]; h != nil {
		return h.loop
	}
	return nil
}

func (sc *schedulers) wakeAll() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, h := range sc.loops {
		h.loop.Wake()
	}
}

// Completed implements vcluster.CompletedReader (TermConfig.Completed).
func (t *Term) Completed(vc string) []*model.Allocation { return t.cfg.Completed.Completed(vc) }

// Snapshot implements vcluster.StateReader over committed state. Under
// the read lock it takes only what the state shares without copying —
// the node list, the vCluster's pending allocations and the active ones
// as views (quorum.AllocView) — and the few small things (vClusters,
// tenants, holds); the per-allocation work (the pending list, the map of
// active allocations) is done after the lock, so Apply never waits for a
// copy of 100,000 allocations.
func (t *Term) Snapshot(name string, now time.Time) (*vcluster.Snapshot, uint64, bool) {
	var snap *vcluster.Snapshot
	var version uint64
	var pending, active quorum.AllocView
	var held []*model.Allocation // allocations idle nodes are held for that are not active
	t.view(func(st *quorum.State) {
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
		t.powerSnapshot(st, vc, snap)
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
func (t *Term) Settings(name string) (*model.VCluster, int, bool) {
	var vc *model.VCluster
	var pending int
	t.view(func(st *quorum.State) {
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
func (t *Term) AssignBatch(ctx context.Context, vc string, items []vcluster.Assignment) ([]vcluster.Outcome, error) {
	onReject := func(r *quorum.Rejection) { t.cfg.Metrics.AssignRejected.WithLabelValues(string(r.Code)).Inc() }
	var out []vcluster.Outcome
	for len(items) > 0 {
		part := items[:min(maxAssignSlice, len(items))]
		items = items[len(part):]
		cmd := &quorum.AssignBatch{VCluster: vc, Items: make([]quorum.AssignItem, len(part))}
		for i, it := range part {
			cmd.Items[i] = quorum.AssignItem{AllocID: it.AllocID, Nodes: it.Nodes, Version: it.Version}
		}
		o, err := t.proposeItems(ctx, cmd, onReject)
		if err != nil {
			return out, err
		}
		out = append(out, o...)
	}
	return out, nil
}

// reserveUntil is how long the nodes of a reclaim or a preemption are held
// for the allocation they were freed for: the victims' checkpoint grace,
// the agent's kill grace, and a minute for the stop to be reported and the
// next cycle to place it.
func (t *Term) reserveUntil(grace time.Duration) time.Time {
	return t.cfg.Clock().Add(grace + t.cfg.KillGrace + time.Minute)
}

// graceOf is the reclaim grace of vCluster name (and of any vCluster, when
// the reclaim takes nodes from several borrowers, the home's is what counts).
func (t *Term) graceOf(name string) time.Duration {
	grace := model.DefaultReclaimGrace
	t.view(func(st *quorum.State) {
		if vc := st.VCluster(name); vc != nil {
			grace = vc.Grace()
		}
	})
	return grace
}

// Reclaim implements vcluster.Proposer: one Raft entry with every reclaim
// of a home vCluster's cycle.
func (t *Term) Reclaim(ctx context.Context, vc string, items []vcluster.ReclaimProposal) ([]vcluster.Outcome, error) {
	cmd := &quorum.Reclaim{VCluster: vc, ReserveUntil: t.reserveUntil(t.graceOf(vc))}
	from := make([]string, len(items)) // the borrower, for the metrics
	t.view(func(st *quorum.State) {
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
	out, err := t.proposeItems(ctx, cmd, nil)
	for i, o := range out {
		if o.Committed && i < len(from) {
			t.cfg.Metrics.Reclaims.WithLabelValues(vc, from[i]).Inc()
			t.log.Info("reclaim", "vcluster", vc, "from", from[i], "for_alloc", o.AllocID, "nodes", items[i].Nodes)
		}
	}
	return out, err
}

// Preempt implements vcluster.Proposer.
func (t *Term) Preempt(ctx context.Context, vc string, items []vcluster.PreemptProposal) ([]vcluster.Outcome, error) {
	cmd := &quorum.Preempt{VCluster: vc, ReserveUntil: t.reserveUntil(t.graceOf(vc))}
	for _, it := range items {
		cmd.Items = append(cmd.Items, quorum.PreemptItem{ForAlloc: it.ForAlloc, Victims: it.Victims, Actions: it.Actions, Reserve: it.Reserve, Version: it.Version})
	}
	out, err := t.proposeItems(ctx, cmd, nil)
	for i, o := range out {
		if o.Committed {
			t.cfg.Metrics.Preemptions.WithLabelValues(vc).Add(float64(len(items[i].Victims)))
			t.log.Info("preemption", "vcluster", vc, "for_alloc", o.AllocID, "victims", items[i].Victims)
		}
	}
	return out, err
}

// proposeItems proposes a batch command and turns its per-item results
// into outcomes; onReject, when set, sees each rejected item.
func (t *Term) proposeItems(ctx context.Context, cmd quorum.Command, onReject func(*quorum.Rejection)) ([]vcluster.Outcome, error) {
	r, err := t.propose(ctx, cmd)
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
			t.log.Debug(cmd.Type().String()+" item rejected", "alloc", it.ID, "why", it.Rejection.Message)
			if onReject != nil {
				onReject(it.Rejection)
			}
		}
	}
	return out, nil
}

// victimCost prices preempting a running allocation now (node-hours), by
// the checkpoint cost model: the loops choose the cheapest victims.
func (t *Term) victimCost(a *model.Allocation, now time.Time) float64 {
	return checkpoint.PreemptionCost(t.cfg.Checkpoint, checkpoint.JobFromAllocation(a, false), now)
}

// powerSnapshot fills a scheduling snapshot's power view: the headroom under
// the system budget and the vCluster's cap (power.Headroom), and the
// site's price schedule with its shifting rule (f7 and EnergyPrice holds).
func (t *Term) powerSnapshot(st *quorum.State, vc *model.VCluster, snap *vcluster.Snapshot) {
	snap.PowerHeadroomWatts = power.MinHeadroom(
		power.Headroom(st.PowerBudgetWatts, st.DrawWatts()),
		power.Headroom(vc.PowerCapWatts, st.VClusterDrawWatts(vc.Name)))
	snap.Energy = t.cfg.Energy
}

// preemptQOS is the QOS entries that set a preemption mode, by name, for a
// scheduling snapshot; nil when none does.
func preemptQOS(st *quorum.State) map[string]*model.QOS {
	var out map[string]*model.QOS
	for _, q := range st.QOSTable() {
		if q.PreemptMode == "" {
			continue
		}
		if out == nil {
			out = map[string]*model.QOS{}
		}
		q := q
		out[q.Name] = &q
	}
	return out
}
