package power

import (
	"fmt"

	"github.com/latticehpc/lattice/model"
)

// Unlimited is the headroom when no budget applies.
const Unlimited int64 = -1

// NodeWatts is a node's estimated draw: its busy watts while it runs an
// allocation, its idle watts otherwise.
func NodeWatts(n *model.Node) int64 { return int64(n.Watts()) }

// StartDelta is what starting work on idle node n adds to the draw of the
// whole system and of vCluster vc (the vCluster that starts the work): from
// what the node draws now (measured when a measurement is in force, else
// its idle figure) to its busy figure. A node vc borrows adds its busy
// watts to vc, whose draw did not count it before; the system sees only
// the step.
func StartDelta(n *model.Node, vc string) (system, vcluster int64) {
	step := int64(n.BusyWatts - n.Watts())
	if n.CurrentVCluster == vc {
		return step, step
	}
	return step, int64(n.BusyWatts)
}

// StartDeltaAll sums StartDelta over nodes.
func StartDeltaAll(nodes []*model.Node, vc string) (system, vcluster int64) {
	for _, n := range nodes {
		s, v := StartDelta(n, vc)
		system += s
		vcluster += v
	}
	return system, vcluster
}

// Exceeded says that a draw would go over a limit.
type Exceeded struct {
	Scope string // "system" or "vcluster NAME"
	Draw  int64  // estimated draw now
	Delta int64  // what the change adds
	Limit int64
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("%s: estimated draw %d W + %d W exceeds the limit %d W", e.Scope, e.Draw, e.Delta, e.Limit)
}

// Check reports whether draw+delta stays within limit (0 = no limit): nil
// when it does.
func Check(scope string, draw, delta, limit int64) *Exceeded {
	if limit > 0 && draw+delta > limit {
		return &Exceeded{Scope: scope, Draw: draw, Delta: delta, Limit: limit}
	}
	return nil
}

// Headroom is how much more may be drawn under limit (0 = no limit gives
// Unlimited); never negative otherwise.
func Headroom(limit, draw int64) int64 {
	if limit <= 0 {
		return Unlimited
	}
	return max(0, limit-draw)
}

// MinHeadroom combines two headrooms (Unlimited = none).
func MinHeadroom(a, b int64) int64 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// Account is the estimated draw of a set of nodes, system-wide and per
// current vCluster, computed from scratch (the quorum keeps the same
// figures as indexes; tests and the replay recompute them).
type Account struct {
	System    int64
	VClusters map[string]int64
}

// Tally computes the draw of nodes.
func Tally(nodes []*model.Node) Account {
	a := Account{VClusters: map[string]int64{}}
	for _, n := range nodes {
		w := NodeWatts(n)
		a.System += w
		a.VClusters[n.CurrentVCluster] += w
	}
	return a
}

// UsedFraction is draw/limit, 0 without a limit.
func UsedFraction(draw, limit int64) float64 {
	if limit <= 0 {
		return 0
	}
	return float64(draw) / float64(limit)
}
