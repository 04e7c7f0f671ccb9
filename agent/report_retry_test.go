package agent

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// forgetfulLeader acknowledges no report the first time it gets it (as a
// leader whose proposal failed), only when it comes again.
type forgetfulLeader struct {
	latticev1.UnimplementedAgentServiceServer
	assign *latticev1.ServerMessage
	mu     sync.Mutex
	seen   map[uint64]int
	acked  []*latticev1.AllocationReport
}

func (f *forgetfulLeader) Connect(stream latticev1.AgentService_ConnectServer) error {
	if _, err := stream.Recv(); err != nil { // hello
		return err
	}
	if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{}}}); err != nil {
		return err
	}
	if err := stream.Send(f.assign); err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		r := m.GetReport()
		if r == nil {
			continue
		}
		f.mu.Lock()
		f.seen[r.Seq]++
		again := f.seen[r.Seq] > 1
		if again {
			f.acked = append(f.acked, r)
		}
		f.mu.Unlock()
		if again {
			if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: r.Seq}}}); err != nil {
				return err
			}
		}
	}
}

func TestUnacknowledgedReportsAreSentAgain(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leader := &forgetfulLeader{assign: assignMsg(21, 0, "#!/bin/sh\nexit 4\n"), seen: map[uint64]int{}}
	srv := grpc.NewServer()
	latticev1.RegisterAgentServiceServer(srv, leader)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cfg := restartConfig(t.TempDir())
	cfg.Servers, cfg.KeepJobs, cfg.ReportRetry = []string{lis.Addr().String()}, false, 200*time.Millisecond
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
	deadline := time.Now().Add(15 * time.Second)
	for {
		leader.mu.Lock()
		var final *latticev1.AllocationReport
		for _, r := range leader.acked {
			if r.State == string(model.StateFailed) {
				final = r
			}
		}
		leader.mu.Unlock()
		if final != nil {
			if final.ExitCode != 4 {
				t.Errorf("final report %v, want exit 4", final)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the unacknowledged final report was never sent again")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The acknowledgement was sent; the agent handles it on its own
	// goroutine, so give it a moment.
	deadline = time.Now().Add(5 * time.Second)
	for {
		n := len(pendingReports(a, 21))
		st, err := loadState(a.statePath())
		if n == 0 && err == nil && len(st.Runs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reports still pending, state file %+v (%v), 5 s after the end was acknowledged", n, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
