package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/leader"
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
	s.presentClusterID(stream)
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil || hello.AgentId == "" {
		return status.Error(codes.InvalidArgument, "the first message must be a hello with an agent id")
	}
	if err := s.sameCluster(hello); err != nil {
		return err
	}
	if err := s.agentOwns(stream.Context(), "register", helloNodeNames(hello)); err != nil {
		return err
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
		nodes[i].FenceAfter = time.Duration(max(hello.FenceAfterMs, 0)) * time.Millisecond
		names[i] = n.Name
	}
	conn := leader.NewAgentConn(hello.AgentId, names, holderOf(stream.Context(), hello.AgentId, hello.Instance))
	// Nodes a different connected agent holds are refused before anything
	// is proposed (agent_claim.go): no job of theirs fails, nothing reaches
	// this stream.
	if err := l.Claim(conn); err != nil {
		return s.refuseClaim(conn.Holder(), "connect", err)
	}
	defer l.Detach(conn)
	ctx, cancel := context.WithTimeout(stream.Context(), 10*time.Second)
	r, err := s.propose(ctx, &quorum.RegisterNodes{Agent: hello.AgentId, Nodes: nodes})
	cancel()
	if err != nil {
		return rpcError(err)
	}
	if r.Rejection != nil {
		return rejectionError(r.Rejection)
	}
	// What the agent still runs counts as delivered — as the run it says
	// it has: the dispatcher will stop what the quorum no longer wants
	// running (an older run included).
	s.view(func(st *quorum.State) {
		for _, run := range hello.Running {
			rc := 0
			if al := st.Allocation(run.AllocationId); al != nil {
				rc = al.RequeueCount
			}
			if run.Run > 0 {
				rc = int(run.Run) - 1
			}
			conn.Adopt(run.AllocationId, rc)
		}
	})
	// Accept: the agent waits for this first message.
	if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{}}}); err != nil {
		return err
	}
	l.Heard(names)
	a.failLost(stream.Context(), names, hello.Running)
	running := make([]uint64, len(hello.Running))
	for i, r := range hello.Running {
		running[i] = r.AllocationId
	}
	s.confirmCleanup(stream.Context(), names, running)
	l.Attach(conn)
	s.metrics.agents.Inc()
	defer s.metrics.agents.Dec()
	s.log.Info("agent attached", "agent", hello.AgentId, "nodes", len(names))

	owned := nodeSet(names)
	recvErr := make(chan error, 1)
	go func() {
		var reportHeard time.Time // the last report that counted as heard
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			switch msg := m.Msg.(type) {
			case *latticev1.AgentMessage_Report:
				// A report shows the agent's nodes alive too; at hundreds of
				// reports a second from an agent of thousands of nodes, once
				// a second is enough (heartbeats carry the rest).
				if now := time.Now(); now.Sub(reportHeard) >= time.Second {
					l.Heard(names)
					reportHeard = now
				}
				if !s.reportIsFor(conn, owned, msg.Report) {
					conn.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: msg.Report.Seq}}})
					continue
				}
				if !l.Report(conn, msg.Report) {
					return
				}
			case *latticev1.AgentMessage_Heartbeat:
				heard := s.ownedOnly(owned, msg.Heartbeat.Nodes)
				l.Heard(heard)
				// The agent's proof that a leader heard it (its fencing
				// clock, agent/fence.go): only while this member leads.
				if msg.Heartbeat.Seq != 0 && len(heard) > 0 && s.q.IsLeader() {
					conn.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{HeartbeatSeq: msg.Heartbeat.Seq}}})
				}
				if len(heard) == len(msg.Heartbeat.Nodes) { // measured draw only from an agent of those nodes
					l.RecordPower(msg.Heartbeat.Nodes, msg.Heartbeat.Watts, time.Now())
				}
				if len(heard) == len(msg.Heartbeat.Nodes) {
					s.recordServiceSamples(msg.Heartbeat.ServiceSamples)
				}
				if msg.Heartbeat.ListsRunning {
					s.confirmCleanup(stream.Context(), names, msg.Heartbeat.Running)
				}
			case *latticev1.AgentMessage_NodeFacts:
				var mine []*latticev1.NodeFact
				for _, f := range msg.NodeFacts.Nodes {
					if owned[f.Name] {
						mine = append(mine, f)
					}
				}
				s.nodeFacts(stream.Context(), hello.AgentId, &latticev1.NodeFacts{Nodes: mine})
			case *latticev1.AgentMessage_LogData:
				conn.DeliverLog(msg.LogData)
			case *latticev1.AgentMessage_UsageAnswer:
				l.usage.deliver(msg.UsageAnswer)
			case *latticev1.AgentMessage_StepEvent:
				l.steps.deliver(msg.StepEvent)
				l.terms.publish(msg.StepEvent)
			}
		}
	}()
	for {
		select {
		case m := <-conn.Out():
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-recvErr:
			return err
		case <-conn.Done():
			return status.Error(codes.Unavailable, "leadership moved or the agent reconnected; reconnect")
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

// failLost ends allocations the quorum believes run on this agent's nodes
// but the agent neither runs nor has a report for: the agent restarted and
// their processes are gone.
func (a *agentService) failLost(ctx context.Context, nodes []string, known []*latticev1.RunningOnAgent) {
	mine := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		mine[n] = true
	}
	knownIDs := make(map[uint64]bool, len(known))
	for _, k := range known {
		knownIDs[k.AllocationId] = true
	}
	cmd := &quorum.UpdateAllocs{}
	a.s.view(func(st *quorum.State) {
		for _, al := range st.Active() {
			if len(al.Nodes) == 0 || !mine[al.Nodes[0]] || knownIDs[al.ID] || al.State == model.StateStaging {
				continue
			}
			st := model.StateFailed
			if quorum.Stopping(al) {
				st = model.StateSuspended // it was being stopped to be requeued anyway
			}
			cmd.Updates = append(cmd.Updates, quorum.AllocUpdate{AllocID: al.ID, State: st, Reason: model.ReasonNodeFailure})
		}
	})
	if len(cmd.Updates) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := a.s.propose(pctx, cmd); err != nil {
		a.s.log.Warn("fail allocations lost with an agent restart", "count", len(cmd.Updates), "err", err)
		return
	}
	a.s.log.Info("allocations lost with an agent restart", "count", len(cmd.Updates))
}
