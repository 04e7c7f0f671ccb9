package solver

import (
	"math/rand"
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
