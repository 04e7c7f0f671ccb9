package server

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

type nodeService struct {
	latticev1.UnimplementedNodeServiceServer
	s *Server
}

// Register adds nodes without a stream (agents normally register through
// AgentService.Connect).
func (n *nodeService) Register(ctx context.Context, req *latticev1.RegisterNodesRequest) (*latticev1.RegisterNodesResponse, error) {
	if req.AgentId == "" {
		return nil, invalid("invalid agent_id: allowed a non-empty agent id")
	}
	var names []string
	for _, p := range req.Nodes {
		names = append(names, p.Name)
	}
	if err := n.s.agentOwns(ctx, "register", names); err != nil {
		return nil, err
	}
	if l := n.s.currentLeader(); l != nil {
		who := holderOf(ctx, req.AgentId, req.Instance)
		if err := l.CheckClaim(who, names); err != nil {
			return nil, n.s.refuseClaim(who, "register", err)
		}
	}
	cmd := &quorum.RegisterNodes{Agent: req.AgentId}
	resp := &latticev1.RegisterNodesResponse{}
	for _, p := range req.Nodes {
		cmd.Nodes = append(cmd.Nodes, agent.NodeFromProto(p))
		resp.Registered = append(resp.Registered, p.Name)
	}
	r, err := n.s.propose(ctx, cmd)
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	if l := n.s.currentLeader(); l != nil {
		l.Heard(resp.Registered)
	}
	return resp, nil
}

func (n *nodeService) Heartbeat(ctx context.Context, req *latticev1.HeartbeatRequest) (*latticev1.HeartbeatResponse, error) {
	if err := n.s.agentOwns(ctx, "heartbeat", req.Nodes); err != nil {
		return nil, err
	}
	if l := n.s.currentLeader(); l != nil {
		l.Heard(req.Nodes)
	}
	return &latticev1.HeartbeatResponse{}, nil
}

func (n *nodeService) List(_ context.Context, req *latticev1.ListNodesRequest) (*latticev1.ListNodesResponse, error) {
	states := map[model.NodeState]bool{}
	for _, s := range req.States {
		st, err := model.ParseNodeState(s)
		if err != nil {
			return nil, rpcError(err)
		}
		states[st] = true
	}
	names := map[string]bool{}
	for _, name := range req.Names {
		names[name] = true
	}
	resp := &latticev1.ListNodesResponse{}
	now := n.s.cfg.Clock()
	l := n.s.currentLeader()
	var missing []string
	n.s.view(func(st *quorum.State) {
		for name := range names {
			if st.Node(name) == nil {
				missing = append(missing, name)
			}
		}
		for _, node := range st.Nodes() {
			if len(names) > 0 && !names[node.Name] {
				continue
			}
			if req.Vcluster != "" && node.CurrentVCluster != req.Vcluster && node.HomeVCluster != req.Vcluster {
				continue
			}
			if len(states) > 0 && !states[node.State] {
				continue
			}
			display := ""
			if node.Allocation != 0 {
				if a := st.Allocation(node.Allocation); a != nil {
					display = a.DisplayID()
				}
			}
			var seen time.Time
			if l != nil {
				seen = l.LastSeen(node.Name)
			}
			resp.Nodes = append(resp.Nodes, convert.NodeToProto(node, display, seen))
		}
		markReserved(resp.Nodes, st.Reservations(now), now) // reservation_service.go
	})
	if len(missing) > 0 && len(resp.Nodes) == 0 {
		return nil, notFound("node %s not found", missing[0])
	}
	return resp, nil
}

func (n *nodeService) setState(ctx context.Context, name string, action quorum.NodeAction, reason string) (*latticev1.NodeResponse, error) {
	if name == "" {
		return nil, invalid("invalid name: allowed a node name")
	}
	by := "root" // auth off: whoever runs the cluster
	if id := caller(ctx); id != nil {
		by = id.User
	}
	r, err := n.s.propose(ctx, &quorum.SetNodeState{Nodes: []string{name}, Action: action, Reason: reason, By: by})
	if err != nil {
		return nil, rpcError(err)
	}
	if r.Rejection != nil {
		return nil, rejectionError(r.Rejection)
	}
	if len(r.Items) > 0 && r.Items[0].Rejection != nil {
		return nil, rejectionError(r.Items[0].Rejection)
	}
	var out *latticev1.Node
	n.s.view(func(st *quorum.State) {
		if node := st.Node(name); node != nil {
			out = convert.NodeToProto(node, "", time.Time{})
		}
	})
	return &latticev1.NodeResponse{Node: out}, nil
}

func (n *nodeService) Drain(ctx context.Context, req *latticev1.DrainRequest) (*latticev1.NodeResponse, error) {
	reason := req.Reason
	if reason == "" {
		reason = "drained by admin"
	}
	return n.setState(ctx, req.Name, quorum.ActionDrain, reason)
}

func (n *nodeService) Undrain(ctx context.Context, req *latticev1.UndrainRequest) (*latticev1.NodeResponse, error) {
	return n.setState(ctx, req.Name, quorum.ActionUndrain, "")
}

// SetState lets an admin drain, undrain or mark a node down or up.
func (n *nodeService) SetState(ctx context.Context, req *latticev1.SetNodeStateRequest) (*latticev1.NodeResponse, error) {
	switch req.State {
	case "drain", "Drained", "Draining", "drained":
		return n.setState(ctx, req.Name, quorum.ActionDrain, req.Reason)
	case "undrain", "Ready", "ready", "resume":
		return n.setState(ctx, req.Name, quorum.ActionUndrain, req.Reason)
	case "down", "Down":
		return n.setState(ctx, req.Name, quorum.ActionDown, req.Reason)
	case "up":
		return n.setState(ctx, req.Name, quorum.ActionUp, req.Reason)
	}
	return nil, invalid("invalid state %q: allowed drain, undrain, down, up", req.State)
}
