package leader

import (
	"context"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Preemption by suspension, the leader's part (quorum/gang.go has the
// state's): the dispatcher freezes every allocation a preemption suspended
// (through the agent of its first node, before anything may start on its
// nodes) and thaws it once the quorum has resumed it; resumeSuspended
// proposes the resumes (or requeues) as soon as they can be.

// preemptFreezes appends the freezes and thaws the agents still need to
// out: a freeze for each allocation a preemption suspended that its agent
// was not told to freeze; a thaw for each one it froze that runs again.
// Called under the state's read lock.
func (d *dispatcher) preemptFreezes(st *quorum.State, conns []*AgentConn, out []delivery) []delivery {
	for _, a := range st.SuspendedByPreemption() {
		c := d.connFor(a.SuspendedOn[0])
		if c == nil || c.isFrozen(a.ID) {
			continue
		}
		out = append(out, delivery{conn: c, id: a.ID, run: a.RequeueCount, kind: deliverFreeze, msg: freezeMsg(a.ID, true)})
	}
	for _, c := range conns {
		for _, id := range c.frozenIDs() {
			a := st.Allocation(id)
			switch {
			case a != nil && a.GangSuspended():
			case a != nil && a.State == model.StateRunning && a.SuspendedAt.IsZero():
				out = append(out, delivery{conn: c, id: id, run: a.RequeueCount, kind: deliverFreeze, msg: freezeMsg(id, false)})
			default:
				// Ended or requeued: the cancel that ends the run thaws it
				// first (agent: thawToStop).
				c.markFrozen(id, false)
			}
		}
	}
	return out
}

func freezeMsg(id uint64, on bool) *latticev1.ServerMessage {
	return &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Freeze{Freeze: &latticev1.FreezeAllocation{AllocationId: id, Freeze: on}}}
}

func (c *AgentConn) isFrozen(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen[id]
}

func (c *AgentConn) markFrozen(id uint64, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setFrozen(id, on)
}

// setFrozen is markFrozen under c.mu.
func (c *AgentConn) setFrozen(id uint64, on bool) {
	if !on {
		delete(c.frozen, id)
		return
	}
	if c.frozen == nil {
		c.frozen = map[uint64]bool{}
	}
	c.frozen[id] = true
}

func (c *AgentConn) frozenIDs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uint64, 0, len(c.frozen))
	for id := range c.frozen {
		out = append(out, id)
	}
	return out
}

// resumeEvery is how often the leader looks for suspended allocations that
// can resume (it also looks after every change of state it is told of).
const resumeEvery = 500 * time.Millisecond

// resumeSuspended is the leader-only loop that ends suspensions: an
// allocation a preemption suspended resumes once its nodes run nothing and
// are held for no one (the job it was suspended for has ended, or never
// started); one whose node is gone, down or drained is requeued.
func (t *Term) resumeSuspended(ctx context.Context) {
	tick := time.NewTicker(resumeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var resume, requeue []uint64
		now := t.cfg.Clock()
		t.view(func(st *quorum.State) {
			for _, a := range st.SuspendedByPreemption() {
				why, never := st.ResumeBlocker(a, now)
				switch {
				case never:
					requeue = append(requeue, a.ID)
				case why == "":
					resume = append(resume, a.ID)
				}
			}
		})
		for _, c := range []*quorum.ResumeSuspended{{IDs: resume}, {IDs: requeue, Requeue: true}} {
			if len(c.IDs) == 0 {
				continue
			}
			r, err := t.propose(ctx, c)
			if err != nil {
				t.log.Warn("ending preemption suspensions failed", "ids", c.IDs, "requeue", c.Requeue, "err", err)
				continue
			}
			for _, it := range r.Items {
				if it.Rejection != nil {
					t.log.Debug("suspension not ended", "alloc", it.ID, "msg", it.Rejection.Message)
				} else {
					t.log.Info("preemption suspension ended", "alloc", it.ID, "requeued", c.Requeue)
				}
			}
			t.disp.poke()
		}
	}
}

// recordUsage commits the usage of runs a user's requeue stopped
// (quorum.RecordUsage), after their reports; a cluster with members that
// predate it refuses the command: the run's usage is then not kept.
func (t *Term) recordUsage(ctx context.Context, records []*quorum.RecordUsage) {
	for _, c := range records {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := t.propose(pctx, c)
		cancel()
		switch {
		case err != nil:
			t.log.Info("usage of a requeued run not recorded", "alloc", c.ID, "err", err)
		case r.Rejection != nil:
			t.log.Debug("usage of a requeued run not recorded", "alloc", c.ID, "msg", r.Rejection.Message)
		}
	}
}
