package vcluster

import (
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// borrowSnapshot: vCluster "batch" (2 own nodes) may borrow from "ml"
// (6 nodes, lends up to half: 3) and "svc" (2 nodes, does not lend).
func borrowSnapshot() *Snapshot {
	batch := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, AllowBorrowing: true, ReservationDepth: 1}
	ml := &model.VCluster{Name: "ml", Type: model.TypeMLTraining, AllowLending: true, MaxLendFraction: 0.5}
	svc := &model.VCluster{Name: "svc", Type: model.TypeService}
	nodes := []*model.Node{
		node("a1", "batch").build(), node("a2", "batch").build(),
		node("m1", "ml").build(), node("m2", "ml").build(), node("m3", "ml").build(),
		node("m4", "ml").build(), node("m5", "ml").build(), node("m6", "ml").running(50).build(),
		node("s1", "svc").build(), node("s2", "svc").build(),
	}
	s := snapshot(batch, nodes, alloc(1, "batch", model.StatePending))
	s.VClusters = map[string]*model.VCluster{"batch": batch, "ml": ml, "svc": svc}
	return s
}

func foreignNames(in solver.Input) []string {
	var out []string
	for _, n := range in.Nodes {
		if !n.Own {
			out = append(out, n.Name)
		}
	}
	return out
}

// TestBorrowingRules: which idle nodes of other vClusters BuildInput
// offers, rule by rule (the quorum enforces the same on a borrow).
func TestBorrowingRules(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *Snapshot)
		want   []string
	}{
		{"a home lends at most MaxLendable of its nodes", func(*Snapshot) {}, []string{"m1", "m2", "m3"}},
		{"nodes already lent count against it", func(s *Snapshot) {
			s.Nodes[7].CurrentVCluster = "other" // m6 is lent out (busy)
		}, []string{"m1", "m2"}},
		{"the whole home when it lends everything", func(s *Snapshot) {
			s.VClusters["ml"].MaxLendFraction = 1
		}, []string{"m1", "m2", "m3", "m4", "m5"}},
		{"no borrowing when the borrower does not borrow", func(s *Snapshot) {
			s.VCluster.AllowBorrowing = false
		}, nil},
		{"a sensitive vCluster never borrows", func(s *Snapshot) {
			s.VCluster.Algorithm = model.AlgorithmSensitive
		}, nil},
		{"a sensitive home never lends", func(s *Snapshot) {
			s.VClusters["ml"].Type, s.VClusters["ml"].MaxLendFraction = model.TypeSensitive, 1
		}, nil},
		{"not within the back-off of a reclaim from this vCluster", func(s *Snapshot) {
			s.VClusters["ml"].ReclaimBackoff = 10 * time.Minute
			s.Nodes[2].ReclaimedFrom, s.Nodes[2].ReclaimedAt = "batch", t0.Add(-5*time.Minute)  // m1: in the back-off
			s.Nodes[3].ReclaimedFrom, s.Nodes[3].ReclaimedAt = "batch", t0.Add(-15*time.Minute) // m2: past it
			s.Nodes[4].ReclaimedFrom, s.Nodes[4].ReclaimedAt = "other", t0.Add(-time.Minute)    // m3: from another
		}, []string{"m2", "m3", "m4"}},
		{"not held for an allocation", func(s *Snapshot) {
			s.Nodes[2].ReservedFor, s.Nodes[2].ReservedUntil = 77, t0.Add(time.Minute) // m1: held
			s.Nodes[3].ReservedFor, s.Nodes[3].ReservedUntil = 77, t0                  // m2: hold over
		}, []string{"m2", "m3", "m4"}},
		{"a hold for an allocation no longer pending holds nothing", func(s *Snapshot) {
			s.Nodes[2].ReservedFor, s.Nodes[2].ReservedUntil = 50, t0.Add(time.Minute)
			s.Allocations[50] = alloc(50, "ml", model.StateRunning)
		}, []string{"m1", "m2", "m3"}},
		{"not a node its home's plan needs now; unlimited ones first, then the latest limits", func(s *Snapshot) {
			s.LendLimits = map[string]map[string]time.Time{"ml": {
				"m1": t0,                    // needed now
				"m2": t0.Add(time.Hour),     // later
				"m3": t0.Add(2 * time.Hour), // later still
				"m4": t0.Add(30 * time.Minute),
			}}
		}, []string{"m2", "m3", "m5"}},
		{"Lenders without VClusters: no limit (the replay)", func(s *Snapshot) {
			s.VClusters = nil
			s.Lenders = map[string]bool{"ml": true}
		}, []string{"m1", "m2", "m3", "m4", "m5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := borrowSnapshot()
			tc.change(s)
			in := BuildInput(s)
			if got := foreignNames(in); !slices.Equal(got, tc.want) {
				t.Fatalf("borrowable %v, want %v", got, tc.want)
			}
		})
	}
	// Lending limits reach the solver.
	s := borrowSnapshot()
	s.LendLimits = map[string]map[string]time.Time{"ml": {"m2": t0.Add(time.Hour)}}
	s.VClusters["ml"].MaxLendFraction = 1
	for _, n := range BuildInput(s).Nodes {
		if want := map[string]time.Time{"m2": t0.Add(time.Hour)}[n.Name]; !n.LendUntil.Equal(want) {
			t.Errorf("node %s lent until %v, want %v", n.Name, n.LendUntil, want)
		}
	}
}

