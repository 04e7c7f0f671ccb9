package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// BenchmarkCheckEverFits10kNodes is the check every Submit makes on a
// leader of 10,000 nodes (two vClusters, one lending to the other):
// whether the request could ever fit. "plain" asks for nodes only (the
// quorum's counts answer); "constrained" asks for a feature (the nodes
// are scanned, after the read lock).
//
//	go test -run '^$' -bench CheckEverFits -count 6 ./server/
func BenchmarkCheckEverFits10kNodes(b *testing.B) {
	s := benchStartMembers(b, 1)
	ctx := context.Background()
	if r, err := s.propose(ctx, &quorum.SetVCluster{VCluster: DefaultVCluster("ml-training")}); err != nil || r.Rejection != nil {
		b.Fatal(err, r)
	}
	nodes := make([]model.Node, 10000)
	for i := range nodes {
		home := "hpc-batch"
		if i%10 < 3 {
			home = "ml-training"
		}
		nodes[i] = model.Node{Name: fmt.Sprintf("n%05d", i), HomeVCluster: home, Group: i / 16, IdleWatts: 100, BusyWatts: 400}
		if i%2 == 0 {
			nodes[i].Features = []string{"ib"}
		}
	}
	if _, err := s.propose(ctx, &quorum.RegisterNodes{Agent: "bench", Nodes: nodes}); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    model.Request
	}{
		{"plain", model.Request{VCluster: "ml-training", NodesMin: 4, Walltime: time.Hour, Checkpoint: model.CheckpointSignal}},
		{"constrained", model.Request{VCluster: "ml-training", NodesMin: 4, Walltime: time.Hour, Constraints: []string{"ib"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := s.admit.EverFits(&c.r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
