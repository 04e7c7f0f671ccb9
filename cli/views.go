package cli

import (
	"cmp"
	"fmt"
	"slices"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// The JSON (and YAML) shapes of latticectl. The fields CLI.md names come
// first, in its order; everything after them is an extension. Never rename
// or remove a field: scripts depend on them.

// allocationView is an allocation as `status -o json` lists it and `show -o
// json` prints it. id is the allocation's own number (array tasks have
// their own ids); display_id is what users type ("12" or "12_3").
type allocationView struct {
	ID              uint64   `json:"id"`
	Name            string   `json:"name"`
	Tenant          string   `json:"tenant"`
	Project         string   `json:"project"`
	VCluster        string   `json:"vcluster"`
	State           string   `json:"state"`
	Reason          string   `json:"reason"`
	Nodes           []string `json:"nodes"`
	NodeCount       int      `json:"node_count"`
	PriorityClass   int32    `json:"priority_class"`
	WalltimeSeconds int64    `json:"walltime_seconds"`
	SubmitTime      *string  `json:"submit_time"`
	StartTime       *string  `json:"start_time"`
	EndTime         *string  `json:"end_time"`
	ExitCode        *int32   `json:"exit_code"`
	DAGID           *uint64  `json:"dag_id"`
	ArrayIndex      *int32   `json:"array_index"`
	Checkpoint      string   `json:"checkpoint"`

	// Extensions.
	DisplayID       string  `json:"display_id"`
	ArrayJobID      *uint64 `json:"array_job_id"`
	NodesMin        int32   `json:"nodes_min"`
	NodesMax        int32   `json:"nodes_max"`
	EligibleTime    *string `json:"eligible_time"`
	ReasonDetail    string  `json:"reason_detail,omitempty"` // e.g. the dependency that can never be satisfied
	RequeueCount    int32   `json:"requeue_count"`
	CheckpointCount int32   `json:"checkpoint_count"`
	LastCheckpoint  *string `json:"last_checkpoint"`
	// While CHECKPOINTING: why (reclaim, preempt, user, proactive, signal) and until when.
	CheckpointReason   string           `json:"checkpoint_reason,omitempty"`
	CheckpointDeadline *string          `json:"checkpoint_deadline,omitempty"`
	Preemption         *preemptionView  `json:"preemption,omitempty"`  // the latest reclaim or preemption
	History            []transitionView `json:"history,omitempty"`     // show only
	Steps              []stepView       `json:"steps,omitempty"`       // show only
	Explanation        *explanationView `json:"explanation,omitempty"` // show only, while pending
	// ExpectedStart is the backfill plan's start of a pending allocation (status --start).
	ExpectedStart *string `json:"expected_start,omitempty"`
}

// preemptionView says who took an allocation's nodes, for whom and when.
type preemptionView struct {
	Kind          string  `json:"kind"` // reclaim, preempt
	ByVCluster    string  `json:"by_vcluster"`
	ForAllocation string  `json:"for_allocation"`
	Time          *string `json:"time"`
	Deadline      *string `json:"deadline"`
	// Action is what the preemption did: checkpoint, requeue, cancel,
	// suspend ("" from servers that predate preemption modes).
	Action string `json:"action,omitempty"`
}

// preemptionText is one sentence on the latest reclaim or preemption.
func preemptionText(p *preemptionView, when string) string {
	if p.Kind == model.PreemptReclaim {
		return fmt.Sprintf("its borrowed nodes were reclaimed by vCluster %s for allocation %s at %s", p.ByVCluster, p.ForAllocation, when)
	}
	how := map[string]string{"checkpoint": " (checkpointed and requeued)", "requeue": " (requeued)", "cancel": " (cancelled)",
		"suspend": " (suspended on its nodes until it ended)"}[p.Action]
	return fmt.Sprintf("preempted in vCluster %s by higher-class allocation %s at %s%s", p.ByVCluster, p.ForAllocation, when, how)
}

type transitionView struct {
	State  string  `json:"state"`
	Reason string  `json:"reason"`
	Time   *string `json:"time"`
}

func allocationOf(a *latticev1.Allocation, detail bool) allocationView {
	req := a.GetRequest()
	v := allocationView{
		ID:              a.GetId(),
		Name:            req.GetName(),
		Tenant:          req.GetTenant(),
		Project:         req.GetProject(),
		VCluster:        req.GetVcluster(),
		State:           a.GetState(),
		Reason:          a.GetReason(),
		Nodes:           nonNil(a.GetNodes()),
		PriorityClass:   req.GetPriorityClass(),
		WalltimeSeconds: req.GetWalltimeSeconds(),
		SubmitTime:      rfc3339(a.GetSubmitTimeUnixMs()),
		StartTime:       rfc3339(a.GetStartTimeUnixMs()),
		EndTime:         rfc3339(a.GetEndTimeUnixMs()),
		Checkpoint:      cmp.Or(req.GetCheckpoint(), string(model.CheckpointNone)),
		DisplayID:       displayID(a),
		NodesMin:        req.GetNodesMin(),
		NodesMax:        req.GetNodesMax(),
		EligibleTime:    rfc3339(a.GetEligibleTimeUnixMs()),
		ReasonDetail:    a.GetReasonDetail(),
		RequeueCount:    a.GetRequeueCount(),
		CheckpointCount: a.GetCheckpointCount(),
	}
	v.NodeCount = nodeCount(a)
	v.LastCheckpoint = rfc3339(a.GetLastCheckpointUnixMs())
	v.CheckpointReason, v.CheckpointDeadline = a.GetCheckpointReason(), rfc3339(a.GetCheckpointDeadlineUnixMs())
	if p := a.GetPreemption(); p != nil {
		for_ := p.GetForDisplayId()
		if for_ == "" {
			for_ = fmt.Sprint(p.GetForAllocation())
		}
		v.Preemption = &preemptionView{Kind: p.GetKind(), ByVCluster: p.GetByVcluster(), ForAllocation: for_,
			Time: rfc3339(p.GetTimeUnixMs()), Deadline: rfc3339(p.GetDeadlineUnixMs()), Action: p.GetAction()}
	}
	if a.GetHasExitCode() {
		e := a.GetExitCode()
		v.ExitCode = &e
	}
	if d := a.GetDagId(); d != 0 {
		v.DAGID = &d
	}
	if aj := a.GetArrayJobId(); aj != 0 {
		i := a.GetArrayIndex()
		v.ArrayIndex, v.ArrayJobID = &i, &aj
	}
	if detail {
		for _, t := range a.GetHistory() {
			v.History = append(v.History, transitionView{State: t.GetState(), Reason: t.GetReason(), Time: rfc3339(t.GetTimeUnixMs())})
		}
		for _, st := range a.GetSteps() {
			sv := stepView{ID: st.GetId(), Nodes: st.GetNodes(), Tasks: st.GetTasks(), Command: st.GetCommand(), State: st.GetState(),
				StartTime: rfc3339(st.GetStartTimeUnixMs()), EndTime: rfc3339(st.GetEndTimeUnixMs()), usageView: usageViewOf(st.GetUsage())}
			if st.GetHasExitCode() {
				e := st.GetExitCode()
				sv.ExitCode = &e
			}
			v.Steps = append(v.Steps, sv)
		}
		if e := a.GetExplanation(); e != nil {
			ev := explanationOf(e)
			v.Explanation = &ev
		}
	}
	return v
}

// nodeCount is the number of nodes held, or while none are held the number
// asked for (as squeue's NODES column shows).
func nodeCount(a *latticev1.Allocation) int {
	if n := len(a.GetNodes()); n > 0 {
		return n
	}
	return int(a.GetRequest().GetNodesMin())
}

func displayID(a *latticev1.Allocation) string {
	if s := a.GetDisplayId(); s != "" {
		return s
	}
	if aj := a.GetArrayJobId(); aj != 0 {
		return fmt.Sprintf("%d_%d", aj, a.GetArrayIndex())
	}
	return fmt.Sprint(a.GetId())
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// explanationView is `explain -o json`.
type explanationView struct {
	ID             string        `json:"id"`
	State          string        `json:"state"`
	Reason         string        `json:"reason"`
	Score          float64       `json:"score"`
	Factors        []factorView  `json:"factors"`
	ExpectedStart  *string       `json:"expected_start"`
	Filtered       []filterCount `json:"filtered"`
	Message        string        `json:"message"`
	Computed       *string       `json:"computed"`
	WeightsProfile string        `json:"weights_profile"`
	QueuePosition  int32         `json:"queue_position"`
	Nodes          []string      `json:"nodes"`
	// Reservation: the node reservation behind the reason, or the one it
	// runs in. Started, WalltimeSeconds, WalltimeLeftSeconds: a running
	// allocation's start and time limit.
	Reservation         string  `json:"reservation,omitempty"`
	Started             *string `json:"started,omitempty"`
	WalltimeSeconds     int64   `json:"walltime_seconds,omitempty"`
	WalltimeLeftSeconds int64   `json:"walltime_left_seconds,omitempty"`
}

type factorView struct {
	Name         string  `json:"name"`
	Title        string  `json:"title"`
	Value        float64 `json:"value"`
	Weight       float64 `json:"weight"`
	Contribution float64 `json:"contribution"`
}

type filterCount struct {
	Filter  string `json:"filter"`
	Removed int32  `json:"removed"`
}

func explanationOf(e *latticev1.Explanation) explanationView {
	v := explanationView{
		ID:              e.GetId(),
		State:           e.GetState(),
		Reason:          e.GetReason(),
		Score:           e.GetScore(),
		Factors:         []factorView{},
		ExpectedStart:   rfc3339(e.GetExpectedStartUnixMs()),
		Filtered:        []filterCount{},
		Message:         e.GetMessage(),
		Computed:        rfc3339(e.GetComputedUnixMs()),
		WeightsProfile:  e.GetWeightsProfile(),
		QueuePosition:   e.GetQueuePosition(),
		Nodes:           nonNil(e.GetNodes()),
		Reservation:     e.GetReservation(),
		Started:         rfc3339(e.GetStartUnixMs()),
		WalltimeSeconds: e.GetWalltimeSeconds(), WalltimeLeftSeconds: e.GetWalltimeLeftSeconds(),
	}
	for _, f := range e.GetFactors() {
		v.Factors = append(v.Factors, factorView{Name: f.GetName(), Title: f.GetTitle(), Value: f.GetValue(),
			Weight: f.GetWeight(), Contribution: f.GetContribution()})
	}
	for _, f := range e.GetFiltered() {
		v.Filtered = append(v.Filtered, filterCount{Filter: f.GetFilter(), Removed: f.GetRemoved()})
	}
	return v
}

// nodeView is a node as `nodes -o json` lists it. allocation is the id of
// the allocation running on it (a number, like an allocation's id) or null.
type nodeView struct {
	Name            string   `json:"name"`
	State           string   `json:"state"`
	HomeVCluster    string   `json:"home_vcluster"`
	CurrentVCluster string   `json:"current_vcluster"`
	Group           int32    `json:"group"`
	Fingerprint     string   `json:"fingerprint"`
	Allocation      *uint64  `json:"allocation"`
	PowerWatts      int32    `json:"power_watts"`
	GPUType         string   `json:"gpu_type"`
	GPUs            int32    `json:"gpus"`
	Features        []string `json:"features"`

	// Extensions.
	AllocationDisplayID *string `json:"allocation_display_id"`
	StateReason         string  `json:"state_reason"`
	IdleWatts           int32   `json:"idle_watts"`
	BusyWatts           int32   `json:"busy_watts"`
	Agent               string  `json:"agent"`
	LastHeartbeat       *string `json:"last_heartbeat"`
	// Elastic sharing: lent out (current != home), being reclaimed by its
	// home, held for a pending allocation, reclaimed from a vCluster.
	Borrowed        bool    `json:"borrowed"`
	ReturnRequested bool    `json:"return_requested"`
	ReservedFor     *uint64 `json:"reserved_for"`
	ReservedUntil   *string `json:"reserved_until"`
	ReclaimedFrom   string  `json:"reclaimed_from,omitempty"`
	ReclaimedAt     *string `json:"reclaimed_at,omitempty"`
	// What the agent detected (0: not detected), an allocation whose
	// processes may still run here (Cleanup), the measured draw in force.
	CPUs          int32   `json:"cpus,omitempty"`
	MemoryMB      int64   `json:"memory_mb,omitempty"`
	Cleanup       *uint64 `json:"cleanup_allocation,omitempty"`
	MeasuredWatts int32   `json:"measured_watts,omitempty"`
	MeasuredAt    *string `json:"measured_at,omitempty"`
}

func nodeOf(n *latticev1.Node) nodeView {
	v := nodeView{
		Name:            n.GetName(),
		State:           n.GetState(),
		HomeVCluster:    n.GetHomeVcluster(),
		CurrentVCluster: n.GetCurrentVcluster(),
		Group:           n.GetGroup(),
		Fingerprint:     n.GetFingerprint(),
		PowerWatts:      n.GetPowerWatts(),
		GPUType:         n.GetGpuType(),
		GPUs:            n.GetGpus(),
		Features:        nonNil(n.GetFeatures()),
		StateReason:     n.GetStateReason(),
		IdleWatts:       n.GetIdleWatts(),
		BusyWatts:       n.GetBusyWatts(),
		Agent:           n.GetAgent(),
		LastHeartbeat:   rfc3339(n.GetLastHeartbeatUnixMs()),
		Borrowed:        n.GetBorrowed(),
		ReturnRequested: n.GetReturnRequested(),
		ReservedUntil:   rfc3339(n.GetReservedUntilUnixMs()),
		ReclaimedFrom:   n.GetReclaimedFrom(),
		ReclaimedAt:     rfc3339(n.GetReclaimedAtUnixMs()),
		CPUs:            n.GetCpus(),
		MemoryMB:        n.GetMemoryMb(),
		MeasuredWatts:   n.GetMeasuredWatts(),
	}
	if n.GetMeasuredWatts() > 0 {
		v.MeasuredAt = rfc3339(n.GetMeasuredAtUnixMs())
	}
	if id := n.GetCleanupAllocation(); id != 0 {
		v.Cleanup = &id
		if v.StateReason == "" {
			v.StateReason = fmt.Sprintf("processes of allocation %d may still run here: no new work until its agent confirms they are gone (or an admin undrains the node)", id)
		}
	}
	if id := n.GetReservedFor(); id != 0 {
		v.ReservedFor = &id
	}
	if id := n.GetAllocation(); id != 0 {
		v.Allocation = &id
		d := cmp.Or(n.GetAllocationDisplayId(), fmt.Sprint(id))
		v.AllocationDisplayID = &d
	}
	return v
}

// quorumView is `quorum status -o json`.
type quorumView struct {
	LeaderID    string         `json:"leader_id"`
	Term        uint64         `json:"term"`
	CommitIndex uint64         `json:"commit_index"`
	Members     []quorumMember `json:"members"`

	// Extensions.
	AppliedIndex uint64 `json:"applied_index"`
	StateVersion uint64 `json:"state_version"`
	// ClusterID names the cluster (agents check it); "" until minted.
	ClusterID string `json:"cluster_id,omitempty"`
}

type quorumMember struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	Role     string `json:"role"`
	Healthy  bool   `json:"healthy"`
	Voter    bool   `json:"voter"`
	// Problem says why it is not healthy; Lag is how many committed
	// entries it has not applied.
	Problem string `json:"problem,omitempty"`
	Lag     uint64 `json:"lag"`
	// FeatureLevel is the log level its latticed knows (0: a release
	// before levels, or unknown); Build names its latticed.
	FeatureLevel uint32 `json:"feature_level"`
	Build        string `json:"build,omitempty"`
}

func quorumOf(q *latticev1.QuorumStatusResponse) quorumView {
	v := quorumView{
		LeaderID:     q.GetLeaderId(),
		Term:         q.GetTerm(),
		CommitIndex:  q.GetCommitIndex(),
		Members:      []quorumMember{},
		AppliedIndex: q.GetAppliedIndex(),
		StateVersion: q.GetStateVersion(),
		ClusterID:    q.GetClusterId(),
	}
	for _, m := range q.GetMembers() {
		v.Members = append(v.Members, quorumMember{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), APIAddr: m.GetApiAddr(),
			Role: m.GetRole(), Healthy: m.GetHealthy(), Voter: m.GetVoter(), Problem: m.GetProblem(), Lag: m.GetLag(),
			FeatureLevel: m.GetFeatureLevel(), Build: m.GetBuild()})
	}
	return v
}

