package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
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
// "id:state:tenant" in id order.
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

// listEnded lists every ended allocation through a member's API, page by
// page, as latticectl history does.
func listEnded(t testing.TB, s *Server, pageSize int32) []uint64 {
	t.Helper()
	conn := dialPlain(t, s)
	var ids []uint64
	req := &latticev1.ListAllocationsRequest{States: []string{"COMPLETED", "FAILED", "CANCELLED"}, PageSize: pageSize,
		TerminalWindowSeconds: 30 * 24 * 3600}
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

// endArrays submits arrays of held jobs (tenants alternating) through a
// member's API and cancels them: arrays × tasks ended jobs.
func endArrays(t testing.TB, s *Server, arrays, tasks int) {
	t.Helper()
	ctx := context.Background()
	allocs := latticev1.NewAllocationServiceClient(dialPlain(t, s))
	// A loaded machine may move leadership under such proposals: retry
	// (the request ids make a retry idempotent).
	retry := func(what string, call func() error) {
		t.Helper()
		var err error
		for range 20 {
			if err = call(); err == nil {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("%s: %v", what, err)
	}
	for i := range arrays {
		tenant := "default"
		if i%2 == 1 {
			tenant = "t1"
		}
		var id string
		retry("submit", func() error {
			r, err := allocs.Submit(ctx, &latticev1.SubmitRequest{ClientRequestId: fmt.Sprintf("arr-%d", i), Request: &latticev1.AllocationRequest{
				Tenant: tenant, NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Hold: true,
				Array: &latticev1.ArraySpec{Start: 0, End: int32(tasks - 1), Step: 1}}})
			if err == nil {
				id = r.DisplayId
			}
			return err
		})
		retry("cancel", func() error {
			_, err := allocs.Cancel(ctx, &latticev1.CancelRequest{ClientRequestId: fmt.Sprintf("cancel-%d", i), Ids: []string{id}})
			return err
		})
	}
}

// The history of ended jobs is the same on every member — one that joined
// after the history was written, and caught up by installing a snapshot,
// included — and every member, made leader in turn, lists all of it.
// LATTICE_LONG_TESTS=1 runs it with 100,000 ended jobs.
func TestHistoryIsTheSameOnEveryMember(t *testing.T) {
	arrays, tasks, pageSize := 4, 10, int32(7)
	long := os.Getenv("LATTICE_LONG_TESTS") == "1"
	if long {
		arrays, tasks, pageSize = 10, 10000, 0
	}
	total := arrays * tasks
	tune := func(c *Config) {
		c.Retention, c.PruneInterval, c.RaftTrailingLogs = time.Millisecond, 50*time.Millisecond, 8
		c.Tenants = []string{"t1"}
		if long {
			c.RaftHeartbeatTimeout = 3 * time.Second // 100,000 jobs on a shared 2-core machine
		}
	}
	servers := startTrioWith(t, tune)
	var l *Server
	waitFor(t, 10*time.Second, "a leader", func() bool { l = leaderOf(servers); return l != nil })
	endArrays(t, l, arrays, tasks)
	waitFor(t, 120*time.Second, "every job in the leader's history", func() bool { return len(memberHistory(l)) == total })
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
	waitFor(t, 120*time.Second, "s4 to catch up", func() bool { return s4.q.AppliedIndex() >= l.q.CommitIndex() && len(memberHistory(s4)) > 0 })
	if s4.q.Stats()["last_snapshot_index"] == "0" {
		t.Fatal("s4 caught up without installing a snapshot: the test does not test that")
	}
	for _, s := range servers {
		if got := memberHistory(s); !slices.Equal(got, want) {
			t.Fatalf("%s holds %d ended jobs, the leader %d", s.cfg.ID, len(got), len(want))
		}
	}
	// Each member leads in turn and lists the whole history: the same list
	// from each, the member restored from a snapshot first.
	var first []uint64
	for _, s := range []*Server{s4, servers[1], servers[0], servers[2]} {
		for attempt := 0; !s.q.IsLeader(); attempt++ {
			if cur := leaderOf(servers); cur != nil {
				_ = cur.q.TransferLeadership(s.cfg.ID)
			}
			if attempt == 100 {
				t.Fatalf("%s never led", s.cfg.ID)
			}
			time.Sleep(100 * time.Millisecond)
		}
		waitFor(t, 10*time.Second, s.cfg.ID+" running its loops", func() bool { return s.currentLeader() != nil })
		t0 := time.Now()
		got := listEnded(t, s, pageSize)
		t.Logf("%s leading lists %d ended jobs in %v", s.cfg.ID, len(got), time.Since(t0))
		if len(got) != total || !slices.IsSorted(got) {
			t.Fatalf("%s leading lists %d ended jobs, want %d in id order", s.cfg.ID, len(got), total)
		}
		if first == nil {
			first = got
		} else if !slices.Equal(got, first) {
			t.Fatalf("%s leading lists other jobs than s4 did", s.cfg.ID)
		}
	}
}

func dialPlain(t testing.TB, s *Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
