package server

import (
	"context"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

// usageService answers latticectl stat (live usage, from the agent's
// cgroup) and usage (per-tenant sums of ended allocations), and suspends
// and resumes allocations (suspend.go).
type usageService struct {
	latticev1.UnimplementedUsageServiceServer
	s *Server
}

// usageWaiters are the live-usage questions sent to agents, by request id.
type usageWaiters struct {
	mu      sync.Mutex
	seq     uint64
	waiters map[uint64]chan *latticev1.UsageAnswer
}

func (w *usageWaiters) add() (uint64, chan *latticev1.UsageAnswer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters == nil {
		w.waiters = map[uint64]chan *latticev1.UsageAnswer{}
	}
	w.seq++
	ch := make(chan *latticev1.UsageAnswer, 1)
	w.waiters[w.seq] = ch
	return w.seq, ch
}

func (w *usageWaiters) remove(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.waiters, id)
}

func (w *usageWaiters) deliver(a *latticev1.UsageAnswer) {
	w.mu.Lock()
	ch := w.waiters[a.RequestId]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- a:
		default:
		}
	}
}

// Stat is the usage so far of a running allocation, read by the agent of
// its first node from the allocation's cgroup.
func (u *usageService) Stat(ctx context.Context, req *latticev1.StatRequest) (*latticev1.StatReply, error) {
	l := u.s.currentLeader()
	if l == nil {
		return nil, status.Error(codes.Unavailable, "no quorum leader right now; retry")
	}
	al, err := u.s.oneAllocation(req.Id)
	if err != nil {
		return nil, err
	}
	if err := u.s.canRead(ctx, "read the usage of", allocObject(al)); err != nil {
		return nil, err
	}
	if al.State != model.StateRunning && al.State != model.StateCheckpointing && al.State != model.StateSuspended || len(al.Nodes) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "allocation %s is %s: stat reads running allocations (latticectl history shows the usage of ended ones)", req.Id, al.State)
	}
	node := al.Nodes[0]
	c := l.ConnFor(node)
	if c == nil {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is not connected; its usage cannot be read now", node)
	}
	id, ch := l.usage.add()
	defer l.usage.remove(id)
	if !c.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_UsageQuery{UsageQuery: &latticev1.UsageQuery{RequestId: id, AllocationId: al.ID}}}) {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is busy; retry", node)
	}
	var ans *latticev1.UsageAnswer
	select {
	case ans = <-ch:
	case <-c.Done():
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s disconnected", node)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return nil, status.Errorf(codes.DeadlineExceeded, "the agent of node %s did not answer", node)
	}
	if ans.Error != "" {
		return nil, status.Errorf(codes.Internal, "usage of %s: %s", req.Id, ans.Error)
	}
	if ans.NotRunning {
		return nil, status.Errorf(codes.FailedPrecondition, "allocation %s has no measured usage on %s (not running there yet, or the node has no cgroups)", req.Id, node)
	}
	out := &latticev1.StatReply{AllocationId: al.ID, DisplayId: al.DisplayID(), Node: node, Usage: ans.Usage}
	if !al.StartTime.IsZero() {
		out.ElapsedSeconds = int64(time.Since(al.StartTime) / time.Second)
	}
	return out, nil
}