// vclusterView is `vcluster list|show -o json`. weights maps f1..f9 to
// their weight; reservation_depth -1 means all (conservative backfill).
type vclusterView struct {
	Name             string             `json:"name"`
	Type             string             `json:"type"`
	WeightsProfile   string             `json:"weights_profile"`
	Weights          map[string]float64 `json:"weights"`
	CycleSeconds     float64            `json:"cycle_seconds"`
	MinIntervalSecs  float64            `json:"min_interval_seconds"`
	ReservationDepth int32              `json:"reservation_depth"`
	AllowLending     bool               `json:"allow_lending"`
	AllowBorrowing   bool               `json:"allow_borrowing"`
	PowerCapWatts    int64              `json:"power_cap_watts"`
	Usage            vclusterUsage      `json:"usage"`
	LastCycle        *string            `json:"last_cycle"`
	LastCycleSeconds float64            `json:"last_cycle_seconds"`
	// Elastic sharing and preemption policy.
	Algorithm                    string  `json:"algorithm"`
	MaxLendFraction              float64 `json:"max_lend_fraction"`
	ReclaimGraceSeconds          float64 `json:"reclaim_grace_seconds"`
	ReclaimBackoffSeconds        float64 `json:"reclaim_backoff_seconds"`
	Preemption                   bool    `json:"preemption"`
	PreemptHorizonSeconds        float64 `json:"preempt_horizon_seconds"`
	CheckpointableOnlyOnBorrowed bool    `json:"checkpointable_only_on_borrowed"`
	LoopPanics                   int64   `json:"loop_panics"`
	// FairShare is what f3 ranks tenants by (usage, service, job-service);
	// ServiceProtect, whether jobs that would take their tenant above
	// Jain's threshold get a reservation.
	FairShare      string `json:"fair_share"`
	ServiceProtect bool   `json:"service_protect"`
	// RunningEnds is when the plan expects running work to end (predicted,
	// walltime); PredictedStarts, whether pending jobs start in holes their
	// predicted runtimes fit.
	RunningEnds     string `json:"running_ends"`
	PredictedStarts bool   `json:"predicted_starts"`
	// PreemptMode is what preemption does to lower-class work that cannot
	// checkpoint: off, checkpoint (never preempted), requeue, cancel,
	// suspend (Slurm's PreemptMode).
	PreemptMode string `json:"preempt_mode"`
	// Partitions are the partition names (-p) that resolve to it.
	Partitions []string `json:"partitions"`
}

