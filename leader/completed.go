package leader

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Completed work for the scheduler loops' runtime predictor
// (vcluster.CompletedReader): the most recently ended COMPLETED
// allocations of a vCluster, with their start and end times. Prediction is
// derived state: it is learnt on the leader from what the quorum
// committed, never committed itself.

const (
	// completedWindow is how many recent completions per vCluster the
	// predictor learns from (it keeps two runs per user and name).
	completedWindow = 5000
	// completedRefresh is how often the window is rebuilt from state: a
	// scan of every allocation, so not every cycle.
	completedRefresh = 30 * time.Second
)

// Completed is the cache of recent completions by vCluster; the member
// keeps one across terms (NewCompleted) and hands it to each term.
type Completed struct {
	view func(func(*quorum.State))
	mu   sync.Mutex
	at   time.Time
	byVC map[string][]*model.Allocation
}

// NewCompleted reads completions through view.
func NewCompleted(view func(func(*quorum.State))) *Completed { return &Completed{view: view} }

// Completed implements vcluster.CompletedReader.
func (c *Completed) Completed(vc string) []*model.Allocation {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); c.byVC == nil || now.Sub(c.at) >= completedRefresh {
		c.byVC = c.recent()
		c.at = now
	}
	return c.byVC[vc]
}

// recent scans the ended allocations of the committed state for the last completedWindow
// completions of each vCluster, oldest first.
func (c *Completed) recent() map[string][]*model.Allocation {
	out := map[string][]*model.Allocation{}
	var ended quorum.AllocView
	c.view(func(st *quorum.State) { ended = st.EndedShared() })
	for a := range ended.All { // after the lock
		if a.State == model.StateCompleted && !a.StartTime.IsZero() && !a.EndTime.Before(a.StartTime) {
			out[a.VCluster] = append(out[a.VCluster], a)
		}
	}
	for vc, list := range out {
		slices.SortFunc(list, func(a, b *model.Allocation) int {
			return cmp.Or(a.EndTime.Compare(b.EndTime), cmp.Compare(a.ID, b.ID))
		})
		if len(list) > completedWindow {
			list = list[len(list)-completedWindow:]
		}
		out[vc] = list
	}
	return out
}
