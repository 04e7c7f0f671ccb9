package quorum

import (
	"time"

	"github.com/latticehpc/lattice/model"
)

// requeuesOnLoss reports whether a node failure sends a back to the queue
// (submitted with --requeue, running, not being cancelled) rather than
// failing it.
func requeuesOnLoss(a *model.Allocation) bool {
	return a.Requeue && !a.CancelRequested && (a.State == model.StateRunning || a.State == model.StateCheckpointing)
}

// requeueLost puts c (a copy being changed) back in the queue after a node
// failure: its run ends SUSPENDED (NodeFailure) — usage charged, nodes
// freed — and it goes PENDING with its requeue count + 1, keeping its
// submit and eligible times, in the same command.
func (s *State) requeueLost(c *model.Allocation, t time.Time) {
	transition(c, model.StateSuspended, model.ReasonNodeFailure, t)
	s.checkpointEnded(c, model.ReasonNodeFailure, t)
	if !c.StartTime.IsZero() && len(c.Nodes) > 0 {
		s.chargeUsage(c.Tenant, float64(len(c.Nodes))*t.Sub(c.StartTime).Seconds(), t)
	}
	s.releaseNodes(c, t)
	c.Nodes = nil
	c.StartTime = time.Time{}
	transition(c, model.StatePending, model.ReasonNodeFailure, t)
	c.RequeueCount++
}
