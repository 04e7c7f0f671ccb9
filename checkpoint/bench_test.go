package checkpoint

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// runningJobs is a realistic running set: mostly small jobs, a tail of large
// ones, walltimes of 1–48h, 70% checkpointable, a fifth on borrowed nodes,
// about half checkpointed before.
func runningJobs(n int) []Job {
	r := rand.New(rand.NewPCG(7, 11))
	jobs := make([]Job, n)
	for i := range jobs {
		wall := time.Duration(1+r.IntN(48)) * time.Hour
		j := Job{ID: uint64(i + 1), Nodes: 1 << r.IntN(8), Mode: model.CheckpointNone, Walltime: wall,
			Start: now.Add(-time.Duration(r.Float64() * float64(wall))), OnBorrowedNodes: r.IntN(5) == 0,
			PriorityClass: r.IntN(11)}
		if r.IntN(10) < 7 {
			j.Mode = model.CheckpointSignal
			if r.IntN(2) == 0 {
				j.CheckpointMinutes = 1 + r.Float64()*20
			}
			if r.IntN(2) == 0 {
				j.LastCheckpoint = j.Start.Add(time.Duration(r.Float64() * float64(now.Sub(j.Start))))
			}
		}
		jobs[i] = j
	}
	return jobs
}

func BenchmarkProactive10kJobs(b *testing.B) {
	jobs := runningJobs(10000)
	p := DefaultParams()
	s := Situation{Now: now, BacklogPressure: 0.6}
	picked := len(Proactive(p, jobs, s, 0))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Proactive(p, jobs, s, 0)
	}
	b.ReportMetric(float64(picked), "picked")
}

func BenchmarkPreemptionCost10kJobs(b *testing.B) {
	jobs := runningJobs(10000)
	p := DefaultParams()
	b.ReportAllocs()
	for b.Loop() {
		for _, j := range jobs {
			PreemptionCost(p, j, now)
		}
	}
}
