package server

import (
	"context"
	"sync"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// liveness keeps node heartbeats in leader memory — they never touch the
// log — and commits only changes: Ready → Degraded after DegradedAfter of
// silence, → Down after DownAfter, and back up when heard again. After a
// leader change nothing is marked for LivenessGrace, so a failover never
// marks the fleet down at once.
type liveness struct {
	l    *leaderState
	mu   sync.Mutex
	seen map[string]time.Time
}

func newLiveness(l *leaderState) *liveness {
	return &liveness{l: l, seen: map[string]time.Time{}}
}

// heard records that nodes are alive now.
func (v *liveness) heard(nodes []string) {
	now := time.Now()
	v.mu.Lock()
	for _, n := range nodes {
		v.seen[n] = now
	}
	v.mu.Unlock()
}

func (v *liveness) lastSeen(node string) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen[node]
}

func (v *liveness) run(ctx context.Context) {
	period := min(time.Second, v.l.s.cfg.DegradedAfter/4)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			v.check(ctx)
		}
	}
}

func (v *liveness) check(ctx context.Context) {
	cfg := v.l.s.cfg
	now := time.Now()
	if now.Sub(v.l.since) < cfg.LivenessGrace {
		return
	}
	var degraded, down, up []string
	var nodes []*model.Node
	v.l.s.view(func(st *quorum.State) { nodes = st.NodesShared() })
	// Compared after the read lock: 10,000 lookups of heartbeats do not
	// hold Apply up.
	v.mu.Lock()
	for _, n := range nodes {
		last, ok := v.seen[n.Name]
		if !ok {
			last = v.l.since
		}
		silence := now.Sub(last)
		switch {
		case silence >= cfg.DownAfter:
			if n.Health != model.NodeDown {
				down = append(down, n.Name)
			}
		case silence >= cfg.DegradedAfter:
			if n.Health == model.NodeReady {
				degraded = append(degraded, n.Name)
			}
		default:
			if n.Health != model.NodeReady {
				up = append(up, n.Name)
			}
		}
	}
	v.mu.Unlock()
	for _, batch := range []struct {
		nodes  []string
		action quorum.NodeAction
		reason string
	}{{down, quorum.ActionDown, "no heartbeat"}, {degraded, quorum.ActionDegraded, "missed heartbeats"}, {up, quorum.ActionUp, ""}} {
		if len(batch.nodes) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := v.l.s.propose(pctx, &quorum.SetNodeState{Nodes: batch.nodes, Action: batch.action, Reason: batch.reason})
		cancel()
		if err != nil {
			v.l.s.log.Warn("commit node health", "action", batch.action, "nodes", len(batch.nodes), "err", err)
			continue
		}
		v.l.s.log.Info("node health changed", "action", batch.action, "nodes", len(batch.nodes))
	}
}
