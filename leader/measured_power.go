package leader

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/latticehpc/lattice/quorum"
)

// measuredPower keeps, in leader memory, the draw agents measured on their
// nodes (heartbeats' watts, one figure per node listed). The zero value is
// ready. The fresh figures are committed to the quorum (NodePower) by
// commitMeasuredPower, where they stand for the configured figures in the
// power check.
type measuredPower struct {
	mu    sync.Mutex
	nodes map[string]measurement
}

type measurement struct {
	watts int64
	at    time.Time
}

func (p *measuredPower) record(nodes []string, watts []int32, now time.Time) {
	if len(watts) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = map[string]measurement{}
	}
	for i, n := range nodes {
		if i < len(watts) && watts[i] > 0 {
			p.nodes[n] = measurement{watts: int64(watts[i]), at: now}
		}
	}
}

// total sums the measurements taken after since, and counts their nodes.
func (p *measuredPower) total(since time.Time) (watts int64, nodes int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, m := range p.nodes {
		if m.at.Before(since) {
			delete(p.nodes, n)
			continue
		}
		watts += m.watts
		nodes++
	}
	return watts, nodes
}

// fresh returns the measurements taken after since, by node.
func (p *measuredPower) fresh(since time.Time) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.nodes))
	for n, m := range p.nodes {
		if !m.at.Before(since) {
			out[n] = int(m.watts)
		}
	}
	return out
}

// measuredChanges is what to commit so that the quorum's measured figures
// are the fresh ones: a node with a fresh measurement that differs from the
// committed one by more than 5 % (or 5 W), or that was taken while it runs
// another allocation than the committed one, gets it; a node whose
// committed measurement has no fresh one any more is cleared.
func measuredChanges(st *quorum.State, fresh map[string]int) []quorum.NodeMeasurement {
	var out []quorum.NodeMeasurement
	for _, n := range st.Nodes() {
		w, ok := fresh[n.Name]
		switch {
		case ok && (n.MeasuredWatts == 0 || n.MeasuredAlloc != n.Allocation || differs(n.MeasuredWatts, w)):
			out = append(out, quorum.NodeMeasurement{Name: n.Name, Watts: w, Allocation: n.Allocation})
		case !ok && n.MeasuredWatts > 0:
			out = append(out, quorum.NodeMeasurement{Name: n.Name})
		}
	}
	slices.SortFunc(out, func(a, b quorum.NodeMeasurement) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

func differs(committed, now int) bool {
	d := committed - now
	if d < 0 {
		d = -d
	}
	return d > 5 && d*20 > committed
}

// commitMeasuredPower commits, every MeasuredPowerInterval, the measured
// draws fresher than MeasuredPowerMaxAge and clears the stale ones (a
// negative max age: never). A measurement is taken by the agent over one
// heartbeat interval; the node's allocation when the leader commits it is
// the one it stands for.
func (t *Term) commitMeasuredPower(ctx context.Context) {
	cfg := t.cfg
	if cfg.MeasuredPowerMaxAge < 0 {
		return
	}
	tick := time.NewTicker(cfg.MeasuredPowerInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fresh := t.power.fresh(time.Now().Add(-cfg.MeasuredPowerMaxAge))
		var changes []quorum.NodeMeasurement
		t.view(func(st *quorum.State) { changes = measuredChanges(st, fresh) })
		if len(changes) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := t.propose(pctx, &quorum.NodePower{Nodes: changes}); err != nil {
			t.log.Warn("commit measured power", "nodes", len(changes), "err", err)
		}
		cancel()
	}
}
