package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// hello opens an agent stream with the given credential and hello and
// returns it with the first answer's error (nil: accepted).
func (s *securedStack) hello(t *testing.T, ctx context.Context, who string, h *latticev1.AgentHello) (latticev1.AgentService_ConnectClient, error) {
	t.Helper()
	stream, err := latticev1.NewAgentServiceClient(s.conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Hello{Hello: h}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	return stream, err
}

// A second agent — even one holding the same wildcard credential — that
// claims a node a connected agent holds is refused before anything is
// proposed: the job on that node keeps running and the stranger gets no
// stream. The same agent reconnecting (same id, credential, instance) is
// accepted and replaces its old stream.
func TestAgentHelloForAHeldNodeIsRefused(t *testing.T) {
	s := startSecured(t)
	allocs := latticev1.NewAllocationServiceClient(s.conn)
	nodes := latticev1.NewNodeServiceClient(s.conn)
	sub, err := allocs.Submit(s.as("bob"), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Name: "long", Tenant: "bio", NodesMin: 1, WalltimeSeconds: 300, Command: []string{"sleep 60"},
		Env: []string{"SECRET_DB_PASSWORD=hunter2"}}})
	if err != nil {
		t.Fatal(err)
	}
	var busy string
	waitFor(t, 20*time.Second, "bob's job running", func() bool {
		a, err := allocs.Get(s.as("bob"), &latticev1.GetAllocationRequest{Id: sub.DisplayId})
		if err == nil && a.State == "RUNNING" && len(a.Nodes) == 1 {
			busy = a.Nodes[0]
			return true
		}
		return false
	})
	stillRunning := func(what string) {
		t.Helper()
		a, err := allocs.Get(s.as("bob"), &latticev1.GetAllocationRequest{Id: sub.DisplayId})
		if err != nil || a.State != "RUNNING" {
			t.Fatalf("%s: bob's job is %v (%v), want RUNNING", what, a.GetState(), err)
		}
	}

	ctx, cancel := context.WithCancel(s.as("agent"))
	defer cancel()
	_, err = s.hello(t, ctx, "agent", &latticev1.AgentHello{AgentId: "intruder", Instance: "0123456789abcdef0123456789abcdef",
		Nodes: []*latticev1.Node{{Name: busy, Cpus: 4, MemoryMb: 100, HomeVcluster: "hpc-batch"}}})
	wantCode(t, "a stranger's hello for a busy node", err, codes.AlreadyExists, "node \""+busy+"\" is held by agent \"a1\"")
	waitFor(t, 5*time.Second, "the refusal logged", func() bool {
		return strings.Contains(s.log.String(), "refused an agent claiming a node another connected agent holds")
	})
	// The same agent id from another instance may not take the id either.
	_, err = s.hello(t, ctx, "agent", &latticev1.AgentHello{AgentId: "a1", Instance: "ffffffffffffffffffffffffffffffff",
		Nodes: []*latticev1.Node{{Name: "node999", Cpus: 4, MemoryMb: 100, HomeVcluster: "hpc-batch"}}})
	wantCode(t, "a stranger using the connected agent's id", err, codes.AlreadyExists, "agent id \"a1\" is connected")
	_, err = nodes.Register(s.as("agent"), &latticev1.RegisterNodesRequest{AgentId: "intruder",
		Nodes: []*latticev1.Node{{Name: busy, Cpus: 4, MemoryMb: 100, HomeVcluster: "hpc-batch"}}})
	wantCode(t, "Register of a busy node", err, codes.AlreadyExists)
	time.Sleep(300 * time.Millisecond) // what a failed-lost proposal would take
	stillRunning("after the strangers")

	// The real agent reconnecting: its instance id is in its data dir.
	b, err := os.ReadFile(filepath.Join(filepath.Dir(s.file), "agent", "instance-id"))
	if err != nil {
		t.Fatal(err)
	}
	running := []*latticev1.RunningOnAgent{{AllocationId: sub.Ids[0], Node: busy, Run: 1}}
	again, err := s.hello(t, ctx, "agent", &latticev1.AgentHello{AgentId: "a1", Instance: strings.TrimSpace(string(b)),
		Nodes: []*latticev1.Node{{Name: busy, Cpus: 4, MemoryMb: 100, HomeVcluster: "hpc-batch"}}, Running: running})
	if err != nil {
		t.Fatalf("the same agent reconnecting: %v", err)
	}
	_ = again.CloseSend()
	stillRunning("after the reconnection")
}
