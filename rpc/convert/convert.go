package convert

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// UnixMS is t in Unix milliseconds, 0 for the zero time (the API's "absent").
func UnixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// RequestFromProto converts a submitted request. It does not validate.
func RequestFromProto(p *latticev1.AllocationRequest) model.Request {
	if p == nil {
		return model.Request{}
	}
	r := model.Request{
		Name: p.Name, Tenant: p.Tenant, Project: p.Project, VCluster: p.Vcluster,
		Command: p.Command, Script: p.Script, WorkDir: p.WorkDir, Env: p.Env,
		NodesMin: int(p.NodesMin), NodesMax: int(p.NodesMax),
		Walltime:      time.Duration(p.WalltimeSeconds) * time.Second,
		PriorityClass: int(p.PriorityClass), Checkpoint: model.CheckpointMode(p.Checkpoint),
		CheckpointMinutes: p.CheckpointMinutes, Constraints: p.Constraints,
		GPUType: p.GpuType, GPUsPerNode: int(p.GpusPerNode), Stdout: p.Stdout, Stderr: p.Stderr,
		CheckpointSignal: p.CheckpointSignal, CheckpointSignalSecs: int(p.CheckpointSignalSecs),
		CheckpointHook: p.CheckpointHook, CheckpointWebhook: p.CheckpointWebhook, Requeue: p.Requeue,
	}
	if len(p.ScriptBytes) > 0 {
		r.SetScript(string(p.ScriptBytes)) // the exact bytes win over the text
	}
	if p.HotDataFraction > 0 {
		f := p.HotDataFraction
		r.HotDataFraction = &f
	}
	if p.BeginUnixMs > 0 {
		r.BeginTime = time.UnixMilli(p.BeginUnixMs).UTC()
	}
	r.Hold, r.MailType, r.MailUser, r.QOS = p.Hold, strings.ToUpper(strings.ReplaceAll(p.MailType, " ", "")), p.MailUser, p.Qos
	r.Reservation = p.Reservation
	if len(p.NodeList) > 0 {
		r.NodeList = slices.Compact(slices.Sorted(slices.Values(p.NodeList)))
	}
	if len(p.ExcludeNodes) > 0 {
		r.ExcludeNodes = slices.Compact(slices.Sorted(slices.Values(p.ExcludeNodes)))
	}
	for _, d := range p.DependsOn {
		r.DependsOn = append(r.DependsOn, model.Dependency{Condition: model.DependencyCondition(d.Condition), IDs: d.Ids, Task: d.Task})
	}
	r.DependencyAny = p.DependencyAny
	r.Ntasks, r.NtasksPerNode, r.CPUsPerTask = int(p.Ntasks), int(p.NtasksPerNode), int(p.CpusPerTask)
	r.MemPerNodeMB, r.MemPerCPUMB, r.GPUsPerTask = p.MemPerNodeMb, p.MemPerCpuMb, int(p.GpusPerTask)
	r.Exclusive, r.Overcommit = p.Exclusive, p.Overcommit
	if p.Interactive {
		// Nothing runs on the nodes until steps come (the agent's placeholder).
		r.Interactive, r.Command, r.Script, r.ScriptBytes = true, nil, "", nil
	}
	if a := p.Array; a != nil {
		r.Array = &model.ArraySpec{Start: int(a.Start), End: int(a.End), Step: int(a.Step), MaxConcurrent: int(a.MaxConcurrent)}
		if r.Array.Step == 0 {
			r.Array.Step = 1
		}
	}
	return r
}

