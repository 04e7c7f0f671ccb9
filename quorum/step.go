package quorum

import (
	"slices"

	"github.com/latticehpc/lattice/model"
)

// StepCommand records a step of an allocation: Begin adds one (the FSM
// assigns its id, returned in Result.IDs) to a RUNNING allocation; otherwise
// it records how step StepID ended.
type StepCommand struct {
	Header
	AllocID  uint64          `json:"alloc_id"`
	Begin    bool            `json:"begin,omitempty"`
	StepID   int             `json:"step_id"`
	Nodes    []string        `json:"nodes,omitempty"`
	Tasks    int             `json:"tasks,omitempty"`
	Command  []string        `json:"command,omitempty"`
	State    model.StepState `json:"state,omitempty"`
	ExitCode *int            `json:"exit_code,omitempty"`
	// Usage: what the ended step used (its nodes' cgroups).
	Usage *model.Usage `json:"usage,omitempty"`
}

func (s *State) applyStep(c *StepCommand) *Result {
	a := s.allocs[c.AllocID]
	if a == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "allocation %d does not exist", c.AllocID)}
	}
	if c.Begin {
		switch {
		case a.State != model.StateRunning || a.CancelRequested:
			return &Result{Rejection: reject(CodeConflict, "", "allocation %d is %s; steps start only inside a RUNNING allocation", c.AllocID, a.State)}
		case len(a.Steps) >= model.MaxStepsPerAllocation:
			return &Result{Rejection: reject(CodeQuota, "", "allocation %d has %d steps, the most one allocation may record", c.AllocID, len(a.Steps))}
		case len(c.Nodes) == 0 || c.Tasks < len(c.Nodes):
			return &Result{Rejection: reject(CodeInvalid, "", "a step needs at least one node and one task per node (got %d nodes, %d tasks)", len(c.Nodes), c.Tasks)}
		}
		for _, n := range c.Nodes {
			if !slices.Contains(a.Nodes, n) {
				return &Result{Rejection: reject(CodeInvalid, "", "node %s is not a node of allocation %d", n, c.AllocID)}
			}
		}
		cp := modify(a)
		id := len(cp.Steps)
		cp.Steps = append(slices.Clip(a.Steps), model.Step{ID: id, Nodes: slices.Clone(c.Nodes), Tasks: c.Tasks,
			Command: slices.Clone(c.Command), State: model.StepRunning, StartTime: c.Time})
		s.replaceAlloc(a, cp)
		s.touch()
		return &Result{IDs: []uint64{uint64(id)}}
	}
	if c.StepID < 0 || c.StepID >= len(a.Steps) {
		return &Result{Rejection: reject(CodeNotFound, "", "allocation %d has no step %d", c.AllocID, c.StepID)}
	}
	if !c.State.Ended() {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid step state %q: allowed COMPLETED, FAILED, CANCELLED", c.State)}
	}
	if a.Steps[c.StepID].State.Ended() {
		return &Result{} // recorded already (a retry)
	}
	cp := modify(a)
	cp.Steps = slices.Clone(a.Steps) // stored objects are never written
	st := &cp.Steps[c.StepID]
	st.State, st.EndTime = c.State, c.Time
	if c.ExitCode != nil {
		e := *c.ExitCode
		st.ExitCode = &e
	}
	if c.Usage != nil {
		u := *c.Usage
		st.Usage = &u
	}
	s.replaceAlloc(a, cp)
	s.touch()
	return &Result{}
}
