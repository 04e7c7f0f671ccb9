package agent

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// TestRunnerStartsConcurrently: starts of different allocations overlap
// (the runner's lock is not held across fork/exec); a second start of the
// same run while the first is in flight is a no-op, of another run an
// error; every run ends exactly once.
func TestRunnerStartsConcurrently(t *testing.T) {
	exits := make(chan Exit, 64)
	r, err := NewRunner(RunnerConfig{Dir: t.TempDir(), OnExit: func(e Exit) { exits <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(time.Second)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for range 2 { // each twice: one of the two starts it
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- r.Start(Launch{AllocID: uint64(100 + i), Nodes: []string{"n1"}, Command: []string{"sleep 1; exit 3"}})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	for range n {
		e := waitExit(t, exits)
		if seen[e.AllocID] || e.State != model.StateFailed || e.ExitCode == nil || *e.ExitCode != 3 {
			t.Fatalf("exit %+v (seen before: %v)", e, seen[e.AllocID])
		}
		seen[e.AllocID] = true
	}
	select {
	case e := <-exits:
		t.Fatalf("a run ended twice: %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
}

// burstLeader assigns many runs at once and cancels some of them right
// behind their assignment, acknowledging every report.
type burstLeader struct {
	latticev1.UnimplementedAgentServiceServer
	msgs    []*latticev1.ServerMessage
	mu      sync.Mutex
	reports map[uint64][]string // states reported per allocation, in order
}

func (f *burstLeader) Connect(stream latticev1.AgentService_ConnectServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	for _, m := range f.msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
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
		f.reports[r.AllocationId] = append(f.reports[r.AllocationId], r.State)
		f.mu.Unlock()
		if err := stream.Send(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Ack{Ack: &latticev1.ReportAck{Seq: r.Seq}}}); err != nil {
			return err
		}
	}
}

// TestLaunchesOverlapAndCancelsWaitForThem: a burst of assignments starts
// concurrently; a cancel that arrives right behind its assignment, while
// the start is still in flight, is applied once the start is done — the
// run ends CANCELLED instead of running on.
func TestLaunchesOverlapAndCancelsWaitForThem(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leader := &burstLeader{reports: map[uint64][]string{}}
	const n = 16
	for i := range uint64(n) {
		id := 100 + i
		leader.msgs = append(leader.msgs, assignMsg(id, 0, "#!/bin/sh\nsleep 300\n"))
		if i%2 == 0 {
			leader.msgs = append(leader.msgs, &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{Cancel: &latticev1.CancelAllocation{
				AllocationId: id, Reason: model.ReasonCancelled, GraceSeconds: 1}}})
		}
	}
	srv := grpc.NewServer()
	latticev1.RegisterAgentServiceServer(srv, leader)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cfg := restartConfig(t.TempDir())
	cfg.Servers, cfg.KeepJobs = []string{lis.Addr().String()}, false
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader.mu.Lock()
		ok := 0
		for i := range uint64(n) {
			rs := leader.reports[100+i]
			last := ""
			if len(rs) > 0 {
				last = rs[len(rs)-1]
			}
			if (i%2 == 0 && last == string(model.StateCancelled)) || (i%2 == 1 && last == string(model.StateRunning)) {
				ok++
			}
		}
		snapshot := fmt.Sprint(leader.reports)
		leader.mu.Unlock()
		if ok == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports %s: want the even allocations CANCELLED, the odd RUNNING", snapshot)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range uint64(n) {
		if running := a.runner.IsRunning(100 + i); running != (i%2 == 1) {
			t.Errorf("allocation %d running %v", 100+i, running)
		}
	}
}
