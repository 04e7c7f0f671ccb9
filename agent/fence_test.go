package agent

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/latticehpc/lattice/agent/supervise"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// hearingLeader accepts agents, assigns one job, and answers heartbeats
// while hears is set (a leader that stops hearing the agent: cut off).
type hearingLeader struct {
	latticev1.UnimplementedAgentServiceServer
	assign   *latticev1.ServerMessage
	hears    atomic.Bool
	assigned atomic.Bool
	mu       sync.Mutex
	reports  []*latticev1.AllocationReport
}

func (f *hearingLeader) Connect(stream latticev1.AgentService_ConnectServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{}}}); err != nil {
		return err
	}
	if !f.assigned.Swap(true) {
		if err := stream.Send(f.assign); err != nil {
			return err
		}
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if hb := m.GetHeartbeat(); hb != nil && f.hears.Load() {
			if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{HeartbeatSeq: hb.Seq}}}); err != nil {
				return err
			}
		}
		if r := m.GetReport(); r != nil {
			f.mu.Lock()
			f.reports = append(f.reports, r)
			f.mu.Unlock()
			if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: r.Seq}}}); err != nil {
				return err
			}
		}
	}
}

func (f *hearingLeader) final() *latticev1.AllocationReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reports {
		if st, _ := model.ParseAllocState(r.State); st.Terminal() {
			return r
		}
	}
	return nil
}

// An agent that a leader hears keeps its jobs past the fencing timeout
// (every answered heartbeat moves the deadline, also in DATA_DIR/fence for
// its supervisor); once no leader hears it for that long it stops them
// itself and reports them FAILED NodeFailure — even though it is still
// connected to a member.
func TestAgentStopsItsJobsWhenNoLeaderHearsIt(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	assign := assignMsg(31, 0, "")
	assign.GetAssign().Allocation.Request.Command = []string{"sleep", "60"}
	leader := &hearingLeader{assign: assign}
	leader.hears.Store(true)
	srv := grpc.NewServer()
	latticev1.RegisterAgentServiceServer(srv, leader)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	const fence = 3 * time.Second // well above a loaded machine's delays of an answer
	cfg := restartConfig(t.TempDir())
	cfg.Servers, cfg.KeepJobs, cfg.VirtualRuns = []string{lis.Addr().String()}, false, true // only the agent can stop it
	cfg.HeartbeatInterval, cfg.FenceTimeout, cfg.Grace = 200*time.Millisecond, fence, 500*time.Millisecond
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.fenceAfter(); got != fence+cfg.Grace {
		t.Errorf("fenceAfter %s, want %s", got, fence+cfg.Grace)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	waitUntil := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("the job running", 10*time.Second, func() bool { return a.runner.IsRunning(31) })
	time.Sleep(2 * fence) // heard all along: it keeps running
	if !a.runner.IsRunning(31) {
		t.Fatal("the job stopped although a leader heard the agent")
	}
	d, _, ok := supervise.ReadDeadline(filepath.Join(cfg.DataDir, supervise.FenceFile))
	if !ok || d.Before(time.Now()) || d.After(time.Now().Add(fence+time.Second)) {
		t.Errorf("fence file deadline %v (%v), want within %s from now", d, ok, fence)
	}
	cut := time.Now()
	leader.hears.Store(false)
	waitUntil("the job stopped by the fence", 20*time.Second, func() bool { return !a.runner.IsRunning(31) })
	if took := time.Since(cut); took < fence/2 {
		t.Errorf("stopped %s after the leader stopped hearing it, before the fence", took)
	}
	waitUntil("its end reported", 20*time.Second, func() bool { return leader.final() != nil })
	if r := leader.final(); r.State != string(model.StateFailed) || r.Reason != model.ReasonNodeFailure {
		t.Errorf("final report %s %s, want FAILED NodeFailure", r.State, r.Reason)
	}
}

// countingLeader is a hearingLeader that counts the agents it accepted.
type countingLeader struct {
	hearingLeader
	accepted atomic.Int32
}

func (c *countingLeader) Connect(stream latticev1.AgentService_ConnectServer) error {
	c.accepted.Add(1)
	return c.hearingLeader.Connect(stream)
}

// A member that accepts TCP connections but never answers (frozen) is
// skipped after ConnectTimeout, and a stream on which nothing arrives for
// StreamTimeout is taken for dead: the agent reaches the member that
// answers within seconds.
func TestAgentLeavesFrozenMembersAndSilentStreams(t *testing.T) {
	frozen, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	serve := func(l *countingLeader) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		latticev1.RegisterAgentServiceServer(srv, l)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}
	silent := &countingLeader{} // accepts, then never sends a thing
	silent.assigned.Store(true)
	good := &countingLeader{}
	good.assigned.Store(true)
	good.hears.Store(true)
	cfg := restartConfig(t.TempDir())
	cfg.Servers = []string{frozen.Addr().String(), serve(silent), serve(good)}
	cfg.HeartbeatInterval, cfg.StreamTimeout, cfg.ConnectTimeout = 200*time.Millisecond, 3*time.Second, 2*time.Second
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for good.accepted.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("never reached the answering member (the silent one accepted %d times)", silent.accepted.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if silent.accepted.Load() == 0 {
		t.Error("the silent member was never tried: the test shows nothing about stream deadlines")
	}
	// On the answering member it stays: heartbeats are answered.
	time.Sleep(2 * time.Second)
	if n := good.accepted.Load(); n != 1 {
		t.Errorf("the answering member accepted the agent %d times, want once", n)
	}
}
