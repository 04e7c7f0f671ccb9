package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/solver"
	"github.com/latticehpc/lattice/vcluster"
)

type adminService struct {
	latticev1.UnimplementedAdminServiceServer
	s *Server
}

const selfOnlyKey = "x-lattice-self-only"

// QuorumStatus reports the Raft configuration and each member's role, asking
// every other member directly (an unreachable one shows as such).
func (a *adminService) QuorumStatus(ctx context.Context, _ *latticev1.QuorumStatusRequest) (*latticev1.QuorumStatusResponse, error) {
	s := a.s
	leaderID, _ := s.q.Leader()
	var version uint64
	members := map[string]quorum.Member{}
	s.view(func(st *quorum.State) {
		version = st.Version
		for _, m := range st.Members() {
			members[m.ID] = m
		}
	})
	// A member is healthy when it is ready (health.go): it leads or follows
	// a leader it knows, has applied what the leader committed, and can
	// persist. Knowing a leader is not enough: a follower whose disk is
	// full still hears heartbeats while it falls behind.
	ready := s.readiness()
	self := &latticev1.QuorumMember{Id: s.cfg.ID, RaftAddr: s.q.RaftAddr(), ApiAddr: s.APIAddr(), Role: ready.Role,
		Healthy: ready.Ready, Problem: ready.Problem, AppliedIndex: ready.Applied, Lag: ready.Lag,
		FeatureLevel: uint32(s.q.AdvertisedLevel()), Build: quorum.Build()}
	resp := &latticev1.QuorumStatusResponse{LeaderId: leaderID, Term: s.q.Term(), CommitIndex: s.q.CommitIndex(),
		AppliedIndex: s.q.AppliedIndex(), StateVersion: version, ClusterId: s.clusterID()}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(selfOnlyKey)) > 0 {
		resp.Members = []*latticev1.QuorumMember{self}
		return resp, nil
	}
	servers, err := s.q.Servers()
	if err != nil {
		return nil, rpcError(err)
	}
	resp.Members = make([]*latticev1.QuorumMember, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		m := &latticev1.QuorumMember{Id: srv.ID, RaftAddr: srv.RaftAddr, ApiAddr: members[srv.ID].APIAddr, Voter: srv.Voter}
		resp.Members[i] = m
		if srv.ID == s.cfg.ID {
			self.Voter = srv.Voter
			resp.Members[i] = self
			continue
		}
		if m.ApiAddr == "" {
			m.Role, m.Problem = "unreachable", "no API address published"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Role, m.Healthy, m.Problem = "unreachable", false, "unreachable"
			cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(s.memberContext(ctx), selfOnlyKey, "1"), 700*time.Millisecond)
			defer cancel()
			conn, err := grpc.NewClient(m.ApiAddr, s.dialCreds())
			if err != nil {
				return
			}
			defer conn.Close()
			r, err := latticev1.NewAdminServiceClient(conn).QuorumStatus(cctx, &latticev1.QuorumStatusRequest{})
			if err != nil || len(r.Members) == 0 {
				return
			}
			o := r.Members[0]
			m.Role, m.Healthy, m.Problem, m.AppliedIndex, m.Lag = o.Role, o.Healthy, o.Problem, r.AppliedIndex, o.Lag
			m.FeatureLevel, m.Build = o.FeatureLevel, o.Build
			// Judge its lag against the commit index this member knows,
			// too: a member that cannot write its log may not know how
			// far behind it is.
			if commit := s.q.CommitIndex(); commit > r.AppliedIndex {
				if lag := commit - r.AppliedIndex; lag > m.Lag {
					m.Lag = lag
				}
			}
			if m.Lag > DefaultMaxLag && m.Healthy {
				m.Healthy, m.Problem = false, fmt.Sprintf("%d entries behind the leader", m.Lag)
			}
		}()
	}
	wg.Wait()
	return resp, nil
}