type vclusterUsage struct {
	HomeNodes     int32 `json:"home_nodes"`
	CurrentNodes  int32 `json:"current_nodes"`
	BusyNodes     int32 `json:"busy_nodes"`
	IdleNodes     int32 `json:"idle_nodes"`
	LentNodes     int32 `json:"lent_nodes"`
	BorrowedNodes int32 `json:"borrowed_nodes"`
	Pending       int32 `json:"pending"`
	Running       int32 `json:"running"`
	PowerWatts    int64 `json:"power_watts"`
}

func vclusterOf(v *latticev1.VClusterInfo) vclusterView {
	u := v.GetUsage()
	out := vclusterView{
		Name:             v.GetName(),
		Type:             v.GetType(),
		WeightsProfile:   v.GetWeightsProfile(),
		Weights:          map[string]float64{},
		CycleSeconds:     float64(v.GetCycleMs()) / 1000,
		MinIntervalSecs:  float64(v.GetMinIntervalMs()) / 1000,
		ReservationDepth: v.GetReservationDepth(),
		AllowLending:     v.GetAllowLending(),
		AllowBorrowing:   v.GetAllowBorrowing(),
		PowerCapWatts:    v.GetPowerCapWatts(),
		Usage: vclusterUsage{
			HomeNodes: u.GetHomeNodes(), CurrentNodes: u.GetCurrentNodes(), BusyNodes: u.GetBusyNodes(),
			IdleNodes: u.GetIdleNodes(), LentNodes: u.GetLentNodes(), BorrowedNodes: u.GetBorrowedNodes(),
			Pending: u.GetPending(), Running: u.GetRunning(), PowerWatts: u.GetPowerWatts(),
		},
		LastCycle:        rfc3339(v.GetLastCycleUnixMs()),
		LastCycleSeconds: v.GetLastCycleSeconds(),

		Algorithm: v.GetAlgorithm(), MaxLendFraction: v.GetMaxLendFraction(),
		ReclaimGraceSeconds: float64(v.GetReclaimGraceMs()) / 1000, ReclaimBackoffSeconds: float64(v.GetReclaimBackoffMs()) / 1000,
		Preemption: v.GetPreemption(), PreemptHorizonSeconds: float64(v.GetPreemptHorizonMs()) / 1000,
		CheckpointableOnlyOnBorrowed: v.GetCheckpointableOnlyOnBorrowed(), LoopPanics: v.GetPanics(),
		Partitions: append([]string{}, v.GetPartitions()...),
		FairShare:  v.GetFairShare(), ServiceProtect: v.GetServiceProtect(),
		RunningEnds: v.GetRunningEnds(), PredictedStarts: v.GetPredictedStarts(), PreemptMode: preemptModeOf(v),
	}
	if out.FairShare == "" { // a server from before the setting
		out.FairShare = string(model.FairShareUsage)
	}
	if out.RunningEnds == "" { // a server from before the setting
		out.RunningEnds = string(model.RunningEndsPredicted)
	}
	for _, w := range v.GetWeights() {
		out.Weights[w.GetFactor()] = w.GetValue()
	}
	return out
}