// TestCheckpointableOnlyOnBorrowed: with the policy on, work that cannot
// checkpoint stays on own nodes; checkpointable work may borrow.
func TestCheckpointableOnlyOnBorrowed(t *testing.T) {
	s := borrowSnapshot()
	s.VCluster.CheckpointableOnlyOnBorrowed = true
	big := alloc(1, "batch", model.StatePending)
	big.NodesMin, big.NodesMax = 3, 3
	ck := alloc(2, "batch", model.StatePending)
	ck.NodesMin, ck.NodesMax, ck.Checkpoint = 3, 3, model.CheckpointSignal
	ck.SubmitTime = big.SubmitTime.Add(time.Minute)
	s.Pending = []*model.Allocation{big, ck}
	in := BuildInput(s)
	if !in.Pending[0].OwnNodesOnly || in.Pending[1].OwnNodesOnly {
		t.Fatalf("own nodes only: %v %v, want true false", in.Pending[0].OwnNodesOnly, in.Pending[1].OwnNodesOnly)
	}
	p := solver.Solve(&in)
	if st := startOf(p, 1); st != nil {
		t.Fatalf("non-checkpointable job started on %v", st.Nodes)
	}
	if st := startOf(p, 2); st == nil || len(st.Borrowed) != 1 {
		t.Fatalf("checkpointable job: %+v, want a start borrowing one node", st)
	}
	s.VCluster.CheckpointableOnlyOnBorrowed = false
	if in := BuildInput(s); in.Pending[0].OwnNodesOnly {
		t.Fatal("own nodes only without the policy")
	}
}

func startOf(p *solver.Plan, id uint64) *solver.Start {
	for i := range p.Starts {
		if p.Starts[i].JobID == id {
			return &p.Starts[i]
		}
	}
	return nil
}

