package supervise

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The supervisor enforces two limits on its own, so that a job never
// outlives them when its agent is gone (killed, hung) or cut off:
//
//   - the agent's fence (FenceFile in the agent's data dir): the time by
//     which the agent must have heard a leader again. The agent moves it
//     forward with every heartbeat a leader acknowledges; an agent that is
//     gone moves it no more, and once it passes every job is stopped — the
//     leader fails a lost node's work only after that time and the grace,
//     so a job never runs twice (docs/operations.md, "Fencing").
//   - the job's walltime (a LimitSuffix file next to its status file):
//     written by the agent when the job starts and when its time limit
//     changes; the agent ends the job at that time, the supervisor a
//     moment later if the agent did not.
//
// Both files hold "DEADLINE_UNIX_MS GRACE_MS". A stop is SIGTERM to the
// job's process group, then SIGKILL after the grace. A missing or
// unreadable file sets no limit.

// FenceFile is the agent's fence in its data dir.
const FenceFile = "fence"

// LimitSuffix replaces a status file's ".status" for the job's walltime file.
const LimitSuffix = ".limit"

// guardEvery is how often a supervisor looks at the limits.
var guardEvery = time.Second

// walltimeSlack is how long past its walltime a job runs before its
// supervisor stops it: its agent does so at the walltime itself and
// reports why.
const walltimeSlack = 2 * time.Second

// LimitPath is the walltime file of the job whose status file is status.
func LimitPath(status string) string {
	return strings.TrimSuffix(status, ".status") + LimitSuffix
}

// FencePath is the fence file of the agent whose job's status file is
// status (DATA_DIR/runs/ID-RUN.status).
func FencePath(status string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(status)), FenceFile)
}

// WriteDeadline writes a limit file (no fsync: after a crash of the
// machine there is no job left to limit).
func WriteDeadline(path string, deadline time.Time, grace time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%d %d\n", deadline.UnixMilli(), grace.Milliseconds())), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadDeadline reads a limit file; ok is false when there is none.
func ReadDeadline(path string) (deadline time.Time, grace time.Duration, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return time.Time{}, 0, false
	}
	ms, err1 := strconv.ParseInt(f[0], 10, 64)
	g, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || ms <= 0 || g < 0 {
		return time.Time{}, 0, false
	}
	return time.UnixMilli(ms), time.Duration(g) * time.Millisecond, true
}

// overdue says whether a job past its limits must be stopped now, and
// with which grace: the fence passed, or the walltime (plus the slack
// its agent has to end it first). fence reads the agent's fence file.
func overdue(status string, now time.Time, fence func(path string) (time.Time, time.Duration, bool)) (why string, grace time.Duration, stop bool) {
	if d, g, ok := fence(FencePath(status)); ok && now.After(d) {
		return "its agent has heard no leader since its fencing deadline " + d.UTC().Format(time.RFC3339), g, true
	}
	if d, g, ok := ReadDeadline(LimitPath(status)); ok && now.After(d.Add(walltimeSlack)) {
		return "past its time limit " + d.UTC().Format(time.RFC3339) + " and its agent did not end it", g, true
	}
	return "", 0, false
}

// guard watches one job until done is closed: when it is overdue, kill
// (the job's group) gets SIGTERM, then SIGKILL after the grace.
func guard(status string, kill func(syscall.Signal), done <-chan struct{}) {
	tick := time.NewTicker(guardEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		why, grace, stop := overdue(status, time.Now(), ReadDeadline)
		if !stop {
			continue
		}
		fmt.Fprintf(os.Stderr, "%s %s: stopping job %s: %s\n", time.Now().Format(time.RFC3339), BinaryName, filepath.Base(status), why)
		kill(syscall.SIGTERM)
		select {
		case <-done:
			return
		case <-time.After(grace):
		}
		kill(syscall.SIGKILL)
		return
	}
}

// jobGuard is a per-job supervisor's guard. The supervisor leads the job's
// process group: SIGTERM goes to the group (the supervisor lets it by);
// SIGKILL to the job, and to the rest of the group once the supervisor
// has recorded its status.
type jobGuard struct {
	status string
	done   chan struct{}
	fired  chan struct{}
}

func newJobGuard(status string) *jobGuard {
	return &jobGuard{status: status, done: make(chan struct{}), fired: make(chan struct{}, 1)}
}

func (g *jobGuard) started(pid int) {
	go guard(g.status, func(sig syscall.Signal) {
		if sig == syscall.SIGKILL {
			_ = syscall.Kill(pid, sig)
			select {
			case g.fired <- struct{}{}:
			default:
			}
			return
		}
		_ = syscall.Kill(-os.Getpid(), sig)
	}, g.done)
}

// ended stops the guard; when it killed the job, what is left of the
// group goes too (the supervisor with it: its status is recorded).
func (g *jobGuard) ended() {
	close(g.done)
	select {
	case <-g.fired:
		_ = syscall.Kill(-os.Getpid(), syscall.SIGKILL)
	default:
	}
}

// daemonGuards are the supervisor daemon's guards, by job pid (one daemon
// per process; a daemon's job leads its own process group). One goroutine
// looks at them all once a second, reading the fence file once.
var daemonGuards = struct {
	sync.Mutex
	jobs    map[int]*guarded
	started bool
}{jobs: map[int]*guarded{}}

type guarded struct {
	status string
	killAt time.Time // zero until SIGTERM was sent
}

// guardDaemonJob watches a job the daemon started.
func guardDaemonJob(pid int, status string) {
	daemonGuards.Lock()
	defer daemonGuards.Unlock()
	daemonGuards.jobs[pid] = &guarded{status: status}
	if !daemonGuards.started {
		daemonGuards.started = true
		go guardDaemonJobs()
	}
}

// unguardDaemonJob stops watching a job that ended.
func unguardDaemonJob(pid int) {
	daemonGuards.Lock()
	delete(daemonGuards.jobs, pid)
	daemonGuards.Unlock()
}

func guardDaemonJobs() {
	for range time.Tick(guardEvery) {
		now := time.Now()
		fences := map[string]fenceRead{}
		fence := func(path string) (time.Time, time.Duration, bool) {
			f, ok := fences[path]
			if !ok {
				f.d, f.g, f.ok = ReadDeadline(path)
				fences[path] = f
			}
			return f.d, f.g, f.ok
		}
		daemonGuards.Lock()
		for pid, j := range daemonGuards.jobs {
			if !j.killAt.IsZero() {
				if now.After(j.killAt) {
					_ = syscall.Kill(-pid, syscall.SIGKILL)
				}
				continue
			}
			why, grace, stop := overdue(j.status, now, fence)
			if !stop {
				continue
			}
			fmt.Fprintf(os.Stderr, "%s %s: stopping job %s: %s\n", now.Format(time.RFC3339), BinaryName, filepath.Base(j.status), why)
			_ = syscall.Kill(-pid, syscall.SIGTERM)
			j.killAt = now.Add(grace)
		}
		daemonGuards.Unlock()
	}
}

type fenceRead struct {
	d  time.Time
	g  time.Duration
	ok bool
}
