package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AllocState is where an allocation is in its life (invariant I5).
type AllocState string

// Allocation states, spelled as users see them.
const (
	StatePending       AllocState = "PENDING"
	StateStaging       AllocState = "STAGING"
	StateRunning       AllocState = "RUNNING"
	StateCheckpointing AllocState = "CHECKPOINTING"
	StateSuspended     AllocState = "SUSPENDED"
	StateCompleted     AllocState = "COMPLETED"
	StateFailed        AllocState = "FAILED"
	StateCancelled     AllocState = "CANCELLED"
)

// AllocStates lists every state in life order.
var AllocStates = []AllocState{StatePending, StateStaging, StateRunning, StateCheckpointing,
	StateSuspended, StateCompleted, StateFailed, StateCancelled}

// transitions is the state machine of DESIGN.md I5. Staging may fall back to
// Pending (the node agent never started it, so nothing ran); Checkpointing may
// return to Running when a checkpoint is declined or fails; Running goes to
// Suspended (and on to Pending, in the same command) when a node of a
// --requeue allocation fails, or a preemption suspends it (PreemptSuspend);
// Suspended goes back to Running when such a suspension ends.
var transitions = map[AllocState][]AllocState{
	StatePending:       {StateStaging, StateCancelled, StateFailed},
	StateStaging:       {StateRunning, StatePending, StateCompleted, StateFailed, StateCancelled},
	StateRunning:       {StateCheckpointing, StateSuspended, StateCompleted, StateFailed, StateCancelled},
	StateCheckpointing: {StateSuspended, StateRunning, StateCompleted, StateFailed, StateCancelled},
	StateSuspended:     {StatePending, StateRunning, StateCancelled},
}

// CanTransition reports whether from → to is an edge of the state machine.
func CanTransition(from, to AllocState) bool {
	return slices.Contains(transitions[from], to)
}

// Terminal reports whether no transition leaves s.
func (s AllocState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Active reports whether an allocation in s holds nodes.
func (s AllocState) Active() bool {
	return s == StateStaging || s == StateRunning || s == StateCheckpointing
}

// ParseAllocState accepts a state name in any letter case, and Slurm's short
// forms (PD, R, CD, F, CA, S).
func ParseAllocState(s string) (AllocState, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	switch u {
	case "PD":
		return StatePending, nil
	case "R":
		return StateRunning, nil
	case "CD":
		return StateCompleted, nil
	case "F":
		return StateFailed, nil
	case "CA":
		return StateCancelled, nil
	case "S":
		return StateSuspended, nil
	}
	for _, st := range AllocStates {
		if u == string(st) {
			return st, nil
		}
	}
	return "", fieldErr("state", s, joinStates(AllocStates))
}

// Reasons: why an allocation waits, or why it ended. Pending reasons are the
// ones Slurm users know.
const (
	ReasonPriority                 = "Priority"
	ReasonResources                = "Resources"
	ReasonDependency               = "Dependency"
	ReasonDependencyNeverSatisfied = "DependencyNeverSatisfied"
	ReasonPowerBudget              = "PowerBudget"
	ReasonEnergyPrice              = "EnergyPrice" // flexible work waiting for cheaper energy within its deadline
	ReasonQuotaMaxNodes            = "QuotaMaxNodes"
	ReasonQuotaMaxRunning          = "QuotaMaxRunning"
	ReasonNodesDrained             = "NodesDrained"
	ReasonBadConstraints           = "BadConstraints"
	ReasonWaitingForScheduling     = "WaitingForScheduling"

	ReasonNonZeroExit      = "NonZeroExit"
	ReasonWalltimeExceeded = "WalltimeExceeded"
	ReasonNodeFailure      = "NodeFailure"
	ReasonPreempted        = "Preempted"
	ReasonCancelled        = "Cancelled"
	ReasonLaunchFailed     = "LaunchFailed"
	ReasonCheckpointed     = "Checkpointed"
	// ReasonCheckpointFailed: the hook exited non-zero, the webhook could
	// not be delivered, or the application answered CheckpointDone failed.
	ReasonCheckpointFailed = "CheckpointFailed"
	// ReasonCheckpointTimeout: no acknowledgement before the deadline.
	ReasonCheckpointTimeout = "CheckpointTimeout"
	ReasonRequeued          = "Requeued"
	// ReasonOutOfMemory: the kernel killed the job for its memory limit
	// (--mem, --mem-per-cpu), Slurm's OUT_OF_MEMORY.
	ReasonOutOfMemory = "OutOfMemory"
)

// CheckpointMode says how a running allocation is asked to checkpoint.
type CheckpointMode string

// Checkpoint modes.
const (
	CheckpointNone    CheckpointMode = "none"
	CheckpointSignal  CheckpointMode = "signal"  // SIGUSR1 to the process group
	CheckpointHook    CheckpointMode = "hook"    // the agent runs the allocation's checkpoint hook
	CheckpointWebhook CheckpointMode = "webhook" // HTTP POST to the allocation's URL; acked by `checkpoint done`
)

// ParseCheckpointMode accepts "", none, signal, hook or webhook.
func ParseCheckpointMode(s string) (CheckpointMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return CheckpointNone, nil
	case "signal":
		return CheckpointSignal, nil
	case "hook":
		return CheckpointHook, nil
	case "webhook":
		return CheckpointWebhook, nil
	}
	return "", fieldErr("checkpoint", s, "signal, hook, webhook or none")
}

