package leader

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// walltimeBackstop is the leader's guard against allocations that stay
// RUNNING for ever because their end was never reported (a lost report, a
// stuck or vanished agent). An allocation past walltime + kill grace +
// WalltimeBackstop is stopped through its agent (a cancel with reason
// WalltimeExceeded, which the agent answers with the run's end); if its
// agent is gone, or the run is still RUNNING another KillGrace +
// WalltimeBackstop later, the leader ends it itself: FAILED, reason
// NodeFailure when no agent holds its first node, WalltimeExceeded
// otherwise. Its nodes are then free.
func (t *Term) walltimeBackstop(ctx context.Context) {
	every := min(max(t.cfg.WalltimeBackstop/4, 100*time.Millisecond), 10*time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	type stopSent struct {
		run int
		at  time.Time
	}
	sent := map[uint64]stopSent{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := t.cfg.Clock()
		limit := t.cfg.KillGrace + t.cfg.WalltimeBackstop
		grace := int64(t.cfg.KillGrace / time.Second)
		var overdue []*model.Allocation
		t.view(func(st *quorum.State) {
			for _, a := range st.Active() {
				if a.State != model.StateRunning || a.Walltime <= 0 || a.StartTime.IsZero() || len(a.Nodes) == 0 {
					continue
				}
				if now.After(a.StartTime.Add(a.Walltime + limit + SuspendedFor(a, now))) {
					overdue = append(overdue, a)
				}
			}
		})
		live := make(map[uint64]bool, len(overdue))
		cmd := &quorum.UpdateAllocs{}
		for _, a := range overdue {
			live[a.ID] = true
			c := t.disp.connFor(a.Nodes[0])
			s, was := sent[a.ID]
			if was && s.run != a.RequeueCount {
				was = false
			}
			switch {
			case c != nil && !was:
				if c.send(cancelMsg(a.ID, model.ReasonWalltimeExceeded, grace)) {
					sent[a.ID] = stopSent{run: a.RequeueCount, at: now}
					t.log.Warn("walltime backstop: stopping an allocation past its walltime with no report", "alloc", a.ID,
						"walltime", a.Walltime, "started", a.StartTime)
				}
			case c == nil || now.Sub(s.at) > limit:
				reason := model.ReasonWalltimeExceeded
				if c == nil {
					reason = model.ReasonNodeFailure
				}
				cmd.Updates = append(cmd.Updates, quorum.AllocUpdate{AllocID: a.ID, State: model.StateFailed, Reason: reason, Run: a.RequeueCount + 1})
				t.log.Warn("walltime backstop: ending an allocation its agent did not end", "alloc", a.ID, "reason", reason)
			}
		}
		for id := range sent {
			if !live[id] {
				delete(sent, id)
			}
		}
		if len(cmd.Updates) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := t.propose(pctx, cmd); err != nil {
			t.log.Warn("walltime backstop: end allocations", "count", len(cmd.Updates), "err", err)
		}
		cancel()
	}
}

// SuspendedFor is how long a's run has been suspended (latticectl
// suspend) so far: its walltime does not count that time.
func SuspendedFor(a *model.Allocation, now time.Time) time.Duration {
	d := a.SuspendedFor
	if !a.SuspendedAt.IsZero() && now.After(a.SuspendedAt) {
		d += now.Sub(a.SuspendedAt)
	}
	return d
}
