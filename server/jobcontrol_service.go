package server

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/admission"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Job control (hold, release, requeue, update, signal) and the site
// configuration (QOS table, partitions). Every change goes through a quorum
// command; the object rules are those of cancel: users act on their own
// work, tenant-admins on their tenants', admins on everything.

// isAdmin reports whether the caller is an admin (everyone is, with auth off:
// such a server listens on loopback only).
func (s *Server) isAdmin(ctx context.Context) bool { return s.admit.IsAdmin(caller(ctx)) }

// resolveChangeable resolves user ids to allocations the caller may change
// (verb names the action in refusals): results carries one entry per id,
// ids the allocations to act on, owner maps each back to its entries.
func (s *Server) resolveChangeable(ctx context.Context, verb string, in []string) (results []*latticev1.JobControlResult, ids []uint64, owner map[uint64][]int, denied error) {
	results = make([]*latticev1.JobControlResult, len(in))
	owner = map[uint64][]int{}
	s.view(func(st *quorum.State) {
		for i, id := range in {
			results[i] = &latticev1.JobControlResult{Id: id}
			found, err := resolveIDs(st, id, true)
			if err != nil {
				results[i].Error = status.Convert(err).Message()
				continue
			}
			if err := s.canChange(ctx, verb, allocObject(found[0])); err != nil {
				results[i].Error = status.Convert(err).Message()
				denied = cmp.Or(denied, err)
				continue
			}
			for _, f := range found {
				if len(owner[f.ID]) == 0 {
					ids = append(ids, f.ID)
				}
				owner[f.ID] = append(owner[f.ID], i)
			}
		}
	})
	return results, ids, owner, denied
}

// jobControl runs one item-wise command over the ids of req.
func (a *allocService) jobControl(ctx context.Context, verb string, req *latticev1.JobControlRequest, cmd func(ids []uint64) quorum.Command) (*latticev1.JobControlResponse, error) {
	if len(req.Ids) == 0 {
		return nil, invalid("invalid ids: allowed one or more allocation ids such as 12, 12_3")
	}
	results, ids, owner, denied := a.s.resolveChangeable(ctx, verb, req.Ids)
	resp := &latticev1.JobControlResponse{Results: results}
	if len(ids) == 0 {
		if denied != nil && len(req.Ids) == 1 {
			return nil, denied
		}
		return resp, nil
	}
	c := cmd(ids)
	c.CommandHeader().RequestID = req.ClientRequestId
	mail := a.s.mail.Snapshot(ids)
	r, err := a.s.propose(ctx, c)
	if err != nil {
		return nil, rpcError(err)
	}
	a.s.mail.After(mail)
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	// An array answers as one: ok when every task was, else the first refusal.
	for _, res := range results {
		if res.Error == "" {
			res.Ok = true
		}
	}
	for _, it := range r.Items {
		for _, i := range owner[it.ID] {
			if !it.Committed && it.Rejection != nil && results[i].Ok {
				results[i].Ok, results[i].Error = false, it.Rejection.Message
			}
		}
	}
	return resp, nil
}

func (a *allocService) Hold(ctx context.Context, req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	kind := model.HoldUser
	if a.s.isAdmin(ctx) && !req.UserHold {
		kind = model.HoldAdmin
	}
	return a.jobControl(ctx, "hold", req, func(ids []uint64) quorum.Command {
		return &quorum.Hold{IDs: ids, Kind: kind, Admin: a.s.isAdmin(ctx)}
	})
}

func (a *allocService) Release(ctx context.Context, req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	return a.jobControl(ctx, "release", req, func(ids []uint64) quorum.Command {
		return &quorum.Hold{IDs: ids, Release: true, Admin: a.s.isAdmin(ctx)}
	})
}

func (a *allocService) Requeue(ctx context.Context, req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	hold := ""
	if req.Hold {
		hold = model.HoldUser
		if a.s.isAdmin(ctx) && !req.UserHold {
			hold = model.HoldAdmin
		}
	}
	return a.jobControl(ctx, "requeue", req, func(ids []uint64) quorum.Command {
		return &quorum.RequeueJobs{IDs: ids, Hold: hold}
	})
}

