package vcluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

func TestBoard(t *testing.T) {
	var b Board
	if l := b.Limits(); len(l) != 0 {
		t.Fatalf("empty board: %v", l)
	}
	b.Publish("ml", map[string]time.Time{"m1": t0})
	b.Publish("hpc", map[string]time.Time{"h1": t0.Add(time.Hour)})
	if got, ok := b.Limit("ml", "m1"); !ok || !got.Equal(t0) {
		t.Fatalf("ml/m1 = %v %v", got, ok)
	}
	snap := b.Limits()
	b.Publish("ml", nil) // withdrawn
	if _, ok := b.Limit("ml", "m1"); ok {
		t.Fatal("a withdrawn plan still limits")
	}
	if _, ok := snap["ml"]["m1"]; !ok || len(b.Limits()) != 1 {
		t.Fatalf("a copy taken before is not kept: %v, now %v", snap, b.Limits())
	}
	// Concurrent loops publish and read (go test -race).
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("vc", i%3)
			for k := range 200 {
				b.Publish(name, map[string]time.Time{fmt.Sprint("n", k): t0})
				for _, m := range b.Limits() {
					_ = len(m)
				}
				b.Limit("vc0", "n1")
			}
		}()
	}
	wg.Wait()
}

// TestLenderReservationsLimitBorrowing: the lender's loop publishes its
// plan's reservations; a borrower's loop then borrows a reserved idle node
// only for work that ends before the lender needs it.
func TestLenderReservationsLimitBorrowing(t *testing.T) {
	ml := &model.VCluster{Name: "ml", Type: model.TypeMLTraining, AllowLending: true, ReservationDepth: 1}
	batch := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, AllowBorrowing: true, ReservationDepth: 1}
	// ml: m1 m2 idle, m3 m4 busy for an hour; its job needs 3 nodes: it
	// reserves m3, m4 and one idle node from +1h.
	nodes := []*model.Node{
		node("m1", "ml").build(), node("m2", "ml").build(),
		node("m3", "ml").running(50).build(), node("m4", "ml").running(50).build(),
	}
	run := alloc(50, "ml", model.StateRunning)
	run.StartTime, run.Walltime, run.Nodes = t0.Add(-time.Hour), 2*time.Hour, []string{"m3", "m4"}
	head := alloc(1, "ml", model.StatePending)
	head.NodesMin, head.NodesMax = 3, 3
	vcs := map[string]*model.VCluster{"ml": ml, "batch": batch}
	mlSnap := snapshot(ml, nodes, run, head)
	mlSnap.VClusters = vcs

	var board Board
	lender := &Loop{Name: "ml", State: &fakeState{mlSnap}, Proposer: &fakeProposer{}, Planner: solver.Solve,
		Clock: func() time.Time { return t0 }, Board: &board}
	if err := lender.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	limits := board.Limits()["ml"]
	if len(limits) != 3 || !limits["m3"].Equal(t0.Add(time.Hour)) {
		t.Fatalf("published %v, want three nodes from +1h", limits)
	}
	reservedIdle := "m1"
	if _, ok := limits["m2"]; ok {
		reservedIdle = "m2"
	}

	for _, tc := range []struct {
		wall time.Duration
		want []string // borrowed
	}{
		{30 * time.Minute, []string{"m1", "m2"}}, // ends before ml needs its node
		{2 * time.Hour, nil},                     // would hold it past then: only one node left
	} {
		job := alloc(7, "batch", model.StatePending)
		job.NodesMin, job.NodesMax, job.Walltime = 2, 2, tc.wall
		bs := snapshot(batch, nodes, run, job)
		bs.VClusters = vcs
		prop := &fakeProposer{}
		borrower := &Loop{Name: "batch", State: &fakeState{bs}, Proposer: prop, Planner: solver.Solve,
			Clock: func() time.Time { return t0 }, Board: &board}
		if err := borrower.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		if len(prop.batches) == 1 {
			got = prop.batches[0][0].Nodes
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("walltime %v: borrowed %v, want %v (ml reserves %s)", tc.wall, got, tc.want, reservedIdle)
		}
	}
	// Without the board, the long job borrows the reserved node too.
	job := alloc(7, "batch", model.StatePending)
	job.NodesMin, job.NodesMax, job.Walltime = 2, 2, 2*time.Hour
	bs := snapshot(batch, nodes, run, job)
	bs.VClusters = vcs
	prop := &fakeProposer{}
	l := &Loop{Name: "batch", State: &fakeState{bs}, Proposer: prop, Planner: solver.Solve, Clock: func() time.Time { return t0 }}
	if err := l.Cycle(context.Background()); err != nil || len(prop.batches) != 1 {
		t.Fatalf("without a board: %v %+v", err, prop.batches)
	}
	// A lender with nothing pending withdraws its plan.
	mlSnap.Pending = nil
	if err := lender.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(board.Limits()) != 0 {
		t.Fatalf("an idle lender still publishes %v", board.Limits())
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPanicInOneLoop: a planner that panics in one loop is recovered,
// counted, logged with its stack and reported; that loop keeps cycling,
// and so does another loop next to it.
func TestPanicInOneLoop(t *testing.T) {
	settings := func(name string) *Snapshot {
		vc := &model.VCluster{Name: name, Type: model.TypeHPCBatch, CycleInterval: 5 * time.Millisecond, MinInterval: time.Millisecond}
		return snapshot(vc, []*model.Node{node(name+"1", name).build()}, alloc(1, name, model.StatePending))
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var reported atomic.Int64
	var badCycles, goodCycles atomic.Int64
	bad := &Loop{Name: "bad", State: &fakeState{settings("bad")}, Proposer: &lockedProposer{}, Log: log,
		Planner: func(*solver.Input) *solver.Plan {
			badCycles.Add(1)
			panic("solver bug")
		},
		OnPanic: func(vc string, v any) {
			if vc == "bad" && fmt.Sprint(v) == "solver bug" {
				reported.Add(1)
			}
		}}
	good := &Loop{Name: "good", State: &fakeState{settings("good")}, Proposer: &lockedProposer{}, Log: log, Planner: solver.Solve,
		OnCycle: func(CycleStats) { goodCycles.Add(1) }}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range []*Loop{bad, good} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Run(ctx)
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for (bad.Panics.Load() < 3 || goodCycles.Load() < 3) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if bad.Panics.Load() < 3 || goodCycles.Load() < 3 || badCycles.Load() < 3 {
		t.Fatalf("panics %d, bad cycles %d, good cycles %d: want both loops to keep cycling",
			bad.Panics.Load(), badCycles.Load(), goodCycles.Load())
	}
	if reported.Load() != bad.Panics.Load() || good.Panics.Load() != 0 {
		t.Fatalf("reported %d of %d panics; the good loop counts %d", reported.Load(), bad.Panics.Load(), good.Panics.Load())
	}
	if out := logs.String(); !strings.Contains(out, "scheduling cycle panicked") || !strings.Contains(out, "goroutine") || !strings.Contains(out, "vcluster=bad") {
		t.Fatalf("panic not logged with its stack: %.300s", out)
	}
}

// lockedProposer accepts everything; safe for concurrent loops.
type lockedProposer struct{ mu sync.Mutex }

func (p *lockedProposer) AssignBatch(_ context.Context, _ string, items []Assignment) ([]Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Outcome, len(items))
	for i, it := range items {
		out[i] = Outcome{AllocID: it.AllocID, Committed: true}
	}
	return out, nil
}

func (p *lockedProposer) Reclaim(context.Context, string, []ReclaimProposal) ([]Outcome, error) {
	return nil, nil
}

func (p *lockedProposer) Preempt(context.Context, string, []PreemptProposal) ([]Outcome, error) {
	return nil, nil
}
