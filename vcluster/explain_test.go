package vcluster

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// explainFixture is a vCluster of 64 nodes in groups of 8, half of them
// running one-node work, and 300 pending allocations of mixed sizes,
// tenants and classes.
func explainFixture(seed uint64) *Snapshot {
	r := rand.New(rand.NewPCG(seed, 7))
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, WeightsProfile: "balanced", ReservationDepth: 2}
	var nodes []*model.Node
	var allocs []*model.Allocation
	id := uint64(1)
	for i := range 64 {
		n := node(fmt.Sprintf("n%02d", i), "batch").build()
		n.Group = i / 8
		if i%2 == 0 {
			a := alloc(id, "batch", model.StateRunning)
			a.Nodes, a.StartTime = []string{n.Name}, t0.Add(-time.Duration(r.IntN(90))*time.Minute)
			n.Allocation = id
			allocs = append(allocs, a)
			id++
		}
		nodes = append(nodes, n)
	}
	for range 300 {
		a := alloc(id, "batch", model.StatePending)
		size := []int{1, 1, 2, 4, 8}[r.IntN(5)]
		a.NodesMin, a.NodesMax = size, size
		a.Tenant = fmt.Sprintf("t%d", r.IntN(5))
		a.PriorityClass = r.IntN(4)
		a.Walltime = time.Duration(1+r.IntN(8)) * time.Hour
		a.EligibleTime = t0.Add(-time.Duration(r.IntN(600)) * time.Minute)
		allocs = append(allocs, a)
		id++
	}
	s := snapshot(vc, nodes, allocs...)
	s.Groups = 8
	return s
}

// advance is the next cycle's snapshot: the started allocations leave the
// queue and the clock moves on.
func advance(s *Snapshot, started []Assignment, by time.Duration) *Snapshot {
	next := *s
	next.Now = s.Now.Add(by)
	gone := map[uint64]bool{}
	for _, it := range started {
		gone[it.AllocID] = true
	}
	next.Pending = nil
	for _, a := range s.Pending {
		if !gone[a.ID] {
			next.Pending = append(next.Pending, a)
		}
	}
	return &next
}

// A loop without a Planner (its solvers reused from cycle to cycle) makes
// the same starts and gives the same explanations as one planning with
// solver.Solve, cycle after cycle, and an explanation read before a later
// cycle keeps what it said.
func TestLoopReusedSolversDecideAsSolve(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := explainFixture(seed)
			fresh := &fakeState{s}
			reused := &fakeState{s}
			pa, pb := &fakeProposer{reject: map[uint64]string{}}, &fakeProposer{reject: map[uint64]string{}}
			clock := func() time.Time { return fresh.snap.Now }
			a := &Loop{Name: "batch", State: fresh, Proposer: pa, Planner: solver.Solve, Clock: clock}
			b := &Loop{Name: "batch", State: reused, Proposer: pb, Clock: clock}
			var kept []*Explanation // read from b after its first cycle
			for cycle := range 5 {
				if err := a.Cycle(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := b.Cycle(context.Background()); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(pa.batches, pb.batches) {
					t.Fatalf("cycle %d: starts differ:\nsolve  %v\nreused %v", cycle, pa.batches, pb.batches)
				}
				for _, al := range s.Pending {
					xa, oka := a.Explanations.Get(al.ID)
					xb, okb := b.Explanations.Get(al.ID)
					if oka != okb || !reflect.DeepEqual(xa, xb) {
						t.Fatalf("cycle %d, allocation %d: explanations differ:\nsolve  %+v\nreused %+v", cycle, al.ID, xa, xb)
					}
					if cycle == 0 {
						c := *xb
						kept = append(kept, &c)
						kept = append(kept, xb)
					}
				}
				var started []Assignment
				if n := len(pa.batches); n > 0 {
					started = pa.batches[n-1]
				}
				// Reject one start of the next cycle in both loops.
				for _, al := range s.Pending {
					pa.reject[al.ID], pb.reject[al.ID] = model.ReasonResources, model.ReasonResources
					break
				}
				s = advance(s, started, 7*time.Minute)
				fresh.snap, reused.snap = s, s
			}
			for i := 0; i < len(kept); i += 2 {
				if !reflect.DeepEqual(kept[i], kept[i+1]) {
					t.Fatalf("an explanation read after the first cycle changed later:\nthen %+v\nnow  %+v", kept[i], kept[i+1])
				}
			}
			if len(b.solvers) > 2 {
				t.Errorf("the loop keeps %d solvers; two are enough when no Get lingers", len(b.solvers))
			}
		})
	}
}

// Gets run while cycles reuse the solvers' memory (go test -race): every
// explanation read is the one of the allocation asked for, whole.
func TestExplanationsReadDuringCycles(t *testing.T) {
	s := explainFixture(4)
	l := &Loop{Name: "batch", State: &fakeState{s}, Proposer: &fakeProposer{}, Clock: func() time.Time { return t0 }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]Explanation{}
	for _, a := range s.Pending {
		x, ok := l.Explanations.Get(a.ID)
		if !ok {
			t.Fatalf("no explanation for pending allocation %d", a.ID)
		}
		want[a.ID] = *x
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				a := s.Pending[(i*7+g)%len(s.Pending)]
				x, ok := l.Explanations.Get(a.ID)
				// The same snapshot each cycle: the same explanation.
				if !ok || !reflect.DeepEqual(*x, want[a.ID]) {
					select {
					case errs <- fmt.Sprintf("allocation %d: got %+v, want %+v", a.ID, x, want[a.ID]):
					default:
					}
					return
				}
			}
		}()
	}
	for range 30 {
		if err := l.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestSortByID(t *testing.T) {
	for _, n := range []int{0, 1, 2, 17, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(n), 1))
			as := make([]*model.Allocation, n)
			for i := range as {
				as[i] = &model.Allocation{ID: uint64(i + 1)}
			}
			r.Shuffle(n, func(i, j int) { as[i], as[j] = as[j], as[i] })
			SortByID(as)
			for i, a := range as {
				if a.ID != uint64(i+1) {
					t.Fatalf("position %d holds %d", i, a.ID)
				}
			}
		})
	}
}

// BenchmarkSortPending100k sorts 100,000 pending allocations taken from a
// map (random order) by id, as the server's snapshot does every cycle:
// through the pointers, and with the ids beside them (SortByID).
func BenchmarkSortPending100k(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]*model.Allocation, 100000)
	for i := range src {
		src[i] = &model.Allocation{ID: uint64(i + 1)}
	}
	r.Shuffle(len(src), func(i, j int) { src[i], src[j] = src[j], src[i] })
	as := make([]*model.Allocation, len(src))
	b.Run("pointers", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(as, src)
			slices.SortFunc(as, func(x, y *model.Allocation) int { return cmp.Compare(x.ID, y.ID) })
		}
	})
	b.Run("keyed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(as, src)
			SortByID(as)
		}
	})
}

// BenchmarkFirstGet100k is the first Explanations.Get after a cycle of
// 100,000 pending allocations: it indexes the plan once.
func BenchmarkFirstGet100k(b *testing.B) {
	plan := make([]solver.Explanation, 100000)
	for i := range plan {
		plan[i] = solver.Explanation{JobID: uint64(len(plan) - i), Position: i + 1, Reason: model.ReasonPriority}
	}
	var e Explanations
	b.ReportAllocs()
	for b.Loop() {
		e.replace(&explanationSet{plan: plan, computed: t0})
		if _, ok := e.Get(50000); !ok {
			b.Fatal("not found")
		}
	}
}
