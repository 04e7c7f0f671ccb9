package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latticehpc/lattice/admission"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
	"github.com/latticehpc/lattice/vcluster"
)

type allocService struct {
	latticev1.UnimplementedAllocationServiceServer
	s *Server
}

func (a *allocService) Submit(ctx context.Context, req *latticev1.SubmitRequest) (*latticev1.SubmitResponse, error) {
	r, check, err := a.checkSubmission(ctx, req)
	if err != nil {
		return nil, err
	}
	res, err := a.s.propose(ctx, &quorum.Submit{
		Header:   quorum.Header{RequestID: req.ClientRequestId},
		Items:    []quorum.SubmitItem{{Request: r}},
		Prepared: true,
	})
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	a.s.metrics.submitted.Add(float64(len(res.IDs)))
	return &latticev1.SubmitResponse{Ids: res.IDs, DisplayId: strconv.FormatUint(res.IDs[0], 10), Warnings: a.s.mailWarning(&check), Tenant: check.Tenant}, nil
}

// checkSubmission runs every check a submission passes before it is
// proposed (package admission: wire bounds, site QOS and partition names,
// limits, validation, array size, tenant and ownership, never-fits) and
// returns the request to propose — prepared (its vCluster resolved,
// defaults applied), stamped with its user — and, for the caller's
// replies, the same.
func (a *allocService) checkSubmission(ctx context.Context, req *latticev1.SubmitRequest) (model.Request, model.Request, error) {
	r := convert.RequestFromProto(req.Request)
	r.Env = a.s.dropSecretEnv(r.Env)
	propose, check, err := a.s.admit.Submit(caller(ctx), admission.Submission{
		Request: r, Wire: wireOf(req.Request), KeepIfNeverFits: req.Request.GetKeepIfNeverFits(),
		Reservation: func(r *model.Request) error { return a.s.admitReservation(ctx, r) }}) // reservation_service.go
	if err != nil {
		return model.Request{}, model.Request{}, admissionError(err)
	}
	return propose, check, nil
}

// SubmitBatch checks each request as Submit does and proposes those that
// pass as one SubmitBatch command: a burst of submissions costs one Raft
// entry (one fsync) instead of one each.
func (a *allocService) SubmitBatch(ctx context.Context, req *latticev1.SubmitBatchRequest) (*latticev1.SubmitBatchResponse, error) {
	if n := len(req.Requests); n == 0 || n > quorum.MaxBatchSubmissions {
		return nil, invalid("invalid requests: %d given, allowed 1..%d per batch", n, quorum.MaxBatchSubmissions)
	}
	resp := &latticev1.SubmitBatchResponse{Results: make([]*latticev1.SubmitBatchResult, len(req.Requests))}
	cmd := &quorum.SubmitBatch{}
	var at []int // request index of each proposed submission
	for i, sr := range req.Requests {
		if sr == nil {
			sr = &latticev1.SubmitRequest{}
		}
		r, _, err := a.checkSubmission(ctx, sr)
		if err != nil {
			resp.Results[i] = batchError(err)
			continue
		}
		cmd.Submissions = append(cmd.Submissions, quorum.Submit{
			Header:   quorum.Header{RequestID: sr.ClientRequestId},
			Items:    []quorum.SubmitItem{{Request: r}},
			Prepared: true,
		})
		at = append(at, i)
	}
	if len(cmd.Submissions) == 0 {
		return resp, nil
	}
	res, err := a.s.propose(ctx, cmd)
	if err != nil {
		return nil, rpcError(err)
	}
	if res.Rejection != nil {
		return nil, rejectionError(res.Rejection)
	}
	for k, sub := range res.Submissions {
		i := at[k]
		if sub.Rejection != nil {
			resp.Results[i] = batchError(rejectionError(sub.Rejection))
			continue
		}
		a.s.metrics.submitted.Add(float64(len(sub.IDs)))
		resp.Results[i] = &latticev1.SubmitBatchResult{Ids: sub.IDs, DisplayId: strconv.FormatUint(sub.IDs[0], 10)}
	}
	return resp, nil
}

