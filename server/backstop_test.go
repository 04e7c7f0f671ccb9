package server

import (
	"context"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Kill the agent for good while its job runs: with liveness slow to notice
// (DownAfter 10 min), the leader's walltime backstop still ends the job —
// NodeFailure, its agent is gone — soon after walltime + grace + backstop,
// and its node is free again.
func TestWalltimeBackstopEndsJobOfAVanishedAgent(t *testing.T) {
	s := startAgentProcStack(t, 1, func(c *Config) {
		c.DegradedAfter, c.DownAfter = 10*time.Minute, 20*time.Minute
		c.WalltimeBackstop = time.Second
	})
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: 1, Script: "#!/bin/sh\nsleep 300\n", WalltimeSeconds: 2}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.DisplayId
	waitFor(t, 20*time.Second, "running", func() bool { return s.get(t, id).State == string(model.StateRunning) })
	s.kill9(t)
	killTagged(s.dataDir) // the node is gone with its processes
	start := time.Now()
	a := s.waitEnd(t, id, 30*time.Second)
	if a.State != string(model.StateFailed) || a.Reason != model.ReasonNodeFailure {
		t.Errorf("job %s %s, want FAILED NodeFailure", a.State, a.Reason)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("ended %s after the agent died, want within walltime + grace + backstop", d)
	}
	nodes, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Nodes {
		if n.Allocation != 0 {
			t.Errorf("node %s still holds allocation %d", n.Name, n.Allocation)
		}
	}
}

// Kill the agent for good: a --requeue job goes back to the queue when its
// node is declared Down (not FAILED), its node is freed, and it runs again
// once an agent brings the node back.
func TestRequeueJobOfAVanishedAgent(t *testing.T) {
	s := startAgentProcStack(t, 1, func(c *Config) {
		c.DegradedAfter, c.DownAfter, c.LivenessGrace = time.Second, 3*time.Second, 100*time.Millisecond
	})
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: 1, Script: "#!/bin/sh\nsleep 300\n", WalltimeSeconds: 600, Requeue: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.DisplayId
	waitFor(t, 20*time.Second, "running", func() bool { return s.get(t, id).State == string(model.StateRunning) })
	s.kill9(t)
	killTagged(s.dataDir)
	waitFor(t, 20*time.Second, "requeued after the node failed", func() bool {
		a := s.get(t, id)
		return a.State == string(model.StatePending) && a.RequeueCount == 1 && a.Reason == model.ReasonNodeFailure
	})
	s.startAgent(t, 1)
	waitFor(t, 30*time.Second, "running again", func() bool {
		a := s.get(t, id)
		return a.State == string(model.StateRunning) && a.RequeueCount == 1
	})
}
