package vcluster

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/solver"
)

// StateReader gives a cycle its consistent snapshot of committed state and
// the state version it was read at. ok is false when the vCluster is gone.
// Settings is the cheap read a loop makes before deciding whether a cycle
// has anything to do: the vCluster's definition and how many allocations
// it has pending.
type StateReader interface {
	Snapshot(vcluster string, now time.Time) (s *Snapshot, version uint64, ok bool)
	Settings(vcluster string) (vc *model.VCluster, pending int, ok bool)
}

// CompletedReader is an optional extension of a StateReader: the recently
// completed allocations of a vCluster (terminal, with their start and end
// times; a bounded window is enough, oldest first), from which the loop's
// runtime predictor learns (Snapshot.Completed) and its fair share of
// service (Snapshot.Service, ServiceMemory). A StateReader without it leaves
// every job planned with its walltime and no service memory. With Loop.ImmutableState, a new
// window must come in a new slice (the loop keeps what it learnt from the
// last one).
type CompletedReader interface {
	Completed(vcluster string) []*model.Allocation
}

// Assignment is one proposed start.
type Assignment struct {
	AllocID uint64
	Nodes   []string // may include nodes to borrow
	Version uint64
}

// Outcome is the quorum's answer for one assignment.
type Outcome struct {
	AllocID   uint64
	Committed bool
	Reason    string // pending reason when it fits one
	Message   string
}

// ReclaimProposal asks for lent nodes back so that ForAlloc, a pending
// allocation of the proposing (home) vCluster, can start on Reserve. The
// quorum moves the borrowers' allocations on Nodes to CHECKPOINTING (the
// checkpoint broker asks them to checkpoint within the home's reclaim
// grace; then they are stopped and requeued), marks Nodes to go home when
// they are free, and holds every node of Reserve for ForAlloc until the
// leader's deadline.
type ReclaimProposal struct {
	ForAlloc uint64
	Nodes    []string // busy nodes lent to other vClusters, to take back
	Reserve  []string // every node of the planned start (idle own ones too)
	Version  uint64
}

// PreemptProposal asks the quorum to preempt Victims (running allocations
// of this vCluster of a strictly lower priority class) so that ForAlloc can
// start on Reserve.
type PreemptProposal struct {
	ForAlloc uint64
	Victims  []uint64
	// Actions holds what preempting each victim does, in Victims' order
	// (model.VictimAction: checkpoint, requeue, cancel or suspend).
	Actions []model.PreemptAction
	Reserve []string
	Version uint64
}

// Proposer sends one cycle's proposals to the quorum. Outcomes of Reclaim
// and Preempt carry ForAlloc as AllocID. AssignBatch returns one outcome per
// item, in order; it may commit the items in several entries (the server
// does beyond 256), each item judged on its own against its Version.
type Proposer interface {
	AssignBatch(ctx context.Context, vcluster string, items []Assignment) ([]Outcome, error)
	Reclaim(ctx context.Context, vcluster string, items []ReclaimProposal) ([]Outcome, error)
	Preempt(ctx context.Context, vcluster string, items []PreemptProposal) ([]Outcome, error)
}

// Planner is the scheduling algorithm: solver.Solve in production. A cycle
// may call it several times (the real plan, then what-ifs for reclaim and
// preemption) and reads the first plan after the others: its plans must
// not share memory (solver.Solve's do not; a reused solver.Solver's do).
// A Loop without one plans with solver.Solve, its real plan made by
// solvers it keeps from one cycle to the next (Loop.plan).
type Planner func(*solver.Input) *solver.Plan

// Explanation is the latest word of the scheduler on one allocation.
type Explanation struct {
	solver.Explanation
	Computed time.Time
	Profile  string
	Message  string
}

