package replay

import (
	"reflect"
	"strings"
	"testing"
)

// TestLatticeTopologyPlacement: the trace of TestMultiGroupPlacement (4
// nodes in groups of 2; A 1 node, B 2 nodes, C 2 nodes later). fcfs puts B
// on nodes 1 and 2 (two groups); the solver picks one group for B.
func TestLatticeTopologyPlacement(t *testing.T) {
	tr := tinyTrace(4,
		tj{id: 1, submit: 0, run: 10, est: 10, size: 1},
		tj{id: 2, submit: 0, run: 10, est: 10, size: 2},
		tj{id: 3, submit: 20, run: 10, est: 10, size: 2},
	)
	res, err := Run(tr, Config{Policy: PolicyLattice, GroupSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.MultiGroupJobs != 0 || res.AvgWait != 0 || res.Jobs != 3 {
		t.Errorf("multi_group_jobs %v avg wait %v jobs %d, want 0, 0, 3", res.MultiGroupJobs, res.AvgWait, res.Jobs)
	}
}

// TestLatticeJSONBorrowing: ml-training (2 nodes) may borrow from hpc-batch
// (4 nodes, lends). Job 2 needs 3 nodes: more than ml-training owns, so it
// can only run on borrowed nodes; job 3 depends on jobs 1 and 2.
func TestLatticeJSONBorrowing(t *testing.T) {
	in := `{"vclusters": [
	    {"name": "hpc-batch", "nodes": 4, "allow_lending": true},
	    {"name": "ml-training", "nodes": 2, "allow_borrowing": true}],
	  "tenants": [{"name": "a", "fair_share_target": 0.5}, {"name": "b", "fair_share_target": 0.5}],
	  "jobs": [
	    {"id": 1, "submit": 0, "runtime": 10, "nodes": 1, "tenant": "a"},
	    {"id": 2, "submit": 0, "runtime": 10, "nodes": 2, "tenant": "b", "vcluster": "ml-training", "priority_class": 3},
	    {"id": 3, "submit": 0, "runtime": 10, "nodes": 2, "tenant": "b", "depends_on": [1, 2]},
	    {"id": 4, "submit": 5, "runtime": 10, "nodes": 2, "tenant": "a", "vcluster": "ml-training"}]}`
	tr, err := ReadJSON(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	// Job 4 arrives at 5 while job 2 holds ml-training's two nodes: it
	// borrows two idle hpc-batch nodes and starts at once.
	got := starts(t, tr, Config{Policy: PolicyLattice, GroupSize: 2})
	want := map[uint64]int{1: 0, 2: 0, 3: 10, 4: 5}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %d starts at %d, want %d (all %v)", id, got[id], w, got)
		}
	}
}

// TestLatticeRealTrace replays hpc2n with the default profile: every job
// runs, the result is deterministic, and periodic cycles work.
func TestLatticeRealTrace(t *testing.T) {
	tr := loadTrace(t, "hpc2n.swf").First(1500)
	a, err := Run(tr, Config{Policy: PolicyLattice})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(tr, Config{Policy: PolicyLattice})
	if err != nil {
		t.Fatal(err)
	}
	a.WallSeconds, b.WallSeconds = 0, 0
	if !reflect.DeepEqual(a.Metrics, b.Metrics) {
		t.Errorf("two replays differ:\n%+v\n%+v", a.Metrics, b.Metrics)
	}
	c, err := Run(tr, Config{Policy: PolicyLattice, Cycle: 60e9, ReservationDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	if c.Jobs != 1500 || c.AvgWait < a.AvgWait {
		t.Errorf("cycle 60s, conservative depth: %+v (event-driven avg wait %v)", c.Metrics, a.AvgWait)
	}
}
