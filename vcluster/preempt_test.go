package vcluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// preemptSnapshot: vCluster "batch" with preemption on, mode requeue; a1 a2 run
// allocation 10 (class 1, cannot checkpoint, 2 h in: 240 node-minutes),
// a3 runs 11 (class 2, checkpoints in 3 min: 3), a4 runs 12 (class 10).
// Job 1 (class 5) waits.
func preemptSnapshot() *Snapshot {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1, Preemption: true, PreemptMode: model.PreemptRequeue}
	nodes := []*model.Node{
		node("a1", "batch").running(10).build(), node("a2", "batch").running(10).build(),
		node("a3", "batch").running(11).build(), node("a4", "batch").running(12).build(),
	}
	run := func(id uint64, class int, ck model.CheckpointMode, mins float64, names ...string) *model.Allocation {
		a := alloc(id, "batch", model.StateRunning)
		a.PriorityClass, a.Checkpoint, a.CheckpointMinutes = class, ck, mins
		a.StartTime, a.Walltime, a.Nodes = t0.Add(-2*time.Hour), 24*time.Hour, names
		return a
	}
	job := alloc(1, "batch", model.StatePending)
	job.PriorityClass = 5
	return snapshot(vc, nodes,
		run(10, 1, model.CheckpointNone, 0, "a1", "a2"),
		run(11, 2, model.CheckpointSignal, 3, "a3"),
		run(12, 10, model.CheckpointSignal, 1, "a4"),
		job)
}