// RequestToProto converts a request as the API shows it.
func RequestToProto(r *model.Request) *latticev1.AllocationRequest {
	p := &latticev1.AllocationRequest{
		Name: r.Name, Tenant: r.Tenant, Project: r.Project, Vcluster: r.VCluster,
		Command: r.Command, Script: r.Script, WorkDir: r.WorkDir, Env: r.Env,
		NodesMin: int32(r.NodesMin), NodesMax: int32(r.NodesMax),
		WalltimeSeconds: int64(r.Walltime / time.Second), PriorityClass: int32(r.PriorityClass),
		Checkpoint: string(r.Checkpoint), CheckpointMinutes: r.CheckpointMinutes,
		Constraints: r.Constraints, GpuType: r.GPUType, GpusPerNode: int32(r.GPUsPerNode),
		Stdout: r.Stdout, Stderr: r.Stderr, HotDataFraction: -1, User: r.User,
		CheckpointSignal: r.CheckpointSignal, CheckpointSignalSecs: int32(r.CheckpointSignalSecs),
		CheckpointHook: r.CheckpointHook, CheckpointWebhook: r.CheckpointWebhook, Requeue: r.Requeue,
		ScriptBytes: r.ScriptBytes,
		Ntasks:      int32(r.Ntasks), NtasksPerNode: int32(r.NtasksPerNode), CpusPerTask: int32(r.CPUsPerTask),
		MemPerNodeMb: r.MemPerNodeMB, MemPerCpuMb: r.MemPerCPUMB, GpusPerTask: int32(r.GPUsPerTask),
		Exclusive: r.Exclusive, Overcommit: r.Overcommit,
	}
	if r.HotDataFraction != nil {
		p.HotDataFraction = *r.HotDataFraction
	}
	p.BeginUnixMs = UnixMS(r.BeginTime)
	p.Hold, p.NodeList, p.ExcludeNodes = r.Hold, r.NodeList, r.ExcludeNodes
	p.MailType, p.MailUser, p.Qos = r.MailType, r.MailUser, r.QOS
	p.Reservation = r.Reservation
	for _, d := range r.DependsOn {
		p.DependsOn = append(p.DependsOn, &latticev1.Dependency{Condition: string(d.Condition), Ids: d.IDs, Task: d.Task})
	}
	p.DependencyAny, p.Interactive = r.DependencyAny, r.Interactive
	if a := r.Array; a != nil {
		p.Array = &latticev1.ArraySpec{Start: int32(a.Start), End: int32(a.End), Step: int32(a.Step), MaxConcurrent: int32(a.MaxConcurrent)}
	}
	return p
}

// AllocToProto converts an allocation as the API (and an agent's
// assignment) carries it.
func AllocToProto(a *model.Allocation) *latticev1.Allocation {
	p := &latticev1.Allocation{
		Id: a.ID, DisplayId: a.DisplayID(), Request: RequestToProto(&a.Request),
		State: string(a.State), Reason: a.Reason, Nodes: a.Nodes,
		SubmitTimeUnixMs: UnixMS(a.SubmitTime), EligibleTimeUnixMs: UnixMS(a.EligibleTime),
		StartTimeUnixMs: UnixMS(a.StartTime), EndTimeUnixMs: UnixMS(a.EndTime),
		ArrayJobId: a.ArrayJobID, ArrayIndex: int32(a.ArrayIndex), DagId: a.DAGID,
		RequeueCount: int32(a.RequeueCount), CheckpointCount: int32(a.CheckpointCount),
		LastCheckpointUnixMs: UnixMS(a.LastCheckpointAt), CheckpointReason: a.CheckpointReason,
		CheckpointDeadlineUnixMs: UnixMS(a.CheckpointDeadline), ReasonDetail: a.ReasonDetail,
		Held: a.Held,
	}
	if pr := a.Preemption; pr != nil {
		p.Preemption = &latticev1.Preemption{Kind: pr.Kind, ByVcluster: pr.ByVCluster, ForAllocation: pr.ForAlloc,
			ForDisplayId: strconv.FormatUint(pr.ForAlloc, 10),
			TimeUnixMs:   UnixMS(pr.Time), DeadlineUnixMs: UnixMS(pr.Deadline), Action: string(pr.Action)}
	}
	if a.ExitCode != nil {
		p.HasExitCode, p.ExitCode = true, int32(*a.ExitCode)
	}
	p.Usage = UsageToProto(a.Usage)
	p.SuspendedUnixMs, p.SuspendedSeconds = UnixMS(a.SuspendedAt), int64(a.SuspendedFor/time.Second)
	p.SuspendedOn = a.SuspendedOn
	for _, h := range a.History {
		p.History = append(p.History, &latticev1.Transition{State: string(h.State), Reason: h.Reason, TimeUnixMs: UnixMS(h.Time)})
	}
	for _, st := range a.Steps {
		ps := &latticev1.Step{Id: int32(st.ID), Nodes: st.Nodes, Tasks: int32(st.Tasks), Command: st.Command, State: string(st.State),
			StartTimeUnixMs: UnixMS(st.StartTime), EndTimeUnixMs: UnixMS(st.EndTime)}
		if st.ExitCode != nil {
			ps.HasExitCode, ps.ExitCode = true, int32(*st.ExitCode)
		}
		ps.Usage = UsageToProto(st.Usage)
		p.Steps = append(p.Steps, ps)
	}
	return p
}