// Checkpointable reports whether work in this mode can be asked to checkpoint.
func (m CheckpointMode) Checkpointable() bool {
	return m == CheckpointSignal || m == CheckpointHook || m == CheckpointWebhook
}

// Preemption kinds: why an allocation was stopped and requeued.
const (
	PreemptReclaim = "reclaim" // its borrowed nodes went back to their home vCluster
	PreemptClass   = "preempt" // higher-class work of its vCluster needed the nodes
)

// Preemption records the latest reclaim or preemption of an allocation.
type Preemption struct {
	Kind       string    `json:"kind"`                  // PreemptReclaim or PreemptClass
	ByVCluster string    `json:"by_vcluster,omitempty"` // the vCluster that took the nodes
	ForAlloc   uint64    `json:"for_alloc,omitempty"`   // the allocation they were taken for
	Time       time.Time `json:"time"`
	// Deadline is when the checkpoint must be done; then the agent stops it.
	Deadline time.Time `json:"deadline"`
	// Action is what the preemption did (PreemptAction); "" = stopped to be
	// requeued (checkpointed first when it can), as before actions existed.
	Action PreemptAction `json:"action,omitempty"`
}

// DependencyCondition is a Slurm-style dependency type.
type DependencyCondition string

// Dependency conditions.
const (
	AfterOK    DependencyCondition = "afterok"
	AfterAny   DependencyCondition = "afterany"
	AfterNotOK DependencyCondition = "afternotok"
	AfterStart DependencyCondition = "after"
	AfterCorr  DependencyCondition = "aftercorr" // array task i after task i of the other array
)

// Dependency is one condition over one or more earlier allocations. An id
// that starts an array stands for every task of the array, unless Task is
// set: then each id is one allocation (a task named as ARRAYID_INDEX).
type Dependency struct {
	Condition DependencyCondition `json:"condition"`
	IDs       []uint64            `json:"ids"`
	Task      bool                `json:"task,omitempty"`
}

// ArraySpec is a job array: indexes Start..End by Step, at most MaxConcurrent
// running at once (0 = no limit).
type ArraySpec struct {
	Start         int `json:"start"`
	End           int `json:"end"`
	Step          int `json:"step"`
	MaxConcurrent int `json:"max_concurrent"`
}

// Indexes lists the array's task indexes in order.
func (a ArraySpec) Indexes() []int {
	var out []int
	for i := a.Start; i <= a.End; i += a.Step {
		out = append(out, i)
	}
	return out
}

