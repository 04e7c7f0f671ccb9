package leader

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// liveness keeps node heartbeats in leader memory — they never touch the
// log — and commits only changes: Ready → Degraded after DegradedAfter of
// silence, → Down after DownAfter (the node timeout), and back up when
// heard again. A node past the timeout is NotResponding instead of Down —
// its work is not failed — while
//
//   - more than MassSilenceFraction of the nodes (at least two) are silent
//     at once: that is the control plane's problem (a partition, a member
//     that froze, every agent reconnecting), not the nodes'. One log line
//     says so, and the lattice_liveness_mass_silence gauge;
//   - or it runs something and its agent may still run it: the agent stops
//     its jobs FenceAfter after a leader last heard it (agent/fence.go),
//     so its work fails (and a --requeue job runs again) only then, never
//     beside its old run.
//
// After a leader change nothing is marked for LivenessGrace, and a node
// not heard yet counts as heard when this member began to lead.
type liveness struct {
	t    *Term
	mu   sync.Mutex
	seen map[string]time.Time
	mass bool // failures held for mass silence (at the last check)
}

// LivenessMetrics are the liveness loop's series, registered by
// NewLivenessMetrics on the member's registry.
type LivenessMetrics struct {
	massSilence prometheus.Gauge
	massEvents  prometheus.Counter
	held        *prometheus.GaugeVec
}

func NewLivenessMetrics(reg *prometheus.Registry) *LivenessMetrics {
	m := &LivenessMetrics{
		massSilence: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lattice_liveness_mass_silence",
			Help: "1 while the leader holds node failures because more than --mass-silence-fraction of the nodes went silent at once."}),
		massEvents: prometheus.NewCounter(prometheus.CounterOpts{Name: "lattice_liveness_mass_silence_events_total",
			Help: "Times the leader began to hold node failures for a mass silence."}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lattice_liveness_held_nodes",
			Help: "Nodes past the node timeout whose failure the leader holds, by why (mass_silence, fencing)."}, []string{"why"}),
	}
	reg.MustRegister(m.massSilence, m.massEvents, m.held)
	return m
}

func newLiveness(t *Term) *liveness {
	return &liveness{t: t, seen: map[string]time.Time{}}
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
	period := min(time.Second, v.t.cfg.DegradedAfter/4)
	tick := time.NewTicker(period)
	defer tick.Stop()
	defer v.t.cfg.Metrics.Liveness.massSilence.Set(0)
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
	cfg := v.t.cfg
	now := time.Now()
	if now.Sub(v.t.since) < cfg.LivenessGrace {
		return
	}
	var nodes []*model.Node
	v.t.view(func(st *quorum.State) { nodes = st.NodesShared() })
	// Compared after the read lock: 10,000 lookups of heartbeats do not
	// hold Apply up.
	silences := make([]time.Duration, len(nodes))
	v.mu.Lock()
	for i, n := range nodes {
		last, ok := v.seen[n.Name]
		if !ok {
			last = v.t.since
		}
		silences[i] = now.Sub(last)
	}
	v.mu.Unlock()
	j := Judge(nodes, silences, Settings{DegradedAfter: cfg.DegradedAfter, NodeTimeout: cfg.NodeTimeout, MassSilenceFraction: cfg.MassSilenceFraction})
	lm := v.t.cfg.Metrics.Liveness
	if j.Mass != v.mass {
		v.mass = j.Mass
		if j.Mass {
			lm.massEvents.Inc()
			lm.massSilence.Set(1)
			v.t.log.Warn("mass silence: most nodes went silent at once; holding every node failure (they become NotResponding) until they are heard again",
				"silent", j.Silent, "nodes", j.Alive, "mass_silence_fraction", cfg.MassSilenceFraction)
		} else {
			lm.massSilence.Set(0)
			v.t.log.Info("mass silence over: node failures are no longer held", "silent", j.Silent, "nodes", j.Alive)
		}
	}
	lm.held.WithLabelValues("mass_silence").Set(float64(j.HeldMass))
	lm.held.WithLabelValues("fencing").Set(float64(j.HeldFence))
	down, degraded, up, held := j.Down, j.Degraded, j.Up, j.Held
	type batch struct {
		nodes  []string
		action quorum.NodeAction
		reason string
	}
	batches := []batch{{down, quorum.ActionDown, "no heartbeat"}, {degraded, quorum.ActionDegraded, "missed heartbeats"}, {up, quorum.ActionUp, ""}}
	for _, r := range slices.Sorted(maps.Keys(held)) {
		batches = append(batches, batch{held[r], quorum.ActionNotResponding, r})
	}
	for _, b := range batches {
		if len(b.nodes) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := v.t.propose(pctx, &quorum.SetNodeState{Nodes: b.nodes, Action: b.action, Reason: b.reason})
		cancel()
		if err != nil {
			v.t.log.Warn("commit node health", "action", b.action, "nodes", len(b.nodes), "err", err)
			continue
		}
		v.t.log.Info("node health changed", "action", b.action, "nodes", len(b.nodes), "reason", b.reason)
	}
}
