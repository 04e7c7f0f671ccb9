package solver

import (
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
)

// This file is the solver's contract with its callers (the vCluster loops
// and the replay simulator). Change it with care: both depend on it.

// Node is a node as one scheduling cycle sees it.
type Node struct {
	Name        string
	Group       int // dragonfly group
	Fingerprint string
	GPUType     string
	GPUs        int
	Features    []string // sorted, unique
	IdleWatts   int
	BusyWatts   int
	State       model.NodeState
	// Own is true when the node's current vCluster is the scheduling one
	// (its own nodes and nodes it has borrowed). Otherwise the node belongs
	// to another vCluster that lends it: the solver may start work on it
	// only when it is idle and Ready, and the start lists it in Borrowed.
	Own bool
	// Allocation is the allocation running on the node (0 = idle); FreeAt is
	// when that allocation's walltime ends (the release timeline).
	Allocation uint64
	FreeAt     time.Time
	// LendUntil, for another vCluster's node (Own false), is when its home
	// vCluster's own plan reserves it: only a job that ends by then may
	// borrow it. Zero = no limit; a limit at or before Now makes the node
	// unusable this cycle.
	LendUntil time.Time
	// ReservedFor holds the node for one pending job until ReservedUntil
	// (the job a reclaim or a preemption freed it for): no other job may
	// start on it before then, and that job starts on the nodes held for it
	// as soon as they are all idle. 0, or ReservedUntil at or before Now,
	// holds nothing.
	ReservedFor   uint64
	ReservedUntil time.Time
}

// Job is a pending allocation, eligible to start (its dependencies are met).
type Job struct {
	ID       uint64
	Tenant   string
	NodesMin int
	NodesMax int
	Walltime time.Duration
	// Predicted is the runtime the plan assumes (a prediction from the
	// tenant's recent runs, package predict): it decides whether the job
	// fits before a reservation, how long its own reservation lasts and its
	// f2. It never ends the job. 0, or more than Walltime, = Walltime.
	Predicted     time.Duration
	PriorityClass int // 0..10
	SubmitTime    time.Time
	// EligibleTime is when the job became eligible (its dependencies were
	// met); zero means SubmitTime. f2 counts the wait from here.
	EligibleTime      time.Time
	Constraints       []string // node features, all required
	GPUType           string
	GPUsPerNode       int
	Checkpoint        model.CheckpointMode
	CheckpointMinutes float64 // estimated minutes per checkpoint; 0 = unknown
	HotDataFraction   float64 // share of input on the hot tier; < 0 = unknown
	// Hold, when not empty, is a reason from outside the solver (e.g. an
	// array's concurrency limit) that keeps the job from starting this
	// cycle. It is still scored and explained, and gets no reservation.
	Hold string
	// NodeList, when set, is the only nodes the job may run on; ExcludeNodes
	// the nodes it may not (sbatch -w, -x). Both sorted.
	NodeList     []string
	ExcludeNodes []string
	// Protected is set by the caller's starvation guard for a job that has
	// waited past its bound (vcluster.EasyStarts). With reservations on, a
	// protected job is decided right after the head, in eligible order with
	// the other protected jobs, and gets a reservation whatever the depth:
	// no job decided after it can delay its start.
	Protected bool
	// OwnNodesOnly keeps the job off borrowed nodes (its vCluster runs only
	// checkpointable work on borrowed nodes, and it cannot checkpoint).
	OwnNodesOnly bool
	// Reservation names the Input.NodeReservations entry the job runs in:
	// it may start only while that reservation is active, only on its
	// nodes (until then, or when it is missing, it waits with reason
	// model.ReasonReservation). "" = none.
	Reservation string
}

// NodeReservation sets nodes aside from Start to End (model.Reservation).
// While it is active only the jobs that name it (Job.Reservation) may start
// on its nodes; before it starts, no job may start on them whose walltime
// would cross Start, and no job is planned on them before End.
type NodeReservation struct {
	Name       string
	Maint      bool // a maintenance window: the reason is model.ReasonMaintenance
	Start, End time.Time
	Nodes      []string // sorted; names not among Input.Nodes are ignored
}

// Running is an allocation holding nodes of this vCluster.
type Running struct {
	ID     uint64
	Tenant string
	Nodes  int
	Start  time.Time
	End    time.Time // start + walltime
}

// Tenant is what the solver knows of a tenant.
type Tenant struct {
	// FairShareTarget is the contracted share (0..1); 0 = none (f3 neutral).
	FairShareTarget float64
	// UsageShare is the tenant's share of the decayed usage of all tenants (0..1).
	UsageShare float64
	// ServiceBehind (0..1) is how far the tenant's recent average bounded
	// slowdown is above everyone's (predict.Service.Behind); f3 is the
	// larger of the usage term and it.
	ServiceBehind float64
	// ServiceMean and ServiceWeight are the tenant's recent average bounded
	// slowdown and the decayed count of the completed jobs behind it
	// (predict.Service.Tenant), read only with Input.ServiceAverage: the
	// per-job fair share of service.
	ServiceMean, ServiceWeight float64
	// NodesLeft and RunningLeft are the room under the hard quotas
	// (invariant I4); < 0 = unlimited.
	NodesLeft   int
	RunningLeft int
}