// Explanations holds the latest explanation per allocation of a vCluster.
// Safe for concurrent use.
//
// A cycle publishes its plan's explanations as they are (one per pending
// allocation, 100,000 at a site's size) with the few changes the loop made
// after planning; Get builds the explanation of one allocation when asked.
// So a cycle does no per-allocation work for explanations nobody reads, and
// the first Get after a cycle indexes the plan once.
type Explanations struct {
	mu  sync.RWMutex
	set *explanationSet
	// started keeps the explanations allocations started with (started.go).
	started startedExplanations
}

// explanationSet is one cycle's explanations. It is not changed once
// published (Explanations.replace), except for its index, built once.
type explanationSet struct {
	plan     []solver.Explanation // the plan's, in score order
	computed time.Time
	profile  string
	fifo     bool // the vCluster schedules in strict order
	// edits are the loop's changes to an allocation's explanation after
	// planning (a reclaim or preemption for it, a refused start...), in the
	// order the loop made them.
	edits map[uint64][]func(*Explanation)

	once  sync.Once
	index map[uint64]int32 // by allocation: its entry in plan
	// readers counts the Gets reading plan now: a loop reuses the plan's
	// memory only once the set is replaced and no Get reads it.
	readers atomic.Int32
}

// edit records a change to an allocation's explanation; it applies only if
// the plan explains the allocation.
func (s *explanationSet) edit(id uint64, f func(*Explanation)) {
	if s.edits == nil {
		s.edits = map[uint64][]func(*Explanation){}
	}
	s.edits[id] = append(s.edits[id], f)
}

// get builds the explanation of an allocation.
func (s *explanationSet) get(id uint64) (*Explanation, bool) {
	s.once.Do(func() {
		s.index = make(map[uint64]int32, len(s.plan))
		for i := range s.plan {
			s.index[s.plan[i].JobID] = int32(i)
		}
	})
	i, ok := s.index[id]
	if !ok {
		return nil, false
	}
	x := &Explanation{Explanation: s.plan[i], Computed: s.computed, Profile: s.profile}
	// The plan's memory is reused by a later cycle: the caller gets its own.
	x.Nodes = slices.Clone(x.Nodes)
	x.Message = describe(&x.Explanation)
	if s.fifo && x.Reason == model.ReasonPriority {
		x.Message = "waits its turn: an allocation ahead of it in the queue cannot start yet (strict order)"
	}
	for _, f := range s.edits[id] {
		f(x)
	}
	return x, true
}

// Get returns the latest explanation of an allocation. The caller owns it.
func (e *Explanations) Get(id uint64) (*Explanation, bool) {
	e.mu.RLock()
	s := e.set
	if s != nil {
		s.readers.Add(1) // under the lock: once replaced, no reader comes
	}
	e.mu.RUnlock()
	if s == nil {
		return nil, false
	}
	defer s.readers.Add(-1)
	return s.get(id)
}

// current returns the published set.
func (e *Explanations) current() *explanationSet {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.set
}

func (e *Explanations) replace(s *explanationSet) {
	e.mu.Lock()
	e.set = s
	e.mu.Unlock()
}

// CycleStats describes one cycle, for metrics and logs.
type CycleStats struct {
	VCluster   string
	Pending    int
	Proposed   int
	Committed  int
	Rejected   int
	Backfilled int
	// Reclaims and Preemptions proposed, and how many the quorum refused.
	Reclaims, Preemptions int
	ProposalsRejected     int
	// Deferred counts the planned starts left to the next cycle by
	// Loop.MaxStarts.
	Deferred int
	Duration time.Duration // solver time
	Total    time.Duration // whole cycle
	// Prediction is how the runtime predictor did on the completed window
	// it learnt from, each run predicted from the runs that ended before it
	// (loops with ImmutableState, as the leader's; Runs 0 = none).
	Prediction predict.Accuracy
	// StartScores are the scores of the planned starts (placement score
	// histograms); Waiting counts the pending allocations left waiting, by
	// pending reason.
	StartScores []float64
	Waiting     map[string]int
}

