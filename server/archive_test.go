package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

func TestArchiveSkipsAPruneAppliedAgain(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := openArchive(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.write(7, []*model.Allocation{{ID: 1, State: model.StateCompleted, EndTime: end}, {ID: 3, ArrayJobID: 3, ArrayIndex: 0, State: model.StateFailed, EndTime: end}})
	a.write(7, []*model.Allocation{{ID: 1, State: model.StateCompleted, EndTime: end}}) // replayed
	// Reopened after a restart: the log replays index 7 again, then 9.
	b, err := openArchive(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	b.write(7, []*model.Allocation{{ID: 1, State: model.StateCompleted, EndTime: end}})
	b.write(9, []*model.Allocation{{ID: 2, State: model.StateCancelled, EndTime: end.Add(time.Hour)}})
	all, err := b.matching(func(*model.Allocation) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != 1 || all[1].ID != 2 || all[2].ID != 3 {
		t.Fatalf("archive holds %v", ids(all))
	}
	if !b.endedSince(end.Add(time.Hour)) || b.endedSince(end.Add(2*time.Hour)) {
		t.Fatal("endedSince does not follow the newest end")
	}
	for _, tc := range []struct {
		id   string
		want int
	}{{"1", 1}, {"3", 1}, {"3_0", 1}, {"3_1", 0}, {"4", 0}, {"x", 0}} {
		got, err := b.lookup(tc.id)
		if err != nil || len(got) != tc.want {
			t.Errorf("lookup %q: %d found (%v), want %d", tc.id, len(got), err, tc.want)
		}
	}
}

func ids(as []*model.Allocation) []uint64 {
	out := make([]uint64, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

// TestPrunedAllocationsStayListable: retention moves ended allocations out
// of the replicated state into the archive; Get and List still find them.
func TestPrunedAllocationsStayListable(t *testing.T) {
	d := startDevWith(t, t.TempDir(), 1, []string{"hpc-batch"}, func(c *Config) {
		c.Retention, c.PruneInterval = time.Millisecond, 20*time.Millisecond
	})
	ctx := context.Background()
	var ended []string
	for range 3 {
		ended = append(ended, d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60,
			Script: "#!/bin/sh\nsleep 1000\n"}))
	}
	if _, err := d.allocs.Cancel(ctx, &latticev1.CancelRequest{Ids: ended}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the cancelled allocations to be pruned", func() bool {
		n := 0
		d.srv.view(func(st *quorum.State) { n = st.AllocationCount() })
		return n == 0
	})
	got, err := d.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: ended[1]})
	if err != nil || got.State != string(model.StateCancelled) {
		t.Fatalf("get of a pruned allocation: %v, %v", got, err)
	}
	for _, req := range []*latticev1.ListAllocationsRequest{
		{States: []string{"CANCELLED"}},
		{},
		{Ids: ended},
	} {
		resp, err := d.allocs.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Allocations) != 3 {
			t.Fatalf("list %v: %d allocations", req, len(resp.Allocations))
		}
	}
	resp, err := d.allocs.List(ctx, &latticev1.ListAllocationsRequest{States: []string{"PENDING"}})
	if err != nil || len(resp.Allocations) != 0 {
		t.Fatalf("pending listing: %v %v", resp, err)
	}
}