// sortedWeights lists a weights map in factor order f1..f9.
func sortedWeights(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b)) })
	return keys
}

// powerView is `power -o json`.
type powerView struct {
	BudgetWatts    int64      `json:"budget_watts"`
	EstimatedWatts int64      `json:"estimated_watts"`
	VClusters      []powerUse `json:"vclusters"`
	// MeasuredWatts is what agents measured on MeasuredNodes nodes;
	// CountedWatts what the power check counts (measured where a committed
	// measurement stands, configured elsewhere).
	MeasuredWatts int64 `json:"measured_watts"`
	MeasuredNodes int32 `json:"measured_nodes"`
	CountedWatts  int64 `json:"counted_watts"`
}

type powerUse struct {
	VCluster       string `json:"vcluster"`
	BudgetWatts    int64  `json:"budget_watts"`
	EstimatedWatts int64  `json:"estimated_watts"`
	MeasuredWatts  int64  `json:"measured_watts"`
	MeasuredNodes  int32  `json:"measured_nodes"`
	CountedWatts   int64  `json:"counted_watts"`
}

func powerOf(p *latticev1.PowerStatus) powerView {
	v := powerView{BudgetWatts: p.GetBudgetWatts(), EstimatedWatts: p.GetEstimatedWatts(), VClusters: []powerUse{},
		MeasuredWatts: p.GetMeasuredWatts(), MeasuredNodes: p.GetMeasuredNodes(), CountedWatts: p.GetCountedWatts()}
	if v.CountedWatts == 0 {
		v.CountedWatts = v.EstimatedWatts // an older server
	}
	for _, u := range p.GetVclusters() {
		pu := powerUse{VCluster: u.GetVcluster(), BudgetWatts: u.GetBudgetWatts(), EstimatedWatts: u.GetEstimatedWatts(),
			MeasuredWatts: u.GetMeasuredWatts(), MeasuredNodes: u.GetMeasuredNodes(), CountedWatts: u.GetCountedWatts()}
		if pu.CountedWatts == 0 {
			pu.CountedWatts = pu.EstimatedWatts
		}
		v.VClusters = append(v.VClusters, pu)
	}
	return v
}

