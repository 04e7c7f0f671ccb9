package vcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// BenchmarkCycle10kNodes100kPending is one full scheduling cycle of a
// site-sized vCluster without Raft (the proposal commits at once): 10,000
// nodes in groups of 16, 9,000 busy with one-node work, 1,000 free, and
// 100,000 pending allocations of 1 to 32 nodes — snapshot handed over,
// BuildInput, solve, reclaim and preemption planning, the batch built.
//
//	go test -run '^$' -bench Cycle10kNodes100kPending -count 5 ./vcluster/
func BenchmarkCycle10kNodes100kPending(b *testing.B) {
	l, _ := cycleBenchLoop()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := l.Cycle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// cycleBenchLoop is the loop and the snapshot of the cycle benchmarks.
func cycleBenchLoop() (*Loop, *Snapshot) {
	vc := &model.VCluster{Name: "hpc-batch", Type: model.TypeHPCBatch, ReservationDepth: 1, CycleInterval: time.Hour}
	nodes := make([]*model.Node, 10000)
	var allocs []*model.Allocation
	id := uint64(1)
	for i := range nodes {
		n := node(fmt.Sprintf("n%05d", i), "hpc-batch").build()
		n.Group = i / 16
		if i < 9000 {
			a := alloc(id, "hpc-batch", model.StateRunning)
			a.Nodes, a.StartTime = []string{n.Name}, t0.Add(-10*time.Minute)
			n.Allocation = id
			allocs = append(allocs, a)
			id++
		}
		nodes[i] = n
	}
	sizes := []int{1, 1, 1, 1, 2, 2, 4, 8, 16, 32}
	for i := range 100000 {
		a := alloc(id, "hpc-batch", model.StatePending)
		a.NodesMin, a.NodesMax = sizes[i%len(sizes)], sizes[i%len(sizes)]
		a.Tenant = fmt.Sprintf("t%d", i%20)
		a.PriorityClass = i % 6
		allocs = append(allocs, a)
		id++
	}
	s := snapshot(vc, nodes, allocs...)
	s.Groups = 10000 / 16
	l := &Loop{Name: "hpc-batch", State: &fakeState{s}, Proposer: &fakeProposer{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return l, s
}

// BenchmarkCycleChurn is BenchmarkCycle10kNodes100kPending as the leader
// runs it from one cycle to the next: between cycles 1% of the pending
// allocations change (each replaced by a new copy, as the quorum stores a
// change). "rebuild" derives every job again each cycle; "immutable" is
// the leader's loop (Loop.ImmutableState: only what changed is derived).
//
//	go test -run '^$' -bench CycleChurn -count 6 ./vcluster/
func BenchmarkCycleChurn(b *testing.B) {
	for _, immutable := range []bool{false, true} {
		name := "rebuild"
		if immutable {
			name = "immutable"
		}
		b.Run(name, func(b *testing.B) {
			l, s := cycleBenchLoop()
			l.ImmutableState = immutable
			ctx := context.Background()
			if err := l.Cycle(ctx); err != nil { // the first cycle derives everything
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				churn(s, i)
				b.StartTimer()
				if err := l.Cycle(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuildChurn is the solver input of BenchmarkCycleChurn alone
// (10,000 nodes, 100,000 pending, 1% of them changed between builds).
//
//	go test -run '^$' -bench BuildChurn -count 6 ./vcluster/
func BenchmarkBuildChurn(b *testing.B) {
	for _, immutable := range []bool{false, true} {
		name := "rebuild"
		if immutable {
			name = "immutable"
		}
		b.Run(name, func(b *testing.B) {
			_, s := cycleBenchLoop()
			bl := Builder{Immutable: immutable}
			bl.Build(s)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				churn(s, i)
				b.StartTimer()
				bl.Build(s)
			}
		})
	}
}

// churn replaces 1% of s's pending allocations (every 100th, from i % 100)
// by changed copies, as committed state that moved on between cycles.
func churn(s *Snapshot, i int) {
	for k := i % 100; k < len(s.Pending); k += 100 {
		c := *s.Pending[k]
		s.Pending[k] = &c
	}
}
