package solver

import (
	"math/rand"
	"slices"
	"testing"
)

// TestTimelineAgainstModel drives a timeline with random moves — whole
// levels, parts of levels, runs in walk order and in random order, onto new
// and existing levels — and checks it against a plain slice of avail times.
func TestTimelineAgainstModel(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewSource(seed))
		n := 50 + r.Intn(200)
		avail := make([]int64, n)
		tl := &timeline{fp: -1, lv: newLevels(), pos: make([]int32, n)}
		var members []int32
		for i := range avail {
			avail[i] = int64(r.Intn(15))
			tl.pos[i] = -1
			if r.Intn(5) > 0 {
				members = append(members, int32(i))
			}
		}
		byAvail := slices.Clone(members)
		slices.SortFunc(byAvail, func(a, b int32) int {
			if avail[a] != avail[b] {
				return int(avail[a] - avail[b])
			}
			return int(a - b)
		})
		id, last := int32(-1), int64(-1)
		for _, x := range byAvail {
			if id < 0 || avail[x] != last {
				last = avail[x]
				id = tl.lv.appendLevel(last)
			}
			tl.pos[x] = int32(len(tl.lv.lists[id]))
			tl.lv.lists[id] = append(tl.lv.lists[id], x)
			tl.lv.t[id].cnt++
		}
		tl.lv.buildSorted(nil)
		check := func(step int) {
			t.Helper()
			var want []int64
			for _, x := range members {
				want = append(want, avail[x])
			}
			slices.Sort(want)
			if got := tl.lv.total(); got != len(want) {
				t.Fatalf("seed %d step %d: total %d, want %d", seed, step, got, len(want))
			}
			for k := range want {
				if got := tl.lv.kth(k); got != want[k] {
					t.Fatalf("seed %d step %d: kth(%d) = %d, want %d", seed, step, k, got, want[k])
				}
			}
			for _, x := range members {
				id := tl.lv.find(avail[x])
				if id < 0 || tl.lv.lists[id][tl.pos[x]] != x {
					t.Fatalf("seed %d step %d: node %d not at its place in level %d", seed, step, x, avail[x])
				}
				if p, ok := tl.lv.pred(avail[x]); ok && (p >= avail[x] || tl.lv.find(p) < 0) {
					t.Fatalf("seed %d step %d: pred(%d) = %d", seed, step, avail[x], p)
				}
			}
			levelsSeen := 0
			for k, ok := int64(1<<40), true; ok; k, ok = tl.lv.pred(k) {
				if k != 1<<40 {
					if id := tl.lv.find(k); tl.lv.t[id].cnt != int32(len(tl.lv.lists[id])) || tl.lv.t[id].cnt == 0 {
						t.Fatalf("seed %d step %d: level %d count %d, list %d", seed, step, k, tl.lv.t[id].cnt, len(tl.lv.lists[id]))
					}
					levelsSeen++
				}
			}
			distinct := slices.Compact(want)
			if levelsSeen != len(distinct) {
				t.Fatalf("seed %d step %d: %d levels, want %d", seed, step, levelsSeen, len(distinct))
			}
		}
		check(0)
		for step := 1; step <= 200; step++ {
			var xs []int32
			switch r.Intn(3) {
			case 0: // whole levels and a partial one, in walk order (as reserve does)
				k := r.Intn(tl.lv.total())
				key := tl.lv.kth(k)
				for kk, ok := key, true; ok && len(xs) < k+1; kk, ok = tl.lv.pred(kk) {
					list := tl.lv.lists[tl.lv.find(kk)]
					take := min(len(list), k+1-len(xs))
					xs = append(xs, list[len(list)-take:]...)
				}
			case 1: // random nodes, members or not, in random order
				for _, i := range r.Perm(n)[:1+r.Intn(n/3)] {
					xs = append(xs, int32(i))
				}
			default: // one whole level
				list := tl.lv.lists[tl.lv.find(tl.lv.kth(r.Intn(tl.lv.total())))]
				xs = slices.Clone(list)
			}
			xs = slices.Clone(xs)
			newKey := int64(r.Intn(25))
			tl.move(xs, avail, newKey)
			for _, x := range xs {
				if tl.pos[x] >= 0 {
					avail[x] = newKey
				}
			}
			check(step)
		}
	}
}
