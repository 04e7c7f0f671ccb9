package vcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// scaleMix is `latticed bench scale`'s default job mix (scale/load.go,
// cmd/latticed/bench.go): nodes per job, and (virtual) runtimes in seconds
// whose walltime is twice that, at least a minute; 5 % of the submissions
// are arrays of 100 one-node tasks; priority classes 0–5; three tenants.
var (
	scaleSizes    = []int{1, 2, 4, 8, 32, 128}
	scaleSizeW    = []float64{60, 15, 10, 8, 5, 2}
	scaleRuntimes = []float64{30, 120, 600}
	scaleRunW     = []float64{30, 40, 30}
	scaleTenants  = []string{"default", "physics", "bio"}
)

func pickWeighted[T any](r *rand.Rand, vals []T, w []float64) T {
	t := r.Float64() * 100
	for i, x := range w {
		if t < x {
			return vals[i]
		}
		t -= x
	}
	return vals[len(vals)-1]
}

// scaleState is the leader's state during `latticed bench scale` as the
// hpc-batch loop sees it, one cycle after another: 10,000 nodes in dragonfly
// groups of 16, 7,000 homed in hpc-batch and 3,000 in ml-training, hpc-batch's
// busy with the scale mix (2 % idle), 120 of its nodes lent to ml-training's
// checkpointable work, ~70,000 pending allocations of the scale mix, three
// tenants with fair-share targets and usage, and a window of 5,000 completed
// runs for the predictor. Between cycles (as at 200 submissions/s with a
// cycle every 0.5 s) the clock moves 0.5 s, the allocations the last cycle
// started leave the pending list, and new submissions bring it back to its
// size; one pending allocation in a hundred is replaced by a changed copy (a
// hold, a priority change), as the quorum stores a change.
type scaleState struct {
	snap    *Snapshot
	done    []*model.Allocation
	r       *rand.Rand
	nextID  uint64
	want    int
	started map[uint64]bool
	churn   int
}

func newScaleState(pending int) *scaleState {
	st := &scaleState{r: rand.New(rand.NewPCG(14, 100)), started: map[uint64]bool{}, want: pending, nextID: 1}
	hpc := &model.VCluster{Name: "hpc-batch", Type: model.TypeHPCBatch, WeightsProfile: "hpc-batch",
		ReservationDepth: model.DefaultReservationDepth, CycleInterval: time.Hour, AllowLending: true, AllowBorrowing: true,
		Preemption: true, CheckpointableOnlyOnBorrowed: true, MaxLendFraction: 1}
	hpc.Weights, _ = solver.Profile("hpc-batch")
	ml := &model.VCluster{Name: "ml-training", Type: model.TypeMLTraining, WeightsProfile: "ml-training",
		ReservationDepth: model.DefaultReservationDepth, AllowLending: true, AllowBorrowing: true,
		Preemption: true, CheckpointableOnlyOnBorrowed: true, MaxLendFraction: 1}
	ml.Weights, _ = solver.Profile("ml-training")
	s := &Snapshot{Now: t0, VCluster: hpc, VClusters: map[string]*model.VCluster{hpc.Name: hpc, ml.Name: ml},
		Lenders: map[string]bool{hpc.Name: true, ml.Name: true}, Allocations: map[uint64]*model.Allocation{},
		Tenants: map[string]*model.Tenant{}, TenantLoad: map[string]TenantLoad{}, Groups: 10000 / 16,
		PowerHeadroomWatts: -1, EnergyPrice: -1}
	st.snap = s
	for k, name := range scaleTenants {
		s.Tenants[name] = &model.Tenant{Name: name, FairShareTarget: []float64{0.5, 0.3, 0.2}[k],
			Usage: float64(k+1) * 3e6, UsageTime: t0.Add(-time.Hour)}
	}
	r := st.r
	for i := 0; i < 10000; {
		home := "hpc-batch"
		if i >= 7000 {
			home = "ml-training"
		}
		n := node(fmt.Sprintf("n%05d", i), home).build()
		n.Group = i / 16
		s.Nodes = append(s.Nodes, n)
		i++
		if home != "hpc-batch" || r.Float64() < 0.02 {
			continue
		}
		if i%50 == 0 && i <= 6000 { // 120 lent to ml-training's checkpointable work
			a := st.request("ml-training")
			a.Checkpoint = model.CheckpointSignal
			a.NodesMin, a.NodesMax = 1, 1
			a.State, a.StartTime, a.Nodes = model.StateRunning, t0.Add(-time.Minute), []string{n.Name}
			n.CurrentVCluster, n.Allocation = "ml-training", a.ID
			s.Allocations[a.ID] = a
			continue
		}
		a := st.request("hpc-batch")
		a.State, a.StartTime = model.StateRunning, t0.Add(-time.Duration(r.Float64()*float64(a.Walltime)/2))
		a.Nodes = []string{n.Name}
		n.Allocation = a.ID
		for k := 1; k < a.NodesMin && i < 7000; k++ {
			m := node(fmt.Sprintf("n%05d", i), home).build()
			m.Group, m.Allocation = i/16, a.ID
			s.Nodes = append(s.Nodes, m)
			a.Nodes = append(a.Nodes, m.Name)
			i++
		}
		a.NodesMin, a.NodesMax = len(a.Nodes), len(a.Nodes)
		s.Allocations[a.ID] = a
	}
	for k := range 5000 {
		a := st.request("hpc-batch")
		a.State, a.StartTime = model.StateCompleted, t0.Add(-time.Duration(5000-k)*time.Second)
		a.EndTime = a.StartTime.Add(a.Walltime / 2)
		st.done = append(st.done, a)
	}
	st.submit()
	return st
}

