package agent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// taggedProcess is a process carrying this agent's tag.
type taggedProcess struct {
	pid, pgid int
	status    string // its LATTICE_SUPERVISE_STATUS: a job supervisor
	alloc     uint64 // its LATTICE_ALLOC_ID (0: none)
	run       int    // its LATTICE_RESTART_COUNT
}

// scanProcesses lists the processes whose environment carries tag (Linux
// /proc; elsewhere nothing is found).
func scanProcesses(tag string) []taggedProcess {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(AgentTagEnv + "=" + tag)
	self := os.Getpid()
	var out []taggedProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		var found bool
		var status string
		var alloc uint64
		var run int
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				found = true
			} else if v, ok := bytes.CutPrefix(kv, []byte(superviseEnv+"=")); ok {
				status = string(v)
			} else if v, ok := bytes.CutPrefix(kv, []byte("LATTICE_ALLOC_ID=")); ok {
				alloc, _ = strconv.ParseUint(string(v), 10, 64)
			} else if v, ok := bytes.CutPrefix(kv, []byte("LATTICE_RESTART_COUNT=")); ok {
				run, _ = strconv.Atoi(string(v))
			}
		}
		if !found || !processAlive(pid) {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue
		}
		out = append(out, taggedProcess{pid: pid, pgid: pgid, status: status, alloc: alloc, run: run})
	}
	return out
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// recoverRuns runs once, before the agent connects: it reads the state
// file, adopts the runs whose supervisor still runs, reports those that
// ended while it was down (with the exit status their supervisor recorded)
// or whose processes are gone (FAILED, NodeFailure), and kills every other
// process it started (left-over step tasks, the rest of a dead job) so its
// nodes take new work clean.
func (a *Agent) recoverRuns() error {
	st, err := loadState(a.statePath())
	if err != nil {
		return err
	}
	procs := scanProcesses(a.runner.tag)
	supervisors := map[string]taggedProcess{}
	for _, p := range procs {
		if p.status != "" && p.pid == p.pgid {
			supervisors[p.status] = p
		}
	}
	// The jobs the supervisor daemon runs, if one outlived the agent.
	var daemon *supDaemon
	var daemonJobs map[string]int
	if d, err := a.runner.daemonClient(false); err == nil {
		if jobs, err := d.jobs(); err == nil {
			daemon, daemonJobs = d, jobs
		} else {
			a.log.Warn("the job supervisor daemon did not list its jobs", "err", err)
		}
	}
	keep := map[int]bool{}
	var reports []*latticev1.AllocationReport
	a.mu.Lock()
	for i := range st.Runs {
		rs := st.Runs[i]
		l := rs.Launch
		id := l.AllocID
		rec := &runRecord{requeue: int32(l.RequeueCount), started: true}
		a.runs[id] = rec
		a.durable[id] = &rs
		var r *latticev1.AllocationReport
		switch p, running := supervisors[l.StatusFile]; {
		case rs.Final != nil:
			r = rs.Final.report(id)
		case l.Placeholder:
			// An interactive allocation's placeholder has no process: it
			// waits on here, with the walltime left (pty.go's steps do not
			// survive the restart).
			a.runner.adoptPlaceholder(l)
			a.log.Info("interactive allocation kept after an agent restart", "alloc", id, "run", l.RequeueCount)
		case l.StatusFile != "" && fileExists(l.StatusFile):
			code, _ := readStatus(l.StatusFile)
			ex := Exit{AllocID: id, RequeueCount: l.RequeueCount, ExitCode: &code, State: model.StateCompleted,
				Message: "ended while the agent was down", End: modTime(l.StatusFile)}
			if code != 0 {
				ex.State, ex.Reason = model.StateFailed, model.ReasonNonZeroExit
			}
			r = exitReport(ex)
		case running && l.StatusFile != "":
			keep[p.pgid] = true
			a.runner.adopt(l, p.pid)
			a.log.Info("run adopted after an agent restart", "alloc", id, "run", l.RequeueCount, "pid", p.pid)
		case l.StatusFile != "" && daemonJobs[l.StatusFile] > 0:
			pid := daemonJobs[l.StatusFile]
			keep[pid] = true
			a.runner.adoptDaemon(l, pid, daemon)
			a.log.Info("run adopted from the job supervisor daemon after an agent restart", "alloc", id, "run", l.RequeueCount, "pid", pid)
		default:
			msg := "its processes were gone when the agent restarted"
			if orphaned(procs, id, l.RequeueCount) {
				// Its supervisor (a daemon killed, or a per-job supervisor)
				// ended before it: nobody can learn its exit status.
				msg = "its job supervisor ended before the job and recorded no exit status; the job was killed when the agent restarted"
			}
			r = exitReport(Exit{AllocID: id, RequeueCount: l.RequeueCount, State: model.StateFailed, Reason: model.ReasonNodeFailure,
				Message: msg})
		}
		if r != nil {
			a.ended(id, rec, r)
			a.durable[id].Final = finalOf(r)
			reports = append(reports, r)
		}
	}
	a.mu.Unlock()
	killed := 0
	adoptedCgroups := a.runner.adoptedCgroups()
	for _, p := range procs {
		if keep[p.pgid] || inCgroupOf(p.pid, adoptedCgroups) {
			continue // of an adopted run (in its cgroup: a daemon it started)
		}
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		killed++
	}
	if killed > 0 {
		a.log.Warn("killed processes of this agent that it could neither adopt nor account for", "count", killed)
		// Wait (briefly) until they are gone: the nodes take no work before.
		deadline := time.Now().Add(5 * time.Second)
		for _, p := range procs {
			for !keep[p.pgid] && !inCgroupOf(p.pid, adoptedCgroups) && processAlive(p.pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if n := a.runner.endStrayCgroups(); n > 0 {
		a.log.Warn("killed the processes left in the cgroups of runs this agent does not keep", "count", n)
	}
	for _, r := range reports {
		a.log.Info("run ended while the agent was down", "alloc", r.AllocationId, "state", r.State, "reason", r.Reason, "exit_code", r.ExitCode)
		a.report(cloneReport(r))
	}
	return a.saveState()
}

// orphaned reports whether a process of run of allocation id is still
// there (among procs).
func orphaned(procs []taggedProcess, id uint64, run int) bool {
	for _, p := range procs {
		if p.alloc == id && p.run == run {
			return true
		}
	}
	return false
}

// adopted registers an adopted run (pid, leader of its process group) as
// running, with what is left of its walltime; its end is the caller's to
// watch (exited: the daemon's answer, nil when polled).
func (r *Runner) adopted(l Launch, pid int, exited chan daemonExit) *process {
	lp, _ := r.Paths(l.AllocID)
	if l.CheckpointDir == "" {
		l.CheckpointDir = r.CheckpointDir(l.AllocID)
	}
	p := &process{pgid: pid, launch: l, logs: lp, done: make(chan struct{}), exited: exited}
	r.adoptCgroup(p)
	r.mu.Lock()
	r.running[l.AllocID] = p
	r.mu.Unlock()
	if l.Walltime > 0 {
		left := max(time.Until(l.Started.Add(l.Walltime)), 0)
		p.timer = time.AfterFunc(left, func() { r.stop(p, model.ReasonWalltimeExceeded, l.Grace) })
	}
	r.wg.Add(1)
	return p
}

// adoptPlaceholder takes over an interactive allocation's placeholder run
// (no process): it ends when the allocation is stopped.
func (r *Runner) adoptPlaceholder(l Launch) {
	p := r.adopted(l, 0, nil)
	p.stopped = make(chan struct{})
	go func() { r.finish(p, virtualWait(p), "") }()
}

// adoptDaemon takes over a run that the supervisor daemon d still runs
// (pid, leader of its process group): its end comes from d.
func (r *Runner) adoptDaemon(l Launch, pid int, d *supDaemon) {
	p := r.adopted(l, pid, make(chan daemonExit, 1))
	d.wait(l.StatusFile, p.exited)
	go func() {
		e := <-p.exited
		r.finish(p, e.code, e.msg)
	}()
}

// adopt takes over a run whose supervisor (pid, leader of its process
// group) survived an agent restart. It cannot be waited for: its end is
// polled, and its exit status read from the status file.
func (r *Runner) adopt(l Launch, pid int) {
	p := r.adopted(l, pid, nil)
	go func() {
		for processAlive(pid) {
			time.Sleep(200 * time.Millisecond)
		}
		code, ok := readStatus(l.StatusFile)
		msg := ""
		if !ok {
			code = 128 + int(syscall.SIGKILL)
			msg = "its supervisor ended without recording an exit status"
		}
		r.finish(p, code, strings.TrimSpace(msg))
	}()
}
