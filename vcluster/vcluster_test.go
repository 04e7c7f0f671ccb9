package vcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

type nb struct{ n model.Node }

func node(name, home string) *nb {
	return &nb{model.Node{Name: name, HomeVCluster: home, CurrentVCluster: home, State: model.NodeReady, Health: model.NodeReady, IdleWatts: 100, BusyWatts: 400}}
}
func (b *nb) current(v string) *nb        { b.n.CurrentVCluster = v; return b }
func (b *nb) running(id uint64) *nb       { b.n.Allocation = id; return b }
func (b *nb) state(s model.NodeState) *nb { b.n.State = s; return b }
func (b *nb) build() *model.Node          { return &b.n }

func alloc(id uint64, vc string, st model.AllocState) *model.Allocation {
	return &model.Allocation{ID: id, State: st, SubmitTime: t0.Add(-time.Hour), EligibleTime: t0.Add(-time.Hour),
		Request: model.Request{VCluster: vc, Tenant: "t", NodesMin: 1, NodesMax: 1, Walltime: 2 * time.Hour}}
}

func snapshot(vc *model.VCluster, nodes []*model.Node, allocs ...*model.Allocation) *Snapshot {
	s := &Snapshot{Now: t0, VCluster: vc, Lenders: map[string]bool{}, Nodes: nodes, Allocations: map[uint64]*model.Allocation{},
		Tenants: map[string]*model.Tenant{}, TenantLoad: map[string]TenantLoad{}, Groups: 2, PowerHeadroomWatts: -1, EnergyPrice: -1}
	for _, a := range allocs {
		if a.State == model.StatePending {
			s.Pending = append(s.Pending, a)
		} else {
			s.Allocations[a.ID] = a
		}
	}
	return s
}

func names(ns []solver.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, fmt.Sprintf("%s/own=%v", n.Name, n.Own))
	}
	return out
}

func TestBuildInputCandidates(t *testing.T) {
	batch := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, AllowBorrowing: true, ReservationDepth: 1}
	nodes := []*model.Node{
		node("a1", "batch").build(),
		node("a2", "batch").running(5).build(),
		node("b1", "ml").build(),                             // idle, ml lends: borrowable
		node("b2", "ml").running(6).build(),                  // busy elsewhere: not ours
		node("b3", "ml").current("batch").running(7).build(), // lent to us: ours
		node("c1", "svc").build(),                            // svc does not lend
		node("b4", "ml").state(model.NodeDrained).build(),    // not schedulable
	}
	running := alloc(5, "batch", model.StateRunning)
	running.StartTime = t0.Add(-30 * time.Minute)
	running.Nodes = []string{"a2"}
	s := snapshot(batch, nodes, running, alloc(9, "batch", model.StatePending))
	s.Lenders["ml"] = true
	in := BuildInput(s)
	want := []string{"a1/own=true", "a2/own=true", "b1/own=false", "b3/own=true"}
	if got := names(in.Nodes); !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	if in.Nodes[1].FreeAt != t0.Add(90*time.Minute) {
		t.Fatalf("a2 frees at %v, want start+walltime", in.Nodes[1].FreeAt)
	}
	if in.Nodes[3].FreeAt != t0.Add(model.MaxWalltime) {
		t.Fatalf("node busy with an unknown allocation frees at %v", in.Nodes[3].FreeAt)
	}
	if len(in.Running) != 1 || in.Running[0].ID != 5 {
		t.Fatalf("running %+v", in.Running)
	}
	// Without borrowing, only own nodes.
	batch.AllowBorrowing = false
	if got := names(BuildInput(s).Nodes); slices.Contains(got, "b1/own=false") {
		t.Fatalf("borrowed without AllowBorrowing: %v", got)
	}
}

func TestBuildInputPendingAndHolds(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch}
	waiting := alloc(3, "batch", model.StatePending)
	waiting.EligibleTime = time.Time{} // on a dependency
	a1 := alloc(10, "batch", model.StateRunning)
	a1.ArrayJobID, a1.ArrayMaxConcurrent = 10, 2
	t1, t2, t3 := alloc(11, "batch", model.StatePending), alloc(12, "batch", model.StatePending), alloc(13, "batch", model.StatePending)
	for _, a := range []*model.Allocation{t1, t2, t3} {
		a.ArrayJobID, a.ArrayMaxConcurrent = 10, 2
	}
	frac := 0.8
	t1.HotDataFraction = &frac
	in := BuildInput(snapshot(vc, nil, waiting, a1, t1, t2, t3))
	var got []string
	for _, j := range in.Pending {
		got = append(got, fmt.Sprintf("%d:%s", j.ID, j.Hold))
	}
	want := []string{"11:", "12:" + ReasonArrayTaskLimit, "13:" + ReasonArrayTaskLimit}
	if !slices.Equal(got, want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
	if in.Pending[0].HotDataFraction != 0.8 || in.Pending[1].HotDataFraction != -1 {
		t.Fatalf("hot data fractions %v %v", in.Pending[0].HotDataFraction, in.Pending[1].HotDataFraction)
	}
}