// request draws one allocation of the scale mix (pending, submitted a
// while ago); an array's tasks are drawn by submit().
func (st *scaleState) request(vc string) *model.Allocation {
	r := st.r
	size := pickWeighted(r, scaleSizes, scaleSizeW)
	run := pickWeighted(r, scaleRuntimes, scaleRunW)
	sub := st.snap.Now.Add(-time.Duration(r.Float64() * float64(10*time.Minute)))
	a := &model.Allocation{ID: st.nextID, State: model.StatePending, SubmitTime: sub, EligibleTime: sub,
		Request: model.Request{Name: "bench", User: "bench", VCluster: vc, Tenant: scaleTenants[r.IntN(len(scaleTenants))],
			NodesMin: size, NodesMax: size, Walltime: max(time.Minute, time.Duration(2*run)*time.Second),
			PriorityClass: r.IntN(6), Checkpoint: model.CheckpointNone}}
	st.nextID++
	return a
}

// submit brings the pending list back to its size with new submissions of
// the mix (5 % arrays of 100 one-node tasks).
func (st *scaleState) submit() {
	s := st.snap
	for len(s.Pending) < st.want {
		a := st.request("hpc-batch")
		if st.r.Float64() >= 0.05 {
			s.Pending = append(s.Pending, a)
			continue
		}
		a.NodesMin, a.NodesMax = 1, 1
		for k := 0; k < 100 && len(s.Pending) < st.want; k++ {
			t := *a
			t.ID = st.nextID - 1 + uint64(k)
			s.Pending = append(s.Pending, &t)
		}
		st.nextID += 99
	}
}

// next moves the state on by one cycle.
func (st *scaleState) next() {
	s := st.snap
	s.Now = s.Now.Add(500 * time.Millisecond)
	s.Pending = slices.DeleteFunc(s.Pending, func(a *model.Allocation) bool { return st.started[a.ID] })
	clear(st.started)
	st.churn++
	for k := st.churn % 100; k < len(s.Pending); k += 100 {
		c := *s.Pending[k]
		s.Pending[k] = &c
	}
	st.submit()
}

func (st *scaleState) Snapshot(string, time.Time) (*Snapshot, uint64, bool) { return st.snap, 7, true }
func (st *scaleState) Settings(string) (*model.VCluster, int, bool) {
	return st.snap.VCluster, len(st.snap.Pending), true
}
func (st *scaleState) Completed(string) []*model.Allocation { return st.done }

func (st *scaleState) AssignBatch(_ context.Context, _ string, items []Assignment) ([]Outcome, error) {
	out := make([]Outcome, len(items))
	for i, it := range items {
		st.started[it.AllocID] = true
		out[i] = Outcome{AllocID: it.AllocID, Committed: true}
	}
	return out, nil
}
func (st *scaleState) Reclaim(_ context.Context, _ string, ps []ReclaimProposal) ([]Outcome, error) {
	out := make([]Outcome, len(ps))
	for i, p := range ps {
		out[i] = Outcome{AllocID: p.ForAlloc, Committed: true}
	}
	return out, nil
}
func (st *scaleState) Preempt(_ context.Context, _ string, ps []PreemptProposal) ([]Outcome, error) {
	out := make([]Outcome, len(ps))
	for i, p := range ps {
		out[i] = Outcome{AllocID: p.ForAlloc, Committed: true}
	}
	return out, nil
}

// scaleLoop is the leader's hpc-batch loop over a scaleState.
func scaleLoop(st *scaleState) *Loop {
	return &Loop{Name: "hpc-batch", State: st, Proposer: st, ImmutableState: true,
		Clock: func() time.Time { return st.snap.Now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// BenchmarkCycleScaleHPCBatch is the hpc-batch cycle of `latticed bench
// scale` without Raft, end to end as the leader runs it cycle after cycle
// (Loop.Cycle: snapshot handed over, input built with the loop's Builder,
// solve with a reused Solver, reclaim and preemption planning, the batch
// proposed): 10,000 nodes, ~70,000 pending of the scale mix, the state
// moving on between cycles as in a scale run (see scaleState).
//
//	go test -run '^$' -bench CycleScaleHPCBatch -count 6 ./vcluster/
func BenchmarkCycleScaleHPCBatch(b *testing.B) {
	st := newScaleState(70000)
	l := scaleLoop(st)
	ctx := context.Background()
	for range 3 { // warm: the builder's and the solver's memory
		if err := l.Cycle(ctx); err != nil {
			b.Fatal(err)
		}
		st.next()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := l.Cycle(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st.next()
		b.StartTimer()
	}
}
