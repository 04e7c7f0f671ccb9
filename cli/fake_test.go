package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// fakeServer is an in-process Lattice API on 127.0.0.1 that records what
// it was asked and answers from canned state.
type fakeServer struct {
	latticev1.UnimplementedAllocationServiceServer
	latticev1.UnimplementedAdminServiceServer

	mu   sync.Mutex
	addr string
	// unavailable makes the next N calls fail with Unavailable ("no
	// leader"), as a follower without a leader would.
	unavailable int
	// cancelBatchNotFound makes Cancel refuse a whole batch with NotFound
	// when one id is unknown (instead of reporting it per id).
	cancelBatchNotFound bool
	// logsBreakAfter makes Logs send one chunk, then fail with Unavailable.
	logsBreakAfter bool

	calls      []string // method names, in order
	requestIDs []string // client_request_id of every write that arrived, failed or not
	auth       []string // authorization metadata seen
	submits    []*latticev1.SubmitRequest
	cancels    []*latticev1.CancelRequest
	logsReqs   []*latticev1.LogsRequest
	drains     []*latticev1.DrainRequest
	setVC      []*latticev1.SetVClusterRequest
	setTenant  []*latticev1.SetTenantRequest
	setPower   []*latticev1.SetPowerBudgetRequest
	joins      []*latticev1.QuorumJoinRequest

	allocs  []*latticev1.Allocation
	nodes   []*latticev1.Node
	logs    map[string]string
	tenants []*latticev1.TenantInfo
	vcs     []*latticev1.VClusterInfo
	// defaultVC is the default vCluster ListVClusters names.
	defaultVC string
	backup    []byte
	nextID    uint64
}

func newFakeServer(t testing.TB) *fakeServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{addr: lis.Addr().String(), nextID: 40, logs: map[string]string{}}
	f.seed()
	s := grpc.NewServer(grpc.UnaryInterceptor(f.intercept), grpc.StreamInterceptor(f.interceptStream))
	latticev1.RegisterAllocationServiceServer(s, f)
	latticev1.RegisterNodeServiceServer(s, nodeService{f: f})
	latticev1.RegisterAdminServiceServer(s, f)
	latticev1.RegisterReservationServiceServer(s, &fakeReservations{f: f}) // reservation_test.go
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f
}

// deadAddr is a 127.0.0.1 address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