// TestOwnNodesHeldAndReturning: holds on own nodes reach the solver (while
// their allocation is pending), and a borrowed node its home reclaimed
// takes no new work here.
func TestOwnNodesHeldAndReturning(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch}
	nodes := []*model.Node{
		node("a1", "batch").build(),
		node("a2", "batch").build(),
		node("a3", "batch").build(),
		node("x1", "ml").current("batch").running(5).build(),
	}
	nodes[0].ReservedFor, nodes[0].ReservedUntil = 9, t0.Add(time.Minute)
	nodes[1].ReservedFor, nodes[1].ReservedUntil = 5, t0.Add(time.Minute) // 5 runs: no hold
	nodes[2].ReservedFor, nodes[2].ReservedUntil = 9, t0                  // over
	nodes[3].ReturnRequested = true
	running := alloc(5, "batch", model.StateRunning)
	running.StartTime, running.Nodes = t0.Add(-time.Minute), []string{"x1"}
	s := snapshot(vc, nodes, running, alloc(9, "batch", model.StatePending))
	in := BuildInput(s)
	held := map[string]uint64{}
	for _, n := range in.Nodes {
		if n.ReservedFor != 0 {
			held[n.Name] = n.ReservedFor
		}
	}
	if len(held) != 1 || held["a1"] != 9 || !in.Nodes[0].ReservedUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("held %v, want a1 for 9", held)
	}
	if x1 := in.Nodes[3]; x1.Name != "x1" || !x1.FreeAt.IsZero() || x1.Allocation != 5 {
		t.Fatalf("returning node %+v: want busy with no release time", x1)
	}
	if len(in.Running) != 1 {
		t.Fatalf("running %+v: the returning node's work still runs here", in.Running)
	}
}

// TestFairShareChargesRunningWork: a tenant's usage includes what its
// running allocations have used so far (their nodes × time since start),
// here or in other vClusters, on top of its recorded decayed usage.
func TestFairShareChargesRunningWork(t *testing.T) {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch}
	long := alloc(5, "ml", model.StateRunning) // another vCluster's work counts too
	long.Tenant, long.StartTime, long.Nodes = "long", t0.Add(-10*time.Hour), []string{"m1", "m2"}
	fresh := alloc(6, "batch", model.StateRunning)
	fresh.Tenant, fresh.StartTime, fresh.Nodes = "busy", t0.Add(-time.Hour), []string{"a1"}
	staging := alloc(7, "batch", model.StateStaging) // not started: nothing yet
	staging.Tenant, staging.Nodes = "busy", []string{"a2"}
	stranger := alloc(8, "batch", model.StateRunning) // a tenant without a record
	stranger.Tenant, stranger.StartTime, stranger.Nodes = "new", t0.Add(-time.Hour), []string{"a3"}
	nodes := []*model.Node{
		node("a1", "batch").running(6).build(), node("a2", "batch").running(7).build(),
		node("a3", "batch").running(8).build(), node("a4", "batch").build(),
		node("m1", "ml").running(5).build(), node("m2", "ml").running(5).build(),
	}
	s := snapshot(vc, nodes, long, fresh, staging, stranger, alloc(9, "batch", model.StatePending))
	h := 3600.0
	s.Tenants["long"] = &model.Tenant{Name: "long", FairShareTarget: 0.5}
	s.Tenants["busy"] = &model.Tenant{Name: "busy", FairShareTarget: 0.5, Usage: 2 * h, UsageTime: t0}
	in := BuildInput(s)
	// long: 2 nodes × 10 h; busy: 2 node-hours recorded + 1 node × 1 h;
	// new: 1 node × 1 h (counts in the total only).
	total := 20*h + 3*h + h
	if got, want := in.Tenants["long"].UsageShare, 20*h/total; !near(got, want) {
		t.Errorf("long runner's tenant: share %v, want %v", got, want)
	}
	if got, want := in.Tenants["busy"].UsageShare, 3*h/total; !near(got, want) {
		t.Errorf("busy tenant: share %v, want %v", got, want)
	}
	// Once the run ends, the quorum charges it whole (2 nodes × 10 h) and
	// it no longer runs: the same share, not twice as much.
	nodes[4].Allocation, nodes[5].Allocation = 0, 0
	long.State, long.EndTime = model.StateCompleted, t0
	s.Tenants["long"] = &model.Tenant{Name: "long", FairShareTarget: 0.5, Usage: 20 * h, UsageTime: t0}
	in = BuildInput(s)
	if got, want := in.Tenants["long"].UsageShare, 20*h/total; !near(got, want) {
		t.Errorf("after the end: share %v, want %v", got, want)
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
