package topology

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/latticehpc/lattice/model"
)

func TestSpan(t *testing.T) {
	tests := []struct {
		name   string
		groups []int
		want   int
	}{
		{"empty", nil, 0},
		{"one", []int{3}, 1},
		{"same group", []int{2, 2, 2}, 1},
		{"three groups unsorted", []int{5, 1, 5, 0, 1}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.groups)
			if got := Span(tt.groups); got != tt.want {
				t.Errorf("Span(%v) = %d, want %d", tt.groups, got, tt.want)
			}
			if !slices.Equal(in, tt.groups) {
				t.Errorf("Span changed its input: %v", tt.groups)
			}
		})
	}
}

func TestSpanNodesAndCountByGroup(t *testing.T) {
	nodes := []*model.Node{
		{Name: "a", Group: 0, State: model.NodeReady},
		{Name: "b", Group: 2, State: model.NodeDrained},
		{Name: "c", Group: 2, State: model.NodeReady},
		{Name: "d", Group: 4, State: model.NodeReady, Allocation: 7},
	}
	if got := SpanNodes(nodes); got != 3 {
		t.Errorf("SpanNodes = %d, want 3", got)
	}
	if got := Group(nodes[1]); got != 2 {
		t.Errorf("Group = %d, want 2", got)
	}
	if got, want := CountByGroup(nodes, nil), []int{1, 0, 2, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("CountByGroup(all) = %v, want %v", got, want)
	}
	free := CountByGroup(nodes, (*model.Node).Schedulable)
	if want := []int{1, 0, 1}; !slices.Equal(free, want) {
		t.Errorf("CountByGroup(schedulable) = %v, want %v", free, want)
	}
}

func TestGroupsNeeded(t *testing.T) {
	counts := []int{10, 0, 4, 25, 7}
	tests := []struct {
		n, want int
	}{
		{0, 0}, {-3, 0}, {1, 1}, {25, 1}, {26, 2}, {35, 2}, {36, 3}, {42, 3}, {46, 4}, {47, -1},
	}
	c := NewCapacity(counts)
	if c.Total() != 46 {
		t.Fatalf("Total = %d, want 46", c.Total())
	}
	for _, tt := range tests {
		if got := c.GroupsNeeded(tt.n); got != tt.want {
			t.Errorf("GroupsNeeded(%d) = %d, want %d", tt.n, got, tt.want)
		}
		if got := GroupsNeeded(counts, tt.n); got != tt.want {
			t.Errorf("func GroupsNeeded(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
	if got := (Capacity{}).GroupsNeeded(1); got != -1 {
		t.Errorf("empty capacity: GroupsNeeded(1) = %d, want -1", got)
	}
}

func TestPick(t *testing.T) {
	tests := []struct {
		name string
		free []int
		n    int
		want []Take
	}{
		{"best fit single group", []int{10, 4, 6, 4}, 4, []Take{{1, 4}}},
		{"best fit keeps big group whole", []int{64, 9, 12}, 8, []Take{{1, 8}}},
		{"exact fit", []int{5, 7, 3}, 7, []Take{{1, 7}}},
		{"two groups largest first then best fit", []int{10, 3, 8, 5, 20}, 24, []Take{{4, 20}, {3, 4}}},
		{"three groups", []int{6, 6, 6, 1}, 17, []Take{{0, 6}, {1, 6}, {2, 5}}},
		{"all groups", []int{2, 3, 4}, 9, []Take{{2, 4}, {1, 3}, {0, 2}}},
		{"impossible", []int{2, 3}, 6, nil},
		{"zero", []int{2, 3}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Pick(tt.free, tt.n)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Pick(%v, %d) = %v, want %v", tt.free, tt.n, got, tt.want)
			}
		})
	}
}

// TestPickProperties checks, on random inputs, that Pick takes exactly n
// nodes, never more than a group has, each group at most once, and in the
// fewest groups possible.
func TestPickProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var p Picker
	for iter := 0; iter < 2000; iter++ {
		free := make([]int, 1+rng.Intn(12))
		for i := range free {
			if rng.Intn(4) > 0 {
				free[i] = rng.Intn(30)
			}
		}
		n := 1 + rng.Intn(80)
		takes, ok := p.Pick(nil, free, n)
		need := GroupsNeeded(free, n)
		if !ok {
			if need != -1 {
				t.Fatalf("Pick(%v,%d) failed but %d groups suffice", free, n, need)
			}
			continue
		}
		sum := 0
		seen := map[int]bool{}
		for _, tk := range takes {
			if seen[tk.Group] || tk.Nodes <= 0 || tk.Nodes > free[tk.Group] {
				t.Fatalf("Pick(%v,%d) = %v: bad take %v", free, n, takes, tk)
			}
			seen[tk.Group] = true
			sum += tk.Nodes
		}
		if sum != n || len(takes) != need {
			t.Fatalf("Pick(%v,%d) = %v: %d nodes in %d groups, want %d in %d", free, n, takes, sum, len(takes), n, need)
		}
	}
}
