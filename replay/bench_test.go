package replay

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// syntheticTrace generates a Lublin-like workload: n jobs on capacity nodes
// at the given offered load. Sizes: a quarter serial, the rest log-uniform
// up to the machine with most rounded to a power of two; runtimes
// log-normal (median ~20 min, long tail capped at 36 h); estimates are
// overestimated walltimes (runtime × 1..10, rounded up to 15 minutes, 15 %
// exact); ~300 users with a skewed activity; Poisson arrivals scaled to the
// load.
func syntheticTrace(n, capacity int, load float64, seed uint64) *Trace {
	rng := rand.New(rand.NewPCG(seed, 1))
	tr := &Trace{Name: fmt.Sprintf("synthetic-%d", n), Capacity: capacity}
	var work float64
	jobs := make([]Job, n)
	for i := range jobs {
		size := 1
		if rng.Float64() > 0.25 {
			l := rng.Float64() * math.Log2(float64(capacity))
			size = int(math.Round(math.Exp2(l)))
			if rng.Float64() < 0.75 {
				size = 1 << int(math.Round(l))
			}
			size = min(max(size, 1), capacity)
		}
		run := math.Exp(rng.NormFloat64()*1.8 + math.Log(1200))
		run = min(max(run, 1), 36*3600)
		est := run
		if rng.Float64() > 0.15 {
			est = math.Ceil(run*(1+9*rng.Float64())/900) * 900
		}
		user := int(math.Floor(math.Pow(rng.Float64(), 2.5) * 300))
		jobs[i] = Job{ID: uint64(i + 1), Size: size, Runtime: seconds(math.Round(run)),
			Estimate: seconds(math.Round(est)), Tenant: "u" + strconv.Itoa(user)}
		work += float64(size) * math.Round(run)
	}
	// Mean inter-arrival so that offered work / (capacity · span) = load.
	mean := work / (load * float64(capacity) * float64(n))
	t := 0.0
	for i := range jobs {
		jobs[i].Submit = seconds(math.Round(t))
		t += rng.ExpFloat64() * mean
	}
	tr.Jobs = jobs
	sortJobs(tr.Jobs)
	return tr
}

// BenchmarkReplay230k replays a 230,000-job synthetic trace on 1,152 nodes
// (SDSC-BLUE's size and job count) at 0.8 offered load, per policy. The
// baselines take seconds; lattice minutes (one BuildInput + Solve over all
// nodes per decision): run it with -benchtime 1x.
func BenchmarkReplay230k(b *testing.B) {
	tr := syntheticTrace(230000, 1152, 0.8, 42)
	for _, p := range Policies {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := Run(tr, Config{Policy: p})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.AvgBoundedSlowdown, "bsld")
				b.ReportMetric(res.Utilization, "util")
			}
		})
	}
}

// BenchmarkReplay20k replays the first 20,000 jobs of BenchmarkReplay230k's
// trace per policy: the same machine and load, quick enough for -count.
func BenchmarkReplay20k(b *testing.B) {
	tr := syntheticTrace(230000, 1152, 0.8, 42).First(20000)
	for _, p := range Policies {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Run(tr, Config{Policy: p}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplayLublin replays the shared lublin_256 trace per policy.
func BenchmarkReplayLublin(b *testing.B) {
	tr := loadTrace(b, "lublin_256.swf")
	for _, p := range Policies {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Run(tr, Config{Policy: p}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWriteSyntheticTrace writes the 230k-job trace as SWF when
// LATTICE_REPLAY_SYNTH names a file, for timing `latticectl replay`.
func TestWriteSyntheticTrace(t *testing.T) {
	path := os.Getenv("LATTICE_REPLAY_SYNTH")
	if path == "" {
		t.Skip("set LATTICE_REPLAY_SYNTH=FILE to write the synthetic 230k-job trace")
	}
	tr := syntheticTrace(230000, 1152, 0.8, 42)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "; synthetic Lublin-like trace, 230000 jobs, load 0.8\n; MaxNodes: %d\n; MaxProcs: %d\n", tr.Capacity, tr.Capacity)
	for _, j := range tr.Jobs {
		fmt.Fprintf(f, "%d %d -1 %d %d -1 -1 %d %d -1 1 %s -1 -1 -1 -1 -1 -1\n", j.ID, int64(j.Submit/time.Second),
			int64(j.Runtime/time.Second), j.Size, j.Size, int64(j.Estimate/time.Second), j.Tenant[1:])
	}
}