func (f *fakeServer) seed() {
	req := func(name, vc string, nodes int32) *latticev1.AllocationRequest {
		return &latticev1.AllocationRequest{Name: name, Tenant: "alice", Vcluster: vc, NodesMin: nodes, NodesMax: nodes,
			WalltimeSeconds: 3600, PriorityClass: 5, Checkpoint: "none", Command: []string{"sleep", "300"}, WorkDir: "/home/alice"}
	}
	f.allocs = []*latticev1.Allocation{
		{Id: 12, DisplayId: "12", Request: req("train", "ml-training", 2), State: "RUNNING",
			Nodes: []string{"n001", "n002"}, SubmitTimeUnixMs: ms(-time.Hour), StartTimeUnixMs: ms(-90 * time.Minute / 3)},
		{Id: 13, DisplayId: "13", Request: req("post", "hpc-batch", 1), State: "PENDING", Reason: "Resources",
			SubmitTimeUnixMs: ms(-time.Minute),
			Explanation: &latticev1.Explanation{Id: "13", State: "PENDING", Reason: "Resources", Score: 0.42,
				Factors: []*latticev1.FactorScore{
					{Name: "f1", Title: "priority", Value: 0.5, Weight: 0.2, Contribution: 0.1},
					{Name: "f2", Title: "wait_time", Value: 0.8, Weight: 0.4, Contribution: 0.32},
				},
				ExpectedStartUnixMs: ms(time.Hour), WeightsProfile: "hpc-batch", QueuePosition: 2,
				Filtered: []*latticev1.FilterCount{{Filter: "busy", Removed: 6}}, Message: "waits for 1 node"}},
		{Id: 14, DisplayId: "14_0", Request: req("sweep", "hpc-batch", 1), State: "COMPLETED", Reason: "",
			Nodes: []string{"n003"}, HasExitCode: true, ExitCode: 0, ArrayJobId: 14, ArrayIndex: 0,
			SubmitTimeUnixMs: ms(-2 * time.Hour), StartTimeUnixMs: ms(-2 * time.Hour), EndTimeUnixMs: ms(-2*time.Hour + 75*time.Second)},
	}
	f.nodes = []*latticev1.Node{
		{Name: "n001", State: "Ready", HomeVcluster: "ml-training", CurrentVcluster: "ml-training", Group: 0, Fingerprint: "3f2a9c0e11d4b7aa",
			Allocation: 12, AllocationDisplayId: "12", PowerWatts: 400, GpuType: "a100", Gpus: 4, Features: []string{"ib", "nvme"}, IdleWatts: 100, BusyWatts: 400},
		{Name: "n003", State: "Drained", HomeVcluster: "hpc-batch", CurrentVcluster: "hpc-batch", Group: 1, Fingerprint: "77aa",
			PowerWatts: 100, IdleWatts: 100, BusyWatts: 400, StateReason: "bad DIMM"},
	}
	f.logs["12"] = "hello\nworld\n"
	f.tenants = []*latticev1.TenantInfo{
		{Name: "alice", MaxNodes: 10, MaxRunning: 3, FairShareTarget: 0.25, UsageNodeSeconds: 7200, RunningAllocations: 1, RunningNodes: 2, UsageShare: 0.4},
		{Name: "bob", FairShareTarget: 0.75},
	}
	f.vcs = []*latticev1.VClusterInfo{
		{Name: "hpc-batch", Type: "hpc-batch", WeightsProfile: "hpc-batch", CycleMs: 5000, MinIntervalMs: 500, ReservationDepth: 1,
			AllowLending: true, Weights: []*latticev1.Weight{{Factor: "f1", Value: 0.2}, {Factor: "f2", Value: 0.3}, {Factor: "f9", Value: 0.05}},
			Usage: &latticev1.VClusterUsage{HomeNodes: 4, CurrentNodes: 4, BusyNodes: 1, IdleNodes: 3, Pending: 1, Running: 1, PowerWatts: 700}},
	}
	f.backup = bytes.Repeat([]byte("lattice-backup "), 1000)
}

func (f *fakeServer) record(ctx context.Context, method string, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method[strings.LastIndex(method, "/")+1:])
	if r, ok := req.(interface{ GetClientRequestId() string }); ok {
		f.requestIDs = append(f.requestIDs, r.GetClientRequestId())
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		f.auth = append(f.auth, md.Get("authorization")...)
	}
	if f.unavailable > 0 {
		f.unavailable--
		return status.Error(codes.Unavailable, "no leader")
	}
	return nil
}

func (f *fakeServer) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := f.record(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (f *fakeServer) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := f.record(ss.Context(), info.FullMethod, nil); err != nil {
		return err
	}
	return h(srv, ss)
}

func (f *fakeServer) find(id string) *latticev1.Allocation {
	for _, a := range f.allocs {
		if a.GetDisplayId() == id || fmt.Sprint(a.GetId()) == id {
			return a
		}
	}
	return nil
}

func (f *fakeServer) Submit(_ context.Context, req *latticev1.SubmitRequest) (*latticev1.SubmitResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.submits = append(f.submits, req)
	n := 1
	if a := req.GetRequest().GetArray(); a != nil {
		n = int((a.GetEnd()-a.GetStart())/a.GetStep() + 1)
	}
	resp := &latticev1.SubmitResponse{DisplayId: fmt.Sprint(f.nextID)}
	for i := 0; i < n; i++ {
		resp.Ids = append(resp.Ids, f.nextID+uint64(i))
	}
	f.nextID += uint64(n)
	return resp, nil
}

func (f *fakeServer) SubmitBatch(ctx context.Context, req *latticev1.SubmitBatchRequest) (*latticev1.SubmitBatchResponse, error) {
	resp := &latticev1.SubmitBatchResponse{}
	for _, r := range req.GetRequests() {
		if r.GetRequest().GetName() == "refused" {
			resp.Results = append(resp.Results, &latticev1.SubmitBatchResult{Error: "invalid tenant: refused by the fake", Code: "InvalidArgument"})
			continue
		}
		one, err := f.Submit(ctx, r)
		if err != nil {
			return nil, err
		}
		resp.Results = append(resp.Results, &latticev1.SubmitBatchResult{Ids: one.Ids, DisplayId: one.DisplayId})
	}
	return resp, nil
}

