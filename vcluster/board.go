package vcluster

import (
	"maps"
	"sync"
	"time"

	"github.com/latticehpc/lattice/solver"
)

// Board is where the loops of one leader term share their plans'
// reservations, so that a vCluster does not lend a node its own plan is
// about to use: each loop publishes, after planning, the nodes its plan
// reserves and the earliest time each is reserved from; a borrower reads
// them in its next cycle (Snapshot.LendLimits) and borrows such a node only
// for work that ends by then. Safe for concurrent use; the zero value is
// ready to use.
type Board struct {
	mu    sync.RWMutex
	plans map[string]map[string]time.Time // by vCluster: node → earliest reserved start
}

// Publish replaces what vcluster's plan reserves: node name → earliest
// reserved start. The map is kept as it is (not copied): the caller must
// not change it afterwards. An empty or nil map withdraws the entry.
func (b *Board) Publish(vcluster string, reserved map[string]time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(reserved) == 0 {
		delete(b.plans, vcluster)
		return
	}
	if b.plans == nil {
		b.plans = make(map[string]map[string]time.Time)
	}
	b.plans[vcluster] = reserved
}

// Limits returns every published plan, by vCluster (Snapshot.LendLimits).
// The maps inside are shared and read-only.
func (b *Board) Limits() map[string]map[string]time.Time {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return maps.Clone(b.plans)
}

// Limit returns when vcluster's plan reserves node, if it does.
func (b *Board) Limit(vcluster, node string) (time.Time, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t, ok := b.plans[vcluster][node]
	return t, ok
}

// reservedStarts lists, for every node a plan reserves, the earliest start
// of a reservation on it.
func reservedStarts(p *solver.Plan) map[string]time.Time {
	if len(p.Reservations) == 0 {
		return nil
	}
	out := make(map[string]time.Time)
	for _, r := range p.Reservations {
		for _, n := range r.Nodes {
			if t, ok := out[n]; !ok || r.Start.Before(t) {
				out[n] = r.Start
			}
		}
	}
	return out
}