// Loop is one vCluster's scheduler loop.
type Loop struct {
	Name     string
	State    StateReader
	Proposer Proposer
	Planner  Planner
	Clock    func() time.Time
	Log      *slog.Logger
	// OnCycle, when set, receives every cycle's stats.
	OnCycle func(CycleStats)
	// Board, when set, is where the loops of a leader term share their
	// plans' reservations (lending limits); nil = no sharing.
	Board *Board
	// VictimCost prices preemption victims; nil = DefaultVictimCost.
	VictimCost VictimCost
	// OnPanic, when set, is told of every cycle that panicked (after it was
	// recovered and logged), for metrics.
	OnPanic func(vcluster string, v any)
	// ImmutableState promises that the allocations of State's snapshots are
	// never changed in place (the quorum's are not: a change stores a new
	// copy), and that a CompletedReader returns a new slice whenever its
	// window changes. A cycle then redoes only the per-allocation work of
	// what changed since the last one (Builder.Immutable), and learns its
	// runtime predictor again only from a new window.
	ImmutableState bool
	// MaxStarts, when above zero, is the most starts one cycle proposes
	// (Slurm's sched_max_job_start). The plan's later starts wait, with
	// reason WaitingForScheduling, and the loop wakes again after its wake
	// gap to plan them from fresh state. A cycle that fills thousands of
	// idle nodes at once (a restart, a wave of completions) so spreads its
	// commits, the agents' reports and the next wave of completions over
	// several cycles instead of saturating every member for a second
	// (docs/scale.md, "Pacing the fill").
	MaxStarts int
	// Panics counts the cycles that panicked.
	Panics atomic.Int64

	Explanations Explanations

	wake chan struct{}
	once sync.Once
	// builder keeps the solver input's memory from one cycle to the next
	// (100,000 pending jobs are megabytes); buildMu guards it and the
	// input while the plan is made, should two cycles ever overlap.
	buildMu sync.Mutex
	builder Builder
	// solvers make the real plan when Planner is nil, each with the
	// explanations published from its last plan (guarded by buildMu).
	solvers []*loopSolver
	// work is how long the last cycle computed before proposing (its CPU
	// share; waiting for the commit is not), which paces woken cycles.
	work time.Duration
	// pred is the predictor learnt from predFrom, the last Completed
	// window (with ImmutableState).
	pred     *predict.History
	predFrom []*model.Allocation
	predAcc  predict.Accuracy
	// service is the fair share of service's memory (Snapshot.Service),
	// kept from one cycle to the next while the vCluster's settings read
	// it (ServiceSettings).
	service ServiceMemory
	// easyStarts is the relative starvation guard's memory
	// (Snapshot.EasyStarts), kept from one cycle to the next.
	easyStarts EasyStarts
}

func (l *Loop) init() {
	l.once.Do(func() {
		l.builder.Immutable = l.ImmutableState
		l.wake = make(chan struct{}, 1)
		if l.Log == nil {
			l.Log = slog.Default()
		}
		if l.Clock == nil {
			l.Clock = time.Now
		}
	})
}

