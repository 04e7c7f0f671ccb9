package solver

import (
	"slices"
	"strings"
)

// A class is the set of nodes that pass one job shape's hard constraints
// (GPU type, GPUs per node, features). Jobs with the same constraints share
// a class, and with it their counts, free pools and release timelines, so
// the work per job does not grow with the node count. Most HPC queues have a
// handful of classes; the unconstrained class is the common one.
type class struct {
	gpuType     string
	gpus        int
	constraints []string
	// only and not are a job's node list and exclusions (sbatch -w, -x):
	// sorted node names.
	only, not []string
	// resv is 1 + the index of the node reservation its jobs run in (-1:
	// one not in the input), 0 = none (nodereserve.go).
	resv int32

	elig    []bool // by node: passes the constraints
	allElig bool   // every node passes

	// At cycle start, for scoring and explanations.
	outConstraint int   // nodes that fail the constraints
	outState      int   // eligible but not Ready
	outOwnership  int   // eligible, Ready, another vCluster's and not lendable now
	outResv       int   // passing, but in a node reservation active now that is not resv
	resvBlock     int32 // 1 + the index of the first such reservation
	eligAll       []int // by conformance group: eligible nodes in any state
	eligReady     []int // by conformance group: eligible Ready own nodes and borrowable ones
	initFree      []int // by conformance group: eligible nodes free at cycle start
	initBorrow    int   // eligible borrowable nodes at cycle start
	ownReady      int   // eligible own Ready nodes, free or busy
	largestConf   int   // largest conformance group among eligReady (f9)
	freeCap       capacity
	usableCap     capacity // free or busy-but-Ready nodes per group (f4 fallback)
	multiFp       bool     // eligible nodes carry more than one fingerprint
	// eligAll, eligReady and initFree summed (or, in a sensitive vCluster,
	// their largest conformance group): what the reasons compare NodesMin to.
	staticAll, staticReady, staticFree int

	// Now, kept in step with every decision of the cycle.
	own, borrow []pool  // by cell (dragonfly group × conformance group)
	ownFree     int     // own free nodes with no reservation
	borrowFree  int     // borrowable free nodes with no lending limit, not taken
	holes       []int64 // sorted: reservation starts of own free reserved nodes
	borrowLim   []int64 // sorted: lending limits of borrowable nodes not taken
	busyG       []int   // binpack: by group, own Ready nodes busy (or taken)

	// Release timelines, created on first use.
	tlAny *timeline
	tlFp  []*timeline // by conformance group (sensitive vClusters)
}

// pool holds one cell's free nodes of one class.
type pool struct {
	free []int32 // node order; entries taken or reserved since are skipped
	n    int     // live entries in free
	// holes: own pools: free nodes with a later reservation; borrow pools:
	// nodes lent only until a limit; by (res, node).
	holes []hole
}

// hole is a node that is free now but reserved from res on: a job that
// starts now may use it only if it ends by res.
type hole struct {
	res  int64
	node int32
}

func cmpHole(a, b hole) int {
	switch {
	case a.res != b.res:
		if a.res < b.res {
			return -1
		}
		return 1
	default:
		return int(a.node - b.node)
	}
}

// holesFrom is the index of the first hole whose reservation starts at or
// after e (the holes a job ending at e may use start there).
func holesFrom(h []hole, e int64) int {
	i, _ := slices.BinarySearchFunc(h, e, func(a hole, e int64) int {
		if a.res < e {
			return -1
		}
		return 1
	})
	return i
}

// startsFrom is the index of the first value >= e in a sorted slice.
func startsFrom(h []int64, e int64) int {
	i, _ := slices.BinarySearchFunc(h, e, func(a, e int64) int {
		if a < e {
			return -1
		}
		return 1
	})
	return i
}

// passes reports whether node x meets the class's hard constraints.
func (c *class) passes(n *Node) bool {
	if c.gpuType != "" && !strings.EqualFold(n.GPUType, c.gpuType) {
		return false
	}
	if n.GPUs < c.gpus {
		return false
	}
	for _, f := range c.constraints {
		if !slices.Contains(n.Features, f) {
			return false
		}
	}
	if len(c.only) > 0 {
		if _, ok := slices.BinarySearch(c.only, n.Name); !ok {
			return false
		}
	}
	if len(c.not) > 0 {
		if _, ok := slices.BinarySearch(c.not, n.Name); ok {
			return false
		}
	}
	return true
}

// usableOwn is the number of own nodes a job ending at e could start on now.
func (c *class) usableOwn(e int64) int {
	return c.ownFree + len(c.holes) - startsFrom(c.holes, e)
}

// cellOwn is usableOwn for one cell.
func (c *class) cellOwn(ci int, e int64) int {
	p := &c.own[ci]
	return p.n + len(p.holes) - holesFrom(p.holes, e)
}

// usableBorrow is the number of borrowable nodes a job ending at e could
// start on now: those without a lending limit, and those lent until e or later.
func (c *class) usableBorrow(e int64) int {
	if len(c.borrowLim) == 0 {
		return c.borrowFree
	}
	return c.borrowFree + len(c.borrowLim) - startsFrom(c.borrowLim, e)
}

// cellBorrow is usableBorrow for one cell.
func (c *class) cellBorrow(ci int, e int64) int {
	p := &c.borrow[ci]
	if len(p.holes) == 0 {
		return p.n
	}
	return p.n + len(p.holes) - holesFrom(p.holes, e)
}

// capacity is topology.Capacity over a buffer kept from cycle to cycle:
// how few groups can hold n nodes, for fixed per-group counts.
type capacity struct {
	prefix []int // prefix[k-1] = nodes in the k largest groups
}

// set makes c the capacity of per-group node counts (index = group).
func (c *capacity) set(counts []int) {
	p := c.prefix[:0]
	for _, n := range counts {
		if n > 0 {
			p = append(p, n)
		}
	}
	slices.SortFunc(p, func(a, b int) int { return b - a })
	for i := 1; i < len(p); i++ {
		p[i] += p[i-1]
	}
	c.prefix = p
}

// GroupsNeeded is the fewest groups whose nodes add up to at least n: 0 when
// n <= 0, -1 when all groups together hold fewer than n (as
// topology.Capacity.GroupsNeeded).
func (c *capacity) GroupsNeeded(n int) int {
	if n <= 0 {
		return 0
	}
	k, _ := slices.BinarySearch(c.prefix, n)
	if k == len(c.prefix) {
		return -1
	}
	return k + 1
}

// largestFp is the largest conformance group among counts.
func largestFp(counts []int) int {
	m := 0
	for _, v := range counts {
		m = max(m, v)
	}
	return m
}

// compact drops dead entries once they outnumber the live ones.
func (p *pool) compact(live func(int32) bool) {
	if len(p.free) <= 2*p.n+16 {
		return
	}
	out := p.free[:0]
	for _, x := range p.free {
		if live(x) {
			out = append(out, x)
		}
	}
	p.free = out
}
