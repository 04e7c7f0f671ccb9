package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/vcluster"
)

// TestAssignBatchInSlices: a cycle's starts beyond maxAssignSlice are
// proposed as several AssignBatch entries, and the outcomes come back one
// per item, in order, as from one entry.
func TestAssignBatchInSlices(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{ID: "a", DataDir: filepath.Join(dir, "q"), APIAddr: "127.0.0.1:0", InMemRaft: true, RaftLogLevel: "off",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	// Leading comes before the leader's first proposals: wait for its
	// vCluster too.
	waitFor(t, 10*time.Second, "leadership and the vCluster", func() bool {
		var vc bool
		s.view(func(st *quorum.State) { vc = st.VCluster("hpc-batch") != nil })
		return s.currentLeader() != nil && vc
	})
	// The leader's count of applied AssignBatch commands (its loop proposes
	// none: nothing is pending).
	entries := func() float64 {
		var m dto.Metric
		if err := s.metrics.applied.WithLabelValues(quorum.CmdAssignBatch.String()).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	for _, tc := range []struct{ items, entries int }{{1, 1}, {maxAssignSlice, 1}, {maxAssignSlice + 1, 2}, {2*maxAssignSlice + 88, 3}} {
		// Allocations that do not exist: every item is refused, on its own.
		items := make([]vcluster.Assignment, tc.items)
		for i := range items {
			items[i] = vcluster.Assignment{AllocID: uint64(1_000_000 + i), Nodes: []string{"nowhere"}, Version: 1}
		}
		before := entries()
		out, err := s.AssignBatch(context.Background(), "hpc-batch", items)
		if err != nil {
			t.Fatalf("%d items: %v", tc.items, err)
		}
		if got := int(entries() - before); got != tc.entries {
			t.Errorf("%d items: %d AssignBatch entries, want %d", tc.items, got, tc.entries)
		}
		if len(out) != len(items) {
			t.Fatalf("%d items: %d outcomes", tc.items, len(out))
		}
		for i, o := range out {
			if o.AllocID != items[i].AllocID || o.Committed || o.Message == "" {
				t.Fatalf("%d items: outcome %d is %+v for allocation %d", tc.items, i, o, items[i].AllocID)
			}
		}
	}
}