func (a *allocService) Update(ctx context.Context, req *latticev1.UpdateAllocationRequest) (*latticev1.Allocation, error) {
	var found []*model.Allocation
	var err error
	a.s.view(func(st *quorum.State) { found, err = resolveIDs(st, req.Id, true) }) // an array's id: every task
	if err != nil {
		return nil, err
	}
	al := found[0]
	if err := a.s.canChange(ctx, "update", allocObject(al)); err != nil {
		return nil, err
	}
	admin := a.s.isAdmin(ctx)
	c := &quorum.UpdateAlloc{Header: quorum.Header{RequestID: req.ClientRequestId}, Admin: admin}
	for _, f := range found {
		c.IDs = append(c.IDs, f.ID)
	}
	changed := false
	if req.WalltimeSeconds != nil {
		d, err := admission.Walltime(*req.WalltimeSeconds)
		if err != nil {
			return nil, admissionError(err)
		}
		c.Walltime, changed = &d, true
	}
	if req.NodesMin != nil {
		n := int(*req.NodesMin)
		c.NodesMin, changed = &n, true
	}
	if req.NodesMax != nil {
		n := int(*req.NodesMax)
		c.NodesMax, changed = &n, true
	}
	if req.Name != nil {
		c.Name, changed = req.Name, true
	}
	if req.Vcluster != nil {
		c.VCluster, changed = req.Vcluster, true
	}
	if req.BeginUnixMs != nil {
		t := time.Time{}
		if *req.BeginUnixMs > 0 {
			t = time.UnixMilli(*req.BeginUnixMs).UTC()
		}
		c.BeginTime, changed = &t, true
	}
	class := -1
	if req.Qos != nil {
		q, err := a.s.admit.QOS(*req.Qos)
		if err != nil {
			return nil, admissionError(err)
		}
		c.QOS, changed = &q.Name, true
		class = q.PriorityClass
	}
	if req.PriorityClass != nil {
		class, changed = int(*req.PriorityClass), true
	}
	if class >= 0 {
		if err := a.s.admit.RaisePriority(caller(ctx), class, found); err != nil {
			return nil, admissionError(err)
		}
		c.PriorityClass = &class
	}
	if !changed {
		return nil, admissionError(admission.NothingToUpdate())
	}
	r, err := a.s.propose(ctx, c)
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	var out *model.Allocation
	var active []*model.Allocation
	a.s.view(func(st *quorum.State) {
		out = st.Allocation(al.ID)
		for _, f := range found {
			if cur := st.Allocation(f.ID); cur != nil && cur.State.Active() && len(cur.Nodes) > 0 {
				active = append(active, cur)
			}
		}
	})
	if out == nil {
		return nil, notFound("allocation %s not found", req.Id)
	}
	if c.Walltime != nil {
		// A running one's agent moves its timer now; if that agent is not
		// connected, the walltime backstop still ends it at its new limit.
		if l := a.s.currentLeader(); l != nil {
			for _, cur := range active {
				if conn := l.ConnFor(cur.Nodes[0]); conn != nil {
					conn.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_SetWalltime{SetWalltime: &latticev1.SetWalltime{
						AllocationId: cur.ID, WalltimeSeconds: int64(cur.Walltime / time.Second)}}})
				}
			}
		}
	}
	return a.withExplanation(out), nil
}