func TestBuildInputTenants(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch}
	s := snapshot(vc, nil)
	s.Tenants["a"] = &model.Tenant{Name: "a", FairShareTarget: 0.5, MaxNodes: 10, Usage: 3000, UsageTime: t0}
	// b's usage was recorded one half-life ago: it counts half.
	s.Tenants["b"] = &model.Tenant{Name: "b", MaxRunning: 2, Usage: 2000, UsageTime: t0.Add(-DefaultFairShareHalfLife)}
	s.TenantLoad["a"] = TenantLoad{Nodes: 4, Running: 1}
	s.TenantLoad["b"] = TenantLoad{Nodes: 1, Running: 3}
	in := BuildInput(s)
	a, b := in.Tenants["a"], in.Tenants["b"]
	if a.UsageShare != 0.75 || b.UsageShare != 0.25 {
		t.Fatalf("usage shares %v %v, want 0.75 0.25", a.UsageShare, b.UsageShare)
	}
	if a.NodesLeft != 6 || a.RunningLeft != -1 || b.NodesLeft != -1 || b.RunningLeft != 0 {
		t.Fatalf("quota room a=%+v b=%+v", a, b)
	}
}

// fakeState serves a fixed snapshot; fakeProposer records batches.
type fakeState struct{ snap *Snapshot }

func (f *fakeState) Snapshot(string, time.Time) (*Snapshot, uint64, bool) {
	return f.snap, 42, f.snap != nil
}

type fakeProposer struct {
	batches  [][]Assignment
	reclaims [][]ReclaimProposal
	preempts [][]PreemptProposal
	reject   map[uint64]string
	err      error
}

func (f *fakeProposer) AssignBatch(_ context.Context, _ string, items []Assignment) ([]Outcome, error) {
	f.batches = append(f.batches, items)
	if f.err != nil {
		return nil, f.err
	}
	out := make([]Outcome, len(items))
	for i, it := range items {
		r, rejected := f.reject[it.AllocID]
		out[i] = Outcome{AllocID: it.AllocID, Committed: !rejected, Reason: r, Message: "m"}
	}
	return out, nil
}

func TestCycleProposesOneBatchAndRecordsRejections(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, WeightsProfile: "balanced", ReservationDepth: 1}
	nodes := []*model.Node{node("n1", "batch").build(), node("n2", "batch").build()}
	s := snapshot(vc, nodes, alloc(1, "batch", model.StatePending), alloc(2, "batch", model.StatePending), alloc(3, "batch", model.StatePending))
	prop := &fakeProposer{reject: map[uint64]string{2: model.ReasonPowerBudget}}
	var stats CycleStats
	l := &Loop{Name: "batch", State: &fakeState{s}, Proposer: prop, Planner: solver.Solve, Clock: func() time.Time { return t0 },
		OnCycle: func(c CycleStats) { stats = c }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.batches) != 1 || len(prop.batches[0]) != 2 {
		t.Fatalf("batches %v, want one batch of two starts", prop.batches)
	}
	for _, it := range prop.batches[0] {
		if it.Version != 42 {
			t.Fatalf("item carries version %d, want the snapshot's 42", it.Version)
		}
	}
	if stats.Proposed != 2 || stats.Committed != 1 || stats.Rejected != 1 || stats.Pending != 3 {
		t.Fatalf("stats %+v", stats)
	}
	if e, ok := l.Explanations.Get(2); !ok || e.Reason != model.ReasonPowerBudget {
		t.Fatalf("rejected item's explanation %+v", e)
	}
	if e, ok := l.Explanations.Get(3); !ok || e.Reason == "" || e.Message == "" {
		t.Fatalf("waiting job's explanation %+v", e)
	}
	// A failed proposal is an error but keeps the explanations.
	prop.err = errors.New("no leader")
	if err := l.Cycle(context.Background()); err == nil {
		t.Fatal("proposal failure not reported")
	}
	if _, ok := l.Explanations.Get(3); !ok {
		t.Fatal("explanations lost after a failed proposal")
	}
}

