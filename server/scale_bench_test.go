package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// BenchmarkSubmitWhileScheduling10kNodes100kPending measures what a
// submission waits for on a large leader (one member, fsync on): 10,000
// nodes, all busy, and 100,000 queued allocations, while a goroutine takes
// scheduler snapshots back to back (as two vCluster loops do under load)
// and the leader's own loops run. Each scheduler snapshot holds the FSM's
// read lock, and Apply waits for it; p99 shows how long.
//
//	go test -run '^$' -bench SubmitWhileScheduling -benchtime 200x -count 5 ./server/
func BenchmarkSubmitWhileScheduling10kNodes100kPending(b *testing.B) {
	s := benchStartMembers(b, 1)
	ctx := context.Background()
	nodes := make([]model.Node, 10000)
	for i := range nodes {
		nodes[i] = model.Node{Name: fmt.Sprintf("n%05d", i), HomeVCluster: "hpc-batch", Group: i / 16, IdleWatts: 100, BusyWatts: 400}
	}
	if _, err := s.propose(ctx, &quorum.RegisterNodes{Agent: "bench", Nodes: nodes}); err != nil {
		b.Fatal(err)
	}
	// 10,000 one-node jobs that fill the nodes, then 100,000 that wait.
	for _, n := range []int{10000, 100000} {
		r, err := s.propose(ctx, &quorum.Submit{Items: []quorum.SubmitItem{{Request: model.Request{Name: "backlog", VCluster: "hpc-batch",
			Command: []string{"sleep", "600"}, NodesMin: 1, Walltime: time.Hour, Array: &model.ArraySpec{Start: 0, End: n - 1, Step: 1}}}}})
		if err != nil || r.Rejection != nil {
			b.Fatal(err, r)
		}
		if n == 10000 {
			benchWaitFor(b, 2*time.Minute, "the nodes to fill", func() bool {
				busy := 0
				s.view(func(st *quorum.State) { busy = st.ActiveCount() })
				return busy == 10000
			})
		}
	}
	term := leader.NewTerm(ctx, termHost{s}, s.termConfig()) // its Snapshot; no loop runs
	defer term.End()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			term.Snapshot("hpc-batch", time.Now())
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		r, err := s.propose(ctx, &quorum.Submit{Header: quorum.Header{RequestID: fmt.Sprintf("b%d", i)},
			Items: []quorum.SubmitItem{{Request: model.Request{Name: "lat", VCluster: "hpc-batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour}}}})
		if err != nil || r.Rejection != nil {
			b.Fatal(err, r)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(benchPercentile(lat, 0.50)), "p50_ms")
	b.ReportMetric(ms(benchPercentile(lat, 0.99)), "p99_ms")
	var hold time.Duration
	const holds = 20
	for range holds {
		t0 := time.Now()
		term.Snapshot("hpc-batch", time.Now())
		hold += time.Since(t0)
	}
	b.ReportMetric(ms(hold/holds), "snapshot_ms")
}