func (f *fakeServer) Get(_ context.Context, req *latticev1.GetAllocationRequest) (*latticev1.Allocation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.find(req.GetId()); a != nil {
		return a, nil
	}
	return nil, status.Errorf(codes.NotFound, "allocation %s not found", req.GetId())
}

func (f *fakeServer) List(_ context.Context, req *latticev1.ListAllocationsRequest) (*latticev1.ListAllocationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &latticev1.ListAllocationsResponse{}
	for _, a := range f.allocs {
		if len(req.GetStates()) > 0 && !contains(req.GetStates(), a.GetState()) ||
			req.GetVcluster() != "" && a.GetRequest().GetVcluster() != req.GetVcluster() ||
			req.GetTenant() != "" && a.GetRequest().GetTenant() != req.GetTenant() ||
			len(req.GetIds()) > 0 && !contains(req.GetIds(), a.GetDisplayId()) {
			continue
		}
		resp.Allocations = append(resp.Allocations, a)
	}
	return resp, nil
}

func (f *fakeServer) snapshot() (calls, ids, auth []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...), append([]string(nil), f.requestIDs...), append([]string(nil), f.auth...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (f *fakeServer) Cancel(_ context.Context, req *latticev1.CancelRequest) (*latticev1.CancelResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, req)
	resp := &latticev1.CancelResponse{}
	for _, id := range req.GetIds() {
		a := f.find(id)
		if a == nil {
			if f.cancelBatchNotFound {
				return nil, status.Errorf(codes.NotFound, "allocation %s not found", id)
			}
			resp.Results = append(resp.Results, &latticev1.CancelResult{Id: id, Error: "allocation " + id + " not found"})
			continue
		}
		a.State = "CANCELLED"
		resp.Results = append(resp.Results, &latticev1.CancelResult{Id: id, Cancelled: true})
	}
	return resp, nil
}

func (f *fakeServer) Logs(req *latticev1.LogsRequest, st grpc.ServerStreamingServer[latticev1.LogChunk]) error {
	f.mu.Lock()
	f.logsReqs = append(f.logsReqs, req)
	text, ok := f.logs[req.GetId()]
	brk := f.logsBreakAfter
	f.logsBreakAfter = false
	f.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "allocation %s not found", req.GetId())
	}
	if req.GetStderr() {
		text = "to stderr\n"
	}
	data := []byte(text)[req.GetOffset():]
	// Send line by line so a broken stream can be resumed mid-way.
	off := req.GetOffset()
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n') + 1
		if i == 0 {
			i = len(data)
		}
		off += int64(i)
		if err := st.Send(&latticev1.LogChunk{Data: data[:i], Offset: off}); err != nil {
			return err
		}
		data = data[i:]
		if brk {
			return status.Error(codes.Unavailable, "leadership lost")
		}
	}
	if req.GetFollow() {
		return st.Send(&latticev1.LogChunk{Offset: off, Eof: true})
	}
	return nil
}

func (f *fakeServer) Explain(_ context.Context, req *latticev1.ExplainRequest) (*latticev1.Explanation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.find(req.GetId()); a != nil && a.GetExplanation() != nil {
		return a.GetExplanation(), nil
	}
	return nil, status.Errorf(codes.NotFound, "allocation %s not found", req.GetId())
}

func (f *fakeServer) ListNodes(req *latticev1.ListNodesRequest) *latticev1.ListNodesResponse {
	resp := &latticev1.ListNodesResponse{}
	for _, n := range f.nodes {
		if len(req.GetNames()) > 0 && !contains(req.GetNames(), n.GetName()) ||
			len(req.GetStates()) > 0 && !contains(req.GetStates(), n.GetState()) {
			continue
		}
		resp.Nodes = append(resp.Nodes, n)
	}
	return resp
}

// nodeService adapts the fake to NodeService (its List clashes with
// AllocationService.List).
type nodeService struct {
	latticev1.UnimplementedNodeServiceServer
	f *fakeServer
}

func (s nodeService) List(_ context.Context, req *latticev1.ListNodesRequest) (*latticev1.ListNodesResponse, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.ListNodes(req), nil
}

