package quorum

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Header is carried by every command. Time is minted by the leader before
// Apply (the FSM never reads the clock); RequestID, when set, makes the
// command idempotent: a retry returns the first outcome.
type Header struct {
	RequestID string    `json:"request_id,omitempty"`
	Time      time.Time `json:"time"`
}

// CommandHeader returns the header to stamp or read.
func (h *Header) CommandHeader() *Header { return h }

// Command is any command payload.
type Command interface {
	Type() CommandType
	CommandHeader() *Header
}

// SubmitItem is one allocation of a submission. AfterItems names earlier
// items of the same submission it depends on (a DAG's edges).
type SubmitItem struct {
	Request    model.Request `json:"request"`
	AfterItems []ItemDep     `json:"after_items,omitempty"`
}

// ItemDep is a dependency on another item of the same submission.
type ItemDep struct {
	Condition model.DependencyCondition `json:"condition"`
	Index     int                       `json:"index"`
}

// Submit creates allocations: one, an array (expanded here), or a DAG. All or nothing.
// A DAG's items are its stages in topological order, named by Request.Name;
// Name is the workflow's name (dag_id of the file).
//
// Prepared says the leader resolved, defaulted and validated every request
// before proposing it (as every leader of level 1 or later does): Apply
// takes the requests as they are and checks only what depends on the state
// it applies to (the vCluster, nodes and dependencies exist). An entry
// without it (written before level 1) is resolved, defaulted and validated
// at apply by the rules of level 0 (model's ApplyDefaultsLevel0 and
// ValidateLevel0), exactly as it was then. A member of level 0 ignores the
// flag and applies level 0's rules to a prepared request, which change
// nothing in a request that passed them before the proposal.
type Submit struct {
	Header
	Items    []SubmitItem `json:"items"`
	DAG      bool         `json:"dag,omitempty"`
	Name     string       `json:"name,omitempty"`
	Prepared bool         `json:"prepared,omitempty"`
}

// SubmitBatch applies many independent submissions in one entry (one
// fsync for a burst of them): each is applied as its own Submit would be —
// all or nothing, idempotent by its own request id — and one's rejection
// does not stop the others. Result.Submissions answers each in order.
type SubmitBatch struct {
	Header
	Submissions []Submit `json:"submissions"`
}

// MaxBatchSubmissions bounds the submissions of one SubmitBatch.
const MaxBatchSubmissions = 10000

// AssignItem proposes to start one allocation on Nodes. Version is the state
// version the proposal was computed from: if the allocation or any node
// changed after it, the item is rejected as stale.
type AssignItem struct {
	AllocID uint64   `json:"alloc_id"`
	Nodes   []string `json:"nodes"`
	Version uint64   `json:"version"`
}

// AssignBatch is one scheduling cycle's proposal for one vCluster. Items are
// applied one by one; each commits or is rejected with a reason. Nodes of
// another vCluster in an item are borrowed as part of it.
type AssignBatch struct {
	Header
	VCluster string       `json:"vcluster"`
	Items    []AssignItem `json:"items"`
}

// AllocUpdate is one reported state change of an allocation.
type AllocUpdate struct {
	AllocID  uint64           `json:"alloc_id"`
	State    model.AllocState `json:"state"`
	Reason   string           `json:"reason,omitempty"`
	ExitCode *int             `json:"exit_code,omitempty"`
	// Run is the reported run's requeue count + 1 (0 = unknown): a report
	// of an earlier run of a requeued allocation is refused as stale.
	Run int `json:"run,omitempty"`
	// EndTime is when the run ended by its agent's clock (zero: unknown).
	// A final report applies it, clamped between the run's start and the
	// command's time, so a late delivery does not stretch the run.
	EndTime time.Time `json:"end_time,omitzero"`
	// Usage is what the ended run used (its agent's cgroup figures); a
	// final report records it on the allocation.
	Usage *model.Usage `json:"usage,omitempty"`
	// StartTime is when a RUNNING report's run started by its agent's
	// clock (zero: unknown), clamped between its assignment and the
	// command's time, as EndTime.
	StartTime time.Time `json:"start_time,omitzero"`
}

// UpdateAllocs applies state reports (from agents, the checkpoint broker...).
type UpdateAllocs struct {
	Header
	Updates []AllocUpdate `json:"updates"`
}

