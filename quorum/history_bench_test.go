package quorum

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// historyState is a state whose history holds n ended jobs (ten users,
// two tenants), built by applying commands directly (no Raft).
func historyState(b *testing.B, n int) *State {
	b.Helper()
	s := NewState()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(c Command) *Result {
		now = now.Add(time.Second)
		c.CommandHeader().Time = now
		r := s.apply(c)
		if r.Rejection != nil {
			b.Fatal(r.Rejection.Message)
		}
		return r
	}
	apply(&SetVCluster{VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}})
	const per = 10000
	for i := 0; i < n; i += per {
		k := min(per, n-i)
		r := apply(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1,
			Walltime: time.Hour, Hold: true, User: fmt.Sprintf("u%d", (i/per)%10), Tenant: fmt.Sprintf("t%d", (i/per)%2),
			Array: &model.ArraySpec{Start: 0, End: k - 1, Step: 1}}}}})
		ids := make([]uint64, k)
		for j := range ids {
			ids[j] = r.IDs[0] + uint64(j)
		}
		apply(&Cancel{IDs: ids})
		apply(&ArchiveEnded{IDs: ids})
	}
	if s.HistoryLen() != n {
		b.Fatalf("history holds %d, want %d", s.HistoryLen(), n)
	}
	return s
}

// BenchmarkHistory100k: queries and snapshots of a history of 100,000
// ended jobs.
//
//	go test -run '^$' -bench History100k -benchtime 20x ./quorum/
func BenchmarkHistory100k(b *testing.B) {
	s := historyState(b, 100000)
	queries := map[string]HistoryQuery{
		"all":        {},
		"one-user":   {Users: []string{"u3"}},
		"one-tenant": {Tenants: []string{"t1"}},
		"last-hour":  {EndedFrom: s.HistoryNewestEnd().Add(-time.Hour)},
		"cancelled":  {States: []model.AllocState{model.StateCancelled}},
	}
	for name, q := range queries {
		b.Run("query-"+name, func(b *testing.B) {
			for range b.N {
				_ = s.History(q)
			}
		})
	}
	b.Run("as-allocations", func(b *testing.B) {
		for range b.N {
			for _, r := range s.History(HistoryQuery{}) {
				_ = r.Allocation()
			}
		}
	})
	var snap bytes.Buffer
	b.Run("snapshot-write", func(b *testing.B) {
		for range b.N {
			snap.Reset()
			if err := s.WriteSnapshot(&snap); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(snap.Len())/(1<<20), "MiB")
	})
	b.Run("snapshot-read", func(b *testing.B) {
		for range b.N {
			if _, err := ReadSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
	})
}