// Request is what a user asks for: everything that does not change once
// submitted.
type Request struct {
	Name    string `json:"name"`
	Tenant  string `json:"tenant"`
	Project string `json:"project,omitempty"`
	// User is who submitted it, as authenticated by the server (never taken
	// from the client); "" when submitted with auth off.
	User          string         `json:"user,omitempty"`
	VCluster      string         `json:"vcluster"`
	Command       []string       `json:"command,omitempty"` // run through sh -c
	Script        string         `json:"script,omitempty"`  // contents of a batch script
	WorkDir       string         `json:"work_dir,omitempty"`
	Env           []string       `json:"env,omitempty"` // KEY=VALUE, sorted
	NodesMin      int            `json:"nodes_min"`
	NodesMax      int            `json:"nodes_max"`
	Walltime      time.Duration  `json:"walltime"`
	PriorityClass int            `json:"priority_class"`
	Checkpoint    CheckpointMode `json:"checkpoint"`
	// CheckpointMinutes estimates how long one checkpoint takes (f8); 0 = unknown.
	CheckpointMinutes float64 `json:"checkpoint_minutes,omitempty"`
	// HotDataFraction is the share of input data on the hot tier (f5); nil = unknown.
	HotDataFraction *float64     `json:"hot_data_fraction,omitempty"`
	DependsOn       []Dependency `json:"depends_on,omitempty"`
	DependencyAny   bool         `json:"dependency_any,omitempty"` // DependsOn holds when any one condition does (Slurm's '?')
	Array           *ArraySpec   `json:"array,omitempty"`
	Constraints     []string     `json:"constraints,omitempty"` // node features, all required
	GPUType         string       `json:"gpu_type,omitempty"`
	GPUsPerNode     int          `json:"gpus_per_node,omitempty"`
	Stdout          string       `json:"stdout,omitempty"` // output file pattern (%j %A %a %x)
	Stderr          string       `json:"stderr,omitempty"`
	// CheckpointSignal names the signal of signal-mode checkpoints (e.g.
	// "USR1", "SIGUSR2", "10"); empty = SIGUSR1. CheckpointSignalSecs, when
	// > 0, also sends it that many seconds before the walltime ends
	// (#SBATCH --signal=SIG@secs).
	CheckpointSignal     string `json:"checkpoint_signal,omitempty"`
	CheckpointSignalSecs int    `json:"checkpoint_signal_secs,omitempty"`
	// CheckpointHook is the command a hook-mode checkpoint runs (sh -c, with
	// the job's environment); CheckpointWebhook the URL a webhook-mode
	// checkpoint POSTs to.
	CheckpointHook    string `json:"checkpoint_hook,omitempty"`
	CheckpointWebhook string `json:"checkpoint_webhook,omitempty"`
	// Requeue puts the allocation back in the queue, rather than failing
	// it, when one of its nodes fails (sbatch --requeue).
	Requeue bool `json:"requeue,omitempty"`

	// BeginTime: not eligible to start before then (sbatch --begin); zero = at once.
	BeginTime time.Time `json:"begin_time,omitzero"`
	// Hold submits it held (sbatch --hold): it waits, JobHeldUser, until released.
	Hold bool `json:"hold,omitempty"`
	// NodeList restricts it to these nodes (sbatch -w, expanded, sorted);
	// ExcludeNodes keeps it off these (sbatch -x).
	NodeList     []string `json:"node_list,omitempty"`
	ExcludeNodes []string `json:"exclude_nodes,omitempty"`
	// MailType and MailUser are sbatch's --mail-type/--mail-user, kept for a
	// site mail hook.
	MailType string `json:"mail_type,omitempty"`
	MailUser string `json:"mail_user,omitempty"`
	// QOS is the site QOS name it was submitted with (its class is in PriorityClass).
	QOS string `json:"qos,omitempty"`
	// Reservation is the reservation it runs in (sbatch --reservation):
	// only that reservation's nodes, only while it is active.
	Reservation string `json:"reservation,omitempty"`
	// Tasks (sbatch -n, --ntasks-per-node, -c, --mem, --mem-per-cpu,
	// --gpus-per-task, --exclusive, -O): see tasks.go. 0 = not given.
	Ntasks        int   `json:"ntasks,omitempty"`
	NtasksPerNode int   `json:"ntasks_per_node,omitempty"`
	CPUsPerTask   int   `json:"cpus_per_task,omitempty"`
	MemPerNodeMB  int64 `json:"mem_per_node_mb,omitempty"`
	MemPerCPUMB   int64 `json:"mem_per_cpu_mb,omitempty"`
	GPUsPerTask   int   `json:"gpus_per_task,omitempty"`
	Exclusive     bool  `json:"exclusive,omitempty"`
	Overcommit    bool  `json:"overcommit,omitempty"`
	// ScriptBytes is the batch script byte for byte when it is not UTF-8
	// (a Latin-1 comment); Script then holds the same text with those bytes
	// as '?' (JSON, display). Empty for UTF-8 scripts. See SetScript.
	ScriptBytes []byte `json:"script_bytes,omitempty"`
	// Interactive marks an allocation for a user at a terminal (latticectl
	// alloc, salloc, run --pty outside an allocation): its entrypoint is a
	// placeholder that only waits for steps (no process on the nodes), and
	// the leader ends it after the interactive idle timeout with no step.
	Interactive bool `json:"interactive,omitempty"`
}

