package leader

import (
	"context"
	"testing"

	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/vcluster"
)

// TestAssignBatchInSlices: a cycle's starts beyond maxAssignSlice are
// proposed as several AssignBatch entries, and the outcomes come back one
// per item, in order, as from one entry.
func TestAssignBatchInSlices(t *testing.T) {
	h := newFSMHost(t)
	h.must(&quorum.SetVCluster{VCluster: testVCluster("hpc-batch")})
	term := NewTerm(context.Background(), h, TermConfig{})
	defer term.End()
	for _, tc := range []struct{ items, entries int }{{1, 1}, {maxAssignSlice, 1}, {maxAssignSlice + 1, 2}, {2*maxAssignSlice + 88, 3}} {
		// Allocations that do not exist: every item is refused, on its own.
		items := make([]vcluster.Assignment, tc.items)
		for i := range items {
			items[i] = vcluster.Assignment{AllocID: uint64(1_000_000 + i), Nodes: []string{"nowhere"}, Version: 1}
		}
		before := h.entries(quorum.CmdAssignBatch)
		out, err := term.AssignBatch(context.Background(), "hpc-batch", items)
		if err != nil {
			t.Fatalf("%d items: %v", tc.items, err)
		}
		if got := h.entries(quorum.CmdAssignBatch) - before; got != tc.entries {
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
