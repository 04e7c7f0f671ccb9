package solver

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/latticehpc/lattice/topology"
)

// TestCapacityMatchesTopology: the solver's reusable capacity answers like
// topology.Capacity, also when one value is set again and again.
func TestCapacityMatchesTopology(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var c capacity
	for k := 0; k < 500; k++ {
		counts := make([]int, r.Intn(40))
		for i := range counts {
			counts[i] = r.Intn(40) - 5
		}
		c.set(counts)
		want := topology.NewCapacity(counts)
		for n := -1; n <= want.Total()+2; n++ {
			if got, w := c.GroupsNeeded(n), want.GroupsNeeded(n); got != w {
				t.Fatalf("counts %v, n %d: %d groups, want %d", counts, n, got, w)
			}
		}
	}
}

// TestRemoveEach: removing several reservation starts in one pass leaves
// what removing them one by one leaves.
func TestRemoveEach(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for k := 0; k < 2000; k++ {
		h := make([]int64, r.Intn(30))
		for i := range h {
			h[i] = int64(r.Intn(6))
		}
		slices.Sort(h)
		rm := make([]int64, 1+r.Intn(8))
		for i := range rm {
			rm[i] = int64(r.Intn(8))
		}
		want := slices.Clone(h)
		for _, v := range rm {
			if i := startsFrom(want, v); i < len(want) && want[i] == v {
				want = append(want[:i], want[i+1:]...)
			}
		}
		if got := removeEach(slices.Clone(h), slices.Clone(rm)); !slices.Equal(got, want) {
			t.Fatalf("removeEach(%v, %v) = %v, want %v", h, rm, got, want)
		}
	}
}
