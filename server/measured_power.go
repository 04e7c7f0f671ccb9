package server

import (
	"sync"
	"time"
)

// measuredPower keeps, in leader memory, the draw agents measured on their
// nodes (heartbeats' watts, one figure per node listed). The zero value is
// ready.
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
