package agent

import (
	"os"

	"github.com/latticehpc/lattice/agent/supervise"
)

// A run's walltime is written next to its status file before it starts
// and again when its time limit changes, so that its supervisor ends it
// even when this agent is gone (agent/supervise/guard.go). The agent ends
// it at that time itself; the file is removed when the run has ended.

// writeLimit records l's walltime for its supervisor (none without one).
func (r *Runner) writeLimit(l Launch) {
	if l.StatusFile == "" || l.Walltime <= 0 || r.virtual {
		return
	}
	start := l.Started
	if start.IsZero() {
		return
	}
	if err := supervise.WriteDeadline(supervise.LimitPath(l.StatusFile), start.Add(l.Walltime), l.Grace); err != nil {
		r.log.Warn("write the walltime for the job supervisor", "alloc", l.AllocID, "err", err)
	}
}

// removeLimit drops an ended run's walltime file (status: its status
// file; only that field is read: SetWalltime writes the launch's walltime
// under the runner's lock).
func removeLimit(status string) {
	if status != "" {
		_ = os.Remove(supervise.LimitPath(status))
	}
}
