package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// A frozen agent (SIGSTOP) loses its node: the quorum fails the job with
// NodeFailure although its processes still run. When the agent wakes up,
// the node must take no new work until the agent has stopped them and
// said so (Cleanup): checked on the processes themselves — no node ever
// runs processes of two allocations — while a second job waits for it.
func TestLostNodeTakesNoWorkUntilItsAgentConfirmsCleanup(t *testing.T) {
	s := startAgentProcStack(t, 1, func(c *Config) {
		c.DegradedAfter, c.DownAfter, c.LivenessGrace = time.Second, 2*time.Second, time.Second
	})
	// The job ignores SIGTERM (so do its children): it lasts the whole grace.
	first := submitScript(t, s.allocs, 1, "#!/bin/sh\ntrap '' TERM\nsleep 60\n")
	waitFor(t, 20*time.Second, "the first job running", func() bool {
		return s.get(t, first).State == string(model.StateRunning) && len(taggedProcs(s.dataDir)) > 0
	})

	var mu sync.Mutex
	var violations []string
	states := map[string]bool{}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			byNode := map[string]map[string]bool{}
			for _, p := range taggedProcs(s.dataDir) {
				for _, n := range p.nodes {
					if byNode[n] == nil {
						byNode[n] = map[string]bool{}
					}
					byNode[n][p.allocID] = true
				}
			}
			r, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{})
			mu.Lock()
			for n, allocs := range byNode {
				if len(allocs) > 1 {
					violations = append(violations, fmt.Sprintf("node %s runs processes of allocations %v", n, allocs))
				}
			}
			if err == nil && len(r.Nodes) == 1 {
				states[r.Nodes[0].State] = true
			}
			mu.Unlock()
		}
	}()

	if err := s.agent.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	second := submitScript(t, s.allocs, 1, "#!/bin/sh\nsleep 1\n")
	a := s.waitEnd(t, first, 20*time.Second)
	if a.State != string(model.StateFailed) || a.Reason != model.ReasonNodeFailure {
		t.Fatalf("first job %s %s, want FAILED NodeFailure", a.State, a.Reason)
	}
	if len(taggedProcs(s.dataDir)) == 0 {
		t.Fatal("the first job's processes are gone already: the test shows nothing")
	}
	time.Sleep(500 * time.Millisecond)
	if err := s.agent.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	b := s.waitEnd(t, second, 40*time.Second)
	close(stop)
	<-sampled
	if b.State != string(model.StateCompleted) {
		t.Errorf("second job %s %s, want COMPLETED", b.State, b.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	if !states[string(model.NodeCleanup)] {
		t.Errorf("the node never showed Cleanup (states seen %v)", states)
	}
	if n := len(taggedProcs(s.dataDir)); n != 0 {
		t.Errorf("%d processes left", n)
	}
}

// A --requeue job whose node was lost goes back to the queue while its old
// run still runs on the frozen agent. When the agent wakes up the old run is
// stopped, the node confirmed clean, the job's next run starts (on the same
// node: the only one) — and a user's cancel of that run reaches it.
func TestRequeuedRunAfterLostNodeStartsCleanAndCancels(t *testing.T) {
	s := startAgentProcStack(t, 1, func(c *Config) {
		c.DegradedAfter, c.DownAfter, c.LivenessGrace = time.Second, 2*time.Second, time.Second
	})
	dir := t.TempDir()
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: 1, NodesMax: 1, WalltimeSeconds: 300, Requeue: true,
		Script: fmt.Sprintf("#!/bin/sh\necho run $LATTICE_RESTART_COUNT >> %s/runs\nsleep 60\n", dir)}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.DisplayId
	waitFor(t, 20*time.Second, "the job running", func() bool { return s.get(t, id).State == string(model.StateRunning) })
	if err := s.agent.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the job requeued", func() bool { return s.get(t, id).State == string(model.StatePending) })
	if err := s.agent.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "its next run running", func() bool {
		a := s.get(t, id)
		return a.State == string(model.StateRunning) && a.RequeueCount == 1
	})
	waitFor(t, 10*time.Second, "its next run's first line", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.Contains(string(b), "run 1")
	})
	for _, p := range taggedProcs(s.dataDir) {
		if p.allocID != "" && p.allocID != id {
			t.Errorf("process of allocation %s on the node", p.allocID)
		}
	}
	if _, err := s.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	a := s.waitEnd(t, id, 20*time.Second)
	if a.State != string(model.StateCancelled) {
		t.Errorf("job %s %s after the cancel, want CANCELLED", a.State, a.Reason)
	}
	waitFor(t, 10*time.Second, "no process left", func() bool { return len(taggedProcs(s.dataDir)) == 0 })
	b, _ := os.ReadFile(filepath.Join(dir, "runs"))
	if got := strings.TrimSpace(string(b)); got != "run 0\nrun 1" {
		t.Errorf("runs started:\n%s\nwant run 0 then run 1, once each", got)
	}
}