// Wake asks for a cycle soon (a submission or a completion happened). The
// loop still waits its wake gap since the last cycle (Run).
func (l *Loop) Wake() {
	l.init()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Woken cycles pace themselves by their own cost: after a wake the loop
// waits wakeDuty times as long as its last cycle computed (up to its
// proposal; the wait for the commit is not counted), at least minWakeGap
// and at most the cycle interval. A cheap cycle (a few ms) so follows the
// completions that free nodes within tens of milliseconds, while a loop
// never takes more than about 1/(wakeDuty+1) of a core however big the
// queue: at 100,000 pending a cycle costs a second or more here, and
// cycling back to back would starve Raft and the API on the same cores.
// A MinInterval other than the default is kept as a floor. The floor of
// 25 ms lets the submissions and completions of a busy stream of short jobs
// gather into one cycle and one AssignBatch entry (a bolt commit with two
// fdatasyncs on every member) instead of one each: at 200 jobs/s about five
// a cycle where 10 ms placed one or two.
const (
	wakeDuty   = 4
	minWakeGap = 25 * time.Millisecond
)

// wakeGap is how long after a cycle that computed for took a woken loop waits.
func wakeGap(took, minInterval, interval time.Duration) time.Duration {
	g := max(minWakeGap, wakeDuty*took)
	if minInterval != model.DefaultMinInterval {
		g = max(g, minInterval)
	}
	return min(g, interval)
}

// Run cycles until ctx ends: every cycle interval, or earlier when woken,
// but never sooner after the last cycle than its wake gap (wakeGap).
func (l *Loop) Run(ctx context.Context) {
	l.init()
	var last time.Time
	var took time.Duration
	for {
		interval, minInterval := l.intervals()
		wait := interval
		if !last.IsZero() {
			wait = max(0, interval-time.Since(last))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-l.wake:
			timer.Stop()
			if gap, since := wakeGap(took, minInterval, interval), time.Since(last); since < gap {
				select {
				case <-ctx.Done():
					return
				case <-time.After(gap - since):
				}
			}
		}
		last = time.Now()
		l.work = 0
		if err := l.safeCycle(ctx); err != nil && ctx.Err() == nil {
			l.Log.Warn("scheduling cycle failed", "vcluster", l.Name, "err", err)
		}
		took = time.Since(last)
		if l.work > 0 {
			took = l.work // the commit wait costs no CPU here
		}
	}
}

// safeCycle runs one cycle and recovers from a panic in it: the panic is
// counted, logged with its stack and reported to OnPanic, and the loop
// carries on with its next cycle (the other loops never notice).
func (l *Loop) safeCycle(ctx context.Context) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		l.Panics.Add(1)
		l.Log.Error("scheduling cycle panicked", "vcluster", l.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if l.OnPanic != nil {
			l.OnPanic(l.Name, v)
		}
		err = nil
	}()
	return l.Cycle(ctx)
}

// publish shares this loop's reservations on its Board, if any.
func (l *Loop) publish(reserved map[string]time.Time) {
	if l.Board != nil {
		l.Board.Publish(l.Name, reserved)
	}
}

func (l *Loop) intervals() (time.Duration, time.Duration) {
	vc, _, ok := l.State.Settings(l.Name)
	interval, minInterval := model.DefaultCycleInterval, model.DefaultMinInterval
	if ok {
		if vc.CycleInterval > 0 {
			interval = vc.CycleInterval
		}
		if vc.MinInterval > 0 {
			minInterval = vc.MinInterval
		}
	}
	return interval, min(minInterval, interval)
}

