package quorum

import (
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func TestStepCommandRecordsSteps(t *testing.T) {
	s := NewState()
	a := &model.Allocation{ID: 7, State: model.StateRunning, Nodes: []string{"n1", "n2"}}
	s.allocs[7] = a
	t0 := time.Unix(100, 0)
	res := s.applyStep(&StepCommand{Header: Header{Time: t0}, AllocID: 7, Begin: true, Nodes: []string{"n1", "n2"}, Tasks: 4, Command: []string{"hostname"}})
	if res.Rejection != nil || len(res.IDs) != 1 || res.IDs[0] != 0 {
		t.Fatalf("begin: %+v", res)
	}
	before := s.allocs[7]
	res = s.applyStep(&StepCommand{AllocID: 7, Begin: true, Nodes: []string{"n2"}, Tasks: 1})
	if res.Rejection != nil || res.IDs[0] != 1 {
		t.Fatalf("second begin: %+v", res)
	}
	if len(before.Steps) != 1 {
		t.Fatalf("a stored allocation was written in place: %d steps", len(before.Steps))
	}
	code := 3
	if res := s.applyStep(&StepCommand{Header: Header{Time: t0.Add(time.Second)}, AllocID: 7, StepID: 0, State: model.StepFailed, ExitCode: &code}); res.Rejection != nil {
		t.Fatalf("end: %+v", res.Rejection)
	}
	got := s.allocs[7].Steps
	if got[0].State != model.StepFailed || got[0].ExitCode == nil || *got[0].ExitCode != 3 || got[1].State != model.StepRunning {
		t.Fatalf("steps = %+v", got)
	}
	if before.Steps[0].State != model.StepRunning {
		t.Fatal("ending a step changed an earlier stored copy")
	}
	for name, c := range map[string]*StepCommand{
		"unknown alloc": {AllocID: 9, Begin: true, Nodes: []string{"n1"}, Tasks: 1},
		"foreign node":  {AllocID: 7, Begin: true, Nodes: []string{"n3"}, Tasks: 1},
		"too few tasks": {AllocID: 7, Begin: true, Nodes: []string{"n1", "n2"}, Tasks: 1},
		"unknown step":  {AllocID: 7, StepID: 5, State: model.StepCompleted},
		"not an end":    {AllocID: 7, StepID: 1, State: model.StepRunning},
		"negative step": {AllocID: 7, StepID: -1, State: model.StepCompleted},
	} {
		if res := s.applyStep(c); res.Rejection == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ended := s.allocs[7].Clone()
	ended.State = model.StateCompleted
	s.allocs[7] = ended
	if res := s.applyStep(&StepCommand{AllocID: 7, Begin: true, Nodes: []string{"n1"}, Tasks: 1}); res.Rejection == nil {
		t.Error("a step began in an ended allocation")
	}
	// Round trip through the log encoding.
	b, err := Encode(&StepCommand{AllocID: 7, StepID: 1, State: model.StepCompleted, ExitCode: &code})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(b)
	if err != nil || c.Type() != CmdStep || c.(*StepCommand).StepID != 1 {
		t.Fatalf("decode: %v %+v", err, c)
	}
}
