package solver

import (
	"fmt"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// Benchmarks run one full scheduling cycle over generated, realistic
// clusters and queues (see genInput: job sizes like HPC traces — many
// one-node jobs, a tail up to 1,024 nodes —, a busy fragmented machine, 10%
// GPU groups, 3 conformance groups, a few constraints, quotas and borrowable
// nodes). Besides time and allocations they report starts and reservations
// per cycle.

func depthName(d int) string {
	if d == model.ReservationsAll {
		return "all"
	}
	return fmt.Sprint(d)
}

func clusterCfg(nodes, pending, running, depth int) genCfg {
	return genCfg{
		nodes: nodes, groups: max(1, nodes/250), pending: pending, running: running, seed: 1,
		fps: 3, gpuGroupFrac: 0.1, foreignFrac: 0.02, downFrac: 0.01, depth: depth, powerHeadroom: -1,
		constrainedJobs: 0.05, elasticJobs: 0.02, quotaTen: 5,
	}
}

func benchSolve(b *testing.B, cfg genCfg) { benchPlanner(b, cfg, Solve) }

// benchPlanner runs plan (Solve, or a Solver's Solve) on cfg's input.
func benchPlanner(b *testing.B, cfg genCfg, plan func(*Input) *Plan) {
	in := genInput(cfg)
	b.ReportAllocs()
	b.ResetTimer()
	starts, reservations := 0, 0
	for i := 0; i < b.N; i++ {
		p := plan(in)
		starts += len(p.Starts)
		reservations += len(p.Reservations)
	}
	b.ReportMetric(float64(starts)/float64(b.N), "starts/cycle")
	b.ReportMetric(float64(reservations)/float64(b.N), "reservations/cycle")
}

// BenchmarkSolveCycle10kNodes: 10,000 nodes in 40 groups, 20,000 pending,
// 5,000 running; EASY (1), 16 and all (conservative) reservations.
func BenchmarkSolveCycle10kNodes(b *testing.B) {
	for _, d := range []int{1, 16, model.ReservationsAll} {
		b.Run("depth="+depthName(d), func(b *testing.B) {
			benchSolve(b, clusterCfg(10_000, 20_000, 5_000, d))
		})
	}
}

// BenchmarkSolveCycle50kNodes: 50,000 nodes in 200 groups, 100,000 pending,
// 25,000 running.
func BenchmarkSolveCycle50kNodes(b *testing.B) {
	for _, d := range []int{1, model.ReservationsAll} {
		b.Run("depth="+depthName(d), func(b *testing.B) {
			benchSolve(b, clusterCfg(50_000, 100_000, 25_000, d))
		})
	}
}

// BenchmarkSolveScaleNodes grows the machine with the queue fixed at 20,000.
func BenchmarkSolveScaleNodes(b *testing.B) {
	for _, n := range []int{1_000, 5_000, 10_000, 25_000, 50_000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			benchSolve(b, clusterCfg(n, 20_000, n/2, model.ReservationsAll))
		})
	}
}

// BenchmarkSolveScaleQueue grows the queue on 10,000 nodes.
func BenchmarkSolveScaleQueue(b *testing.B) {
	for _, q := range []int{1_000, 5_000, 20_000, 50_000, 100_000} {
		for _, d := range []int{1, model.ReservationsAll} {
			b.Run(fmt.Sprintf("pending=%d/depth=%s", q, depthName(d)), func(b *testing.B) {
				benchSolve(b, clusterCfg(10_000, q, 5_000, d))
			})
		}
	}
}

// replayScaleCfg is one decision of the replay simulator's benchmark
// (replay.BenchmarkReplay230k): 1,152 homogeneous nodes in 36 groups of 32,
// about 80 % busy, 300 tenants, and a short queue.
func replayScaleCfg(pending, depth int) genCfg {
	return genCfg{
		nodes: 1152, groups: 36, pending: pending, running: pending/2 + 40, seed: 7,
		fps: 1, depth: depth, powerHeadroom: -1, busyFrac: 0.8, maxJob: 512, tenants: 300,
	}
}

// BenchmarkSolveReplayScale is the solver's hot path in a replay: one cycle
// on ~1k nodes with a queue of 10 to 200 jobs, hundreds of thousands of
// times per replay, by one Solver that keeps its memory from cycle to cycle
// as the replay's does.
func BenchmarkSolveReplayScale(b *testing.B) {
	for _, q := range []int{10, 50, 200} {
		for _, d := range []int{1, model.ReservationsAll} {
			b.Run(fmt.Sprintf("pending=%d/depth=%s", q, depthName(d)), func(b *testing.B) {
				var sv Solver
				benchPlanner(b, replayScaleCfg(q, d), sv.Solve)
			})
		}
	}
}
