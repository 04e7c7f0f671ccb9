package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// everFitsByScan is admission.Chain.EverFits as it was before it read the quorum's
// indexes: a walk over every node under the read lock. The test keeps it
// as the reference the fast path must agree with.
func everFitsByScan(st *quorum.State, r *model.Request) string {
	if st.NodeCount() == 0 {
		return ""
	}
	name := st.ResolveVCluster(r.VCluster)
	if name == "" {
		name = st.DefaultVCluster
	}
	vc := st.VCluster(name)
	if vc == nil {
		return ""
	}
	constrained := r.GPUType != "" || r.GPUsPerNode > 0 || len(r.Constraints) > 0 || len(r.NodeList) > 0 || len(r.ExcludeNodes) > 0
	own, fps := 0, map[string]int{}
	lendable := map[string]int{}
	for _, n := range st.Nodes() {
		if !nodeMeetsRef(n, r) {
			continue
		}
		if n.HomeVCluster == name {
			own++
			fps[n.Fingerprint]++
			continue
		}
		lendable[n.HomeVCluster]++
	}
	most := own
	if vc.Sensitive() {
		most = 0
		for _, c := range fps {
			most = max(most, c)
		}
	} else if vc.Borrows() && !(vc.CheckpointableOnlyOnBorrowed && !r.Checkpoint.Checkpointable()) {
		for home, c := range lendable {
			if h := st.VCluster(home); h != nil && h.Lends() {
				most += min(c, h.MaxLendable(st.HomeNodes(home)))
			}
		}
	}
	tenant := r.Tenant
	if tenant == "" {
		tenant = model.DefaultTenant
	}
	if t := st.Tenant(tenant); t != nil && t.MaxNodes > 0 && r.NodesMin > t.MaxNodes {
		return fmt.Sprintf("nodes: %d requested, tenant %s may use at most %d at once (its quota)", r.NodesMin, tenant, t.MaxNodes)
	}
	if r.NodesMin <= most {
		return ""
	}
	what := ""
	if constrained {
		what = " nodes that meet its constraints"
	}
	return fmt.Sprintf("nodes: %d requested, vCluster %s can have at most %d%s (its own and what it may borrow)", r.NodesMin, name, most, what)
}

// EverFits answers from the quorum's node counts for a request without
// constraints, and scans the shared node list after the read lock for one
// with constraints or in a sensitive vCluster: either way exactly what a
// scan of every node under the lock answered.
func TestCheckEverFitsAgreesWithAScan(t *testing.T) {
	ml := DefaultVCluster("ml-training")
	ml.MaxLendFraction = 0.25
	batch := DefaultVCluster("hpc-batch")
	batch.MaxLendFraction = 0.5
	s, err := New(Config{ID: "s1", DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", InMemRaft: true, RaftLogLevel: "off",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		VClusters: []model.VCluster{batch, ml, DefaultVCluster("sensitive"), DefaultVCluster("interactive")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		s.view(func(st *quorum.State) { n = len(st.VClusters()) })
		if n == 4 && s.currentLeader() != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader with its vClusters")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx := context.Background()
	var nodes []model.Node
	add := func(home string, k int, f func(i int, n *model.Node)) {
		for i := range k {
			n := model.Node{Name: fmt.Sprintf("%s-%02d", home, i), HomeVCluster: home, Group: i / 4, IdleWatts: 100, BusyWatts: 300, Fingerprint: "fpA"}
			if f != nil {
				f(i, &n)
			}
			nodes = append(nodes, n)
		}
	}
	add("hpc-batch", 20, func(i int, n *model.Node) {
		if i%2 == 0 {
			n.Features = []string{"ib"}
		}
	})
	add("ml-training", 12, func(i int, n *model.Node) {
		n.GPUType, n.GPUs = "a100", 4
		if i < 3 {
			n.GPUs = 8
		}
	})
	add("sensitive", 9, func(i int, n *model.Node) {
		if i >= 5 {
			n.Fingerprint = "fpB"
		}
	})
	if _, err := s.propose(ctx, &quorum.RegisterNodes{Agent: "a", Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.propose(ctx, &quorum.SetTenant{Tenant: model.Tenant{Name: "small", MaxNodes: 6}}); err != nil || r.Rejection != nil {
		t.Fatal(err, r)
	}
	ckpt := model.CheckpointSignal
	refused := 0
	for _, r := range []model.Request{
		{VCluster: "hpc-batch", NodesMin: 20},
		{VCluster: "hpc-batch", NodesMin: 21},
		{VCluster: "hpc-batch", NodesMin: 23, Checkpoint: ckpt},
		{VCluster: "hpc-batch", NodesMin: 24, Checkpoint: ckpt},
		{VCluster: "ml-training", NodesMin: 12},
		{VCluster: "ml-training", NodesMin: 13},
		{VCluster: "ml-training", NodesMin: 22, Checkpoint: ckpt},
		{VCluster: "ml-training", NodesMin: 23, Checkpoint: ckpt},
		{VCluster: "ml-training", NodesMin: 4, GPUsPerNode: 8},
		{VCluster: "ml-training", NodesMin: 2, GPUType: "h100"},
		{VCluster: "hpc-batch", NodesMin: 11, Constraints: []string{"ib"}},
		{VCluster: "hpc-batch", NodesMin: 10, Constraints: []string{"ib"}},
		{VCluster: "hpc-batch", NodesMin: 3, NodeList: []string{"hpc-batch-01", "hpc-batch-02", "ml-training-00"}, Checkpoint: ckpt},
		{VCluster: "hpc-batch", NodesMin: 20, ExcludeNodes: []string{"hpc-batch-01"}},
		{VCluster: "sensitive", NodesMin: 5},
		{VCluster: "sensitive", NodesMin: 6},
		{VCluster: "interactive", NodesMin: 1},
		{VCluster: "interactive", NodesMin: 16, Checkpoint: ckpt},
		{VCluster: "interactive", NodesMin: 17, Checkpoint: ckpt},
		{VCluster: "hpc-batch", NodesMin: 7, Tenant: "small"},
		{VCluster: "no-such", NodesMin: 1},
		{NodesMin: 30},
	} {
		t.Run(fmt.Sprintf("%s/%d/%v%v%s%d", r.VCluster, r.NodesMin, r.Constraints, r.NodeList, r.GPUType, r.GPUsPerNode), func(t *testing.T) {
			var want string
			s.view(func(st *quorum.State) { want = everFitsByScan(st, &r) })
			got := ""
			if err := s.admit.EverFits(&r); err != nil {
				got = err.Error()
			}
			if want != "" {
				refused++
			}
			if want == "" && got != "" || want != "" && (got == "" || !strings.Contains(got, want)) {
				t.Fatalf("EverFits = %q, the scan says %q", got, want)
			}
		})
	}
	if refused < 10 {
		t.Fatalf("only %d of the requests never fit: the table no longer tests the boundaries", refused)
	}
}

// nodeMeetsRef is whether n meets r's node constraints, as the reference
// scan judges it.
func nodeMeetsRef(n *model.Node, r *model.Request) bool {
	if r.GPUType != "" && !strings.EqualFold(n.GPUType, r.GPUType) {
		return false
	}
	return n.GPUs >= r.GPUsPerNode && n.HasFeatures(r.Constraints) && r.NodeAllowed(n.Name)
}
