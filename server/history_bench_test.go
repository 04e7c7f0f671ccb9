package server

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// BenchmarkListHistory100k: what `latticectl history` costs the member it
// asks at 100,000 ended jobs — every page of List over gRPC on loopback,
// the ended jobs in the replicated history (one member, Raft in memory).
//
//	go test -run '^$' -bench ListHistory100k -benchtime 5x ./server/
func BenchmarkListHistory100k(b *testing.B) {
	s := benchStartMembers(b, 1)
	ctx := context.Background()
	for i := range 10 {
		r, err := s.propose(ctx, &quorum.Submit{Items: []quorum.SubmitItem{{Request: model.Request{Name: "done", VCluster: "hpc-batch",
			User: []string{"alice", "bob"}[i%2], Tenant: model.DefaultTenant, Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour, Hold: true,
			Array: &model.ArraySpec{Start: 0, End: 9999, Step: 1}}}}})
		if err != nil || r.Rejection != nil {
			b.Fatal(err, r)
		}
		ids := make([]uint64, 10000)
		for j := range ids {
			ids[j] = r.IDs[0] + uint64(j)
		}
		if _, err := s.propose(ctx, &quorum.Cancel{IDs: ids}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.propose(ctx, &quorum.ArchiveEnded{IDs: ids}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		if got := listEnded(b, s, 0); len(got) != 100000 {
			b.Fatalf("listed %d", len(got))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/listing")
	// The CPU of the process (server and client) per listing: what a
	// listing costs whatever else the machine runs.
	b.ReportMetric(float64((processCPU()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/listing")
}

// processCPU is the CPU time this process used so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