func (s nodeService) Drain(_ context.Context, req *latticev1.DrainRequest) (*latticev1.NodeResponse, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.drains = append(s.f.drains, req)
	for _, n := range s.f.nodes {
		if n.GetName() == req.GetName() {
			n.State, n.StateReason = "Draining", req.GetReason()
			return &latticev1.NodeResponse{Node: n}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "node %s not found", req.GetName())
}

func (s nodeService) Undrain(_ context.Context, req *latticev1.UndrainRequest) (*latticev1.NodeResponse, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	for _, n := range s.f.nodes {
		if n.GetName() == req.GetName() {
			n.State, n.StateReason = "Ready", ""
			return &latticev1.NodeResponse{Node: n}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "node %s not found", req.GetName())
}

func (f *fakeServer) QuorumStatus(context.Context, *latticev1.QuorumStatusRequest) (*latticev1.QuorumStatusResponse, error) {
	return &latticev1.QuorumStatusResponse{LeaderId: "m1", Term: 3, CommitIndex: 120, AppliedIndex: 120, StateVersion: 77,
		Members: []*latticev1.QuorumMember{
			{Id: "m1", RaftAddr: "127.0.0.1:7001", ApiAddr: "127.0.0.1:7070", Role: "leader", Healthy: true, Voter: true},
			{Id: "m2", RaftAddr: "127.0.0.1:7002", ApiAddr: "127.0.0.1:7071", Role: "unreachable", Voter: true},
		}}, nil
}

func (f *fakeServer) QuorumJoin(_ context.Context, req *latticev1.QuorumJoinRequest) (*latticev1.QuorumJoinResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins = append(f.joins, req)
	return &latticev1.QuorumJoinResponse{}, nil
}

func (f *fakeServer) QuorumTransferLeadership(_ context.Context, req *latticev1.QuorumTransferRequest) (*latticev1.QuorumTransferResponse, error) {
	return &latticev1.QuorumTransferResponse{NewLeaderId: "m2"}, nil
}

func (f *fakeServer) Backup(_ *latticev1.BackupRequest, st grpc.ServerStreamingServer[latticev1.BackupChunk]) error {
	for b := f.backup; len(b) > 0; {
		n := min(len(b), 4096)
		if err := st.Send(&latticev1.BackupChunk{Data: b[:n]}); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (f *fakeServer) ListVClusters(context.Context, *latticev1.ListVClustersRequest) (*latticev1.ListVClustersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &latticev1.ListVClustersResponse{Vclusters: f.vcs, DefaultVcluster: f.defaultVC}, nil
}

func (f *fakeServer) SetVCluster(_ context.Context, req *latticev1.SetVClusterRequest) (*latticev1.VClusterInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setVC = append(f.setVC, req)
	for _, v := range f.vcs {
		if v.GetName() == req.GetName() {
			return v, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "vCluster %s not found", req.GetName())
}

func (f *fakeServer) GetPower(context.Context, *latticev1.GetPowerRequest) (*latticev1.PowerStatus, error) {
	return &latticev1.PowerStatus{BudgetWatts: 50000, EstimatedWatts: 12500,
		Vclusters: []*latticev1.PowerUse{{Vcluster: "hpc-batch", EstimatedWatts: 700}}}, nil
}

func (f *fakeServer) SetPowerBudget(_ context.Context, req *latticev1.SetPowerBudgetRequest) (*latticev1.PowerStatus, error) {
	f.mu.Lock()
	f.setPower = append(f.setPower, req)
	f.mu.Unlock()
	return &latticev1.PowerStatus{BudgetWatts: req.GetBudgetWatts()}, nil
}

func (f *fakeServer) ListTenants(context.Context, *latticev1.ListTenantsRequest) (*latticev1.ListTenantsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &latticev1.ListTenantsResponse{Tenants: f.tenants}, nil
}

func (f *fakeServer) SetTenant(_ context.Context, req *latticev1.SetTenantRequest) (*latticev1.TenantInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setTenant = append(f.setTenant, req)
	return &latticev1.TenantInfo{Name: req.GetName(), MaxNodes: req.GetMaxNodes(), MaxRunning: req.GetMaxRunning(), FairShareTarget: req.GetFairShareTarget()}, nil
}
