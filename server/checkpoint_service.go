package server

import (
	"context"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

// Checkpoint asks a running allocation to checkpoint now and keep running
// (`latticectl checkpoint ID`). The agent has the vCluster's reclaim grace
// to get the acknowledgement.
func (a *allocService) Checkpoint(ctx context.Context, req *latticev1.CheckpointAllocationRequest) (*latticev1.CheckpointAllocationResponse, error) {
	al, grace, err := a.lookupOne(req.Id)
	if err != nil {
		return nil, err
	}
	if err := a.s.canChange(ctx, "checkpoint", allocObject(al)); err != nil {
		return nil, err
	}
	item := quorum.CheckpointItem{AllocID: al.ID, Reason: quorum.CheckpointUser, Deadline: a.s.cfg.Clock().Add(grace)}
	r, err := a.s.propose(ctx, &quorum.Checkpoint{Header: quorum.Header{RequestID: req.ClientRequestId}, Items: []quorum.CheckpointItem{item}})
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	if it := r.Items[0]; it.Rejection != nil {
		return nil, rejectionError(it.Rejection)
	}
	resp := &latticev1.CheckpointAllocationResponse{Id: al.DisplayID()}
	a.s.view(func(st *quorum.State) {
		if cur := st.Allocation(al.ID); cur != nil {
			resp.State, resp.DeadlineUnixMs = string(cur.State), convert.UnixMS(cur.CheckpointDeadline)
		}
	})
	return resp, nil
}

// CheckpointDone acknowledges a webhook-mode checkpoint: the agent that
// waits for it is told, and stops or resumes the allocation.
func (a *allocService) CheckpointDone(ctx context.Context, req *latticev1.CheckpointDoneRequest) (*latticev1.CheckpointDoneResponse, error) {
	al, _, err := a.lookupOne(req.Id)
	if err != nil {
		return nil, err
	}
	if err := a.s.canChange(ctx, "acknowledge a checkpoint of", allocObject(al)); err != nil {
		return nil, err
	}
	if al.State != model.StateCheckpointing {
		return nil, failedPrecondition("allocation %s is %s; only a CHECKPOINTING allocation can acknowledge a checkpoint", al.DisplayID(), al.State)
	}
	l := a.s.currentLeader()
	if l == nil {
		return nil, unavailable("no leader; retry")
	}
	if err := l.CheckpointAck(al, req.Failed); err != nil {
		return nil, err
	}
	return &latticev1.CheckpointDoneResponse{}, nil
}

// lookupOne resolves one allocation id and its vCluster's checkpoint grace.
func (a *allocService) lookupOne(id string) (*model.Allocation, time.Duration, error) {
	var al *model.Allocation
	var err error
	grace := model.DefaultReclaimGrace
	a.s.view(func(st *quorum.State) {
		var found []*model.Allocation
		if found, err = resolveIDs(st, id, false); err == nil {
			al = found[0]
			if vc := st.VCluster(al.VCluster); vc != nil {
				grace = vc.Grace()
			}
		}
	})
	return al, grace, err
}
