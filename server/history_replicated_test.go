package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// memberHistory is every ended job a member's own state holds, as
// "id:state:user" in id order.
func memberHistory(s *Server) []string {
	var out []string
	s.view(func(st *quorum.State) {
		for _, r := range st.History(quorum.HistoryQuery{}) {
			out = append(out, strconv.FormatUint(r.ID, 10)+":"+string(r.State)+":"+r.Tenant)
		}
	})
	slices.Sort(out)
	return out
}

// listEnded lists every cancelled allocation through a member's API, page
// by page.
func listEnded(t *testing.T, s *Server) []uint64 {
	t.Helper()
	conn := dialPlain(t, s)
	var ids []uint64
	req := &latticev1.ListAllocationsRequest{States: []string{"CANCELLED"}, PageSize: 7}
	for {
		resp, err := latticev1.NewAllocationServiceClient(conn).List(context.Background(), req)
		if err != nil {
			t.Fatalf("list through %s: %v", s.cfg.ID, err)
		}
		for _, a := range resp.Allocations {
			ids = append(ids, a.Id)
		}
		if resp.NextPageToken == "" {
			return ids
		}
		req.PageToken = resp.NextPageToken
	}
}

// The history of ended jobs is the same on every member — one that joined
// after the history was written, and caught up by installing a snapshot,
// included — and every member, made leader in turn, lists all of it.
func TestHistoryIsTheSameOnEveryMember(t *testing.T) {
	tune := func(c *Config) {
		c.Retention, c.PruneInterval, c.RaftTrailingLogs = time.Millisecond, 50*time.Millisecond, 8
		c.Tenants = []string{"t1"}
	}
	servers := startTrioWith(t, tune)
	var l *Server
	waitFor(t, 10*time.Second, "a leader", func() bool { l = leaderOf(servers); return l != nil })
	ctx := context.Background()
	allocs := latticev1.NewAllocationServiceClient(dialPlain(t, l))
	var submitted []string
	for i := range 40 {
		tenant := "default"
		if i%2 == 1 {
			tenant = "t1"
		}
		// Pending forever (more nodes than there are): cancelled below.
		r, err := allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{Tenant: tenant, NodesMin: 1,
			WalltimeSeconds: 60, Command: []string{"true"}, Hold: true}})
		if err != nil {
			t.Fatal(err)
		}
		submitted = append(submitted, r.DisplayId)
	}
	if _, err := allocs.Cancel(ctx, &latticev1.CancelRequest{Ids: submitted}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "every job in the leader's history", func() bool { return len(memberHistory(l)) == len(submitted) })
	want := memberHistory(l)
	// Compact the log on every member, then add a fourth: it must install
	// a snapshot to catch up.
	for _, s := range servers {
		if err := s.q.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{ID: "s4", DataDir: filepath.Join(t.TempDir(), "s4"), RaftAddr: freeAddr(t), APIAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogLevel: "off",
		VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}, Join: []string{l.APIAddr()}}
	tune(&cfg)
	s4, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s4.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s4.Stop)
	servers = append(servers, s4)
	waitFor(t, 20*time.Second, "s4 to catch up", func() bool { return s4.q.AppliedIndex() >= l.q.CommitIndex() && len(memberHistory(s4)) > 0 })
	if s4.q.Stats()["last_snapshot_index"] == "0" {
		t.Fatal("s4 caught up without installing a snapshot: the test does not test that")
	}
	for _, s := range servers {
		if got := memberHistory(s); !slices.Equal(got, want) {
			t.Fatalf("%s holds %d ended jobs, the leader %d:\n%v\n%v", s.cfg.ID, len(got), len(want), got, want)
		}
	}
	// Each member leads in turn and lists the whole history.
	for _, s := range []*Server{s4, servers[1], servers[0]} {
		for attempt := 0; !s.q.IsLeader(); attempt++ {
			cur := leaderOf(servers)
			if cur != nil {
				_ = cur.q.TransferLeadership(s.cfg.ID)
			}
			if attempt == 100 {
				t.Fatalf("%s never led", s.cfg.ID)
			}
			time.Sleep(100 * time.Millisecond)
		}
		waitFor(t, 10*time.Second, s.cfg.ID+" running its loops", func() bool { return s.currentLeader() != nil })
		if got := listEnded(t, s); len(got) != len(submitted) {
			t.Fatalf("%s leading lists %d ended jobs, want %d", s.cfg.ID, len(got), len(submitted))
		}
	}
}

func dialPlain(t *testing.T, s *Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
