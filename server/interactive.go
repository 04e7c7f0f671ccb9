package server

import (
	"fmt"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
)

// DefaultInteractiveIdleTimeout is how long an interactive allocation may
// go without a step before the leader ends it, unless the site says.
const DefaultInteractiveIdleTimeout = 30 * time.Minute

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
		if since := leader.IdleSince(al); since.IsZero() {
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
