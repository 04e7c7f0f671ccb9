package vcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// modeSnapshot: preemptSnapshot where job 1 needs two nodes, which only
// allocation 10 (class 1, cannot checkpoint, on a1 a2) can give; the
// vCluster's mode is mode.
func modeSnapshot(mode model.PreemptMode) *Snapshot {
	s := preemptSnapshot()
	s.VCluster.PreemptMode = mode
	s.Pending[0].NodesMin, s.Pending[0].NodesMax = 2, 2
	s.Allocations[11].State = model.StateCheckpointing // not a victim
	return s
}

// TestPlanPreemptionsByMode: what the planner proposes for work that
// cannot checkpoint, by the vCluster's mode and the victim's QOS.
func TestPlanPreemptionsByMode(t *testing.T) {
	victim10 := func(a model.PreemptAction) []PreemptProposal {
		return []PreemptProposal{{ForAlloc: 1, Victims: []uint64{10}, Actions: []model.PreemptAction{a}, Reserve: []string{"a1", "a2"}}}
	}
	tests := []struct {
		name   string
		mode   model.PreemptMode
		change func(s *Snapshot)
		want   []PreemptProposal
		note   string // in the job's explanation when nothing is proposed
	}{
		{"default: never killed", "", nil, nil, "it cannot checkpoint and vcluster batch has preempt-mode checkpoint"},
		{"checkpoint: never killed", model.PreemptCheckpoint, nil, nil, "preempt-mode checkpoint"},
		{"requeue", model.PreemptRequeue, nil, victim10(model.ActionRequeue), ""},
		{"cancel", model.PreemptCancel, nil, victim10(model.ActionCancel), ""},
		{"suspend", model.PreemptSuspend, nil, victim10(model.ActionSuspend), ""},
		{"suspend: not with a borrowed node", model.PreemptSuspend, func(s *Snapshot) {
			s.Nodes = append(s.Nodes, node("o1", "other").current("batch").running(10).build())
			s.Allocations[10].Nodes = append(s.Allocations[10].Nodes, "o1")
		}, nil, "borrowed nodes"},
		{"suspend: not one an admin suspended", model.PreemptSuspend, func(s *Snapshot) {
			s.Allocations[10].SuspendedAt = t0.Add(-time.Minute)
		}, nil, "suspended by an admin"},
		{"off", model.PreemptOff, nil, nil, "preemption is off in vcluster batch"},
		{"preemption off", model.PreemptRequeue, func(s *Snapshot) { s.VCluster.Preemption = false }, nil, "preemption is off"},
		{"the victim's QOS says requeue", "", func(s *Snapshot) {
			s.Allocations[10].QOS = "low"
			s.QOS = map[string]*model.QOS{"low": {Name: "low", PriorityClass: 1, PreemptMode: model.PreemptRequeue}}
		}, victim10(model.ActionRequeue), ""},
		{"the victim's QOS says off", model.PreemptRequeue, func(s *Snapshot) {
			s.Allocations[10].QOS = "low"
			s.QOS = map[string]*model.QOS{"low": {Name: "low", PriorityClass: 1, PreemptMode: model.PreemptOff}}
		}, nil, "qos low has preempt-mode off"},
		{"no note when the protected work would not be enough", "", func(s *Snapshot) {
			s.Pending[0].NodesMin, s.Pending[0].NodesMax = 4, 4
		}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := modeSnapshot(tc.mode)
			if tc.change != nil {
				tc.change(s)
			}
			in := BuildInput(s)
			real := solver.Solve(&in)
			got, notes := PlanPreemptionsExplained(s, real, solver.Solve, nil, nil)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("preemptions %+v, want %+v", got, tc.want)
			}
			if note := notes[1]; tc.note == "" && note != "" || !strings.Contains(note, tc.note) {
				t.Fatalf("note %q, want one with %q", note, tc.note)
			}
		})
	}
}

// TestExplainSaysPreemptionIsOff: the loop puts the policy's note in the
// pending job's explanation.
func TestExplainSaysPreemptionIsOff(t *testing.T) {
	s := modeSnapshot("")
	prop := &fakeProposer{}
	l := &Loop{Name: "batch", State: &fakeState{s}, Proposer: prop, Planner: solver.Solve, Clock: func() time.Time { return t0 }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(prop.preempts) != 0 {
		t.Fatalf("preemptions %+v under the default mode", prop.preempts)
	}
	e, _ := l.Explanations.Get(1)
	if e == nil || !strings.Contains(e.Message, "allocation 10") || !strings.Contains(e.Message, "cannot checkpoint") {
		t.Fatalf("explanation %+v", e)
	}
}

// TestSuspendedNodeHeldForItsPreemptor: a node that keeps the frozen
// processes of a suspended allocation takes only the job it was suspended
// for — in the solver's input, the preemption planner and for borrowers.
func TestSuspendedNodeHeldForItsPreemptor(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}
	victim := alloc(10, "batch", model.StateSuspended)
	victim.SuspendedOn = []string{"a1"}
	victim.Preemption = &model.Preemption{Kind: model.PreemptClass, ForAlloc: 2, Action: model.ActionSuspend}
	other := alloc(1, "batch", model.StatePending)
	n := node("a1", "batch").build()
	n.SuspendedAlloc = 10
	s := snapshot(vc, []*model.Node{n}, victim, other)
	in := BuildInput(s)
	if p := solver.Solve(&in); len(p.Starts) != 0 {
		t.Fatalf("job 1 starts on a node held for the suspended allocation's preemptor: %+v", p.Starts)
	}
	pre := alloc(2, "batch", model.StatePending)
	s = snapshot(vc, []*model.Node{n}, victim, pre)
	in = BuildInput(s)
	if p := solver.Solve(&in); len(p.Starts) != 1 || p.Starts[0].JobID != 2 {
		t.Fatalf("the preemptor does not start on the node: %+v", p.Starts)
	}
	// Resumed (or ended): the mark no longer holds.
	victim.State, victim.SuspendedOn = model.StateRunning, nil
	s = snapshot(vc, []*model.Node{n}, victim, other)
	in = BuildInput(s)
	if p := solver.Solve(&in); len(p.Starts) != 1 {
		t.Fatalf("a stale mark still holds the node: %+v", p.Starts)
	}
	// Another vCluster never borrows it.
	home := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, AllowLending: true}
	b := &model.VCluster{Name: "b", Type: model.TypeHPCBatch, AllowBorrowing: true, ReservationDepth: 1}
	victim.State, victim.SuspendedOn = model.StateSuspended, []string{"a1"}
	job := alloc(3, "b", model.StatePending)
	job.Checkpoint = model.CheckpointSignal
	s = snapshot(b, []*model.Node{n}, victim, job)
	s.VClusters = map[string]*model.VCluster{"batch": home, "b": b}
	in = BuildInput(s)
	if p := solver.Solve(&in); len(p.Starts) != 0 {
		t.Fatalf("another vCluster borrows a node with frozen work on it: %+v", p.Starts)
	}
}