// Report sums, per tenant, the allocations that ended in [start, end)
// that the caller may read: their count, node-seconds, CPU time and energy.
func (u *usageService) Report(ctx context.Context, req *latticev1.UsageReportRequest) (*latticev1.UsageReportReply, error) {
	end := time.Now()
	if req.EndUnixMs > 0 {
		end = time.UnixMilli(req.EndUnixMs)
	}
	start := time.UnixMilli(req.StartUnixMs)
	if req.StartUnixMs <= 0 {
		start = time.Time{}
	}
	if !start.Before(end) {
		return nil, status.Errorf(codes.InvalidArgument, "start %s is not before end %s", start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	}
	var ended []*model.Allocation
	u.s.view(func(st *quorum.State) { ended = st.EndedShared().AppendTo(nil) })
	who := caller(ctx)
	sums := map[string]*latticev1.TenantUsage{}
	for _, a := range ended {
		if a.EndTime.Before(start) || !a.EndTime.Before(end) || (req.Tenant != "" && a.Tenant != req.Tenant) {
			continue
		}
		if u.s.authOn() && auth.CanRead(who, "read", allocObject(a)) != nil {
			continue
		}
		t := sums[a.Tenant]
		if t == nil {
			t = &latticev1.TenantUsage{Tenant: a.Tenant}
			sums[a.Tenant] = t
		}
		t.Jobs++
		if !a.StartTime.IsZero() && a.EndTime.After(a.StartTime) {
			t.NodeSeconds += float64(len(a.Nodes)) * a.EndTime.Sub(a.StartTime).Seconds()
		}
		if us := a.Usage; us != nil {
			t.MeasuredJobs++
			t.CpuSeconds += us.TotalCPUSeconds()
			t.EnergyJoules += us.EnergyJoules
		}
	}
	out := &latticev1.UsageReportReply{StartUnixMs: convert.UnixMS(start), EndUnixMs: end.UnixMilli()}
	for _, t := range sums {
		out.Tenants = append(out.Tenants, t)
	}
	sort.Slice(out.Tenants, func(i, j int) bool { return out.Tenants[i].Tenant < out.Tenants[j].Tenant })
	return out, nil
}

// Suspend freezes every process of a running allocation (Resume: thaws
// them) through its agent, after the quorum recorded it; admins only.
func (u *usageService) Suspend(ctx context.Context, req *latticev1.SuspendJobRequest) (*latticev1.SuspendJobReply, error) {
	l := u.s.currentLeader()
	if l == nil {
		return nil, status.Error(codes.Unavailable, "no quorum leader right now; retry")
	}
	al, err := u.s.oneAllocation(req.Id)
	if err != nil {
		return nil, err
	}
	if al.State != model.StateRunning || len(al.Nodes) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "allocation %s is %s: only RUNNING allocations can be suspended or resumed", req.Id, al.State)
	}
	c := l.ConnFor(al.Nodes[0])
	if c == nil {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is not connected; the allocation cannot be frozen now", al.Nodes[0])
	}
	res, err := u.s.propose(ctx, &quorum.SuspendJob{ID: al.ID, Resume: req.Resume})
	if err != nil {
		return nil, err
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	if !c.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Freeze{Freeze: &latticev1.FreezeAllocation{AllocationId: al.ID, Freeze: !req.Resume}}}) {
		return nil, status.Errorf(codes.Unavailable, "the agent of node %s is busy; retry", al.Nodes[0])
	}
	state := "SUSPENDED"
	if req.Resume {
		state = string(model.StateRunning)
	}
	return &latticev1.SuspendJobReply{State: state}, nil
}

// stepUsage sums what a step used on its nodes, from the agents' NodeDone
// events: CPU times and OOM kills added, the largest peak memory.
type stepUsage struct {
	nodes int
	sum   *model.Usage
}

func (s *stepUsage) add(ev *latticev1.StepEvent) {
	s.nodes++
	u := convert.UsageFromProto(ev.Usage)
	if u == nil {
		return
	}
	if s.sum == nil {
		s.sum = &model.Usage{}
	}
	s.sum.UserCPUSeconds += u.UserCPUSeconds
	s.sum.SystemCPUSeconds += u.SystemCPUSeconds
	s.sum.MaxRSSBytes = max(s.sum.MaxRSSBytes, u.MaxRSSBytes)
	s.sum.OOMKills += u.OOMKills
}

// stepUsageWait bounds how long a step's end waits for its nodes' usage
// after its tasks' ends (an agent ends the step's cgroup first).
const stepUsageWait = time.Second

// wait takes the NodeDone events of the nodes not heard yet, for at most
// stepUsageWait (agents of an older version send none).
func (s *stepUsage) wait(events <-chan *latticev1.StepEvent, nodes int) {
	deadline := time.After(stepUsageWait)
	for s.nodes < nodes {
		select {
		case ev := <-events:
			if ev.NodeDone {
				s.add(ev)
			}
		case <-deadline:
			return
		}
	}
}