func batchError(err error) *latticev1.SubmitBatchResult {
	st := status.Convert(err)
	return &latticev1.SubmitBatchResult{Error: st.Message(), Code: st.Code().String()}
}

// oneAllocation is the live allocation a user id names ("12", "12_3"), read
// from committed state.
func (s *Server) oneAllocation(id string) (*model.Allocation, error) {
	var al *model.Allocation
	var err error
	s.view(func(st *quorum.State) {
		var found []*model.Allocation
		if found, err = resolveIDs(st, id, false); err == nil {
			al = found[0]
		}
	})
	return al, err
}

// resolveIDs turns user ids into allocations: "12" is allocation 12 — or,
// when 12 starts an array, all its tasks when expandArrays — and "12_3" is
// task 3 of array 12.
func resolveIDs(st *quorum.State, id string, expandArrays bool) ([]*model.Allocation, error) {
	id = strings.TrimSpace(id)
	if base, idx, ok := strings.Cut(id, "_"); ok {
		arr, err1 := strconv.ParseUint(base, 10, 64)
		i, err2 := strconv.Atoi(idx)
		if err1 != nil || err2 != nil {
			return nil, invalid("invalid id %q: allowed ID or ARRAYID_INDEX", id)
		}
		t := st.LookupArrayTask(arr, i)
		if t == nil {
			return nil, notFound("allocation %s not found", id)
		}
		return []*model.Allocation{t}, nil
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil, invalid("invalid id %q: allowed ID or ARRAYID_INDEX", id)
	}
	a := st.Allocation(n)
	if a == nil {
		return nil, notFound("allocation %s not found", id)
	}
	if !expandArrays || a.ArrayJobID != n || a.Array == nil {
		return []*model.Allocation{a}, nil
	}
	var out []*model.Allocation
	for pos := range a.Array.Indexes() {
		if t := st.Allocation(n + uint64(pos)); t != nil && t.ArrayJobID == n {
			out = append(out, t)
		}
	}
	return out, nil
}

func (a *allocService) explanation(al *model.Allocation) *vcluster.Explanation {
	l := a.s.currentLeader()
	if l == nil {
		return nil
	}
	loop := l.Scheduler(al.VCluster)
	if loop == nil {
		return nil
	}
	e, _ := loop.Explanations.Get(al.ID)
	return e
}

func (a *allocService) withExplanation(al *model.Allocation) *latticev1.Allocation {
	p := convert.AllocToProto(al)
	if al.State == model.StatePending {
		defer func() {
			// A hold or a begin time outranks what the scheduler last said.
			if why := al.Waiting(a.s.cfg.Clock()); why != "" {
				p.Reason = why
			}
		}()
		if e := a.explanation(al); e != nil {
			p.Explanation = explanationToProto(al.DisplayID(), al.State, e)
			if al.Reason == model.ReasonWaitingForScheduling || al.Reason == "" {
				p.Reason = e.Reason
				if p.Reason == "" {
					p.Reason = model.ReasonWaitingForScheduling
				}
			}
		}
	}
	return p
}

func (a *allocService) Get(ctx context.Context, req *latticev1.GetAllocationRequest) (*latticev1.Allocation, error) {
	var al *model.Allocation
	var err error
	a.s.view(func(st *quorum.State) {
		var found []*model.Allocation
		found, err = resolveIDs(st, req.Id, false)
		if err == nil {
			al = found[0]
		}
	})
	if status.Code(err) == codes.NotFound {
		// Past retention: the history of ended jobs has it (history.go).
		a.s.view(func(st *quorum.State) {
			if old := endedLookup(st, req.Id); len(old) > 0 {
				al, err = old[0], nil
			}
		})
	}
	if err != nil {
		return nil, err
	}
	if err := a.s.canRead(ctx, "show", allocObject(al)); err != nil {
		return nil, err
	}
	return a.withExplanation(al), nil
}