// Cycle runs one scheduling cycle:
//  1. read a consistent snapshot and its version (with the lending limits
//     of the other loops' plans, from the Board);
//  2. build the solver input (BuildInput) and plan; publish the plan's
//     reservations on the Board;
//  3. plan reclaims of lent nodes (PlanReclaims) and preemptions
//     (PlanPreemptions) for the jobs the plan leaves waiting; starts on
//     nodes a reclaim holds for another job are dropped;
//  4. propose every start as one batch (the Proposer may commit a large
//     one in several entries) carrying the snapshot version, then
//     the reclaims, then the preemptions;
//  5. record explanations; rejected items simply stay pending and are
//     planned again next cycle from fresher state.
func (l *Loop) Cycle(ctx context.Context) error {
	l.init()
	began := time.Now()
	if _, pending, ok := l.State.Settings(l.Name); ok && pending == 0 {
		// Nothing to place: skip the snapshot, the cheap way out of most
		// cycles of an idle vCluster.
		l.Explanations.replace(nil)
		l.publish(nil)
		return nil
	}
	now := l.Clock()
	snap, version, ok := l.State.Snapshot(l.Name, now)
	if !ok {
		l.publish(nil)
		return fmt.Errorf("vcluster %s no longer exists", l.Name)
	}
	stats := CycleStats{VCluster: l.Name, Pending: len(snap.Pending)}
	if len(snap.Pending) == 0 {
		l.Explanations.replace(nil)
		l.publish(nil)
		return nil
	}
	if l.Board != nil {
		s := *snap
		s.LendLimits = l.Board.Limits()
		snap = &s
	}
	if cr, ok := l.State.(CompletedReader); ok && snap.Completed == nil && snap.Predictor == nil {
		s := *snap
		s.Completed = cr.Completed(l.Name)
		if l.ImmutableState {
			// The same window as last cycle: the same predictor (learning
			// from 5,000 runs every cycle is work, and a new predictor
			// makes the Builder predict every pending job again).
			if done := s.Completed; len(done) != len(l.predFrom) || len(done) > 0 && &done[0] != &l.predFrom[0] {
				l.pred, l.predAcc = LearnCompletedScored(done)
				l.predFrom = done
			}
			s.Predictor = l.pred
			stats.Prediction = l.predAcc
		}
		snap = &s
	}
	if _, _, need := ServiceSettings(snap.VCluster); need && snap.Service == nil {
		// The fair share of service: the loop's memory observes each
		// completion once, as the windows show them (ServiceMemory).
		done := snap.Completed
		if cr, ok := l.State.(CompletedReader); ok && done == nil {
			done = cr.Completed(l.Name)
		}
		s := *snap
		s.Service = l.service.Update(done)
		snap = &s
	}
	if snap.EasyStarts == nil {
		s := *snap
		s.EasyStarts = &l.easyStarts
		snap = &s
	}
	plan, sv, solveTook := l.buildAndPlan(snap)
	stats.Duration = solveTook
	l.publish(reservedStarts(plan))

	expl := &explanationSet{plan: plan.Explanations, computed: now, profile: snap.VCluster.WeightsProfile,
		fifo: snap.VCluster.EffectiveAlgorithm() == model.AlgorithmFIFO}
	if sv != nil {
		sv.set = expl // the explanations read the solver's memory
	}
	// One pass over the explanations: the counts by reason, and whether any
	// job waits in a way reclaim (blockedLent) or preemption (blocked) could
	// help — without one, PlanReclaims and PlanPreemptions find nothing to do
	// and are not called (each would walk every explanation to find so).
	horizon := snap.Now.Add(snap.VCluster.Horizon())
	var blocked, blockedLent bool
	stats.Waiting, blocked, blockedLent = waitingCounts(plan.Explanations, horizon)
	for _, st := range plan.Starts {
		stats.StartScores = append(stats.StartScores, st.Score)
	}
	for id, n := range heldCounts(snap) {
		expl.edit(id, func(x *Explanation) {
			switch x.Reason {
			case model.ReasonBadConstraints, model.ReasonNodesDrained:
				// Lent nodes coming back for it are not in the input yet.
				x.Reason = model.ReasonResources
				fallthrough
			case model.ReasonResources, model.ReasonPriority:
				x.Message = fmt.Sprintf("waits for %d node(s) held for it while the work on them is checkpointed (reclaim or preemption in progress)", n)
			}
		})
	}

	whatIf := l.Planner
	if whatIf == nil {
		whatIf = solver.Solve // what-if plans must not share the real plan's memory
	}
	var reclaims []ReclaimProposal
	if blockedLent {
		reclaims = PlanReclaims(snap, plan, whatIf)
	}
	var preempts []PreemptProposal
	if blocked {
		var notes map[uint64]string
		preempts, notes = PlanPreemptionsExplained(snap, plan, whatIf, l.VictimCost, reclaims)
		for id, note := range notes {
			expl.edit(id, func(x *Explanation) { x.Message = note })
		}
	}
	heldBy := map[string]uint64{} // nodes a reclaim holds, by the job
	bw := newBorrowers(snap)
	for i := range reclaims {
		r := &reclaims[i]
		r.Version = version
		for _, n := range r.Reserve {
			heldBy[n] = r.ForAlloc
		}
		msg := fmt.Sprintf("reclaiming %d lent node(s) from %s; starts once they are checkpointed", len(r.Nodes), bw.of(r.Nodes))
		expl.edit(r.ForAlloc, func(x *Explanation) {
			if x.Reason == model.ReasonBadConstraints || x.Reason == model.ReasonNodesDrained {
				// Its nodes exist, lent out (the real input does not show them).
				x.Reason = model.ReasonResources
			}
			x.Message = msg
		})
	}
	for i := range preempts {
		p := &preempts[i]
		p.Version = version
		msg := preemptMessage(snap, p.Victims, p.Actions)
		expl.edit(p.ForAlloc, func(x *Explanation) { x.Message = msg })
	}

	var items []Assignment
	n := 0
	for _, st := range plan.Starts {
		n += len(st.Nodes)
	}
	names := make([]string, 0, n)
	for _, st := range plan.Starts {
		if by := conflict(st.Nodes, heldBy); by != 0 {
			// Its nodes go to a job a reclaim is for.
			msg := fmt.Sprintf("the nodes it would start on are held for allocation %d (reclaim in progress)", by)
			expl.edit(st.JobID, func(x *Explanation) {
				x.Reason, x.ExpectedStart, x.Nodes = model.ReasonPriority, time.Time{}, nil
				x.Message = msg
			})
			continue
		}
		// The proposal owns its node lists: a reused solver's plan is
		// overwritten by a later cycle.
		names = append(names, st.Nodes...)
		items = append(items, Assignment{AllocID: st.JobID, Nodes: names[len(names)-len(st.Nodes) : len(names) : len(names)], Version: version})
		if st.Backfilled && (l.MaxStarts <= 0 || len(items) <= l.MaxStarts) {
			stats.Backfilled++ // of the starts proposed (MaxStarts below)
		}
	}
	if l.MaxStarts > 0 && len(items) > l.MaxStarts {
		msg := fmt.Sprintf("starts in a following cycle: this cycle already starts %d allocations, the most one cycle may (latticed --max-starts-per-cycle)", l.MaxStarts)
		for _, it := range items[l.MaxStarts:] {
			expl.edit(it.AllocID, func(x *Explanation) {
				x.Reason, x.Nodes, x.Message = model.ReasonWaitingForScheduling, nil, msg
			})
		}
		stats.Deferred = len(items) - l.MaxStarts
		items = items[:l.MaxStarts:l.MaxStarts]
		defer l.Wake() // the rest, after the wake gap
	}
	l.work = time.Since(began) // planning done; what follows waits for commits
	if len(items) > 0 {
		stats.Proposed = len(items)
		outcomes, err := l.Proposer.AssignBatch(ctx, l.Name, items)
		if err != nil {
			l.Explanations.replace(expl)
			return fmt.Errorf("propose %d assignments: %w", len(items), err)
		}
		l.Explanations.recordStarts(plan, outcomes, snap, now) // started.go
		for _, o := range outcomes {
			if o.Committed {
				stats.Committed++
				continue
			}
			stats.Rejected++
			reason, msg := o.Reason, "the quorum refused the planned start: "+o.Message+"; retried next cycle"
			if reason == "" {
				reason = model.ReasonResources
			}
			expl.edit(o.AllocID, func(x *Explanation) { x.Reason, x.Message = reason, msg })
			l.Log.Debug("assignment rejected", "vcluster", l.Name, "alloc", o.AllocID, "reason", o.Reason, "msg", o.Message)
		}
	}
	if len(reclaims) > 0 {
		stats.Reclaims = len(reclaims)
		outcomes, err := l.Proposer.Reclaim(ctx, l.Name, reclaims)
		if err != nil {
			l.Explanations.replace(expl)
			return fmt.Errorf("propose %d reclaims: %w", len(reclaims), err)
		}
		stats.ProposalsRejected += l.refused("reclaim", outcomes, expl)
	}
	if len(preempts) > 0 {
		stats.Preemptions = len(preempts)
		outcomes, err := l.Proposer.Preempt(ctx, l.Name, preempts)
		if err != nil {
			l.Explanations.replace(expl)
			return fmt.Errorf("propose %d preemptions: %w", len(preempts), err)
		}
		stats.ProposalsRejected += l.refused("preemption", outcomes, expl)
	}
	l.Explanations.replace(expl)
	stats.Total = time.Since(began)
	if l.OnCycle != nil {
		l.OnCycle(stats)
	}
	if stats.Proposed > 0 || stats.Reclaims > 0 || stats.Preemptions > 0 {
		l.Log.Info("scheduling cycle", "vcluster", l.Name, "pending", stats.Pending, "started", stats.Committed,
			"rejected", stats.Rejected, "backfilled", stats.Backfilled, "deferred", stats.Deferred, "reclaims", stats.Reclaims,
			"preemptions", stats.Preemptions, "solve_ms", stats.Duration.Milliseconds())
	}
	return nil
}