// Limits on requests.
const (
	MaxPriorityClass = 10
	MaxScriptBytes   = 1 << 20
	MaxArrayTasks    = 100000
	MaxWalltime      = 365 * 24 * time.Hour
	DefaultWalltime  = time.Hour
	DefaultTenant    = "default"
)

// ApplyDefaults fills what a request may leave out, before it is
// proposed: today exactly ApplyDefaultsLevel0.
func (r *Request) ApplyDefaults() { r.ApplyDefaultsLevel0() }

// ApplyDefaultsLevel0 fills what a request may leave out: the tenant, the
// node maximum (= minimum), the walltime, the checkpoint mode; it
// normalises constraints. The vCluster default is the quorum's to fill.
// It is frozen: the Raft log's entries of feature level 0 are applied
// with exactly these rules (quorum Apply), on every member, forever.
// Tighten or loosen a rule in ApplyDefaults instead, which is checked before a
// proposal (TestLevel0RulesAreFrozen pins this function's verdicts).
func (r *Request) ApplyDefaultsLevel0() {
	if r.Tenant == "" {
		r.Tenant = DefaultTenant
	}
	if r.NodesMax == 0 {
		r.NodesMax = r.NodesMin
	}
	if r.Walltime == 0 {
		r.Walltime = DefaultWalltime
	}
	if r.Checkpoint == "" {
		r.Checkpoint = CheckpointNone
	}
	r.Constraints = NormalizeFeatures(slices.Clone(r.Constraints))
	r.normalizeDependencies()
}

// Validate checks a request. It does not know the cluster: whether the
// vCluster exists or the nodes are enough is for the quorum to say.
func (r *Request) Validate() error { return r.ValidateLevel0() }