// Input is everything one cycle decides from. The solver never reads the
// clock: Now is the cycle's time.
type Input struct {
	Now      time.Time
	VCluster string
	Type     model.VClusterType
	// Algorithm is how jobs are placed (see docs/solver.md): backfill (the
	// default), fifo, binpack or sensitive. Empty = the type's default
	// (model.AlgorithmFor).
	Algorithm model.Algorithm
	Weights   model.Weights
	// ReservationDepth: how many blocked jobs get a protected reservation.
	// 0 = none (pure greedy), 1 = EASY, N, model.ReservationsAll = conservative.
	ReservationDepth int
	// PredictedStarts plans starts and reservations with Job.Predicted
	// instead of the walltime: a job may start in a hole it fits by its
	// prediction. Off, predictions only order the queue (f2).
	PredictedStarts bool
	// OmitReservationNodes leaves the reservations' (and their
	// explanations') node lists out of the plan, for callers that read
	// only the starts (the replay): with a reservation often over most of
	// a large machine, naming its nodes every cycle costs more than the
	// rest of the reservation.
	OmitReservationNodes bool
	// ServiceAverage (> 0) turns on the per-job fair share of service: f3
	// of a job of a tenant with a fair-share target is at least
	// predict.PendingBehind — how far its tenant's average bounded slowdown
	// (Tenant.ServiceMean, ServiceWeight) would be above ServiceAverage,
	// everyone's, if the job started now at the slowdown its wait has
	// reached. 0 = off.
	ServiceAverage float64
	// ProtectedFirst decides the protected jobs (Job.Protected) before the
	// head rather than right after it: their reservations come first, and
	// the head's is made around them.
	ProtectedFirst bool
	// Groups is the number of dragonfly groups in the system (f4's
	// max_groups_available); 0 = count the groups among Nodes.
	Groups  int
	Nodes   []Node
	Running []Running
	Pending []Job
	// Tenants by name; a tenant missing here has no target and no quota.
	Tenants map[string]Tenant
	// PowerHeadroomWatts is how much more the system (and this vCluster's
	// cap) may draw; starting a job adds BusyWatts-IdleWatts per node.
	// < 0 = unlimited.
	PowerHeadroomWatts int64
	// EnergyPrice is the normalised energy price at Now in [0,1]; < 0 = unknown
	// (then Energy's schedule, when set, gives it).
	EnergyPrice float64
	// Energy is the site's time-of-use price schedule and the rule that
	// holds flexible work for cheaper hours; nil = none.
	Energy *Energy
	// NodeReservations are the reservations not over at Now, in any order
	// (at most one active on a node at a time). The replay passes none.
	NodeReservations []NodeReservation
}

// Energy is a time-of-use price schedule with its shifting rule. Flexible
// pending work (power.Shift.Flexible) of a vCluster whose type shifts
// (power.ShiftsType) waits with reason EnergyPrice while a start before its
// deadline would run it at a clearly lower price (power.Shift.Defer).
type Energy struct {
	Prices *power.Schedule
	Shift  power.Shift
}

// Plan is the outcome of one cycle.
type Plan struct {
	Starts       []Start       // in decision order
	Reservations []Reservation // protected future starts
	// Explanations has one entry per pending job, in score order.
	Explanations []Explanation
}

// Start is a decision to start a job now on Nodes.
type Start struct {
	JobID uint64
	Nodes []string
	// Borrowed lists the nodes of Nodes that belong to another vCluster;
	// the caller proposes Borrow for them together with the assignment.
	Borrowed   []string
	Backfilled bool // started ahead of a higher-scored job
	Score      float64
	// Position is the 1-based rank of its explanation: Plan.Explanations[Position-1].
	Position int
}

// Reservation protects a blocked job's earliest start.
type Reservation struct {
	JobID uint64
	Start time.Time
	Nodes []string
}

// FilterCounts counts candidate nodes removed by each filter for one job.
type FilterCounts struct {
	Constraint int // GPU type/count, features, conformance (sensitive)
	State      int // not Ready (drained, down, degraded, draining)
	Ownership  int // another vCluster's node that is not lendable now
	Busy       int // running other work
	Power      int // would exceed the power headroom
}

// Explanation says why a job starts, or why it waits.
type Explanation struct {
	JobID    uint64
	Position int // 1-based rank in score order
	Score    float64
	Factors  [model.NumFactors]float64
	Weights  model.Weights
	// Reason is empty when the job starts this cycle; otherwise one of the
	// pending reasons of CLI.md (Priority, Resources, PowerBudget, ...).
	Reason        string
	ExpectedStart time.Time // zero = unknown
	Nodes         []string  // where it starts or is reserved
	Filtered      FilterCounts
	// Reservation names the node reservation behind Reason (Reservation,
	// Maintenance, Reserved), or the one the job runs in; "" = none.
	Reservation string
}