// buildAndPlan builds the solver input with the loop's Builder and plans
// (Loop.plan); it returns how long planning took. The lock is released
// even when the planner panics (safeCycle recovers, the loop carries on).
func (l *Loop) buildAndPlan(snap *Snapshot) (*solver.Plan, *loopSolver, time.Duration) {
	l.buildMu.Lock()
	defer l.buildMu.Unlock()
	in := l.builder.Build(snap)
	start := time.Now()
	plan, sv := l.plan(&in)
	return plan, sv, time.Since(start)
}

// loopSolver is a solver a Loop reuses, and the explanations published
// from its last plan (which read its memory).
type loopSolver struct {
	sv  solver.Solver
	set *explanationSet
}

// plan makes a cycle's real plan: with Planner when set, else with a solver
// of the loop whose last plan nobody reads any more (a new one when every
// solver's is still read: the published one, or a Get still copying from
// an older one). The solver is returned to be told of the explanations
// published from this plan. Reusing a solver's memory (a plan of 100,000
// jobs is tens of megabytes) spares the allocation and the garbage
// collection each cycle; a reused solver decides exactly as a new one.
func (l *Loop) plan(in *solver.Input) (*solver.Plan, *loopSolver) {
	if l.Planner != nil {
		return l.Planner(in), nil
	}
	cur := l.Explanations.current()
	for _, ls := range l.solvers {
		if ls.set == nil || (ls.set != cur && ls.set.readers.Load() == 0) {
			return ls.sv.Solve(in), ls
		}
	}
	ls := &loopSolver{}
	l.solvers = append(l.solvers, ls)
	return ls.sv.Solve(in), ls
}