// NodeToProto converts a node as the API shows it, with the display id of
// its allocation and when the leader last heard its agent.
func NodeToProto(n *model.Node, displayAlloc string, lastSeen time.Time) *latticev1.Node {
	return &latticev1.Node{
		Name: n.Name, State: string(n.State), HomeVcluster: n.HomeVCluster, CurrentVcluster: n.CurrentVCluster,
		Group: int32(n.Group), Fingerprint: n.Fingerprint, Allocation: n.Allocation, AllocationDisplayId: displayAlloc,
		PowerWatts: int32(n.Watts()), GpuType: n.GPUType, Gpus: int32(n.GPUs), Features: n.Features,
		IdleWatts: int32(n.IdleWatts), BusyWatts: int32(n.BusyWatts), StateReason: n.StateReason, Agent: n.Agent,
		LastHeartbeatUnixMs: UnixMS(lastSeen), Borrowed: n.Borrowed(), ReturnRequested: n.ReturnRequested,
		ReservedFor: n.ReservedFor, ReservedUntilUnixMs: UnixMS(n.ReservedUntil),
		ReclaimedFrom: n.ReclaimedFrom, ReclaimedAtUnixMs: UnixMS(n.ReclaimedAt),
		Cpus: int32(n.CPUs), MemoryMb: n.MemoryMB, CleanupAllocation: n.Cleanup,
		MeasuredWatts: int32(n.MeasuredWatts), MeasuredAtUnixMs: UnixMS(n.MeasuredAt),
		StateReasonBy: n.ReasonBy, StateReasonUnixMs: UnixMS(n.ReasonAt),
		SuspendedAllocation: n.SuspendedAlloc,
	}
}

// UsageToProto converts a run's measured usage (nil stays nil).
func UsageToProto(u *model.Usage) *latticev1.JobUsage {
	if u == nil {
		return nil
	}
	return &latticev1.JobUsage{UserCpuSeconds: u.UserCPUSeconds, SystemCpuSeconds: u.SystemCPUSeconds,
		MaxRssBytes: u.MaxRSSBytes, MaxRssSampled: u.MaxRSSSampled, ConsumedEnergyJoules: u.EnergyJoules,
		EnergySource: u.EnergySource, OomKills: u.OOMKills}
}

// UsageFromProto converts an agent's figures; nonsense (negative, NaN,
// an unknown energy source) is dropped rather than committed.
func UsageFromProto(p *latticev1.JobUsage) *model.Usage {
	if p == nil {
		return nil
	}
	finite := func(f float64) float64 {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	u := &model.Usage{UserCPUSeconds: finite(p.UserCpuSeconds), SystemCPUSeconds: finite(p.SystemCpuSeconds),
		MaxRSSBytes: max(p.MaxRssBytes, 0), MaxRSSSampled: p.MaxRssSampled, EnergyJoules: finite(p.ConsumedEnergyJoules),
		OOMKills: max(p.OomKills, 0)}
	if p.EnergySource == model.EnergyRAPL || p.EnergySource == model.EnergyModel {
		u.EnergySource = p.EnergySource
	} else {
		u.EnergyJoules = 0
	}
	return u
}
