package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/latticehpc/lattice/agent/supervise"
)

// A step's tasks are this agent's children: when the agent is killed or
// frozen past its fence, nothing of the agent stops them. So each step run
// on a node gets a step guard (agent/supervise/stepguard.go), started in
// its own session, that stops the tasks at the fence or at the
// allocation's walltime, as a job's supervisor does for the job. The agent
// ends the guard when the step's tasks have ended.

// stepGuard is a running step guard; stop ends it.
type stepGuard struct{ cmd *os.Process }

// guardStep starts the guard of a step run's tasks (process groups), or
// returns nil when there is nothing to enforce (no fence, no walltime) or
// it cannot start (logged: the agent still stops the tasks itself).
func (a *Agent) guardStep(alloc uint64, groups []int) *stepGuard {
	limit := a.runner.limitFileOf(alloc)
	if len(groups) == 0 || (a.cfg.FenceTimeout < 0 && limit == "") {
		return nil
	}
	cmd, err := supervisorCommand(a.runner.supervisor, "", "", nil)
	if err != nil {
		a.log.Warn("no step guard: its tasks are stopped at the fence only while this agent runs", "alloc", alloc, "err", err)
		return nil
	}
	cmd.Args = []string{supervise.BinaryName, limit}
	for _, g := range groups {
		cmd.Args = append(cmd.Args, strconv.Itoa(g))
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, AgentTagEnv+"=") && !strings.HasPrefix(kv, superviseEnv+"=") &&
			!strings.HasPrefix(kv, superviseCredEnv+"=") && !strings.HasPrefix(kv, supervise.DaemonEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, supervise.StepGuardEnv+"="+a.fencePath())
	if logf, err := os.OpenFile(filepath.Join(a.cfg.DataDir, supervise.LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		defer logf.Close()
		cmd.Stderr = logf
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		a.log.Warn("no step guard: its tasks are stopped at the fence only while this agent runs", "alloc", alloc, "err", err)
		return nil
	}
	go func() { _ = cmd.Wait() }() // no zombie while this agent runs
	return &stepGuard{cmd: cmd.Process}
}

// stop ends the guard (its tasks have ended).
func (g *stepGuard) stop() {
	if g != nil {
		_ = g.cmd.Signal(syscall.SIGKILL)
	}
}

// limitFileOf is the walltime file of id's run here, or "" when it does
// not run here (or has none).
func (r *Runner) limitFileOf(id uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.running[id]; p != nil && p.launch.StatusFile != "" && p.launch.Walltime > 0 && !r.virtual {
		return supervise.LimitPath(p.launch.StatusFile)
	}
	return ""
}
