package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startTrio starts three members in-process over real TCP Raft on loopback.
func startTrio(t *testing.T) []*Server { return startTrioWith(t, nil) }

// startTrioWith is startTrio with each member's Config changed by tune
// (nil: as is). The members are stopped when the test ends (Stop may be
// called before).
func startTrioWith(t *testing.T, tune func(*Config)) []*Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	var servers []*Server
	for i, id := range []string{"s1", "s2", "s3"} {
		cfg := Config{ID: id, DataDir: filepath.Join(dir, id), RaftAddr: freeAddr(t), APIAddr: "127.0.0.1:0",
			Logger: log, RaftLogLevel: "off", VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}}
		if tune != nil {
			tune(&cfg)
		}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = []string{servers[0].APIAddr()}
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Serve(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		servers = append(servers, s)
	}
	waitFor(t, 20*time.Second, "three voters", func() bool {
		for _, s := range servers {
			srv, err := s.q.Servers()
			if err != nil || len(srv) != 3 || s.q.AppliedIndex() < servers[0].q.CommitIndex() {
				return false
			}
		}
		return true
	})
	return servers
}

func leaderOf(servers []*Server) *Server {
	for _, s := range servers {
		if s.q.IsLeader() && s.currentLeader() != nil {
			return s
		}
	}
	return nil
}

func TestLeaderLoopsFollowLeadership(t *testing.T) {
	servers := startTrio(t)
	var old *Server
	// On a loaded machine an election may move leadership between finding
	// the leader and asking it to transfer: find it again then.
	for attempt := 0; ; attempt++ {
		waitFor(t, 10*time.Second, "a leader running its loops", func() bool { old = leaderOf(servers); return old != nil })
		for _, s := range servers {
			if s != old && s.currentLeader() != nil {
				t.Fatalf("follower %s runs leader loops", s.cfg.ID)
			}
		}
		err := old.q.TransferLeadership("")
		if err == nil {
			break
		}
		if !errors.Is(err, quorum.ErrNotLeader) || attempt == 4 {
			t.Fatal(err)
		}
		t.Logf("%s lost leadership before the transfer (%v); again", old.cfg.ID, err)
	}
	lost := time.Now()
	waitFor(t, 5*time.Second, "old leader to step down", func() bool { return !old.q.IsLeader() })
	stopped := time.Now()
	waitFor(t, 2*time.Second, "old leader's loops to stop", func() bool { return old.currentLeader() == nil })
	if d := time.Since(stopped); d > time.Second {
		t.Fatalf("leader loops took %v to stop after leadership was lost", d)
	}
	var next *Server
	waitFor(t, 10*time.Second, "the new leader's loops", func() bool { next = leaderOf(servers); return next != nil && next != old })
	t.Logf("leadership moved %s -> %s; old loops stopped within %v of the step-down", old.cfg.ID, next.cfg.ID, time.Since(lost))

	// A submission through a follower is forwarded to the new leader,
	// committed, and visible on every member.
	var follower *Server
	for _, s := range servers {
		if s != next {
			follower = s
		}
	}
	conn, err := grpc.NewClient(follower.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := latticev1.NewAllocationServiceClient(conn).Submit(context.Background(), &latticev1.SubmitRequest{
		Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}}})
	if err != nil {
		t.Fatalf("submit through follower %s: %v", follower.cfg.ID, err)
	}
	id := resp.Ids[0]
	waitFor(t, 5*time.Second, "the allocation on every member", func() bool {
		for _, s := range servers {
			found := false
			s.view(func(st *quorum.State) { found = st.Allocation(id) != nil })
			if !found {
				return false
			}
		}
		return true
	})
}
