package topology

import (
	"slices"

	"github.com/latticehpc/lattice/model"
)

// Group is the dragonfly group of a node.
func Group(n *model.Node) int { return n.Group }

// Span is the number of distinct groups in groups (one entry per node).
func Span(groups []int) int {
	if len(groups) == 0 {
		return 0
	}
	s := slices.Clone(groups)
	slices.Sort(s)
	return len(slices.Compact(s))
}

// SpanNodes is the number of distinct dragonfly groups the nodes sit in.
func SpanNodes(nodes []*model.Node) int {
	gs := make([]int, len(nodes))
	for i, n := range nodes {
		gs[i] = n.Group
	}
	return Span(gs)
}

// CountByGroup counts, per group number, the nodes that keep accepts (all of
// them when keep is nil). The result is indexed by group number and is as
// long as the largest group number plus one.
func CountByGroup(nodes []*model.Node, keep func(*model.Node) bool) []int {
	var counts []int
	for _, n := range nodes {
		if n.Group < 0 || (keep != nil && !keep(n)) {
			continue
		}
		for len(counts) <= n.Group {
			counts = append(counts, 0)
		}
		counts[n.Group]++
	}
	return counts
}

// Capacity answers "how few groups can hold n nodes" for fixed per-group
// counts in O(log groups).
type Capacity struct {
	prefix []int // prefix[k-1] = nodes in the k largest groups
}

// NewCapacity builds a Capacity from per-group node counts (index = group).
func NewCapacity(counts []int) Capacity {
	s := make([]int, 0, len(counts))
	for _, c := range counts {
		if c > 0 {
			s = append(s, c)
		}
	}
	slices.SortFunc(s, func(a, b int) int { return b - a })
	for i := 1; i < len(s); i++ {
		s[i] += s[i-1]
	}
	return Capacity{prefix: s}
}

// Total is the number of nodes over all groups.
func (c Capacity) Total() int {
	if len(c.prefix) == 0 {
		return 0
	}
	return c.prefix[len(c.prefix)-1]
}

// GroupsNeeded is the fewest groups whose nodes add up to at least n:
// 0 when n <= 0, -1 when all groups together hold fewer than n.
func (c Capacity) GroupsNeeded(n int) int {
	if n <= 0 {
		return 0
	}
	k, _ := slices.BinarySearch(c.prefix, n)
	if k == len(c.prefix) {
		return -1
	}
	return k + 1
}

// GroupsNeeded is the fewest groups whose counts add up to at least n
// (counts indexed by group): 0 when n <= 0, -1 when impossible.
func GroupsNeeded(counts []int, n int) int { return NewCapacity(counts).GroupsNeeded(n) }

// Take is how many nodes to take from one group.
type Take struct {
	Group int
	Nodes int
}

// Picker chooses per-group node counts. Its scratch space is reused between
// calls, so one Picker serves a whole scheduling cycle without allocating;
// it is not safe for concurrent use. The zero value is ready to use.
type Picker struct {
	order []int
}

// Pick appends to dst how many nodes to take from each group so that n nodes
// span the fewest groups, with best fit: if one group can hold them, it is
// the group with the fewest free nodes that still does; otherwise the
// largest groups are taken whole, largest first, and the remainder comes
// from the group with the fewest free nodes that holds it. Ties go to the
// lower group index. free is indexed by group; it returns dst unchanged
// (and false) when all groups together hold fewer than n.
func (p *Picker) Pick(dst []Take, free []int, n int) ([]Take, bool) {
	if n <= 0 {
		return dst, true
	}
	// Fast path: one group holds the job (the common case, and always for
	// one-node jobs): a single linear scan, no sorting.
	best, total := -1, 0
	for g, f := range free {
		if f <= 0 {
			continue
		}
		total += f
		if f >= n && (best < 0 || f < free[best]) {
			best = g
		}
	}
	if best >= 0 {
		return append(dst, Take{Group: best, Nodes: n}), true
	}
	if total < n {
		return dst, false
	}
	// Largest groups first (ties: lower group), whole, until the remainder
	// fits in one of the groups left; that one is chosen by best fit.
	p.order = p.order[:0]
	for g, f := range free {
		if f > 0 {
			p.order = append(p.order, g)
		}
	}
	slices.SortFunc(p.order, func(a, b int) int {
		if free[a] != free[b] {
			return free[b] - free[a]
		}
		return a - b
	})
	remaining := n
	for i := 0; remaining > 0; i++ {
		g := p.order[i]
		if free[g] < remaining {
			dst = append(dst, Take{Group: g, Nodes: free[g]})
			remaining -= free[g]
			continue
		}
		// The groups from i on are sorted by free count, descending: the
		// best fit is the last one that still holds the remainder, and
		// among equal counts the lowest group, i.e. the first of its run.
		rest := p.order[i:]
		j := len(rest) - 1
		for free[rest[j]] < remaining {
			j--
		}
		for j > 0 && free[rest[j-1]] == free[rest[j]] {
			j--
		}
		dst = append(dst, Take{Group: rest[j], Nodes: remaining})
		remaining = 0
	}
	return dst, true
}

// Pick is Picker.Pick with a fresh Picker: how many nodes to take from each
// group (free indexed by group) so that n nodes span the fewest groups with
// best fit; nil when the groups hold fewer than n nodes.
func Pick(free []int, n int) []Take {
	var p Picker
	t, ok := p.Pick(nil, free, n)
	if !ok {
		return nil
	}
	return t
}