// refused logs at debug the reclaims or preemptions the quorum refused and
// says so in their jobs' explanations; they are planned again next cycle.
// It returns how many were refused.
func (l *Loop) refused(kind string, outcomes []Outcome, expl *explanationSet) int {
	n := 0
	for _, o := range outcomes {
		if o.Committed {
			continue
		}
		n++
		l.Log.Debug(kind+" rejected", "vcluster", l.Name, "alloc", o.AllocID, "reason", o.Reason, "msg", o.Message)
		msg := "the quorum refused the planned " + kind + ": " + o.Message + "; retried next cycle"
		expl.edit(o.AllocID, func(x *Explanation) { x.Message = msg })
	}
	return n
}

// waitingCounts counts the jobs a plan leaves waiting, by pending reason; nil
// when none waits. Reasons are few: a short list beats hashing 100,000
// strings. It also reports whether some job is blocked by horizon for
// preemption (waiting(plan, horizon, false) would not be empty) and for
// reclaim (waiting(plan, horizon, true)).
func waitingCounts(plan []solver.Explanation, horizon time.Time) (_ map[string]int, blocked, blockedLent bool) {
	type count struct {
		reason string
		n      int
		// What a job waiting for it may be blocked for (blockedBy): own
		// (preemption, and reclaim too), lent (reclaim only), or neither.
		own, lent bool
	}
	var counts []count
	for i := range plan {
		ex := &plan[i]
		r := ex.Reason
		if r == "" {
			continue
		}
		k := 0
		for k < len(counts) && counts[k].reason != r {
			k++
		}
		if k == len(counts) {
			counts = append(counts, count{reason: r, own: blockedBy(&solver.Explanation{Reason: r}, horizon, false),
				lent: blockedBy(&solver.Explanation{Reason: r}, horizon, true)})
		}
		c := &counts[k]
		c.n++
		if (c.own && !blocked || c.lent && !blockedLent) && (ex.ExpectedStart.IsZero() || ex.ExpectedStart.After(horizon)) {
			blocked = blocked || c.own
			blockedLent = blockedLent || c.lent
		}
	}
	if len(counts) == 0 {
		return nil, blocked, blockedLent
	}
	out := make(map[string]int, len(counts))
	for _, c := range counts {
		out[c.reason] = c.n
	}
	return out, blocked, blockedLent
}

