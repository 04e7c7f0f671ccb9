package quorum

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// An allocList holds what a map of the same puts and removes holds, in id
// order, and a view once shared never changes, whatever the list does
// after it: puts and removes of every kind (appends at the end, inserts in
// the middle as a requeue does, replacements, removals that empty and
// merge chunks), with views taken at random points.
func TestAllocListMatchesAMapAndViewsStay(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		rng := rand.New(rand.NewPCG(seed, seed))
		l := newAllocList()
		ref := map[uint64]*model.Allocation{}
		type held struct {
			v    AllocView
			want []*model.Allocation
		}
		var views []held
		sorted := func() []*model.Allocation {
			ids := make([]uint64, 0, len(ref))
			for id := range ref {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			out := make([]*model.Allocation, len(ids))
			for i, id := range ids {
				out[i] = ref[id]
			}
			return out
		}
		next, low := uint64(1), uint64(1)
		for step := range 20000 {
			switch r := rng.IntN(100); {
			case r < 45: // a new submission: the next id
				a := &model.Allocation{ID: next}
				next++
				l.put(a)
				ref[a.ID] = a
			case r < 55 && next > 1: // a requeue or a replacement: any id
				a := &model.Allocation{ID: 1 + rng.Uint64N(next-1), ArrayIndex: step}
				l.put(a)
				ref[a.ID] = a
			case r < 97 && next > 1: // a start or a cancel
				id := 1 + rng.Uint64N(next-1)
				if rng.IntN(2) == 0 { // often the oldest, as starts go
					for low < next && ref[low] == nil {
						low++
					}
					id = low
				}
				l.remove(id)
				delete(ref, id)
			default:
				v := l.Share()
				views = append(views, held{v, v.AppendTo(nil)})
			}
			if step%1000 == 0 || step == 19999 {
				if got, want := l.Share().AppendTo(nil), sorted(); !slices.Equal(got, want) || l.Len() != len(want) {
					t.Fatalf("seed %d step %d: list holds %d allocations, the map %d (len %d)", seed, step, len(got), len(want), l.Len())
				}
				for i, c := range l.chunks {
					if len(c.ids) == 0 || len(c.ids) > allocChunk || len(c.ids) != len(c.allocs) {
						t.Fatalf("seed %d step %d: chunk %d holds %d ids, %d allocations", seed, step, i, len(c.ids), len(c.allocs))
					}
				}
			}
		}
		for i, h := range views {
			if got := h.v.AppendTo(nil); !slices.Equal(got, h.want) || h.v.Len() != len(h.want) {
				t.Fatalf("seed %d: view %d changed after it was shared (%d allocations, was %d)", seed, i, len(got), len(h.want))
			}
		}
		if len(views) == 0 {
			t.Fatal("no view taken")
		}
	}
}

// BenchmarkShareAndRead100k is what a scheduling cycle pays for a
// vCluster's 100,000 pending allocations: Share under the read lock, then
// AppendTo (in id order) after it.
func BenchmarkShareAndRead100k(b *testing.B) {
	l := newAllocList()
	for id := uint64(1); id <= 100000; id++ {
		l.put(&model.Allocation{ID: id})
	}
	var buf []*model.Allocation
	b.ReportAllocs()
	for b.Loop() {
		v := l.Share()
		buf = v.AppendTo(buf[:0])
		l.remove(buf[0].ID) // a change after the share: one chunk copied
		l.put(buf[0])
	}
}

// mergeViews merges disjoint lists into one in id order, whatever their
// interleaving: runs of one list, single ids alternating, empty lists.
func TestMergeViews(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		lists := make([]*allocList, 1+rng.IntN(5))
		for i := range lists {
			lists[i] = newAllocList()
		}
		var want []*model.Allocation
		run := 1 + rng.IntN(1500)
		k := 0
		for id := uint64(1); id <= uint64(rng.IntN(3000)); id++ {
			if rng.IntN(run) == 0 {
				k = rng.IntN(len(lists))
			}
			a := &model.Allocation{ID: id}
			lists[k].put(a)
			want = append(want, a)
		}
		views := make([]AllocView, len(lists))
		for i, l := range lists {
			views[i] = l.Share()
		}
		if got := mergeViews(views); !slices.Equal(got, want) {
			t.Fatalf("round %d: merged %d allocations, want %d in id order", round, len(got), len(want))
		}
	}
}