func TestLoopWakesEarlyButNotTooOften(t *testing.T) {
	for _, tc := range []struct {
		name        string
		solve       time.Duration // how long each cycle's plan takes
		minInterval time.Duration
		atLeast     time.Duration
		below       time.Duration
	}{
		// A slow cycle: 4 × 20 ms is past the 50 ms ceiling.
		{"slow cycles wait the minimum interval", 20 * time.Millisecond, 50 * time.Millisecond, 45 * time.Millisecond, time.Hour},
		// A cheap cycle follows a wake far sooner than the 500 ms ceiling.
		{"cheap cycles follow wakes quickly", 0, 500 * time.Millisecond, 0, 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, CycleInterval: time.Hour, MinInterval: tc.minInterval}
			s := snapshot(vc, []*model.Node{node("n1", "batch").build()}, alloc(1, "batch", model.StatePending))
			cycles := make(chan time.Time, 100)
			planner := func(in *solver.Input) *solver.Plan {
				time.Sleep(tc.solve)
				return solver.Solve(in)
			}
			// A cycle begins with its snapshot: time that.
			l := &Loop{Name: "batch", State: &timedState{fakeState{s}, cycles}, Proposer: &fakeProposer{}, Planner: planner}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go l.Run(ctx)
			// The first cycle waits for the interval (an hour) unless woken.
			select {
			case <-cycles:
				t.Fatal("cycled before being woken")
			case <-time.After(50 * time.Millisecond):
			}
			l.Wake()
			first := <-cycles
			for range 5 {
				l.Wake()
			}
			second := <-cycles
			if gap := second.Sub(first); gap < tc.atLeast || gap >= tc.below {
				t.Fatalf("cycles %v apart, want within [%v, %v)", gap, tc.atLeast, tc.below)
			}
		})
	}
}

type timedState struct {
	fakeState
	at chan time.Time
}

func (ts *timedState) Snapshot(vc string, now time.Time) (*Snapshot, uint64, bool) {
	ts.at <- time.Now()
	return ts.fakeState.Snapshot(vc, now)
}

func TestWakeGap(t *testing.T) {
	def := model.DefaultMinInterval
	for _, tc := range []struct {
		took, minInterval, interval, want time.Duration
	}{
		{0, def, time.Hour, 25 * time.Millisecond}, // submissions arriving together share a cycle and its entry
		{time.Millisecond, def, time.Hour, 25 * time.Millisecond},
		{5 * time.Millisecond, def, time.Hour, 25 * time.Millisecond},
		{10 * time.Millisecond, def, time.Hour, 40 * time.Millisecond},
		{100 * time.Millisecond, def, time.Hour, 400 * time.Millisecond},
		{time.Second, def, 5 * time.Second, 4 * time.Second},         // a costly cycle: a fifth of a core at most
		{time.Second, def, 2 * time.Second, 2 * time.Second},         // never past the cycle interval
		{0, 50 * time.Millisecond, time.Hour, 50 * time.Millisecond}, // a MinInterval set by hand is a floor
		{20 * time.Millisecond, 50 * time.Millisecond, time.Hour, 80 * time.Millisecond},
	} {
		if got := wakeGap(tc.took, tc.minInterval, tc.interval); got != tc.want {
			t.Errorf("wakeGap(%v, %v, %v) = %v, want %v", tc.took, tc.minInterval, tc.interval, got, tc.want)
		}
	}
}

func (f *fakeState) Settings(string) (*model.VCluster, int, bool) {
	if f.snap == nil {
		return nil, 0, false
	}
	return f.snap.VCluster, len(f.snap.Pending), true
}

func TestCycleWithNothingPendingTakesNoSnapshot(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch}
	st := &countingState{fakeState: fakeState{snapshot(vc, []*model.Node{node("n1", "batch").build()})}}
	prop := &fakeProposer{}
	l := &Loop{Name: "batch", State: st, Proposer: prop, Planner: solver.Solve}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st.snapshots != 0 || len(prop.batches) != 0 {
		t.Fatalf("an idle cycle took %d snapshots and proposed %d batches", st.snapshots, len(prop.batches))
	}
}

type countingState struct {
	fakeState
	snapshots int
}

func (c *countingState) Snapshot(vc string, now time.Time) (*Snapshot, uint64, bool) {
	c.snapshots++
	return c.fakeState.Snapshot(vc, now)
}