// tenantView is a row of `usage -o json`.
type tenantView struct {
	Name               string  `json:"name"`
	FairShareTarget    float64 `json:"fair_share_target"`
	UsageShare         float64 `json:"usage_share"`
	UsageNodeSeconds   float64 `json:"usage_node_seconds"`
	RunningAllocations int32   `json:"running_allocations"`
	RunningNodes       int32   `json:"running_nodes"`
	MaxNodes           int32   `json:"max_nodes"`
	MaxRunning         int32   `json:"max_running"`
}

func tenantOf(t *latticev1.TenantInfo) tenantView {
	return tenantView{Name: t.GetName(), FairShareTarget: t.GetFairShareTarget(), UsageShare: t.GetUsageShare(),
		UsageNodeSeconds: t.GetUsageNodeSeconds(), RunningAllocations: t.GetRunningAllocations(),
		RunningNodes: t.GetRunningNodes(), MaxNodes: t.GetMaxNodes(), MaxRunning: t.GetMaxRunning()}
}

// stepView is one step of an allocation (latticectl run, srun).
type stepView struct {
	ID        int32    `json:"id"`
	Nodes     []string `json:"nodes"`
	Tasks     int32    `json:"tasks"`
	Command   []string `json:"command"`
	State     string   `json:"state"`
	ExitCode  *int32   `json:"exit_code"`
	StartTime *string  `json:"start_time"`
	EndTime   *string  `json:"end_time"`
	// Usage: what its tasks used on its nodes (absent when not measured).
	*usageView
}
