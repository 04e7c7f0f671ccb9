package solver

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// TestSortKeysMatchesPdqsort pins the seeded sort (sortKeys: a bounded
// insertion sort of the keys in the last cycle's order, the fresh ones
// sorted apart and merged in, pdqsort when the bound is hit) to a plain
// sort of the same keys, whatever order they start in.
func TestSortKeysMatchesPdqsort(t *testing.T) {
	r := rand.New(rand.NewSource(15))
	gen := func(n int) []sortKey {
		k := make([]sortKey, n)
		for i := range k {
			// Few distinct scores and waits: ties are decided by id, then idx.
			k[i] = sortKey{score: float64(r.Intn(20)) / 20, wait: int64(r.Intn(5)), id: uint64(r.Intn(n + 1)), idx: int32(i)}
		}
		return k
	}
	sorted := func(k []sortKey) []sortKey { k = slices.Clone(k); slices.SortFunc(k, cmpKeys); return k }
	nearly := func(k []sortKey, swaps int) []sortKey {
		k = sorted(k)
		for range swaps {
			if len(k) > 1 {
				i := r.Intn(len(k) - 1)
				k[i], k[i+1] = k[i+1], k[i]
			}
		}
		return k
	}
	cases := []struct {
		name  string
		keys  []sortKey
		fresh int
	}{
		{"empty", nil, 0},
		{"one", gen(1), 0},
		{"one fresh", gen(1), 1},
		{"all fresh", gen(200), 200},
		{"sorted, no fresh", sorted(gen(300)), 0},
		{"nearly sorted, no fresh", nearly(gen(300), 20), 0},
		{"nearly sorted, fresh tail", append(nearly(gen(300), 20), gen(30)...), 30},
		{"reversed (the bound is hit)", func() []sortKey { k := sorted(gen(300)); slices.Reverse(k); return k }(), 0},
		{"reversed with a fresh tail", func() []sortKey { k := sorted(gen(300)); slices.Reverse(k); return append(k, gen(5)...) }(), 5},
		{"random", gen(500), 0},
		{"random with a fresh tail", gen(500), 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := sorted(c.keys)
			var s state
			s.keys = slices.Clone(c.keys)
			s.sortKeys(s.keys, c.fresh)
			if got := s.keys; !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("sortKeys\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestSolverAcrossCyclesMatchesSolve runs one Solver over a queue that
// moves on cycle after cycle as a vCluster's does — time passes, jobs
// start and leave, new ones arrive with higher ids, some change (priority,
// hold, walltime), one comes back with its old id, the tenants' usage
// moves, and sometimes the input comes in another order (no seed) — and
// checks every plan against a fresh Solve of the same input: the seeded
// sort, the jobs in rank order and the memoised factors decide exactly
// what Solve decides.
func TestSolverAcrossCyclesMatchesSolve(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		cfg := randomCfg(seed)
		cfg.pending = 50 + r.Intn(300)
		in := genInput(cfg)
		slices.SortFunc(in.Pending, func(a, b Job) int { return int(a.ID) - int(b.ID) })
		in.Pending = slices.CompactFunc(in.Pending, func(a, b Job) bool { return a.ID == b.ID })
		var gone []Job
		nextID := uint64(1_000_000)
		var sv Solver
		for step := range 25 {
			t.Run(fmt.Sprintf("seed %d step %d", seed, step), func(t *testing.T) {
				want := planText(Solve(in))
				if got := planText(sv.Solve(in)); got != want {
					t.Fatalf("the Solver's plan differs from Solve's:\n got %s\nwant %s", got, want)
				}
			})
			next := cloneInput(in)
			next.Now = in.Now.Add(time.Duration(r.Intn(600)) * time.Second)
			var pending []Job
			for _, j := range next.Pending {
				switch k := r.Intn(30); {
				case k == 0:
					gone = append(gone, j)
					continue
				case k == 1:
					j.PriorityClass = r.Intn(6)
				case k == 2:
					j.Hold = []string{"", "JobHeldUser"}[r.Intn(2)]
				case k == 3:
					j.Walltime = time.Duration(1+r.Intn(48)) * time.Hour
				}
				pending = append(pending, j)
			}
			if len(gone) > 0 && r.Intn(3) == 0 { // back with its old id
				pending = append(pending, gone[0])
				gone = gone[1:]
			}
			for range r.Intn(10) {
				j := pending[r.Intn(len(pending))]
				j.ID = nextID
				nextID++
				j.SubmitTime, j.EligibleTime = next.Now, next.Now
				pending = append(pending, j)
			}
			slices.SortFunc(pending, func(a, b Job) int { return int(a.ID) - int(b.ID) })
			if r.Intn(8) == 0 { // not in id order: no seed
				r.Shuffle(len(pending), func(a, b int) { pending[a], pending[b] = pending[b], pending[a] })
			}
			next.Pending = pending
			for name, tn := range next.Tenants {
				tn.UsageShare = r.Float64()
				next.Tenants[name] = tn
			}
			in = next
		}
	}
}

// TestFactorsOfEveryJobAsComputedAlone: the scoring loop evaluates f2 and
// the tenant's f3 again only when a job's inputs differ from the previous
// job's. Every explanation's f1, f2 and f3 must still be what the factor
// functions give for that job alone, over queues with runs of jobs that
// share their wait, length and tenant (an array's tasks) and ones that do
// not. (A factor that comes to depend on more of the job must be added to
// the memo's key in scoreAll.)
func TestFactorsOfEveryJobAsComputedAlone(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		r := rand.New(rand.NewSource(seed))
		in := genInput(randomCfg(seed))
		// Runs of neighbours sharing everything f2 and f3 read.
		for i := 1; i < len(in.Pending); i++ {
			p, j := &in.Pending[i-1], &in.Pending[i]
			if r.Intn(2) == 0 { // each shared or not, independently
				j.SubmitTime, j.EligibleTime = p.SubmitTime, p.EligibleTime
			}
			if r.Intn(2) == 0 {
				j.Walltime, j.Predicted = p.Walltime, p.Predicted
			}
			if r.Intn(2) == 0 {
				j.Tenant = p.Tenant
			}
		}
		fifo := in.Algorithm == model.AlgorithmFIFO || in.Algorithm == "" && model.AlgorithmFor(in.Type) == model.AlgorithmFIFO
		jobs := map[uint64]*Job{}
		for i := range in.Pending {
			jobs[in.Pending[i].ID] = &in.Pending[i]
		}
		var sv Solver
		for range 2 { // a fresh Solver, then a reused one
			p := sv.Solve(in)
			for _, ex := range p.Explanations {
				j := jobs[ex.JobID]
				elig := j.EligibleTime
				if elig.IsZero() {
					elig = j.SubmitTime
				}
				var wait time.Duration
				if !elig.IsZero() {
					wait = in.Now.Sub(elig)
				}
				length := jobLength(j)
				if fifo {
					length = -1
				}
				f3 := NeutralFairShare
				if tn, ok := in.Tenants[j.Tenant]; ok {
					f3 = fFairShare(tn.FairShareTarget, tn.UsageShare)
				}
				if want := [3]float64{fPriority(j.PriorityClass), fWait(wait, length), f3}; [3]float64(ex.Factors[:3]) != want {
					t.Fatalf("seed %d job %d: factors f1–f3 %v, computed alone %v", seed, j.ID, ex.Factors[:3], want)
				}
			}
		}
	}
}

// TestMemosDecideAsWithout: the plans made with the memos of neighbouring
// jobs' and ranks' results (f2, f3, f4, f9, the wait; a class's usable
// counts and earliest start while no start or reservation changed the
// pools) equal, bit for bit, the plans made computing every one afresh —
// one cycle and cycle after cycle, over inputs of every shape and queues
// with runs of neighbours that share their class, size and walltime.
func TestMemosDecideAsWithout(t *testing.T) {
	defer func() { memoOff = false }()
	for seed := int64(1); seed <= 150; seed++ {
		r := rand.New(rand.NewSource(seed))
		cfg := randomCfg(seed)
		if seed%3 == 0 {
			cfg = replayScaleCfg(10+int(seed), []int{1, model.ReservationsAll}[seed%2])
		}
		in := genInput(cfg)
		for i := 1; i < len(in.Pending); i++ {
			if r.Intn(2) == 0 { // an array's task: its predecessor's shape
				p, j := &in.Pending[i-1], &in.Pending[i]
				j.NodesMin, j.NodesMax, j.Walltime, j.Constraints, j.GPUType, j.GPUsPerNode = p.NodesMin, p.NodesMax, p.Walltime, p.Constraints, p.GPUType, p.GPUsPerNode
				j.SubmitTime, j.EligibleTime = p.SubmitTime, p.EligibleTime
			}
		}
		var with, without Solver
		for step := range 3 {
			memoOff = false
			got := planText(with.Solve(in))
			memoOff = true
			want := planText(without.Solve(in))
			memoOff = false
			if got != want {
				t.Fatalf("seed %d step %d: with the memos\n got %s\nwant %s", seed, step, got, want)
			}
			in = cloneInput(in)
			in.Now = in.Now.Add(time.Duration(r.Intn(3600)) * time.Second)
		}
	}
}