func (f *fakeProposer) Reclaim(_ context.Context, _ string, items []ReclaimProposal) ([]Outcome, error) {
	f.reclaims = append(f.reclaims, items)
	out := make([]Outcome, len(items))
	for i, it := range items {
		r, rejected := f.reject[it.ForAlloc]
		out[i] = Outcome{AllocID: it.ForAlloc, Committed: !rejected, Reason: r, Message: "m"}
	}
	return out, f.err
}

func (f *fakeProposer) Preempt(_ context.Context, _ string, items []PreemptProposal) ([]Outcome, error) {
	f.preempts = append(f.preempts, items)
	out := make([]Outcome, len(items))
	for i, it := range items {
		r, rejected := f.reject[it.ForAlloc]
		out[i] = Outcome{AllocID: it.ForAlloc, Committed: !rejected, Reason: r, Message: "m"}
	}
	return out, f.err
}

// TestCycleFIFOExplainsStrictOrder: an interactive vCluster (fifo) starts
// nothing past a job that cannot start, and says so.
func TestCycleFIFOExplainsStrictOrder(t *testing.T) {
	vc := &model.VCluster{Name: "ia", Type: model.TypeInteractive, ReservationDepth: 1}
	big := alloc(1, "ia", model.StatePending)
	big.NodesMin, big.NodesMax = 2, 2
	big.SubmitTime, big.EligibleTime = t0.Add(-2*time.Hour), t0.Add(-2*time.Hour)
	nodes := []*model.Node{node("n1", "ia").build(), node("n2", "ia").running(9).build()}
	run := alloc(9, "ia", model.StateRunning)
	run.StartTime, run.Nodes = t0, []string{"n2"}
	s := snapshot(vc, nodes, run, big, alloc(2, "ia", model.StatePending))
	prop := &fakeProposer{}
	l := &Loop{Name: "ia", State: &fakeState{s}, Proposer: prop, Planner: solver.Solve, Clock: func() time.Time { return t0 }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.batches) != 0 {
		t.Fatalf("fifo started %+v past the blocked job", prop.batches)
	}
	if e, _ := l.Explanations.Get(2); e == nil || e.Reason != model.ReasonPriority || !strings.Contains(e.Message, "strict order") {
		t.Fatalf("job 2: %+v", e)
	}
}

func TestCycleStartsAtMostMaxStarts(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, WeightsProfile: "balanced", ReservationDepth: 1}
	var nodes []*model.Node
	var allocs []*model.Allocation
	for i := 1; i <= 5; i++ {
		nodes = append(nodes, node(fmt.Sprintf("n%d", i), "batch").build())
		allocs = append(allocs, alloc(uint64(i), "batch", model.StatePending))
	}
	for _, tc := range []struct {
		max, proposed, deferred int
		wakes                   bool
	}{
		{max: 0, proposed: 5},
		{max: 5, proposed: 5},
		{max: 2, proposed: 2, deferred: 3, wakes: true},
	} {
		prop := &fakeProposer{}
		var stats CycleStats
		l := &Loop{Name: "batch", State: &fakeState{snapshot(vc, nodes, allocs...)}, Proposer: prop, Planner: solver.Solve,
			Clock: func() time.Time { return t0 }, OnCycle: func(c CycleStats) { stats = c }, MaxStarts: tc.max}
		if err := l.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(prop.batches) != 1 || len(prop.batches[0]) != tc.proposed || stats.Proposed != tc.proposed || stats.Deferred != tc.deferred {
			t.Fatalf("max %d: batches %v, stats %+v; want %d proposed, %d deferred", tc.max, prop.batches, stats, tc.proposed, tc.deferred)
		}
		started := map[uint64]bool{}
		for _, it := range prop.batches[0] {
			started[it.AllocID] = true
		}
		waiting := 0
		for id := uint64(1); id <= 5; id++ {
			e, ok := l.Explanations.Get(id)
			if !ok {
				t.Fatalf("max %d: no explanation for %d", tc.max, id)
			}
			if started[id] {
				continue
			}
			waiting++
			if e.Reason != model.ReasonWaitingForScheduling || len(e.Nodes) != 0 || !strings.Contains(e.Message, "max-starts-per-cycle") {
				t.Fatalf("max %d: deferred %d explained as %+v", tc.max, id, e)
			}
		}
		if waiting != tc.deferred {
			t.Fatalf("max %d: %d waiting, want %d", tc.max, waiting, tc.deferred)
		}
		select {
		case <-l.wake:
			if !tc.wakes {
				t.Fatalf("max %d: the loop woke itself with nothing deferred", tc.max)
			}
		default:
			if tc.wakes {
				t.Fatalf("max %d: deferred starts but no wake for the next cycle", tc.max)
			}
		}
	}
}
