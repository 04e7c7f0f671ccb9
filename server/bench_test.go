package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// benchSubmitClients submit concurrently in BenchmarkSubmitLatencyGRPC.
const benchSubmitClients = 8

// benchRaftAddr returns a free 127.0.0.1 port for Raft, which advertises
// the address it binds (so ":0" will not do).
func benchRaftAddr(b testing.TB) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func benchWaitFor(b testing.TB, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchStartMembers starts n servers in this process with fsync on: one
// member over the in-memory transport, or n over TCP Raft on loopback (the
// first bootstraps, the others join through its API). It returns the
// leader once it runs its loops and the initial vCluster exists.
func benchStartMembers(b *testing.B, n int) *Server {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := b.TempDir()
	var servers []*Server
	for i := range n {
		id := fmt.Sprintf("s%d", i+1)
		cfg := Config{ID: id, DataDir: filepath.Join(dir, id), APIAddr: "127.0.0.1:0", Logger: log, RaftLogLevel: "off",
			VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}}
		switch {
		case n == 1:
			cfg.InMemRaft = true
		case i == 0:
			cfg.RaftAddr, cfg.Bootstrap = benchRaftAddr(b), true
		default:
			cfg.RaftAddr, cfg.Join = benchRaftAddr(b), []string{servers[0].APIAddr()}
		}
		s, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Serve(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.Stop)
		servers = append(servers, s)
	}
	var leader *Server
	benchWaitFor(b, 30*time.Second, fmt.Sprintf("%d members with a leader running its loops", n), func() bool {
		leader = nil
		for _, s := range servers {
			members, err := s.q.Servers()
			if err != nil || len(members) != n || s.q.AppliedIndex() < servers[0].q.CommitIndex() {
				return false
			}
			if s.q.IsLeader() && s.currentLeader() != nil {
				leader = s
			}
		}
		if leader == nil {
			return false
		}
		// The new leader writes the initial vClusters after its loops start.
		var configured bool
		leader.view(func(st *quorum.State) { configured = st.VCluster("hpc-batch") != nil })
		return configured
	})
	return leader
}

// BenchmarkSubmitLatencyGRPC measures submission latency end to end through
// the gRPC API of the leader (validation, proposal, commit, apply, reply),
// benchSubmitClients clients at once, each on its own connection, one
// allocation per Submit with a client request id as latticectl sends. No
// agent is attached, so submissions stay pending (the leader's scheduler
// loops still wake on them and run). Reports p50, p99 and max in ms.
//
//	go test -run '^$' -bench SubmitLatencyGRPC -count 5 ./server/
func BenchmarkSubmitLatencyGRPC(b *testing.B) {
	for _, members := range []int{1, 3} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			leader := benchStartMembers(b, members)
			clients := make([]latticev1.AllocationServiceClient, benchSubmitClients)
			for i := range clients {
				conn, err := grpc.NewClient(leader.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { conn.Close() })
				clients[i] = latticev1.NewAllocationServiceClient(conn)
				// Connect before the clock runs.
				if _, err := clients[i].List(context.Background(), &latticev1.ListAllocationsRequest{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			var next atomic.Int64
			lat := make([][]time.Duration, benchSubmitClients)
			errs := make(chan error, benchSubmitClients)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for c := range benchSubmitClients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						req := &latticev1.SubmitRequest{ClientRequestId: fmt.Sprintf("bench-%d", i), Request: &latticev1.AllocationRequest{
							Name: "lat", NodesMin: 1, WalltimeSeconds: 3600, Command: []string{"sleep", "60"}}}
						t0 := time.Now()
						if _, err := clients[c].Submit(context.Background(), req); err != nil {
							errs <- fmt.Errorf("submit %d: %w", i, err)
							return
						}
						lat[c] = append(lat[c], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(benchPercentile(all, 0.50)), "p50_ms")
			b.ReportMetric(ms(benchPercentile(all, 0.99)), "p99_ms")
			b.ReportMetric(ms(all[len(all)-1]), "max_ms")
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "submits/s")
		})
	}
}

// benchPercentile of sorted durations (nearest rank).
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
