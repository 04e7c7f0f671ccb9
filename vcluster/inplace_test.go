package vcluster

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// TestImmutableBuilderInPlace pins the in-place update of the Builder's
// records (pendingRecs) to BuildInput in the cases it treats apart: runs
// of unchanged allocations moved at once, a record written where one was
// already read, one pending again with an old id before unread records
// (set aside first), growth past the buffers' capacity, an emptied queue,
// a new predictor.
func TestImmutableBuilderInPlace(t *testing.T) {
	mk := func(id uint64) *model.Allocation {
		return &model.Allocation{ID: id, State: model.StatePending, SubmitTime: t0.Add(-time.Duration(id) * time.Minute),
			EligibleTime: t0.Add(-time.Duration(id) * time.Minute),
			Request:      model.Request{Tenant: "t0", NodesMin: 1 + int(id%3), NodesMax: 1 + int(id%3), Walltime: time.Hour, Checkpoint: model.CheckpointNone, PriorityClass: int(id % 6)}}
	}
	ids := func(lo, hi uint64) []*model.Allocation {
		var out []*model.Allocation
		for id := lo; id <= hi; id++ {
			out = append(out, mk(id))
		}
		return out
	}
	type step func(p []*model.Allocation) []*model.Allocation
	drop := func(at ...int) step {
		return func(p []*model.Allocation) []*model.Allocation {
			var out []*model.Allocation
			for i, a := range p {
				if !slices.Contains(at, i) {
					out = append(out, a)
				}
			}
			return out
		}
	}
	change := func(at ...int) step {
		return func(p []*model.Allocation) []*model.Allocation {
			p = slices.Clone(p)
			for _, i := range at {
				c := *p[i]
				c.PriorityClass = (c.PriorityClass + 1) % 6
				c.Held = model.HoldUser
				p[i] = &c
			}
			return p
		}
	}
	add := func(as ...*model.Allocation) step {
		return func(p []*model.Allocation) []*model.Allocation {
			p = append(slices.Clone(p), as...)
			SortByID(p)
			return p
		}
	}
	cases := []struct {
		name  string
		start []*model.Allocation
		steps []step
	}{
		{"unchanged", ids(1, 50), []step{func(p []*model.Allocation) []*model.Allocation { return p }}},
		{"removed at the front, the middle, the end", ids(1, 50), []step{drop(0), drop(10, 11, 12), drop(46)}},
		{"changed where it was", ids(1, 50), []step{change(0), change(5, 30, 47)}},
		{"removed then changed after", ids(1, 50), []step{func(p []*model.Allocation) []*model.Allocation { return change(20)(drop(3)(p)) }}},
		{"new at the end", ids(1, 50), []step{add(mk(100), mk(101)), add(mk(102))}},
		{"back with an old id before unread records", ids(10, 60), []step{add(mk(1)), add(mk(5), mk(30)), drop(0, 1)}},
		{"back after removals (written where one was read)", ids(10, 60), []step{func(p []*model.Allocation) []*model.Allocation {
			return add(mk(3))(drop(0, 1)(p))
		}}},
		{"grows past capacity", ids(1, 10), []step{add(ids(11, 200)...), add(ids(201, 2000)...)}},
		{"emptied and refilled", ids(1, 30), []step{func([]*model.Allocation) []*model.Allocation { return nil }, add(ids(40, 70)...)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, 9))
			s := randomSnapshot(r)
			vc := *s.VCluster
			vc.Algorithm = ""
			s.VCluster = &vc
			s.Pending = c.start
			b := Builder{Immutable: true}
			check := func(k int) {
				t.Helper()
				if got, want := b.Build(s), BuildInput(s); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: the Immutable Builder\n got %+v\nwant %+v", k, got, want)
				}
			}
			check(0)
			for k, st := range c.steps {
				next := *s
				next.Pending = st(s.Pending)
				next.Now = s.Now.Add(time.Minute)
				if k == len(c.steps)-1 { // and a new predictor at the last step
					next.Predictor = LearnCompleted([]*model.Allocation{{ID: 99999, State: model.StateCompleted,
						Request: model.Request{Tenant: "t0", Walltime: time.Hour}, StartTime: t0.Add(-time.Hour), EndTime: t0.Add(-30 * time.Minute)}})
				}
				s = &next
				check(k + 1)
			}
		})
	}
}

// borrowersScan is borrowersOf as it was: a scan of every node per list.
func borrowersScan(snap *Snapshot, nodes []string) string {
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		want[n] = true
	}
	var vcs []string
	for _, n := range snap.Nodes {
		if want[n.Name] && !slices.Contains(vcs, n.CurrentVCluster) {
			vcs = append(vcs, n.CurrentVCluster)
		}
	}
	slices.Sort(vcs)
	return strings.Join(vcs, ", ")
}

// TestBorrowersMatchesScan: the cycle's index of the nodes away from home
// names the same borrowers as a scan, for lists of lent nodes, of nodes at
// home, of unknown names and of mixes.
func TestBorrowersMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	vcs := []string{"hpc", "ml", "int"}
	for seed := range 30 {
		s := &Snapshot{}
		for i := range 200 {
			home := vcs[r.IntN(3)]
			n := node(fmt.Sprintf("n%03d", i), home).build()
			if r.IntN(3) == 0 {
				n.CurrentVCluster = vcs[r.IntN(3)]
			}
			s.Nodes = append(s.Nodes, n)
		}
		bw := newBorrowers(s)
		for k := range 20 {
			var list []string
			for range r.IntN(12) {
				if r.IntN(10) == 0 {
					list = append(list, "unknown")
				} else {
					list = append(list, s.Nodes[r.IntN(len(s.Nodes))].Name)
				}
			}
			if got, want := bw.of(list), borrowersScan(s, list); got != want {
				t.Fatalf("seed %d list %d %v: got %q, want %q", seed, k, list, got, want)
			}
		}
	}
}

// TestWaitingCountsFlagsMatchWaiting: the cycle's one pass over the
// explanations says a job is blocked (for preemption, and for reclaim)
// exactly when waiting finds one, so skipping PlanReclaims and
// PlanPreemptions on its word skips only calls that would find nothing.
func TestWaitingCountsFlagsMatchWaiting(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for seed := range 60 {
		s := randomSnapshot(r)
		in := BuildInput(s)
		p := solver.Solve(&in)
		for _, h := range []time.Duration{-time.Hour, 0, time.Minute, time.Hour, 1000 * time.Hour} {
			horizon := s.Now.Add(h)
			_, blocked, blockedLent := waitingCounts(p.Explanations, horizon)
			if want := len(waiting(p, horizon, false)) > 0; blocked != want {
				t.Fatalf("seed %d horizon %v: blocked %v, waiting finds %v", seed, h, blocked, want)
			}
			if want := len(waiting(p, horizon, true)) > 0; blockedLent != want {
				t.Fatalf("seed %d horizon %v: blockedLent %v, waiting finds %v", seed, h, blockedLent, want)
			}
		}
	}
}
