package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

type agentService struct {
	latticev1.UnimplementedAgentServiceServer
	s *Server
}

// Connect is an agent's stream. Only the leader accepts it; a follower
// refuses with FailedPrecondition naming the leader, and the agent moves on.
func (a *agentService) Connect(stream latticev1.AgentService_ConnectServer) error {
	s := a.s
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil || hello.AgentId == "" {
		return status.Error(codes.InvalidArgument, "the first message must be a hello with an agent id")
	}
	l := s.currentLeader()
	if l == nil {
		leaderID, _ := s.q.Leader()
		return status.Errorf(codes.FailedPrecondition, "not the leader; the leader is %q", leaderID)
	}
	nodes := make([]model.Node, len(hello.Nodes))
	names := make([]string, len(hello.Nodes))
	for i, n := range hello.Nodes {
		nodes[i] = agent.NodeFromProto(n)
		names[i] = n.Name
	}
	ctx, cancel := context.WithTimeout(stream.Context(), 10*time.Second)
	r, err := s.propose(ctx, &quorum.RegisterNodes{Agent: hello.AgentId, Nodes: nodes})
	cancel()
	if err != nil {
		return rpcError(err)
	}
	if r.Rejection != nil {
		return rejectionError(r.Rejection)
	}
	conn := &agentConn{
		id: hello.AgentId, out: make(chan *latticev1.ServerMessage, 4096), done: make(chan struct{}), nodes: names,
		sent: map[uint64]bool{}, cancelSent: map[uint64]bool{}, reported: map[uint64]bool{},
		logWaiters: map[uint64]chan *latticev1.LogData{},
	}
	// What the agent still runs counts as delivered: the dispatcher will
	// stop what the quorum no longer wants running.
	for _, run := range hello.Running {
		conn.sent[run.AllocationId] = true
	}
	// Accept: the agent waits for this first message.
	if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{}}}); err != nil {
		return err
	}
	l.live.heard(names)
	l.disp.attach(conn)
	defer l.disp.detach(conn)
	s.metrics.agents.Inc()
	defer s.metrics.agents.Dec()
	s.log.Info("agent attached", "agent", hello.AgentId, "nodes", len(names))

	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			switch msg := m.Msg.(type) {
			case *latticev1.AgentMessage_Report:
				l.live.heard(names)
				select {
				case l.disp.reports <- reportIn{conn: conn, report: msg.Report}:
				case <-conn.done:
					return
				}
			case *latticev1.AgentMessage_Heartbeat:
				l.live.heard(msg.Heartbeat.Nodes)
			case *latticev1.AgentMessage_LogData:
				conn.deliverLog(msg.LogData)
			}
		}
	}()
	for {
		select {
		case m := <-conn.out:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-recvErr:
			return err
		case <-conn.done:
			return status.Error(codes.Unavailable, "leadership moved or the agent reconnected; reconnect")
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}
