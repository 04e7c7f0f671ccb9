package server

import (
	"runtime"
	"testing"
	"time"

	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
)

// TestLoopProcsFollowLeadership: with Config.LoopProcs each scheduler loop
// of the leader adds one Go processor while it runs; a leadership change
// moves them (the old leader's loops give theirs back), and stopping the
// members restores GOMAXPROCS. Three members share this process, so the
// count is the leader's loops alone.
func TestLoopProcsFollowLeadership(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	want := func(loops int) int {
		if _, fixed := leader.AddedProcs(); fixed { // GOMAXPROCS set in the environment: never changed
			return base
		}
		return base + loops
	}
	servers := startTrioWith(t, func(c *Config) {
		c.LoopProcs = true
		c.VClusters = []model.VCluster{DefaultVCluster("hpc-batch"), DefaultVCluster("ml-training")}
	})
	var old *Server
	waitFor(t, 20*time.Second, "a leader running its two loops", func() bool {
		old = leaderOf(servers)
		return old != nil && runtime.GOMAXPROCS(0) == want(2)
	})
	if err := old.q.TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a new leader", func() bool {
		next := leaderOf(servers)
		return next != nil && next != old && old.currentLeader() == nil
	})
	waitFor(t, 5*time.Second, "the Ps of the new leader's loops alone", func() bool { return runtime.GOMAXPROCS(0) == want(2) })
	if got, fixed := leader.AddedProcs(); !fixed && got != 2 {
		t.Fatalf("loops added %d Ps after the leadership change, want 2", got)
	}
	for _, s := range servers {
		s.Stop()
	}
	waitFor(t, 5*time.Second, "GOMAXPROCS restored", func() bool {
		return runtime.GOMAXPROCS(0) == base && func() bool { n, _ := leader.AddedProcs(); return n == 0 }()
	})
}
