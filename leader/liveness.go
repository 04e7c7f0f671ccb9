package leader

import (
	"fmt"
	"time"

	"github.com/latticehpc/lattice/model"
)

// DefaultNodeTimeout is how long a node may be silent before the leader
// fails it, as Slurm's SlurmdTimeout.
const DefaultNodeTimeout = 300 * time.Second

// DefaultMassSilenceFraction: when more than this share of the nodes is
// silent at once, every node failure is held (mass silence).
const DefaultMassSilenceFraction = 0.5

// FenceMargin is added to an agent's fencing time before its node's work
// is failed: clock rates, and a deposed leader that still acknowledged a
// heartbeat for a moment.
const FenceMargin = 5 * time.Second

// Settings are the site's liveness settings.
type Settings struct {
	DegradedAfter time.Duration
	NodeTimeout   time.Duration
	// MassSilenceFraction: more than this share of the nodes not failed
	// already (and at least two) silent at once is a mass silence; 1 =
	// never.
	MassSilenceFraction float64
}

// Verdict is what Judge decided: the nodes whose health changes.
type Verdict struct {
	Down, Degraded, Up []string
	// Held are the nodes to mark NotResponding, by reason (nodes already
	// NotResponding for that reason are left out).
	Held map[string][]string
	// Mass: failures are held for a mass silence; Silent of Alive nodes
	// (not Down) are silent past DegradedAfter.
	Mass          bool
	Silent, Alive int
	// HeldMass and HeldFence count every node past the timeout whose
	// failure is held, by why.
	HeldMass, HeldFence int
}

// Judge applies the liveness rule to the nodes, silence[i] being how long
// nodes[i] has not been heard:
//
//   - silent for DegradedAfter: a Ready node becomes Degraded;
//   - silent for NodeTimeout: the node is failed (Down; its work fails or
//     is requeued) — unless it is a mass silence, or the node runs
//     something its agent may still run (silence < FenceAfter +
//     FenceMargin): then it is NotResponding, with a reason, and nothing
//     fails;
//   - heard again: back up.
func Judge(nodes []*model.Node, silence []time.Duration, s Settings) Verdict {
	var v Verdict
	for i, n := range nodes {
		if n.Health == model.NodeDown {
			continue
		}
		v.Alive++
		if silence[i] >= s.DegradedAfter {
			v.Silent++
		}
	}
	v.Mass = v.Silent >= 2 && s.MassSilenceFraction < 1 && float64(v.Silent) > s.MassSilenceFraction*float64(v.Alive)
	massReason := fmt.Sprintf("not responding: %d of %d nodes went silent at once; the leader holds their failure", v.Silent, v.Alive)
	for i, n := range nodes {
		switch {
		case silence[i] >= s.NodeTimeout:
			if n.Health == model.NodeDown {
				continue
			}
			reason := ""
			switch {
			case v.Mass:
				reason = massReason
				v.HeldMass++
				if n.Health == model.NodeNotResponding && n.StateReason != "" {
					reason = n.StateReason // held already: no command every pass
				}
			case n.Allocation != 0 && n.FenceAfter > 0 && silence[i] < n.FenceAfter+FenceMargin:
				reason = FencingReason(n)
				v.HeldFence++
			}
			switch {
			case reason == "":
				v.Down = append(v.Down, n.Name)
			case n.Health != model.NodeNotResponding || n.StateReason != reason:
				if v.Held == nil {
					v.Held = map[string][]string{}
				}
				v.Held[reason] = append(v.Held[reason], n.Name)
			}
		case silence[i] >= s.DegradedAfter:
			if n.Health == model.NodeReady {
				v.Degraded = append(v.Degraded, n.Name)
			}
		default:
			if n.Health != model.NodeReady {
				v.Up = append(v.Up, n.Name)
			}
		}
	}
	return v
}

// FencingReason is a NotResponding node's reason while its work waits for
// its agent's fencing deadline.
func FencingReason(n *model.Node) string {
	return fmt.Sprintf("no heartbeat past the node timeout; allocation %d fails once its agent has certainly stopped it (%s after it was last heard)",
		n.Allocation, (n.FenceAfter + FenceMargin).Round(time.Second))
}
