package quorum

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func freeRaftAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Three members over TCP replicate and commit through the log cache, and a
// restarted follower catches up from the leader's log.
func TestThreeMembersReplicate(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfgs := make([]Config, 3)
	qs := make([]*Quorum, 3)
	for i := range qs {
		id := fmt.Sprintf("m%d", i+1)
		cfgs[i] = Config{ID: id, DataDir: filepath.Join(dir, id), RaftAddr: freeRaftAddr(t), Bootstrap: i == 0,
			Logger: log, RaftLogLevel: "off", NoSync: true}
		q, err := Open(cfgs[i], NewFSM())
		if err != nil {
			t.Fatal(err)
		}
		qs[i] = q
		if i == 0 {
			waitFor(t, 10*time.Second, "the bootstrapped member to lead", q.IsLeader)
		}
	}
	defer func() {
		for _, q := range qs {
			_ = q.Shutdown()
		}
	}()
	for _, q := range qs[1:] {
		if err := qs[0].AddVoter(q.ID(), q.RaftAddr(), 10*time.Second); err != nil {
			t.Fatalf("add voter %s: %v", q.ID(), err)
		}
	}
	now := time.Now().UTC()
	propose := func(name string) {
		t.Helper()
		now = now.Add(time.Millisecond)
		r, err := qs[0].Propose(t.Context(), &SetTenant{Header: Header{Time: now}, Tenant: model.Tenant{Name: name}})
		if err != nil || r.Rejection != nil {
			t.Fatalf("propose tenant %s: %v %v", name, err, r)
		}
	}
	tenants := func(q *Quorum) int {
		n := 0
		q.View(func(s *State) { n = len(s.Tenants()) })
		return n
	}
	for i := range 300 {
		propose(fmt.Sprintf("t%d", i))
	}
	want := tenants(qs[0])
	for _, q := range qs[1:] {
		waitFor(t, 10*time.Second, q.ID()+" to apply every entry", func() bool { return tenants(q) == want })
	}
	// A follower down while entries commit catches up when it returns.
	if err := qs[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		propose(fmt.Sprintf("u%d", i))
	}
	want = tenants(qs[0])
	cfgs[2].Bootstrap = false
	q, err := Open(cfgs[2], NewFSM())
	if err != nil {
		t.Fatal(err)
	}
	qs[2] = q
	waitFor(t, 20*time.Second, "the restarted follower to catch up", func() bool { return tenants(q) == want })
}