// ValidateLevel0 is Validate's rules of feature level 0.
// It is frozen: the Raft log's entries of feature level 0 are applied
// with exactly these rules (quorum Apply), on every member, forever.
// Tighten or loosen a rule in Validate instead, which is checked before a
// proposal (TestLevel0RulesAreFrozen pins this function's verdicts).
func (r *Request) ValidateLevel0() error {
	if r.Name != "" && (len(r.Name) > 200 || strings.ContainsAny(r.Name, "\n\r\x00")) {
		return fieldErr("name", r.Name, "up to 200 characters on one line")
	}
	if r.Tenant != "" && !validName(r.Tenant) {
		return fieldErr("tenant", r.Tenant, "letters, digits, '.', '-' and '_'")
	}
	if r.VCluster != "" && !validName(r.VCluster) {
		return fieldErr("vcluster", r.VCluster, "letters, digits, '.', '-' and '_'")
	}
	if len(r.Command) == 0 && r.Script == "" && !r.Interactive {
		return fieldErr("entrypoint", "", "a command after -- or a batch script")
	}
	if len(r.Command) > 0 && r.Script != "" {
		return fieldErr("entrypoint", "", "either a command or a batch script, not both")
	}
	if len(r.Script) > MaxScriptBytes {
		return fieldErr("script", fmt.Sprintf("%d bytes", len(r.Script)), fmt.Sprintf("at most %d bytes", MaxScriptBytes))
	}
	if r.NodesMin < 1 {
		return fieldErr("nodes", itoa(r.NodesMin), "a node count >= 1, or MIN-MAX with 1 <= MIN <= MAX")
	}
	if r.NodesMax < r.NodesMin && !(r.NodesMax == 0 && r.Ntasks > 0) { // 0 with tasks: the server sizes it
		return fieldErr("nodes", itoa(r.NodesMin)+"-"+itoa(r.NodesMax), "MIN-MAX with 1 <= MIN <= MAX")
	}
	if r.Walltime <= 0 || r.Walltime > MaxWalltime {
		return fieldErr("walltime", r.Walltime.String(), "a duration > 0 and at most 365 days")
	}
	if r.PriorityClass < 0 || r.PriorityClass > MaxPriorityClass {
		return fieldErr("priority-class", itoa(r.PriorityClass), "an integer 0..10")
	}
	if _, err := ParseCheckpointMode(string(r.Checkpoint)); err != nil {
		return err
	}
	if err := r.validateCheckpoint(); err != nil {
		return err
	}
	if r.CheckpointMinutes < 0 {
		return fieldErr("checkpoint-minutes", fmt.Sprint(r.CheckpointMinutes), "a number of minutes >= 0")
	}
	if f := r.HotDataFraction; f != nil && (*f < 0 || *f > 1) {
		return fieldErr("hot-data-fraction", fmt.Sprint(*f), "a fraction between 0 and 1")
	}
	if r.GPUsPerNode < 0 {
		return fieldErr("gpus-per-node", itoa(r.GPUsPerNode), "a count >= 0")
	}
	if err := r.validateTasks(); err != nil {
		return err
	}
	if err := r.validateDependencies(); err != nil {
		return err
	}
	if a := r.Array; a != nil {
		if a.Start < 0 || a.End < a.Start || a.Step < 1 || a.MaxConcurrent < 0 || (a.End-a.Start)/a.Step+1 > MaxArrayTasks {
			return fieldErr("array", fmt.Sprintf("%d-%d:%d%%%d", a.Start, a.End, a.Step, a.MaxConcurrent),
				fmt.Sprintf("START-END[:STEP][%%MAX] with 0 <= START <= END, STEP >= 1, at most %d tasks", MaxArrayTasks))
		}
	}
	for _, c := range r.Constraints {
		if c == "" || strings.ContainsAny(c, " \t\n&|,") {
			return fieldErr("constraint", c, "FEATURE[&FEATURE...] of non-empty feature names")
		}
	}
	for _, e := range r.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fieldErr("env", e, "KEY=VALUE")
		}
	}
	for _, n := range r.NodeList {
		if !validName(n) {
			return fieldErr("nodelist", n, hostlistAllowed)
		}
	}
	for _, n := range r.ExcludeNodes {
		if !validName(n) {
			return fieldErr("exclude", n, hostlistAllowed)
		}
	}
	if len(r.NodeList) > 0 {
		allowed := 0
		for _, n := range r.NodeList {
			if !slices.Contains(r.ExcludeNodes, n) {
				allowed++
			}
		}
		if r.NodesMin > allowed {
			return fieldErr("nodes", itoa(r.NodesMin), fmt.Sprintf("at most %d: --nodelist names %d node(s) not excluded", allowed, allowed))
		}
	}
	if r.QOS != "" && !validName(r.QOS) {
		return fieldErr("qos", r.QOS, "letters, digits, '.', '-' and '_'")
	}
	if r.MailType != "" {
		if _, err := ParseMailType(r.MailType); err != nil {
			return err
		}
	}
	if len(r.MailUser) > 256 || strings.ContainsAny(r.MailUser, " \t\n\r\x00") {
		return fieldErr("mail-user", r.MailUser, "one address of up to 256 characters")
	}
	return nil
}

