package server

import (
	"context"
	"fmt"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// DefaultInteractiveIdleTimeout is how long an interactive allocation may
// go without a step before the leader ends it, unless the site says.
const DefaultInteractiveIdleTimeout = 30 * time.Minute

// idleSince is when an interactive allocation last had a step running
// (its start when it never had one); zero while a step runs.
func idleSince(a *model.Allocation) time.Time {
	since := a.StartTime
	for _, st := range a.Steps {
		if !st.State.Ended() {
			return time.Time{}
		}
		if st.EndTime.After(since) {
			since = st.EndTime
		}
	}
	return since
}

// endIdleInteractive is the leader's loop that ends the interactive
// allocations nobody uses: RUNNING, no step running (a terminal, srun
// --pty or an attach, is a running step) and none ended for the site's
// InteractiveIdleTimeout. They end CANCELLED, reason IdleTimeout; the
// salloc waiting on one tells its user and ends its shell.
func (l *leaderState) endIdleInteractive(ctx context.Context) {
	limit := l.s.cfg.InteractiveIdleTimeout
	if limit <= 0 {
		return
	}
	tick := time.NewTicker(min(max(limit/4, 100*time.Millisecond), 15*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := l.s.cfg.Clock()
		var idle []uint64
		l.s.view(func(st *quorum.State) {
			for _, a := range st.Active() {
				if !a.Request.Interactive || a.State != model.StateRunning || a.CancelRequested {
					continue
				}
				if since := idleSince(a); !since.IsZero() && now.Sub(since) >= limit {
					idle = append(idle, a.ID)
				}
			}
		})
		if len(idle) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := l.s.propose(pctx, &quorum.Cancel{IDs: idle, Reason: model.ReasonIdleTimeout})
		cancel()
		if err != nil {
			l.s.log.Warn("end idle interactive allocations", "ids", idle, "err", err)
			continue
		}
		l.s.log.Info("ended idle interactive allocations", "ids", idle, "idle_timeout", limit)
	}
}

// interactiveVCluster sends an interactive request that names no vCluster
// to the site's interactive one (the first of that type, by name), with
// its short waits; with none, the default vCluster takes it.
func (s *Server) interactiveVCluster(r *model.Request) {
	if !r.Interactive || r.VCluster != "" {
		return
	}
	s.view(func(st *quorum.State) {
		for _, vc := range st.VClusters() {
			if vc.Type == model.TypeInteractive {
				r.VCluster = vc.Name
				return
			}
		}
	})
}

// explainInteractive adds to an interactive allocation's explanation when
// it should start (pending) or when the idle timeout would end it.
func (s *Server) explainInteractive(al *model.Allocation, out *latticev1.Explanation) {
	if !al.Request.Interactive {
		return
	}
	now := s.cfg.Clock()
	var note string
	switch {
	case al.State == model.StatePending && out.ExpectedStartUnixMs != 0:
		start := time.UnixMilli(out.ExpectedStartUnixMs)
		note = fmt.Sprintf("interactive request: expected to start at %s (in %s)", start.UTC().Format(time.RFC3339),
			max(start.Sub(now), 0).Round(time.Second))
	case al.State == model.StatePending:
		note = "interactive request: not planned yet (its vCluster's scheduler runs every few seconds)"
	case al.State.Active() && s.cfg.InteractiveIdleTimeout > 0:
		if since := idleSince(al); since.IsZero() {
			note = fmt.Sprintf("interactive: a step is running; ended after %s with none", s.cfg.InteractiveIdleTimeout)
		} else {
			note = fmt.Sprintf("interactive: no step since %s; ended at %s unless one starts", since.UTC().Format(time.RFC3339),
				since.Add(s.cfg.InteractiveIdleTimeout).UTC().Format(time.RFC3339))
		}
	default:
		return
	}
	if out.Message == "" {
		out.Message = note
	} else {
		out.Message = note + "; " + out.Message
	}
}
