package server

import (
	"context"
	"fmt"
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