// Transition is one state change in an allocation's history.
type Transition struct {
	State  AllocState `json:"state"`
	Reason string     `json:"reason,omitempty"`
	Time   time.Time  `json:"time"`
}

// Allocation is one unit of work and everything the quorum knows about it.
type Allocation struct {
	ID      uint64 `json:"id"`
	Request `json:"request"`

	ArrayJobID uint64 `json:"array_job_id,omitempty"` // id of the array's first task; 0 = not an array
	ArrayIndex int    `json:"array_index,omitempty"`
	DAGID      uint64 `json:"dag_id,omitempty"`
	// Service names the service this allocation is an instance of ("" =
	// none): services.go.
	Service string `json:"service,omitempty"`
	// StopGrace is the SIGTERM→SIGKILL time when it is stopped (a service
	// instance's drain time); 0 = the site's kill grace.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
	// ArrayMaxConcurrent is copied from the array spec onto every task.
	ArrayMaxConcurrent int `json:"array_max_concurrent,omitempty"`
	// ReasonDetail says more about Reason in a sentence, e.g. which
	// dependency can never be satisfied.
	ReasonDetail string `json:"reason_detail,omitempty"`

	State    AllocState `json:"state"`
	Reason   string     `json:"reason,omitempty"`
	Nodes    []string   `json:"nodes,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`

	SubmitTime   time.Time `json:"submit_time"`
	EligibleTime time.Time `json:"eligible_time,omitzero"` // when its dependencies were met
	StartTime    time.Time `json:"start_time,omitzero"`
	EndTime      time.Time `json:"end_time,omitzero"`

	History         []Transition `json:"history,omitempty"`
	RequeueCount    int          `json:"requeue_count,omitempty"`
	CheckpointCount int          `json:"checkpoint_count,omitempty"`
	// LastCheckpointAt is when its latest checkpoint was acknowledged.
	LastCheckpointAt time.Time `json:"last_checkpoint_at,omitzero"`
	// CheckpointReason and CheckpointDeadline describe the checkpoint in
	// progress while CHECKPOINTING (user, proactive, signal, reclaim, preempt).
	CheckpointReason   string    `json:"checkpoint_reason,omitempty"`
	CheckpointDeadline time.Time `json:"checkpoint_deadline,omitzero"`
	// Preemption is the latest reclaim or preemption that stopped it (kept
	// after it is requeued, so users can see why and by whom).
	Preemption *Preemption `json:"preemption,omitempty"`
	// CancelRequested marks an active allocation a user cancelled: its
	// agent is stopping it and will report it Cancelled.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// CancelReason is the reason the leader gave when it cancelled it
	// itself (IdleTimeout); empty for a user's cancel (Cancelled).
	CancelReason string `json:"cancel_reason,omitempty"`
	// Steps are the steps launched inside it (latticectl run, srun), by id.
	Steps []Step `json:"steps,omitempty"`
	// ModifyVersion is the quorum state version of the allocation's last change.
	ModifyVersion uint64 `json:"modify_version,omitempty"`
	// Held is who holds it while pending: HoldUser, HoldAdmin or "" (not held).
	Held string `json:"held,omitempty"`
	// RequeueRequested marks an active allocation a user requeued: its agent
	// is stopping it, and its end sends it back to PENDING.
	RequeueRequested bool `json:"requeue_requested,omitempty"`
	// SuspendedAt is when an admin suspended its run (latticectl suspend;
	// zero: not suspended); SuspendedFor is how long its run was suspended
	// before, which its walltime does not count.
	SuspendedAt  time.Time     `json:"suspended_at,omitzero"`
	SuspendedFor time.Duration `json:"suspended_for,omitempty"`
	// SuspendedOn lists the nodes a preemption suspended it on (its
	// processes frozen there, PreemptSuspend) while it is SUSPENDED: it
	// resumes on them once the allocation it was suspended for
	// (Preemption.ForAlloc) has ended. Each of them carries
	// Node.SuspendedAlloc. Empty otherwise.
	SuspendedOn []string `json:"suspended_on,omitempty"`
	// Usage is what its latest ended run used, as its agent measured it
	// (cgroups); nil when not measured.
	Usage *Usage `json:"usage,omitempty"`
}