// Cancel cancels allocations: pending ones end at once, active ones are
// marked and end when their agent reports them stopped.
type Cancel struct {
	Header
	IDs    []uint64 `json:"ids"`
	Reason string   `json:"reason,omitempty"`
}

// RegisterNodes adds or refreshes nodes of one agent.
type RegisterNodes struct {
	Header
	Agent string       `json:"agent"`
	Nodes []model.Node `json:"nodes"`
}

// NodeAction is what SetNodeState does.
type NodeAction string

// Node actions.
const (
	ActionDrain    NodeAction = "drain"    // no new work; Drained once idle
	ActionUndrain  NodeAction = "undrain"  // back to Ready
	ActionDegraded NodeAction = "degraded" // missed heartbeats
	ActionDown     NodeAction = "down"     // lost: its work fails with NodeFailure
	ActionUp       NodeAction = "up"       // heard from again
	// ActionNotResponding: silent past the node timeout, its failure held
	// by the leader (mass silence, or fencing); Reason says which.
	ActionNotResponding NodeAction = "notresponding"
	// ActionCleaned: the node's agent confirmed that no process of the
	// allocation in Cleanup (SetNodeState.Allocation; 0 = any) runs there.
	ActionCleaned NodeAction = "cleaned"
)

// SetNodeState changes one or more nodes' state.
type SetNodeState struct {
	Header
	Nodes  []string   `json:"nodes"`
	Action NodeAction `json:"action"`
	Reason string     `json:"reason,omitempty"`
	// By is who set the reason (the caller's user name), recorded with the
	// command's time as the node's ReasonBy and ReasonAt (sinfo -R).
	By string `json:"by,omitempty"`
	// Allocation qualifies ActionCleaned.
	Allocation uint64 `json:"allocation,omitempty"`
}

// SetVCluster creates or replaces a vCluster definition.
type SetVCluster struct {
	Header
	VCluster model.VCluster `json:"vcluster"`
}

// SetTenant creates or replaces a tenant's quotas and target (usage is kept).
type SetTenant struct {
	Header
	Tenant model.Tenant `json:"tenant"`
}

// SetPowerBudget sets the system budget (VCluster empty) or a vCluster's cap.
type SetPowerBudget struct {
	Header
	VCluster string `json:"vcluster,omitempty"`
	Watts    int64  `json:"watts"`
}

// Requeue sends active allocations back to Pending (through Suspended when
// they were checkpointed), freeing their nodes.
type Requeue struct {
	Header
	IDs    []uint64 `json:"ids"`
	Reason string   `json:"reason,omitempty"`
}

// ReturnNodes gives idle borrowed nodes back to their home vCluster.
type ReturnNodes struct {
	Header
	Nodes []string `json:"nodes"`
}

// Reclaim asks for borrowed nodes back: idle ones return at once, busy ones
// are marked and return when their allocation ends. Nodes alone (an
// admin's reclaim) only marks them. Items, proposed by a home vCluster's
// loop, also start the borrowers' checkpoints: each item's busy lent nodes
// are marked, their allocations move to CHECKPOINTING with a Preemption
// record (deadline = Time + the home's reclaim grace), the borrower may not
// borrow them again for the home's back-off, and every node of Reserve is
// held for ForAlloc until ReserveUntil.
type Reclaim struct {
	Header
	Nodes        []string      `json:"nodes,omitempty"`
	VCluster     string        `json:"vcluster,omitempty"` // the home vCluster reclaiming (with Items)
	Items        []ReclaimItem `json:"items,omitempty"`
	ReserveUntil time.Time     `json:"reserve_until,omitzero"`
}

// ReclaimItem is one reclaim for one pending allocation of the home vCluster.
type ReclaimItem struct {
	ForAlloc uint64   `json:"for_alloc"`
	Nodes    []string `json:"nodes"`
	Reserve  []string `json:"reserve,omitempty"`
	Version  uint64   `json:"version"`
}

// Preempt stops running allocations of a vCluster for a pending one of a
// strictly higher priority class. Each item is checked (classes, class 10
// never a victim, the victims' vCluster allows preemption, staleness) and
// commits whole or not at all: its victims move to CHECKPOINTING with a
// Preemption record (deadline = Time + the vCluster's reclaim grace) and
// its Reserve nodes are held for ForAlloc until ReserveUntil.
type Preempt struct {
	Header
	VCluster     string        `json:"vcluster"`
	Items        []PreemptItem `json:"items"`
	ReserveUntil time.Time     `json:"reserve_until,omitzero"`
}