func TestPlanPreemptions(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *Snapshot)
		want   []PreemptProposal
	}{
		{"the cheapest victim", func(*Snapshot) {},
			[]PreemptProposal{{ForAlloc: 1, Victims: []uint64{11}, Actions: []model.PreemptAction{"checkpoint"}, Reserve: []string{"a3"}}}},
		{"the cheapest set that holds the job, and no more", func(s *Snapshot) {
			// 11 (3) and 10 (240) hold 3 nodes; 10 alone holds 2.
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 2, 2
		}, []PreemptProposal{{ForAlloc: 1, Victims: []uint64{10}, Actions: []model.PreemptAction{"requeue"}, Reserve: []string{"a1", "a2"}}}},
		{"with an idle node, fewer victims", func(s *Snapshot) {
			s.Nodes = append(s.Nodes, node("a5", "batch").build())
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 2, 2
		}, []PreemptProposal{{ForAlloc: 1, Victims: []uint64{11}, Actions: []model.PreemptAction{"checkpoint"}, Reserve: []string{"a3", "a5"}}}},
		{"never class 10", func(s *Snapshot) {
			s.Pending[0].PriorityClass = 10
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 4, 4
		}, nil},
		{"only strictly lower classes", func(s *Snapshot) {
			s.Pending[0].PriorityClass = 1
		}, nil},
		{"a class-2 job may preempt class 1 only", func(s *Snapshot) {
			s.Pending[0].PriorityClass = 2
		}, []PreemptProposal{{ForAlloc: 1, Victims: []uint64{10}, Actions: []model.PreemptAction{"requeue"}, Reserve: []string{"a1"}}}},
		{"constraints: only nodes that fit", func(s *Snapshot) {
			s.Nodes[1].Features = []string{"big"}
			s.Pending[0].Constraints = []string{"big"}
		}, []PreemptProposal{{ForAlloc: 1, Victims: []uint64{10}, Actions: []model.PreemptAction{"requeue"}, Reserve: []string{"a2"}}}},
		{"no preemption when the vCluster does not preempt", func(s *Snapshot) {
			s.VCluster.Preemption = false
		}, nil},
		{"none when the job starts within the horizon anyway", func(s *Snapshot) {
			s.Allocations[11].Walltime = 2*time.Hour + time.Minute
		}, nil},
		{"none while nodes are held for it", func(s *Snapshot) {
			s.Nodes[0].ReservedFor, s.Nodes[0].ReservedUntil = 1, t0.Add(time.Minute)
		}, nil},
		{"a victim whose work is already checkpointing is not one", func(s *Snapshot) {
			s.Allocations[11].State = model.StateCheckpointing
		}, []PreemptProposal{{ForAlloc: 1, Victims: []uint64{10}, Actions: []model.PreemptAction{"requeue"}, Reserve: []string{"a1"}}}},
		{"the price comes from VictimCost", nil,
			[]PreemptProposal{{ForAlloc: 1, Victims: []uint64{10}, Actions: []model.PreemptAction{"requeue"}, Reserve: []string{"a1"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := preemptSnapshot()
			cost := VictimCost(nil)
			if tc.change != nil {
				tc.change(s)
			} else {
				cost = func(a *model.Allocation, _ time.Time) float64 { return float64(a.ID) } // 10 is the cheapest
			}
			in := BuildInput(s)
			real := solver.Solve(&in)
			got := PlanPreemptions(s, real, solver.Solve, cost, nil)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("preemptions %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDefaultVictimCost(t *testing.T) {
	a := alloc(1, "batch", model.StateRunning)
	a.Nodes, a.StartTime = []string{"a", "b"}, t0.Add(-90*time.Minute)
	if got := DefaultVictimCost(a, t0); got != 180 {
		t.Errorf("not checkpointable: %v node-minutes, want 180 (the work lost)", got)
	}
	a.Checkpoint = model.CheckpointHook
	if got := DefaultVictimCost(a, t0); got != 2*DefaultCheckpointMinutes {
		t.Errorf("checkpointable, time unknown: %v, want %v", got, 2*DefaultCheckpointMinutes)
	}
	a.CheckpointMinutes = 0.5
	if got := DefaultVictimCost(a, t0); got != 1 {
		t.Errorf("checkpointable in 30 s: %v, want 1", got)
	}
}

// TestCyclePreempts: the loop proposes the preemption with the snapshot's
// version and explains it.
func TestCyclePreempts(t *testing.T) {
	s := preemptSnapshot()
	prop := &fakeProposer{}
	l := &Loop{Name: "batch", State: &fakeState{s}, Proposer: prop, Planner: solver.Solve, Clock: func() time.Time { return t0 }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.preempts) != 1 || fmt.Sprint(prop.preempts[0]) != fmt.Sprint([]PreemptProposal{{ForAlloc: 1, Victims: []uint64{11}, Actions: []model.PreemptAction{"checkpoint"}, Reserve: []string{"a3"}, Version: 42}}) {
		t.Fatalf("preemptions %+v", prop.preempts)
	}
	if e, _ := l.Explanations.Get(1); e == nil || !strings.Contains(e.Message, "preempting allocation 11 (class 2, checkpointed and requeued)") {
		t.Fatalf("explanation %+v", e)
	}
	// A VictimCost plugged into the loop is used.
	l.VictimCost = func(a *model.Allocation, _ time.Time) float64 { return float64(a.ID) }
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := prop.preempts[1][0].Victims; !slices.Equal(got, []uint64{10}) {
		t.Fatalf("victims %v with the loop's VictimCost, want [10]", got)
	}
}

// randomPreemptSnapshot draws a vCluster with preemption on: nodes in a few
// dragonfly groups and conformance groups, with features, some drained;
// running allocations of every class (some checkpointing, some borrowed
// nodes, some of another vCluster); idle nodes, held nodes; pending jobs
// of every class, size and constraint.
func randomPreemptSnapshot(r *rand.Rand) *Snapshot {
	vc := &model.VCluster{Name: "v", Type: model.TypeHPCBatch, ReservationDepth: []int{0, 1, 3}[r.IntN(3)], Preemption: true,
		PreemptHorizon: time.Duration(r.IntN(3)) * 10 * time.Minute}
	if r.IntN(4) == 0 {
		vc.Algorithm = []model.Algorithm{model.AlgorithmFIFO, model.AlgorithmBinpack}[r.IntN(2)]
	}
	s := snapshot(vc, nil)
	s.Groups = 1 + r.IntN(3)
	id := uint64(100)
	var cur *model.Allocation
	for i := range 8 + r.IntN(30) {
		n := node(fmt.Sprintf("n%02d", i), "v").build()
		n.Group, n.Fingerprint = i%s.Groups, fmt.Sprint("fp", r.IntN(2))
		if r.IntN(3) == 0 {
			n.Features = []string{"big"}
		}
		if r.IntN(12) == 0 {
			n.State = model.NodeDrained
		}
		if r.IntN(10) == 0 {
			n.HomeVCluster = "other" // borrowed: goes home when free
		}
		switch u := r.IntN(10); {
		case u < 2: // idle
			if r.IntN(6) == 0 {
				n.ReservedFor, n.ReservedUntil = uint64(1+r.IntN(12)), t0.Add(time.Minute)
			}
		case u < 5 && cur != nil:
			n.Allocation = cur.ID
			cur.Nodes = append(cur.Nodes, n.Name)
		default:
			cur = alloc(id, "v", model.StateRunning)
			id++
			cur.PriorityClass = r.IntN(11)
			cur.StartTime = t0.Add(-time.Duration(r.IntN(300)) * time.Minute)
			cur.Walltime = time.Duration(1+r.IntN(24)) * time.Hour
			if r.IntN(2) == 0 {
				cur.Checkpoint, cur.CheckpointMinutes = model.CheckpointSignal, float64(r.IntN(10))
			}
			switch r.IntN(10) {
			case 0:
				cur.State = model.StateCheckpointing
			case 1:
				cur.VCluster = "other"
			}
			s.Allocations[cur.ID] = cur
			n.Allocation = cur.ID
			cur.Nodes = append(cur.Nodes, n.Name)
		}
		s.Nodes = append(s.Nodes, n)
	}
	for j := range 1 + r.IntN(10) {
		a := alloc(uint64(1+j), "v", model.StatePending)
		a.PriorityClass = r.IntN(11)
		a.NodesMin = 1 + r.IntN(8)
		a.NodesMax = a.NodesMin + r.IntN(2)
		a.Walltime = time.Duration(1+r.IntN(10)) * time.Hour
		a.SubmitTime = t0.Add(-time.Duration(r.IntN(600)) * time.Minute)
		a.EligibleTime = a.SubmitTime
		if r.IntN(4) == 0 {
			a.Constraints = []string{"big"}
		}
		s.Pending = append(s.Pending, a)
	}
	return s
}

// TestPropertyPreemption: over random clusters, every proposal takes only
// running allocations of the vCluster of a strictly lower class, never
// class 10; only for a job the real plan does not expect to start within
// the horizon; the victims suffice (the what-if starts the job on Reserve)
// and are minimal (without any one of them it does not start).
func TestPropertyPreemption(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	proposals, victims := 0, 0
	for i := range 600 {
		s := randomPreemptSnapshot(r)
		in := BuildInput(s)
		real := solver.Solve(&in)
		got := PlanPreemptions(s, real, solver.Solve, nil, nil)
		if len(got) > MaxPreemptionsPerCycle {
			t.Fatalf("snapshot %d: %d proposals", i, len(got))
		}
		expl := map[uint64]solver.Explanation{}
		for _, ex := range real.Explanations {
			expl[ex.JobID] = ex
		}
		// The what-ifs see what the loop sees: the real starts, then each
		// earlier proposal's Reserve, busy.
		pm := &preemption{snap: s, plan: solver.Solve, busy: map[string]bool{}, used: map[uint64]bool{}}
		for _, st := range real.Starts {
			for _, n := range st.Nodes {
				pm.busy[n] = true
			}
		}
		pm.findVictims(DefaultVictimCost)
		seen := map[uint64]bool{}
		for _, p := range got {
			proposals++
			var job *model.Allocation
			for _, a := range s.Pending {
				if a.ID == p.ForAlloc {
					job = a
				}
			}
			ex := expl[p.ForAlloc]
			if job == nil || ex.Reason != model.ReasonResources && ex.Reason != model.ReasonPriority {
				t.Fatalf("snapshot %d: proposal for %d, which does not wait for nodes (%q)", i, p.ForAlloc, ex.Reason)
			}
			if !ex.ExpectedStart.IsZero() && !ex.ExpectedStart.After(t0.Add(s.VCluster.Horizon())) {
				t.Fatalf("snapshot %d: job %d preempts though it starts at %v, within the horizon", i, p.ForAlloc, ex.ExpectedStart.Sub(t0))
			}
			var set []*victim
			for _, id := range p.Victims {
				a := s.Allocations[id]
				switch {
				case a == nil || a.VCluster != "v" || a.State != model.StateRunning:
					t.Fatalf("snapshot %d: victim %d is not a running allocation of the vCluster", i, id)
				case a.PriorityClass >= model.MaxPriorityClass:
					t.Fatalf("snapshot %d: class-10 victim %d", i, id)
				case a.PriorityClass >= job.PriorityClass:
					t.Fatalf("snapshot %d: victim %d (class %d) not below job %d (class %d)", i, id, a.PriorityClass, job.ID, job.PriorityClass)
				case seen[id]:
					t.Fatalf("snapshot %d: victim %d chosen twice", i, id)
				}
				seen[id] = true
				for _, v := range pm.victims {
					if v.a.ID == id {
						set = append(set, v)
					}
				}
			}
			victims += len(set)
			st := pm.whatIf(job, set)
			if st == nil || !slices.Equal(slices.Sorted(slices.Values(st.Nodes)), p.Reserve) {
				t.Fatalf("snapshot %d: job %d with victims %v: what-if start %+v, want Reserve %v", i, job.ID, p.Victims, st, p.Reserve)
			}
			for k := range set {
				rest := slices.Delete(slices.Clone(set), k, k+1)
				if st := pm.whatIf(job, rest); st != nil {
					t.Fatalf("snapshot %d: job %d starts without victim %d: not minimal", i, job.ID, set[k].a.ID)
				}
			}
			for _, n := range p.Reserve {
				pm.busy[n] = true
			}
		}
	}
	if proposals < 100 || victims < proposals {
		t.Fatalf("only %d proposals with %d victims: the property is barely exercised", proposals, victims)
	}
	t.Logf("%d proposals, %d victims", proposals, victims)
}
