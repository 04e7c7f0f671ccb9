package model

import "time"

// DAG is a workflow submitted as one unit: stages (allocations or arrays)
// joined by dependency conditions. The quorum keeps one record per DAG,
// from its submission until its last allocation is pruned.
type DAG struct {
	ID         uint64     `json:"id"`   // the id of its first allocation
	Name       string     `json:"name"` // dag_id of the workflow file
	SubmitTime time.Time  `json:"submit_time"`
	Stages     []DAGStage `json:"stages"` // in submission (topological) order
}

// DAGStage is one stage of a DAG.
type DAGStage struct {
	Name  string `json:"name"`
	ID    uint64 `json:"id"`              // its allocation; an array's first task
	Tasks int    `json:"tasks,omitempty"` // tasks of an array stage; 0 = not an array
	// DependsOn lists its conditions on earlier stages (Name) and, for a
	// singleton ("mutex"), the condition alone with the stage's own name.
	DependsOn []DAGDependency `json:"depends_on,omitempty"`
}

// DAGDependency is one edge into a stage.
type DAGDependency struct {
	Name      string              `json:"name"`
	Condition DependencyCondition `json:"condition"`
}

// DAGState is the state of a workflow as a whole.
type DAGState string

// DAG states. A DAG is RUNNING while any stage is pending or active. Then
// it is FAILED if a stage failed, CANCELLED if a stage was cancelled (by a
// user, or because a stage it needed was), and COMPLETED otherwise: a stage
// skipped because its condition could never hold (an afternotok handler
// after a success) was not needed.
const (
	DAGRunning   DAGState = "RUNNING"
	DAGCompleted DAGState = "COMPLETED"
	DAGFailed    DAGState = "FAILED"
	DAGCancelled DAGState = "CANCELLED"
)