// PreemptItem is one preemption: the victims freeing Reserve for ForAlloc.
// Actions, when present, holds one action per victim (model.VictimAction
// of the vCluster's and the victim's QOS's policy, which Apply checks
// again): checkpoint and requeue stop it to requeue it (CHECKPOINTING, as
// without Actions), cancel cancels it, suspend freezes it on its nodes
// (gang.go). Without Actions every victim is stopped and requeued (the
// commands of members that predate preemption modes).
type PreemptItem struct {
	ForAlloc uint64                `json:"for_alloc"`
	Victims  []uint64              `json:"victims"`
	Actions  []model.PreemptAction `json:"actions,omitempty"`
	Reserve  []string              `json:"reserve,omitempty"`
	Version  uint64                `json:"version"`
}

// Checkpoint asks running allocations to checkpoint and keep running (a
// user's request, a proactive checkpoint of the broker, sbatch's --signal
// lead time): RUNNING → CHECKPOINTING until the agent reports it RUNNING
// again (Checkpointed or not).
type Checkpoint struct {
	Header
	Items []CheckpointItem `json:"items"`
}

// CheckpointItem is one checkpoint request.
type CheckpointItem struct {
	AllocID  uint64    `json:"alloc_id"`
	Reason   string    `json:"reason"` // user, proactive, signal
	Deadline time.Time `json:"deadline"`
}

// Prune drops terminal allocations that ended before Before (retention).
type Prune struct {
	Header
	Before time.Time `json:"before"`
}

// Member is one quorum member's addresses, so any member can route to the leader.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
}

// SetMember records a member's addresses.
type SetMember struct {
	Header
	Member Member `json:"member"`
}

// RemoveMember forgets a member's addresses.
type RemoveMember struct {
	Header
	ID string `json:"id"`
}

// SetDefaults sets cluster-wide settings.
type SetDefaults struct {
	Header
	DefaultVCluster string `json:"default_vcluster"`
}

// Encode serialises a command as one type byte followed by its body:
// binary for AssignBatch and UpdateAllocs (see codec.go), JSON for the others.
func Encode(c Command) ([]byte, error) {
	switch c := c.(type) {
	case *AssignBatch:
		b, err := encodeAssignBatch(c)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
		}
		return b, nil
	case *UpdateAllocs:
		b, err := encodeUpdateAllocs(c)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
		}
		return b, nil
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	out := make([]byte, 0, len(body)+1)
	out = append(out, byte(c.Type()))
	return append(out, body...), nil
}

// Code classifies a rejection; the server maps it to a gRPC status code.
type Code string

// Rejection codes.
const (
	CodeInvalid  Code = "invalid"   // InvalidArgument
	CodeNotFound Code = "not_found" // NotFound
	CodeStale    Code = "stale"     // FailedPrecondition: computed from an older version
	CodeConflict Code = "conflict"  // FailedPrecondition: state does not allow it (node busy, wrong state)
	CodeQuota    Code = "quota"     // ResourceExhausted
	CodePower    Code = "power"     // ResourceExhausted
)

// Rejection says why a command or an item was not applied.
type Rejection struct {
	Code    Code   `json:"code"`
	Reason  string `json:"reason,omitempty"` // a pending reason of CLI.md where one fits
	Message string `json:"message"`
}

func (r *Rejection) Error() string { return r.Message }

func reject(code Code, reason, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// ItemResult is the outcome of one item of a batch.
type ItemResult struct {
	ID        uint64     `json:"id"`
	Committed bool       `json:"committed"`
	Rejection *Rejection `json:"rejection,omitempty"`
}

// Result is what applying a command returns.
type Result struct {
	Rejection *Rejection   `json:"rejection,omitempty"` // the whole command was refused
	IDs       []uint64     `json:"ids,omitempty"`       // created allocations (Submit)
	Items     []ItemResult `json:"items,omitempty"`     // per item (batches)
	// Submissions answers each submission of a SubmitBatch, in order.
	Submissions []*Result `json:"submissions,omitempty"`
	Version     uint64    `json:"version"` // state version after the command
}