func (a *allocService) List(ctx context.Context, req *latticev1.ListAllocationsRequest) (*latticev1.ListAllocationsResponse, error) {
	if req.Mine && req.Tenant == "" {
		req.Tenant = a.s.admit.DefaultTenantOf(caller(ctx))
	}
	if req.Tenant != "" {
		if err := a.s.canListTenant(ctx, req.Tenant); err != nil {
			return nil, err
		}
	}
	states := map[model.AllocState]bool{}
	for _, s := range req.States {
		st, err := model.ParseAllocState(s)
		if err != nil {
			return nil, rpcError(err)
		}
		states[st] = true
	}
	var cutoff time.Time
	if req.TerminalWindowSeconds > 0 {
		cutoff = a.s.cfg.Clock().Add(-time.Duration(req.TerminalWindowSeconds) * time.Second)
	}
	after, err := parsePageToken(req.PageToken)
	if err != nil {
		return nil, err
	}
	var list []*model.Allocation
	var ended []*quorum.HistoryRecord // past retention (history.go), in id order
	a.s.view(func(st *quorum.State) {
		if len(req.Ids) > 0 {
			seen := map[uint64]bool{}
			for _, id := range req.Ids {
				found, ferr := resolveIDs(st, id, true)
				if status.Code(ferr) == codes.NotFound {
					found, ferr = endedLookup(st, id), nil
				}
				if ferr != nil {
					err = ferr
					return
				}
				for _, f := range found {
					if err = a.s.canRead(ctx, "list", allocObject(f)); err != nil {
						return
					}
					if !seen[f.ID] {
						seen[f.ID] = true
						list = append(list, f)
					}
				}
			}
			slices.SortFunc(list, func(x, y *model.Allocation) int { return cmp.Compare(x.ID, y.ID) })
		} else {
			list = st.Allocations()
			if q := endedQuery(states, req.Vcluster, req.Tenant, req.Users, cutoff, after); q != nil {
				ended = st.History(*q)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	ended = byID(ended)
	resp := &latticev1.ListAllocationsResponse{}
	size := 0
	for al, rec := range mergeEnded(list, ended) {
		var p *latticev1.Allocation
		if rec != nil { // the history query applied the request's filters
			if !a.s.mayRead(ctx, endedObject(rec)) {
				continue
			}
			p = endedToProto(rec)
		} else {
			if !a.keepListed(ctx, req, al, after, states, cutoff) {
				continue
			}
			p = listed(a.withExplanation(al))
		}
		sz := proto.Size(p)
		if n := len(resp.Allocations); n > 0 && (size+sz > listPageBytes || (req.PageSize > 0 && n >= int(req.PageSize))) {
			resp.NextPageToken = strconv.FormatUint(resp.Allocations[n-1].Id, 10)
			break
		}
		size += sz
		resp.Allocations = append(resp.Allocations, p)
	}
	return resp, nil
}

// keepListed reports whether a listing by req shows al.
func (a *allocService) keepListed(ctx context.Context, req *latticev1.ListAllocationsRequest, al *model.Allocation, after uint64,
	states map[model.AllocState]bool, cutoff time.Time) bool {
	return al.ID > after &&
		(len(req.Users) == 0 || slices.Contains(req.Users, cmp.Or(al.User, al.Tenant))) &&
		(len(states) == 0 || states[al.State]) &&
		(req.Vcluster == "" || al.VCluster == req.Vcluster) &&
		(req.Tenant == "" || al.Tenant == req.Tenant) &&
		(cutoff.IsZero() || !al.State.Terminal() || !al.EndTime.Before(cutoff)) &&
		a.s.mayRead(ctx, allocObject(al))
}

func (a *allocService) Cancel(ctx context.Context, req *latticev1.CancelRequest) (*latticev1.CancelResponse, error) {
	if len(req.Ids) == 0 {
		return nil, invalid("invalid ids: allowed one or more allocation ids")
	}
	// denied, the first refusal, is the answer when nothing else was asked.
	results, ids, owner, denied := a.s.resolveChangeable(ctx, "cancel", req.Ids)
	resp := &latticev1.CancelResponse{Results: make([]*latticev1.CancelResult, len(results))}
	for i, r := range results {
		resp.Results[i] = &latticev1.CancelResult{Id: r.Id, Error: r.Error}
	}
	if len(ids) == 0 {
		if denied != nil {
			return nil, denied
		}
		return resp, nil
	}
	mail := a.s.mail.Snapshot(ids)
	r, err := a.s.propose(ctx, &quorum.Cancel{Header: quorum.Header{RequestID: req.ClientRequestId}, IDs: ids})
	if err != nil {
		return nil, rpcError(err)
	}
	a.s.mail.After(mail)
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	for _, it := range r.Items {
		for _, i := range owner[it.ID] {
			res := resp.Results[i]
			if it.Committed {
				res.Cancelled, res.Error = true, ""
			} else if !res.Cancelled && it.Rejection != nil {
				res.Error = it.Rejection.Message
			}
		}
	}
	return resp, nil
}

func (a *allocService) Explain(ctx context.Context, req *latticev1.ExplainRequest) (*latticev1.Explanation, error) {
	al, err := a.s.oneAllocation(req.Id)
	if err != nil {
		return nil, err
	}
	if err := a.s.canRead(ctx, "explain", allocObject(al)); err != nil {
		return nil, err
	}
	if e := a.explanation(al); e != nil && al.State == model.StatePending {
		out := explanationToProto(al.DisplayID(), al.State, e)
		defer a.s.explainInteractive(al, out) // interactive.go
		if why := al.Waiting(a.s.cfg.Clock()); why != "" {
			out.Reason, out.Message = why, waitingSentence(al)
		}
		if p := preemptionSentence(al); p != "" {
			out.Message = p + "; " + out.Message
		}
		return out, nil
	}
	out := &latticev1.Explanation{Id: al.DisplayID(), State: string(al.State), Reason: al.Reason, Nodes: al.Nodes}
	defer a.s.explainInteractive(al, out) // interactive.go
	defer func() {
		if p := preemptionSentence(al); p != "" {
			out.Message = p + "; " + out.Message
		}
	}()
	switch {
	case al.State == model.StatePending && al.Waiting(a.s.cfg.Clock()) != "":
		out.Reason, out.Message = al.Waiting(a.s.cfg.Clock()), waitingSentence(al)
	case al.State == model.StatePending && al.EligibleTime.IsZero():
		out.Message = "waits for its dependencies"
	case al.State == model.StatePending:
		out.Reason = model.ReasonWaitingForScheduling
		out.Message = "not yet considered by its vCluster's scheduler; it runs every few seconds"
	case al.State.Active():
		a.explainRunning(al, out) // explain_running.go
	default:
		out.Message = "ended " + string(al.State)
	}
	return out, nil
}

// Logs streams an allocation's output from the agent that ran it.
func (a *allocService) Logs(req *latticev1.LogsRequest, stream latticev1.AllocationService_LogsServer) error {
	ctx := stream.Context()
	l := a.s.currentLeader()
	if l == nil {
		if forwarded(ctx) {
			return status.Error(codes.Unavailable, "no quorum leader right now; retry")
		}
		return a.proxyLogs(req, stream)
	}
	offset := req.Offset
	for {
		var al *model.Allocation
		var err error
		changed := a.s.fsm.Changed()
		a.s.view(func(st *quorum.State) {
			var found []*model.Allocation
			if found, err = resolveIDs(st, req.Id, false); err == nil {
				al = found[0]
			}
		})
		if err != nil {
			return err
		}
		if err := a.s.canRead(ctx, "read the logs of", allocObject(al)); err != nil {
			return err
		}
		if len(al.Nodes) == 0 || al.State == model.StatePending || al.State == model.StateSuspended {
			if al.State.Terminal() || !req.Follow {
				return stream.Send(&latticev1.LogChunk{Offset: offset, Eof: al.State.Terminal()})
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-changed:
			case <-time.After(time.Second):
			}
			continue
		}
		data, err := l.ReadLog(ctx, al.Nodes[0], &latticev1.LogRequest{
			AllocationId: al.ID, Stderr: req.Stderr, Offset: offset, MaxBytes: 256 << 10})
		if err != nil {
			return err
		}
		if data.NotFound {
			if al.State.Terminal() {
				return status.Errorf(codes.NotFound, "no output recorded for allocation %s", req.Id)
			}
			data.Eof = false // staging: the agent has not started it yet
		} else if data.Error != "" {
			return status.Errorf(codes.Internal, "read output of %s: %s", req.Id, data.Error)
		}
		offset = data.Offset
		ended := data.Eof && al.State.Terminal()
		if len(data.Data) > 0 || ended {
			if err := stream.Send(&latticev1.LogChunk{Data: data.Data, Offset: offset, Eof: ended}); err != nil {
				return err
			}
		}
		if ended {
			return nil
		}
		if len(data.Data) == 256<<10 {
			continue // more to read now
		}
		if !req.Follow {
			if len(data.Data) == 0 {
				return stream.Send(&latticev1.LogChunk{Offset: offset})
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// proxyLogs relays a Logs stream from the leader (agents talk to the leader).
func (a *allocService) proxyLogs(req *latticev1.LogsRequest, stream latticev1.AllocationService_LogsServer) error {
	return relayFromLeader(a.s, stream.Context(), func(cc *grpc.ClientConn, ctx context.Context) (recvStream[*latticev1.LogChunk], error) {
		return latticev1.NewAllocationServiceClient(cc).Logs(ctx, req)
	}, stream.Send)
}

// recvStream is the receiving side of a server stream.
type recvStream[T any] interface{ Recv() (T, error) }

// dialLeader opens a connection of its own to the leader's API, for a
// stream relayed through this member (the caller closes it).
func (s *Server) dialLeader() (*grpc.ClientConn, error) {
	id, _ := s.q.Leader()
	var addr string
	s.view(func(st *quorum.State) {
		if m, ok := st.Member(id); ok {
			addr = m.APIAddr
		}
	})
	if addr == "" {
		return nil, status.Error(codes.Unavailable, "no quorum leader right now; retry")
	}
	conn, err := grpc.NewClient(addr, s.dialCreds())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "dial leader: %v", err)
	}
	return conn, nil
}

// relayFromLeader opens a server stream on the leader (with the caller's
// metadata, marked forwarded) and relays everything it sends.
func relayFromLeader[T any](s *Server, ctx context.Context, open func(*grpc.ClientConn, context.Context) (recvStream[T], error), send func(T) error) error {
	conn, err := s.dialLeader()
	if err != nil {
		return err
	}
	defer conn.Close()
	up, err := open(conn, forwardContext(ctx))
	if err != nil {
		return err
	}
	for {
		m, err := up.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := send(m); err != nil {
			return err
		}
	}
}

// preemptionSentence says why and by whom an allocation was (or is being)
// stopped and requeued; empty when it never was.
func preemptionSentence(al *model.Allocation) string {
	p := al.Preemption
	if p == nil {
		return ""
	}
	var s string
	if p.Kind == model.PreemptReclaim {
		s = fmt.Sprintf("its borrowed nodes were reclaimed by vCluster %s for allocation %d at %s", p.ByVCluster, p.ForAlloc, p.Time.Format(time.RFC3339))
	} else {
		s = fmt.Sprintf("preempted by higher-class allocation %d of vCluster %s at %s", p.ForAlloc, p.ByVCluster, p.Time.Format(time.RFC3339))
	}
	if al.State == model.StateCheckpointing {
		return s + fmt.Sprintf("; checkpointing until %s, then it is stopped and requeued", p.Deadline.Format(time.RFC3339))
	}
	return s + fmt.Sprintf("; requeued (restart %d)", al.RequeueCount)
}

// waitingSentence says why a held or not-yet-begun allocation waits and
// what lets it run.
func waitingSentence(al *model.Allocation) string {
	switch al.Held {
	case model.HoldUser:
		return "held by its owner; `latticectl release " + al.DisplayID() + "` lets it run"
	case model.HoldAdmin:
		return "held by an admin; only an admin's `latticectl release " + al.DisplayID() + "` lets it run"
	}
	return "not eligible before its begin time " + al.BeginTime.Format(time.RFC3339) + "; `latticectl update " + al.DisplayID() + " --begin now` changes it"
}
