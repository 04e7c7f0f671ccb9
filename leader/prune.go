package leader

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/quorum"
)

// prune moves ended allocations older than the retention period into the
// replicated history of ended jobs, and drops history older than the
// history retention (quorum.ArchiveEnded; history.go).
func (t *Term) prune(ctx context.Context) {
	tick := time.NewTicker(t.cfg.PruneInterval)
	defer tick.Stop()
	for {
		t.archiveEnded(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// archiveEnded proposes ArchiveEnded commands until nothing is past
// retention (at most quorum.MaxArchivePerCommand ids each).
func (t *Term) archiveEnded(ctx context.Context) {
	for ctx.Err() == nil {
		now := t.cfg.Clock()
		before, dropBefore := now.Add(-t.cfg.Retention), now.Add(-t.cfg.HistoryRetention)
		var ended quorum.AllocView
		var drop bool
		t.view(func(st *quorum.State) {
			ended = st.EndedShared()
			oldest := st.HistoryOldestEnd()
			drop = !oldest.IsZero() && oldest.Before(dropBefore)
		})
		cmd := &quorum.ArchiveEnded{}
		for a := range ended.All { // after the lock
			if !a.EndTime.IsZero() && a.EndTime.Before(before) {
				cmd.IDs = append(cmd.IDs, a.ID)
				if len(cmd.IDs) == quorum.MaxArchivePerCommand {
					break
				}
			}
		}
		if drop {
			cmd.DropBefore = dropBefore
		}
		if len(cmd.IDs) == 0 && !drop {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := t.propose(pctx, cmd)
		cancel()
		if err != nil {
			t.log.Warn("move ended allocations to the history", "count", len(cmd.IDs), "err", err)
			return
		}
		t.log.Info("moved ended allocations to the history", "count", len(r.IDs), "before", before, "history_drop_before", cmd.DropBefore)
		if len(cmd.IDs) < quorum.MaxArchivePerCommand || len(r.IDs) == 0 {
			return
		}
	}
}
