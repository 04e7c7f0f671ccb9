package vcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// reclaimSnapshot: home "batch" owns a1..a4 and has lent a3 and a4 to "ml",
// where they run ml's allocation 50 (class 10, not checkpointable). Job 1
// of batch needs 4 nodes.
func reclaimSnapshot() *Snapshot {
	batch := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, AllowLending: true, ReservationDepth: 1}
	ml := &model.VCluster{Name: "ml", Type: model.TypeMLTraining, AllowBorrowing: true}
	nodes := []*model.Node{
		node("a1", "batch").build(), node("a2", "batch").build(),
		node("a3", "batch").current("ml").running(50).build(), node("a4", "batch").current("ml").running(50).build(),
		node("m1", "ml").running(50).build(),
	}
	borrower := alloc(50, "ml", model.StateRunning)
	borrower.PriorityClass, borrower.StartTime, borrower.Nodes = 10, t0.Add(-time.Hour), []string{"a3", "a4", "m1"}
	job := alloc(1, "batch", model.StatePending)
	job.NodesMin, job.NodesMax = 4, 4
	s := snapshot(batch, nodes, borrower, job)
	s.VClusters = map[string]*model.VCluster{"batch": batch, "ml": ml}
	return s
}

func TestPlanReclaims(t *testing.T) {
	small := func(s *Snapshot) *model.Allocation {
		a := alloc(2, "batch", model.StatePending)
		a.SubmitTime = t0.Add(-time.Minute)
		a.EligibleTime = a.SubmitTime
		s.Pending = append(s.Pending, a)
		return a
	}
	tests := []struct {
		name   string
		change func(s *Snapshot)
		want   []ReclaimProposal
	}{
		{"the lent nodes its job needs, whatever the borrower's class", func(*Snapshot) {},
			[]ReclaimProposal{{ForAlloc: 1, Nodes: []string{"a3", "a4"}, Reserve: []string{"a1", "a2", "a3", "a4"}}}},
		{"only the lent nodes not already being returned", func(s *Snapshot) {
			s.Nodes[2].ReturnRequested = true
		}, []ReclaimProposal{{ForAlloc: 1, Nodes: []string{"a4"}, Reserve: []string{"a1", "a2", "a3", "a4"}}}},
		{"none when all are being returned", func(s *Snapshot) {
			s.Nodes[2].ReturnRequested, s.Nodes[3].ReturnRequested = true, true
		}, nil},
		{"none while nodes are held for the job", func(s *Snapshot) {
			s.Nodes[0].ReservedFor, s.Nodes[0].ReservedUntil = 1, t0.Add(time.Minute)
		}, nil},
		{"only what the job needs", func(s *Snapshot) {
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 3, 3
		}, []ReclaimProposal{{ForAlloc: 1, Nodes: []string{"a3"}, Reserve: []string{"a1", "a2", "a3"}}}},
		{"none for a job its own nodes hold", func(s *Snapshot) {
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 2, 2
		}, nil},
		{"none when the plan expects it within the horizon", func(s *Snapshot) {
			// a1 and a2 run batch work ending in a minute; the job needs 2.
			run := alloc(60, "batch", model.StateRunning)
			run.StartTime, run.Walltime, run.Nodes = t0.Add(-time.Hour), time.Hour+time.Minute, []string{"a1", "a2"}
			s.Nodes[0].Allocation, s.Nodes[1].Allocation = 60, 60
			s.Allocations[60] = run
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 2, 2
		}, nil},
		{"but when the horizon is shorter", func(s *Snapshot) {
			run := alloc(60, "batch", model.StateRunning)
			run.StartTime, run.Walltime, run.Nodes = t0.Add(-time.Hour), time.Hour+time.Minute, []string{"a1", "a2"}
			s.Nodes[0].Allocation, s.Nodes[1].Allocation = 60, 60
			s.Allocations[60] = run
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 2, 2
			s.VCluster.PreemptHorizon = 30 * time.Second
		}, []ReclaimProposal{{ForAlloc: 1, Nodes: []string{"a3", "a4"}, Reserve: []string{"a3", "a4"}}}},
		{"a job the real plan starts needs nothing", func(s *Snapshot) {
			s.Pending = s.Pending[:0]
			small(s)
		}, nil},
		{"by the plan's order: the oldest job first", func(s *Snapshot) {
			small(s) // fits a1 now in the real plan; in the what-if job 1 takes all
		}, []ReclaimProposal{{ForAlloc: 1, Nodes: []string{"a3", "a4"}, Reserve: []string{"a1", "a2", "a3", "a4"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := reclaimSnapshot()
			tc.change(s)
			in := BuildInput(s)
			real := solver.Solve(&in)
			got := PlanReclaims(s, real, solver.Solve)
			if !equalReclaims(got, tc.want) {
				t.Fatalf("reclaims %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalReclaims(a, b []ReclaimProposal) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ForAlloc != b[i].ForAlloc || !slices.Equal(a[i].Nodes, b[i].Nodes) ||
			!slices.Equal(slices.Sorted(slices.Values(a[i].Reserve)), b[i].Reserve) {
			return false
		}
	}
	return true
}

// TestCycleReclaims: the loop proposes the reclaim with the snapshot's
// version, explains it, and drops a start on nodes the reclaim holds for
// the older job; a refused reclaim is explained and planned again.
func TestCycleReclaims(t *testing.T) {
	s := reclaimSnapshot()
	a := alloc(2, "batch", model.StatePending)
	a.SubmitTime = t0.Add(-time.Minute)
	a.EligibleTime = a.SubmitTime
	s.Pending = append(s.Pending, a)
	prop := &fakeProposer{}
	var stats CycleStats
	l := &Loop{Name: "batch", State: &fakeState{s}, Proposer: prop, Planner: solver.Solve, Clock: func() time.Time { return t0 },
		OnCycle: func(c CycleStats) { stats = c }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.reclaims) != 1 || len(prop.reclaims[0]) != 1 {
		t.Fatalf("reclaims %+v, want one", prop.reclaims)
	}
	r := prop.reclaims[0][0]
	if r.ForAlloc != 1 || r.Version != 42 || !slices.Equal(r.Nodes, []string{"a3", "a4"}) {
		t.Fatalf("reclaim %+v", r)
	}
	if len(prop.batches) != 0 {
		t.Fatalf("assignments %+v: job 2's start takes a node held for job 1", prop.batches)
	}
	if e, _ := l.Explanations.Get(1); e == nil || !strings.Contains(e.Message, "reclaiming 2 lent node(s) from ml") {
		t.Fatalf("job 1's explanation %+v", e)
	}
	if e, _ := l.Explanations.Get(2); e == nil || e.Reason != model.ReasonPriority || !strings.Contains(e.Message, "held for allocation 1") {
		t.Fatalf("job 2's explanation %+v", e)
	}
	if stats.Reclaims != 1 {
		t.Fatalf("stats %+v", stats)
	}
	// Refused: explained, and proposed again next cycle.
	prop.reject = map[uint64]string{1: model.ReasonResources}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, _ := l.Explanations.Get(1); e == nil || !strings.Contains(e.Message, "refused") || stats.ProposalsRejected != 1 {
		t.Fatalf("refused reclaim: explanation %+v, stats %+v", e, stats)
	}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.reclaims) != 3 {
		t.Fatalf("%d reclaim proposals over three cycles, want 3", len(prop.reclaims))
	}
	// Once the nodes are held for it, the job waits and says why.
	for _, n := range s.Nodes[:2] {
		n.ReservedFor, n.ReservedUntil = 1, t0.Add(time.Minute)
	}
	prop.reclaims = nil
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.reclaims) != 0 {
		t.Fatalf("reclaimed again while in progress: %+v", prop.reclaims)
	}
	if e, _ := l.Explanations.Get(1); e == nil || !strings.Contains(e.Message, "held for it") {
		t.Fatalf("job 1 waiting for its nodes: %+v", e)
	}
}
