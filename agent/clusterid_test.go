package agent

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// namedLeader is a countingLeader that presents a cluster id ("" none).
type namedLeader struct {
	countingLeader
	id string
}

func (n *namedLeader) Connect(stream latticev1.AgentService_ConnectServer) error {
	if n.id != "" {
		if err := stream.SetHeader(metadata.Pairs(ClusterIDHeader, n.id)); err != nil {
			return err
		}
	}
	return n.countingLeader.Connect(stream)
}

func serveAgents(t *testing.T, l latticev1.AgentServiceServer) string {
	t.Helper()
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

// runAgentUntil runs an agent of cfg until cond holds (or fails the test
// after 20 s), then stops it.
func runAgentUntil(t *testing.T, cfg Config, what string, cond func() bool) {
	t.Helper()
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
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // whatever else it would do, it does now
}

// An agent learns its cluster's id from the first leader that presents
// one and keeps it; restarted with a server of another cluster listed
// first (at an address it may well have used), it refuses that server
// before obeying anything it sent — an assignment here — and serves its
// own cluster's leader.
func TestAgentServesOnlyItsOwnCluster(t *testing.T) {
	const own, other = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	dir := t.TempDir()
	mine := &namedLeader{id: own}
	mine.assigned.Store(true)
	mine.hears.Store(true)
	cfg := restartConfig(dir)
	cfg.Servers = []string{serveAgents(t, mine)}
	runAgentUntil(t, cfg, "the first connection", func() bool { return mine.accepted.Load() > 0 })
	if b, _ := os.ReadFile(filepath.Join(dir, clusterIDFile)); strings.TrimSpace(string(b)) != own {
		t.Fatalf("learned cluster id %q, want %s", b, own)
	}

	marker := filepath.Join(t.TempDir(), "ran")
	foreign := &namedLeader{id: other}
	foreign.assign = assignMsg(7, 0, "#!/bin/sh\ntouch "+marker+"\nsleep 60\n")
	foreign.hears.Store(true)
	mine2 := &namedLeader{id: own}
	mine2.assigned.Store(true)
	mine2.hears.Store(true)
	cfg.Servers = []string{serveAgents(t, foreign), serveAgents(t, mine2)}
	runAgentUntil(t, cfg, "the agent on its own cluster's leader", func() bool { return mine2.accepted.Load() > 0 })
	if foreign.accepted.Load() == 0 {
		t.Error("the foreign server was never tried: the test shows nothing")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the agent ran a job a server of another cluster assigned")
	}
	if n := mine2.accepted.Load(); n != 1 {
		t.Errorf("its own leader accepted the agent %d times, want once (it stays)", n)
	}
}

// A pinned cluster id (--cluster-id) refuses a server that presents none
// or another; a learned one lets a server that presents none by (an older
// release), and an agent's data dir of another cluster is refused at start.
func TestClusterIDCheck(t *testing.T) {
	const own, other = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	md := func(id string) metadata.MD {
		if id == "" {
			return metadata.MD{}
		}
		return metadata.Pairs(ClusterIDHeader, id)
	}
	pinned, err := loadClusterID(t.TempDir(), own)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m      *clusterMemory
		got    string
		refuse bool
	}{
		{pinned, own, false}, {pinned, "", true}, {pinned, other, true},
		{&clusterMemory{known: own}, "", false}, {&clusterMemory{known: own}, other, true}, {&clusterMemory{known: own}, own, false},
	} {
		_, err := c.m.check(md(c.got))
		if refused := errors.Is(err, errOtherCluster); refused != c.refuse {
			t.Errorf("pinned %q known %q, server presents %q: err %v, want refused %v", c.m.pinned, c.m.known, c.got, err, c.refuse)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, clusterIDFile), []byte(other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadClusterID(dir, own); err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("a data dir of cluster %s pinned to %s: %v, want refused", other, own, err)
	}
}

// A member that did not answer is passed over while another may answer,
// for suspectFor; when every member is suspect each is tried again.
func TestSuspectMembersArePassedOver(t *testing.T) {
	servers := []string{"s1", "s2", "s3"}
	s := suspectMembers{}
	s.note("s1", errUnresponsive)
	s.note("s2", errors.New("not the leader"))
	if !s.skip("s1", servers) || s.skip("s2", servers) || s.skip("s3", servers) {
		t.Errorf("after s1 did not answer: skip s1 %v s2 %v s3 %v, want only s1", s.skip("s1", servers), s.skip("s2", servers), s.skip("s3", servers))
	}
	s.note("s2", errUnresponsive)
	s.note("s3", errUnresponsive)
	if s.skip("s1", servers) {
		t.Error("every member is suspect: s1 must be tried again")
	}
	s.note("s1", nil)
	if s.skip("s1", servers) || !s.skip("s2", servers) {
		t.Error("s1 answered: it is tried, the others passed over")
	}
	s["s2"] = time.Now().Add(-suspectFor - time.Second)
	if s.skip("s2", servers) {
		t.Errorf("s2 is suspect for %s only", suspectFor)
	}
}