// conflict returns the job a reclaim holds one of nodes for, or 0.
func conflict(nodes []string, heldBy map[string]uint64) uint64 {
	if len(heldBy) == 0 {
		return 0
	}
	for _, n := range nodes {
		if id := heldBy[n]; id != 0 {
			return id
		}
	}
	return 0
}

// heldCounts counts the nodes held for each allocation now.
func heldCounts(s *Snapshot) map[uint64]int {
	var out map[uint64]int
	for _, n := range s.Nodes {
		if n.ReservedFor != 0 && s.Now.Before(n.ReservedUntil) {
			if out == nil {
				out = map[uint64]int{}
			}
			out[n.ReservedFor]++
		}
	}
	return out
}

// preemptMessage says which allocations are preempted for a job.
func preemptMessage(s *Snapshot, victims []uint64, actions []model.PreemptAction) string {
	parts := make([]string, 0, len(victims))
	for i, id := range victims {
		how := ""
		if i < len(actions) && actions[i] != "" {
			how = ", " + map[model.PreemptAction]string{model.ActionCheckpoint: "checkpointed and requeued",
				model.ActionRequeue: "requeued", model.ActionCancel: "cancelled", model.ActionSuspend: "suspended"}[actions[i]]
		}
		if a := s.Allocations[id]; a != nil {
			parts = append(parts, fmt.Sprintf("%s (class %d%s)", a.DisplayID(), a.PriorityClass, how))
		} else {
			parts = append(parts, fmt.Sprint(id))
		}
	}
	if len(victims) == 1 {
		return "preempting allocation " + parts[0] + "; starts once it has stopped"
	}
	return "preempting allocations " + strings.Join(parts, ", ") + "; starts once they have stopped"
}

// describe writes one sentence on why a job waits or where it starts.
func describe(e *solver.Explanation) string {
	switch e.Reason {
	case "":
		return fmt.Sprintf("starts on %d node(s)", len(e.Nodes))
	case model.ReasonPriority:
		return "higher-scored allocations hold the nodes it needs"
	case model.ReasonResources:
		return "not enough free nodes that satisfy its request"
	case model.ReasonPowerBudget:
		return "starting it would exceed the power budget"
	case model.ReasonQuotaMaxNodes:
		return "its tenant is at its node quota"
	case model.ReasonQuotaMaxRunning:
		return "its tenant is at its running-allocation quota"
	case model.ReasonNodesDrained:
		return "enough nodes exist but some are drained or down"
	case model.ReasonBadConstraints:
		return "no node of this vCluster can ever satisfy its constraints"
	case ReasonArrayTaskLimit:
		return "its array runs as many tasks as its %MAX allows"
	case model.ReasonReservation:
		return fmt.Sprintf("it runs in reservation %q, which has not started (or no longer exists)", e.Reservation)
	case model.ReasonMaintenance:
		return fmt.Sprintf("the nodes it could use are reserved for maintenance (reservation %q) now or before its walltime would end", e.Reservation)
	case model.ReasonReserved:
		return fmt.Sprintf("the nodes it could use are in reservation %q now or before its walltime would end", e.Reservation)
	}
	return e.Reason
}
