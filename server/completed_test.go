package server

import (
	"testing"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/vcluster"
)

// The leader's loops learn runtimes from what completed: the server is a
// vcluster.CompletedReader (leader.Completed), and a completed allocation appears in its
// vCluster's window with its start and end (failed ones do not).
func TestCompletedFeedsThePredictor(t *testing.T) {
	d := startDev(t, t.TempDir(), 2)
	var _ vcluster.CompletedReader = d.srv.completed
	ok := d.submit(t, &latticev1.AllocationRequest{Name: "quick", NodesMin: 1, WalltimeSeconds: 600, Vcluster: "hpc-batch", Command: []string{"true"}})
	bad := d.submit(t, &latticev1.AllocationRequest{Name: "bad", NodesMin: 1, WalltimeSeconds: 600, Vcluster: "hpc-batch", Command: []string{"false"}})
	d.waitState(t, ok, model.StateCompleted)
	d.waitState(t, bad, model.StateFailed)
	completed := leader.NewCompleted(d.srv.view) // built at the first call, not in 30 s
	got := completed.Completed("hpc-batch")
	if len(got) != 1 || got[0].Name != "quick" || got[0].StartTime.IsZero() || got[0].EndTime.Before(got[0].StartTime) {
		t.Fatalf("Completed(hpc-batch) = %v, want the one completed allocation with its times", got)
	}
	if h := vcluster.LearnCompleted(got); h == nil {
		t.Fatal("no predictor learnt from a completed allocation")
	}
	if other := completed.Completed("ml-training"); len(other) != 0 {
		t.Fatalf("Completed(ml-training) = %v, want none", other)
	}
}
