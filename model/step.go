package model

import (
	"slices"
	"time"
)

// StepState is the state of a step inside an allocation.
type StepState string

// Step states.
const (
	StepRunning   StepState = "RUNNING"
	StepCompleted StepState = "COMPLETED"
	StepFailed    StepState = "FAILED"
	StepCancelled StepState = "CANCELLED"
)

// Ended reports whether the step is over.
func (s StepState) Ended() bool { return s == StepCompleted || s == StepFailed || s == StepCancelled }

// MaxStepsPerAllocation bounds the steps recorded in one allocation.
const MaxStepsPerAllocation = 10000

// Step is one step launched inside an allocation (latticectl run, srun):
// its tasks ran on Nodes; ExitCode is the worst task's.
type Step struct {
	ID        int       `json:"id"`
	Nodes     []string  `json:"nodes"`
	Tasks     int       `json:"tasks"`
	Command   []string  `json:"command"`
	State     StepState `json:"state"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	StartTime time.Time `json:"start_time,omitzero"`
	EndTime   time.Time `json:"end_time,omitzero"`
	// Usage is what its tasks used, summed over its nodes (MaxRSSBytes:
	// the largest node's); nil when not measured.
	Usage *Usage `json:"usage,omitempty"`
}

// cloneSteps deep-copies steps.
func cloneSteps(steps []Step) []Step {
	if steps == nil {
		return nil
	}
	out := make([]Step, len(steps))
	for i, s := range steps {
		s.Nodes = slices.Clone(s.Nodes)
		s.Command = slices.Clone(s.Command)
		if s.ExitCode != nil {
			e := *s.ExitCode
			s.ExitCode = &e
		}
		if s.Usage != nil {
			u := *s.Usage
			s.Usage = &u
		}
		out[i] = s
	}
	return out
}
