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

// admission's FitTasks sizes -n without -N from the nodes' reported CPUs and refuses
// tasks no node can hold, as sbatch does.
func TestFitTasks(t *testing.T) {
	s, err := New(Config{ID: "s1", DataDir: t.TempDir(), APIAddr: "127.0.0.1:0", InMemRaft: true, RaftLogLevel: "off",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	// Leading comes before the leader's first proposals: wait for its
	// vCluster too (the nodes' home).
	waitFor(t, 20*time.Second, "leadership and the vCluster", func() bool {
		var vc bool
		s.view(func(st *quorum.State) { vc = st.VCluster("hpc-batch") != nil })
		return s.currentLeader() != nil && vc
	})
	var nodes []model.Node
	for i := range 8 {
		nodes = append(nodes, model.Node{Name: fmt.Sprintf("n%d", i), HomeVCluster: "hpc-batch", IdleWatts: 100, BusyWatts: 300,
			Fingerprint: "fp", CPUs: 4, GPUs: 2})
	}
	if res, err := s.propose(context.Background(), &quorum.RegisterNodes{Agent: "a", Nodes: nodes}); err != nil || res.Rejection != nil {
		t.Fatal(err, res.Rejection)
	}
	waitFor(t, 10*time.Second, "the nodes in the leader's view", func() bool {
		n := 0
		s.view(func(st *quorum.State) { n = st.NodeCount() })
		return n == len(nodes)
	})
	for _, tt := range []struct {
		req      model.Request
		min, max int
		err      string
	}{
		{req: model.Request{NodesMin: 1, Ntasks: 10}, min: 3, max: 3},                // 4 CPUs a node
		{req: model.Request{NodesMin: 1, Ntasks: 8, CPUsPerTask: 2}, min: 4, max: 4}, // 2 tasks a node
		{req: model.Request{NodesMin: 2, NodesMax: 2, Ntasks: 8}, min: 2, max: 2},    // fits 4+4
		{req: model.Request{NodesMin: 2, NodesMax: 2, NtasksPerNode: 4}, min: 2, max: 2},
		{req: model.Request{NodesMin: 2, NodesMax: 2, NtasksPerNode: 5}, err: "need 5 CPUs"},
		{req: model.Request{NodesMin: 2, NodesMax: 2, NtasksPerNode: 5, Overcommit: true}, min: 2, max: 2},
		{req: model.Request{NodesMin: 1, NodesMax: 1, NtasksPerNode: 2, CPUsPerTask: 3}, err: "need 6 CPUs"},
		{req: model.Request{NodesMin: 1, NodesMax: 1, NtasksPerNode: 2, GPUsPerTask: 2}, err: "GPUs"},
		{req: model.Request{NodesMin: 2, NodesMax: 2, NtasksPerNode: 5, Hold: true}, min: 2, max: 2},
	} {
		r := tt.req
		err := s.admit.FitTasks(&r, false)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: %v, want an error with %q", tt.req, err, tt.err)
			}
			continue
		}
		if err != nil || r.NodesMin != tt.min || r.NodesMax != tt.max {
			t.Errorf("%+v: nodes %d-%d, %v; want %d-%d", tt.req, r.NodesMin, r.NodesMax, err, tt.min, tt.max)
		}
	}
}