// Signal sends a signal to running allocations through their agents. It
// changes no state, so it is no quorum command: the leader sends it to the
// agent of each allocation's first node, which signals the job's process
// group (the supervisor passes it by).
func (a *allocService) Signal(ctx context.Context, req *latticev1.SignalRequest) (*latticev1.JobControlResponse, error) {
	sig, err := model.ParseSignal(req.Signal)
	if err != nil {
		return nil, rpcError(err)
	}
	if len(req.Ids) == 0 {
		return nil, invalid("invalid ids: allowed one or more allocation ids such as 12, 12_3")
	}
	l := a.s.currentLeader()
	if l == nil {
		return nil, status.Error(codes.Unavailable, "no quorum leader right now; retry")
	}
	results, ids, owner, denied := a.s.resolveChangeable(ctx, "signal", req.Ids)
	if len(ids) == 0 && denied != nil && len(req.Ids) == 1 {
		return nil, denied
	}
	for _, res := range results {
		res.Ok = res.Error == ""
	}
	for _, id := range ids {
		var al *model.Allocation
		a.s.view(func(st *quorum.State) { al = st.Allocation(id) })
		why := ""
		switch {
		case al == nil:
			why = fmt.Sprintf("allocation %d not found", id)
		case al.State != model.StateRunning && al.State != model.StateCheckpointing:
			why = fmt.Sprintf("allocation %s is %s; only running allocations can be signalled", al.DisplayID(), al.State)
		default:
			c := l.ConnFor(al.Nodes[0])
			if c == nil || !c.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Signal{
				Signal: &latticev1.SignalAllocation{AllocationId: al.ID, Signal: int32(sig)}}}) {
				why = fmt.Sprintf("the agent of node %s is not connected; retry", al.Nodes[0])
			}
		}
		if why == "" {
			continue
		}
		for _, i := range owner[id] {
			if results[i].Ok {
				results[i].Ok, results[i].Error = false, why
			}
		}
	}
	return &latticev1.JobControlResponse{Results: results}, nil
}

func qosToProto(q model.QOS) *latticev1.QOS {
	return &latticev1.QOS{Name: q.Name, PriorityClass: int32(q.PriorityClass), MaxWalltimeSeconds: int64(q.MaxWalltime / time.Second),
		MaxNodes: int32(q.MaxNodes), Vcluster: q.VCluster, Description: q.Description, PreemptMode: string(q.PreemptMode)}
}

func (a *allocService) ListQOS(ctx context.Context, _ *latticev1.ListQOSRequest) (*latticev1.ListQOSResponse, error) {
	resp := &latticev1.ListQOSResponse{}
	a.s.view(func(st *quorum.State) {
		for _, q := range st.QOSTable() {
			resp.Qos = append(resp.Qos, qosToProto(q))
		}
		parts := st.Partitions()
		for _, name := range slices.Sorted(maps.Keys(parts)) {
			resp.Partitions = append(resp.Partitions, &latticev1.Partition{Name: name, Vcluster: parts[name]})
		}
	})
	return resp, nil
}

func (a *allocService) SetQOS(ctx context.Context, req *latticev1.SetQOSRequest) (*latticev1.SetQOSResponse, error) {
	p := req.Qos
	if p == nil {
		return nil, invalid("invalid qos: allowed a QOS entry with a name")
	}
	if p.MaxWalltimeSeconds < 0 || p.MaxWalltimeSeconds > model.MaxWalltimeSecond {
		return nil, rpcError(&model.FieldError{Field: "max-walltime", Value: fmt.Sprintf("%d seconds", p.MaxWalltimeSeconds), Allowed: "0 (no limit) up to 365 days"})
	}
	q := model.QOS{Name: p.Name, PriorityClass: int(p.PriorityClass), MaxWalltime: time.Duration(p.MaxWalltimeSeconds) * time.Second,
		MaxNodes: int(p.MaxNodes), VCluster: p.Vcluster, Description: p.Description}
	if p.PreemptMode != "" {
		m, err := model.ParsePreemptMode(p.PreemptMode)
		if err != nil {
			return nil, rpcError(err)
		}
		q.PreemptMode = m
	}
	r, err := a.s.propose(ctx, &quorum.SetQOS{QOS: q, Delete: req.Delete})
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	return &latticev1.SetQOSResponse{}, nil
}

func (a *allocService) SetPartition(ctx context.Context, req *latticev1.SetPartitionRequest) (*latticev1.SetPartitionResponse, error) {
	r, err := a.s.propose(ctx, &quorum.SetPartition{Name: req.Name, VCluster: req.Vcluster})
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	return &latticev1.SetPartitionResponse{}, nil
}