func (a *adminService) QuorumJoin(ctx context.Context, req *latticev1.QuorumJoinRequest) (*latticev1.QuorumJoinResponse, error) {
	if req.Id == "" || req.RaftAddr == "" {
		return nil, invalid("invalid join: allowed an id and a raft address")
	}
	s := a.s
	servers, err := s.q.Servers()
	if err != nil {
		return nil, rpcError(err)
	}
	present := false
	for _, srv := range servers {
		if srv.ID == req.Id && srv.RaftAddr == req.RaftAddr {
			present = true
		}
	}
	if !present {
		if err := s.joinable(ctx, req); err != nil {
			return nil, err
		}
		if err := s.keepsMajority(ctx, "", req.RaftAddr); err != nil && !req.Nonvoter {
			return nil, err
		}
		add := s.q.AddVoter
		if req.Nonvoter {
			add = s.q.AddNonvoter
		}
		if err := add(req.Id, req.RaftAddr, 10*time.Second); err != nil {
			return nil, rpcError(err)
		}
		s.log.Info("member joined", "id", req.Id, "raft_addr", req.RaftAddr)
	}
	if req.ApiAddr != "" {
		if _, err := s.propose(ctx, &quorum.SetMember{Member: quorum.Member{ID: req.Id, RaftAddr: req.RaftAddr, APIAddr: req.ApiAddr}}); err != nil {
			return nil, rpcError(err)
		}
	}
	return &latticev1.QuorumJoinResponse{}, nil
}

func (a *adminService) QuorumRemove(ctx context.Context, req *latticev1.QuorumRemoveRequest) (*latticev1.QuorumRemoveResponse, error) {
	if req.Id == "" {
		return nil, invalid("invalid id: allowed a member id")
	}
	servers, err := a.s.q.Servers()
	if err != nil {
		return nil, rpcError(err)
	}
	found := false
	for _, srv := range servers {
		found = found || srv.ID == req.Id
	}
	if !found {
		return nil, notFound("no quorum member %q", req.Id)
	}
	if err := a.s.keepsMajority(ctx, req.Id, ""); err != nil {
		return nil, err
	}
	if err := a.s.q.RemoveServer(req.Id, 10*time.Second); err != nil {
		return nil, rpcError(err)
	}
	if _, err := a.s.propose(ctx, &quorum.RemoveMember{ID: req.Id}); err != nil {
		return nil, rpcError(err)
	}
	return &latticev1.QuorumRemoveResponse{}, nil
}

