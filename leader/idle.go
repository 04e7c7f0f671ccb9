package leader

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// IdleSince is when an interactive allocation last had a step running
// (its start when it never had one); zero while a step runs.
func IdleSince(a *model.Allocation) time.Time {
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
func (t *Term) endIdleInteractive(ctx context.Context) {
	limit := t.cfg.InteractiveIdleTimeout
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
		now := t.cfg.Clock()
		var idle []uint64
		t.view(func(st *quorum.State) {
			for _, a := range st.Active() {
				if !a.Request.Interactive || a.State != model.StateRunning || a.CancelRequested {
					continue
				}
				if since := IdleSince(a); !since.IsZero() && now.Sub(since) >= limit {
					idle = append(idle, a.ID)
				}
			}
		})
		if len(idle) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := t.propose(pctx, &quorum.Cancel{IDs: idle, Reason: model.ReasonIdleTimeout})
		cancel()
		if err != nil {
			t.log.Warn("end idle interactive allocations", "ids", idle, "err", err)
			continue
		}
		t.log.Info("ended idle interactive allocations", "ids", idle, "idle_timeout", limit)
	}
}
