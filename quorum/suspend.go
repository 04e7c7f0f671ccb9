package quorum

import (
	"time"

	"github.com/latticehpc/lattice/model"
)

// Suspend and resume of a running allocation (latticectl suspend/resume,
// Slurm's scontrol suspend): its agent freezes every process of it (the
// cgroup freezer). It keeps its nodes and stays RUNNING as far as
// scheduling goes; SuspendedAt marks it frozen and SuspendedFor counts the
// time its run spent frozen, which its walltime does not count.

// SuspendJob suspends (Resume false) or resumes one running allocation.
type SuspendJob struct {
	Header
	ID     uint64 `json:"id"`
	Resume bool   `json:"resume,omitempty"`
}

func (s *State) applySuspendJob(c *SuspendJob) *Result {
	a := s.allocs[c.ID]
	switch {
	case a == nil:
		return &Result{Rejection: reject(CodeNotFound, "", "allocation %d does not exist", c.ID)}
	case a.State != model.StateRunning:
		return &Result{Rejection: reject(CodeConflict, "", "allocation %d is %s; only RUNNING allocations can be suspended or resumed", c.ID, a.State)}
	case !c.Resume && !a.SuspendedAt.IsZero(), c.Resume && a.SuspendedAt.IsZero():
		return &Result{} // already so: idempotent
	}
	cp := modify(a)
	if c.Resume {
		if d := c.Time.Sub(a.SuspendedAt); d > 0 {
			cp.SuspendedFor += d
		}
		cp.SuspendedAt = time.Time{}
	} else {
		cp.SuspendedAt = c.Time
	}
	s.replaceAlloc(a, cp)
	s.touch()
	return &Result{Items: []ItemResult{{ID: c.ID, Committed: true}}}
}