func (a *adminService) QuorumTransferLeadership(_ context.Context, req *latticev1.QuorumTransferRequest) (*latticev1.QuorumTransferResponse, error) {
	if err := a.s.q.TransferLeadership(req.Id); err != nil {
		if strings.Contains(err.Error(), "no quorum member") {
			return nil, notFound("%v", err)
		}
		return nil, rpcError(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if id, _ := a.s.q.Leader(); id != "" && id != a.s.cfg.ID {
			return &latticev1.QuorumTransferResponse{NewLeaderId: id}, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	id, _ := a.s.q.Leader()
	return &latticev1.QuorumTransferResponse{NewLeaderId: id}, nil
}

// Backup streams a consistent snapshot of committed state with its checksum.
func (a *adminService) Backup(_ *latticev1.BackupRequest, stream latticev1.AdminService_BackupServer) error {
	if !a.s.q.IsLeader() {
		if forwarded(stream.Context()) {
			return status.Error(codes.Unavailable, "backups are taken from the leader, and this member no longer leads; retry")
		}
		return a.proxyBackup(stream)
	}
	if err := a.s.q.Barrier(5 * time.Second); err != nil {
		return rpcError(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(a.s.fsm.WriteBackup(pw)) }()
	buf := make([]byte, 256<<10)
	for {
		n, err := pr.Read(buf)
		if n > 0 {
			if serr := stream.Send(&latticev1.BackupChunk{Data: append([]byte(nil), buf[:n]...)}); serr != nil {
				pr.CloseWithError(serr)
				return serr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Internal, "backup: %v", err)
		}
	}
}

func (a *adminService) vclusterInfo(st *quorum.State, v *model.VCluster) *latticev1.VClusterInfo {
	info := &latticev1.VClusterInfo{
		Name: v.Name, Type: string(v.Type), WeightsProfile: v.WeightsProfile,
		CycleMs: v.CycleInterval.Milliseconds(), MinIntervalMs: v.MinInterval.Milliseconds(),
		ReservationDepth: int32(v.ReservationDepth), AllowLending: v.AllowLending, AllowBorrowing: v.AllowBorrowing,
		PowerCapWatts: v.PowerCapWatts,
		Algorithm:     string(v.EffectiveAlgorithm()), MaxLendFraction: v.LendFraction(),
		ReclaimGraceMs: v.Grace().Milliseconds(), ReclaimBackoffMs: v.Backoff().Milliseconds(),
		Preemption: v.Preempts(), PreemptHorizonMs: v.Horizon().Milliseconds(),
		CheckpointableOnlyOnBorrowed: v.CheckpointableOnlyOnBorrowed,
		FairShare:                    string(v.EffectiveFairShare()), ServiceProtect: v.Protects(),
		RunningEnds: string(v.EffectiveRunningEnds()), PredictedStarts: v.StartsByPrediction(),
		PreemptMode: string(v.EffectivePreemptMode()),
	}
	if l := a.s.currentLeader(); l != nil {
		info.Panics = l.Panics(v.Name)
	}
	for name, vc := range st.Partitions() {
		if vc == v.Name {
			info.Partitions = append(info.Partitions, name)
		}
	}
	slices.Sort(info.Partitions)
	for i, w := range v.Weights {
		info.Weights = append(info.Weights, &latticev1.Weight{Factor: fmt.Sprintf("f%d", i+1), Value: w})
	}
	u := st.VClusterUsage(v.Name)
	lent, borrowed := 0, 0
	for _, o := range st.VClusters() {
		lent += st.Borrowed(v.Name, o.Name)
		borrowed += st.Borrowed(o.Name, v.Name)
	}
	running := 0
	for _, al := range st.Active() {
		if al.VCluster == v.Name {
			running++
		}
	}
	info.Usage = &latticev1.VClusterUsage{
		HomeNodes: int32(st.HomeNodes(v.Name)), CurrentNodes: int32(u.Busy + u.Free + u.Down),
		BusyNodes: int32(u.Busy), IdleNodes: int32(u.Free), LentNodes: int32(lent), BorrowedNodes: int32(borrowed),
		Pending: int32(st.PendingCount(v.Name)), Running: int32(running), PowerWatts: st.VClusterDrawWatts(v.Name),
	}
	return info
}

func (a *adminService) ListVClusters(context.Context, *latticev1.ListVClustersRequest) (*latticev1.ListVClustersResponse, error) {
	resp := &latticev1.ListVClustersResponse{}
	a.s.view(func(st *quorum.State) {
		for _, v := range st.VClusters() {
			resp.Vclusters = append(resp.Vclusters, a.vclusterInfo(st, v))
		}
		resp.DefaultVcluster = st.DefaultVCluster
	})
	if l := a.s.currentLeader(); l != nil {
		for _, info := range resp.Vclusters {
			if ts, secs := a.s.metrics.lastCycle(info.Name); !ts.IsZero() {
				info.LastCycleUnixMs, info.LastCycleSeconds = ts.UnixMilli(), secs
			}
		}
	}
	return resp, nil
}

// SetVCluster changes (or, with create, adds) a vCluster's settings.
func (a *adminService) SetVCluster(ctx context.Context, req *latticev1.SetVClusterRequest) (*latticev1.VClusterInfo, error) {
	var vc model.VCluster
	var exists bool
	var known string
	a.s.view(func(st *quorum.State) {
		if v := st.VCluster(req.Name); v != nil {
			vc, exists = *v, true
		}
		var names []string
		for _, v := range st.VClusters() {
			names = append(names, v.Name)
		}
		known = strings.Join(names, ", ")
	})
	before := vc
	switch {
	case !exists && !req.Create:
		return nil, notFound("vcluster %q not found; known: %s", req.Name, known)
	case !exists:
		t := model.TypeForName(req.Name)
		if req.Type != "" {
			pt, err := model.ParseVClusterType(req.Type)
			if err != nil {
				return nil, rpcError(err)
			}
			t = pt
		}
		vc = newVCluster(req.Name, t)
	}
	if req.WeightsProfile != "" {
		w, ok := solver.Profile(req.WeightsProfile)
		if !ok {
			return nil, invalid("invalid weights-profile %q: allowed %s", req.WeightsProfile, strings.Join(solver.ProfileNames(), ", "))
		}
		vc.WeightsProfile, vc.Weights = req.WeightsProfile, w
	}
	for _, w := range req.Weights {
		var i int
		if _, err := fmt.Sscanf(w.Factor, "f%d", &i); err != nil || i < 1 || i > model.NumFactors || fmt.Sprintf("f%d", i) != w.Factor {
			return nil, invalid("invalid weight factor %q: allowed f1..f9", w.Factor)
		}
		vc.Weights[i-1] = w.Value
		vc.WeightsProfile = "custom"
	}
	var warnings []string
	if len(req.Weights) > 0 {
		w, note, err := normaliseWeights(vc.Weights)
		if err != nil {
			return nil, err
		}
		vc.Weights = w
		if note != "" {
			warnings = append(warnings, note)
		}
	}
	if req.CycleMs != 0 {
		vc.CycleInterval = time.Duration(req.CycleMs) * time.Millisecond
	}
	if req.SetReservationDepth {
		vc.ReservationDepth = int(req.ReservationDepth)
	}
	if req.SetLending {
		vc.AllowLending = req.AllowLending
	}
	if req.SetBorrowing {
		vc.AllowBorrowing = req.AllowBorrowing
	}
	if req.SetPowerCap {
		vc.PowerCapWatts = req.PowerCapWatts
	}
	if req.SetMaxLendFraction {
		vc.MaxLendFraction = req.MaxLendFraction
	}
	for _, d := range []struct {
		ms  int64
		dst *time.Duration
	}{{req.ReclaimGraceMs, &vc.ReclaimGrace}, {req.ReclaimBackoffMs, &vc.ReclaimBackoff}, {req.PreemptHorizonMs, &vc.PreemptHorizon}} {
		if d.ms != 0 {
			*d.dst = time.Duration(d.ms) * time.Millisecond
		}
	}
	if req.SetPreemption {
		vc.Preemption = req.Preemption
	}
	if err := setPreemptMode(&vc, req.PreemptMode); err != nil {
		return nil, rpcError(err)
	}
	if req.SetCheckpointableOnlyOnBorrowed {
		vc.CheckpointableOnlyOnBorrowed = req.CheckpointableOnlyOnBorrowed
	}
	if err := cmp.Or(setMode(req.Algorithm, model.ParseAlgorithm, &vc.Algorithm),
		setMode(req.FairShare, model.ParseFairShare, &vc.FairShare),
		setMode(req.RunningEnds, model.ParseRunningEnds, &vc.RunningEnds)); err != nil {
		return nil, rpcError(err)
	}
	if req.SetServiceProtect {
		vc.ServiceProtect = &req.ServiceProtect
	}
	if req.SetPredictedStarts {
		vc.PredictedStarts = &req.PredictedStarts
	}
	if err := vc.Validate(); err != nil {
		return nil, invalid("%v", err)
	}
	cmd, err := a.s.vclusterCommand(ctx, req.ClientRequestId, exists, before, vc)
	if err != nil {
		return nil, rpcError(err)
	}
	r, err := a.s.propose(ctx, cmd)
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	var info *latticev1.VClusterInfo
	a.s.view(func(st *quorum.State) {
		if v := st.VCluster(req.Name); v != nil {
			info = a.vclusterInfo(st, v)
		}
	})
	if info != nil {
		info.Warnings = warnings
	}
	return info, nil
}

// normaliseWeights is model.Weights.Normalised, refusing as invalid input.
func normaliseWeights(w model.Weights) (model.Weights, string, error) {
	w, note, err := w.Normalised()
	if err != nil {
		return w, "", invalid("invalid weights: %v", err)
	}
	return w, note, nil
}

// power reports, system-wide and per vCluster (the nodes' current one),
// the configured estimate, what the agents measured (fresh readings, in
// leader memory) and what the power check counts (the committed
// measurements where they stand, the configured figures elsewhere).
func (a *adminService) power() *latticev1.PowerStatus {
	out := &latticev1.PowerStatus{}
	var fresh map[string]int
	if l := a.s.currentLeader(); l != nil {
		since := time.Now().Add(-a.s.cfg.DegradedAfter)
		out.MeasuredWatts, out.MeasuredNodes = l.MeasuredPower(since)
		fresh = l.FreshPower(since)
	}
	a.s.view(func(st *quorum.State) {
		out.BudgetWatts, out.CountedWatts = st.PowerBudgetWatts, st.DrawWatts()
		byVC := map[string]*latticev1.PowerUse{}
		for _, v := range st.VClusters() {
			u := &latticev1.PowerUse{Vcluster: v.Name, BudgetWatts: v.PowerCapWatts, CountedWatts: st.VClusterDrawWatts(v.Name)}
			byVC[v.Name] = u
			out.Vclusters = append(out.Vclusters, u)
		}
		for _, n := range st.Nodes() {
			e := int64(n.EstimatedWatts())
			out.EstimatedWatts += e
			u := byVC[n.CurrentVCluster]
			if u == nil {
				continue
			}
			u.EstimatedWatts += e
			if w, ok := fresh[n.Name]; ok {
				u.MeasuredWatts += int64(w)
				u.MeasuredNodes++
			}
		}
	})
	return out
}

func (a *adminService) GetPower(context.Context, *latticev1.GetPowerRequest) (*latticev1.PowerStatus, error) {
	return a.power(), nil
}

func (a *adminService) SetPowerBudget(ctx context.Context, req *latticev1.SetPowerBudgetRequest) (*latticev1.PowerStatus, error) {
	r, err := a.s.propose(ctx, &quorum.SetPowerBudget{Header: quorum.Header{RequestID: req.ClientRequestId}, VCluster: req.Vcluster, Watts: req.BudgetWatts})
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	return a.power(), nil
}

func (a *adminService) ListTenants(context.Context, *latticev1.ListTenantsRequest) (*latticev1.ListTenantsResponse, error) {
	now := a.s.cfg.Clock()
	resp := &latticev1.ListTenantsResponse{}
	a.s.view(func(st *quorum.State) {
		seen := map[string]bool{}
		var total float64
		for _, t := range st.Tenants() {
			seen[t.Name] = true
			u := vcluster.DecayedUsage(t, now, quorum.FairShareHalfLife)
			total += u
			run := st.TenantRunning(t.Name)
			resp.Tenants = append(resp.Tenants, &latticev1.TenantInfo{Name: t.Name, MaxNodes: int32(t.MaxNodes), MaxRunning: int32(t.MaxRunning),
				FairShareTarget: t.FairShareTarget, UsageNodeSeconds: u, RunningAllocations: int32(run.Allocations), RunningNodes: int32(run.Nodes)})
		}
		// Tenants running work without a record yet.
		for _, al := range st.Active() {
			if !seen[al.Tenant] {
				seen[al.Tenant] = true
				run := st.TenantRunning(al.Tenant)
				resp.Tenants = append(resp.Tenants, &latticev1.TenantInfo{Name: al.Tenant, RunningAllocations: int32(run.Allocations), RunningNodes: int32(run.Nodes)})
			}
		}
		for _, t := range resp.Tenants {
			if total > 0 {
				t.UsageShare = t.UsageNodeSeconds / total
			}
		}
	})
	return resp, nil
}

func (a *adminService) SetTenant(ctx context.Context, req *latticev1.SetTenantRequest) (*latticev1.TenantInfo, error) {
	t := model.Tenant{Name: req.Name, MaxNodes: int(req.MaxNodes), MaxRunning: int(req.MaxRunning), FairShareTarget: req.FairShareTarget}
	r, err := a.s.propose(ctx, &quorum.SetTenant{Header: quorum.Header{RequestID: req.ClientRequestId}, Tenant: t})
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	return &latticev1.TenantInfo{Name: t.Name, MaxNodes: req.MaxNodes, MaxRunning: req.MaxRunning, FairShareTarget: t.FairShareTarget}, nil
}

// InjectFault cuts (or heals) this member's Raft links, for partition tests.
func (a *adminService) InjectFault(_ context.Context, req *latticev1.InjectFaultRequest) (*latticev1.InjectFaultResponse, error) {
	if req.DiskFull != nil {
		if err := a.s.q.SetDiskFull(*req.DiskFull); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		a.s.log.Warn("fault injection: disk full", "on", *req.DiskFull)
		if len(req.BlockMemberIds) == 0 {
			return &latticev1.InjectFaultResponse{}, nil
		}
	}
	if err := a.s.q.Partition(req.BlockMemberIds); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	a.s.log.Warn("fault injection: raft links cut", "members", req.BlockMemberIds)
	return &latticev1.InjectFaultResponse{}, nil
}

// setMode parses raw (a mode of a SetVClusterRequest; empty = unchanged)
// into *dst.
func setMode[S ~string](raw string, parse func(string) (S, error), dst *S) error {
	if raw == "" {
		return nil
	}
	m, err := parse(raw)
	if err != nil {
		return err
	}
	*dst = m
	return nil
}