// DisplayID is the id users see: "ID", or "ARRAYID_INDEX" for array tasks.
func (a *Allocation) DisplayID() string {
	if a.ArrayJobID != 0 {
		return strconv.FormatUint(a.ArrayJobID, 10) + "_" + strconv.Itoa(a.ArrayIndex)
	}
	return strconv.FormatUint(a.ID, 10)
}

// Clone returns a deep copy.
func (a *Allocation) Clone() *Allocation {
	c := *a
	c.Command = slices.Clone(a.Command)
	c.Env = slices.Clone(a.Env)
	c.Constraints = slices.Clone(a.Constraints)
	c.NodeList = slices.Clone(a.NodeList)
	c.ExcludeNodes = slices.Clone(a.ExcludeNodes)
	c.DependsOn = slices.Clone(a.DependsOn)
	for i := range c.DependsOn {
		c.DependsOn[i].IDs = slices.Clone(c.DependsOn[i].IDs)
	}
	if a.Array != nil {
		arr := *a.Array
		c.Array = &arr
	}
	if a.HotDataFraction != nil {
		f := *a.HotDataFraction
		c.HotDataFraction = &f
	}
	c.Nodes = slices.Clone(a.Nodes)
	c.SuspendedOn = slices.Clone(a.SuspendedOn)
	if a.ExitCode != nil {
		e := *a.ExitCode
		c.ExitCode = &e
	}
	c.History = slices.Clone(a.History)
	c.Steps = cloneSteps(a.Steps)
	if a.Preemption != nil {
		p := *a.Preemption
		c.Preemption = &p
	}
	return &c
}

func itoa(i int) string { return strconv.Itoa(i) }

// MaxCheckpointHookBytes bounds a checkpoint hook command or webhook URL.
const MaxCheckpointHookBytes = 4096

func (r *Request) validateCheckpoint() error {
	if _, err := ParseCheckpointMode(string(r.Checkpoint)); err != nil {
		return err
	}
	if r.CheckpointSignal != "" {
		if _, err := ParseSignal(r.CheckpointSignal); err != nil {
			return err
		}
	}
	if r.CheckpointSignalSecs < 0 || r.CheckpointSignalSecs > 65535 {
		return fieldErr("signal", itoa(r.CheckpointSignalSecs)+"s", "a lead time of 0..65535 seconds")
	}
	if len(r.CheckpointHook) > MaxCheckpointHookBytes || strings.ContainsRune(r.CheckpointHook, 0) {
		return fieldErr("checkpoint-hook", fmt.Sprintf("%d bytes", len(r.CheckpointHook)), fmt.Sprintf("a command of at most %d bytes", MaxCheckpointHookBytes))
	}
	if r.Checkpoint == CheckpointHook && strings.TrimSpace(r.CheckpointHook) == "" {
		return fieldErr("checkpoint-hook", "", "a command to run (--checkpoint-hook CMD) when --checkpoint hook")
	}
	if r.Checkpoint == CheckpointWebhook {
		u := r.CheckpointWebhook
		if !(strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) || len(u) > MaxCheckpointHookBytes || strings.ContainsAny(u, " \t\n") {
			return fieldErr("checkpoint-webhook", u, "an http:// or https:// URL (--checkpoint-webhook URL) when --checkpoint webhook")
		}
	}
	return nil
}
