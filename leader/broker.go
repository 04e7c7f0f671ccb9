package leader

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/checkpoint"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// The checkpoint broker (leader only) decides the checkpoints nobody asked
// for by hand: sbatch's --signal=SIG@SECS lead time before the walltime
// ends, and proactive checkpoints of long runners when the cost model
// (package checkpoint) says Value > Cost. Checkpoints of reclaims and
// preemptions are started by those commands themselves; users ask with
// `latticectl checkpoint ID`. Every decision goes through the quorum as a
// Checkpoint command; the dispatcher then delivers it to the agent.

// maxProactivePerPass bounds the proactive checkpoints one pass starts, so
// that a fleet of long runners is not asked to write all at once.
const maxProactivePerPass = 16

func (t *Term) broker(ctx context.Context) {
	every := t.cfg.BrokerInterval
	if every <= 0 {
		every = 15 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		items := t.brokerPass(t.cfg.Clock())
		if len(items) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := t.propose(pctx, &quorum.Checkpoint{Items: items})
		cancel()
		if err != nil {
			t.log.Warn("checkpoint broker: propose", "err", err)
			continue
		}
		for i, it := range r.Items {
			if it.Committed {
				t.log.Info("checkpoint requested", "alloc", it.ID, "reason", items[i].Reason, "deadline", items[i].Deadline)
			}
		}
	}
}

// brokerPass decides, from committed state at now, which running
// allocations to ask for a checkpoint.
func (t *Term) brokerPass(now time.Time) []quorum.CheckpointItem {
	params := t.cfg.Checkpoint
	var items []quorum.CheckpointItem
	var jobs []checkpoint.Job
	grace := map[uint64]time.Duration{}
	var runningNodeHours, queuedNodeHours float64
	var queued []quorum.AllocView
	t.view(func(st *quorum.State) {
		for _, a := range st.Active() {
			if a.State == model.StateRunning {
				runningNodeHours += float64(len(a.Nodes)) * a.Walltime.Hours()
			}
			if !checkpoint.Candidate(a) {
				continue
			}
			vc := st.VCluster(a.VCluster)
			g := model.DefaultReclaimGrace
			if vc != nil {
				g = vc.Grace()
			}
			grace[a.ID] = g
			j := checkpoint.JobFromAllocation(a, len(a.Nodes) > 0 && st.Node(a.Nodes[0]) != nil && st.Node(a.Nodes[0]).Borrowed())
			if a.CheckpointSignalSecs > 0 && checkpoint.SignalDue(j, a.CheckpointSignalSecs, now) && !signalledThisRun(a) {
				items = append(items, quorum.CheckpointItem{AllocID: a.ID, Reason: quorum.CheckpointSignal, Deadline: now.Add(g)})
				continue
			}
			if !t.cfg.NoProactiveCheckpoints {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) == 0 {
			return
		}
		for _, v := range st.VClusters() {
			queued = append(queued, st.PendingShared(v.Name))
		}
	})
	if len(jobs) == 0 {
		return items
	}
	// The backlog is summed after the lock, from the views of it: 100,000
	// pending allocations are read without holding Apply up.
	for _, q := range queued {
		for p := range q.All {
			queuedNodeHours += float64(p.NodesMin) * p.Walltime.Hours()
		}
	}
	sit := checkpoint.Situation{Now: now, BacklogPressure: checkpoint.BacklogPressure(queuedNodeHours, runningNodeHours)}
	for _, id := range checkpoint.Proactive(params, jobs, sit, maxProactivePerPass) {
		items = append(items, quorum.CheckpointItem{AllocID: id, Reason: quorum.CheckpointProactive, Deadline: now.Add(grace[id])})
	}
	return items
}

// signalledThisRun reports whether the --signal lead-time checkpoint was
// already asked for in the allocation's current run.
func signalledThisRun(a *model.Allocation) bool {
	for i := len(a.History) - 1; i >= 0; i-- {
		h := a.History[i]
		if h.State == model.StateCheckpointing && h.Reason == quorum.CheckpointSignal {
			return true
		}
		if h.State == model.StateStaging {
			return false // the run began here
		}
	}
	return false
}
