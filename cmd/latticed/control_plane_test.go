package main

// A control-plane incident never costs a running job (issue 24): three real
// members and a real agent; the jobs' processes are watched in /proc, not
// only the quorum's view. The default run uses the harness's short node
// timeout (6 s) and freezes/outages a few seconds past it;
// LATTICE_LONG_TESTS=1 runs the literal durations (30 s, 120 s, 400 s
// freezes, a 5-minute outage).

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

func longTests() bool { return os.Getenv("LATTICE_LONG_TESTS") == "1" }

// fleet is the agents of a control-plane test, each its own process with
// its own data dir, log and simulated nodes.
type fleet struct {
	dirs, logs []string
}

// startFleet runs k agents of n simulated nodes each against every member
// (args: more agent flags) and waits until all their nodes are Ready.
func (c *cluster) startFleet(k, n int, args ...string) *fleet {
	c.t.Helper()
	f := &fleet{}
	for i := 1; i <= k; i++ {
		dir, log := filepath.Join(c.dir, fmt.Sprintf("agent%d", i)), filepath.Join(c.dir, fmt.Sprintf("agent%d.log", i))
		c.logs = append(c.logs, log)
		p := startProc(c.t, log, "agent", append([]string{"--log-level", "info", "agent", "--id", fmt.Sprintf("agent%d", i),
			"--data-dir", dir, "--simulate", fmt.Sprint(n), "--group-size", fmt.Sprint(n), "--name", fmt.Sprintf("a%dn", i),
			"--server", strings.Join(c.apiAddrs(), ","), "--grace", "2s", "--token", c.agentToken}, args...)...)
		c.track(p)
		f.dirs, f.logs = append(f.dirs, dir), append(f.logs, log)
	}
	c.waitNodesReady(k*n, 60*time.Second)
	return f
}

// connections counts, per agent, the "agent connected" lines of its log
// that name a member other than notAddr's; last is the latest such line.
func (f *fleet) connections(notAddr string) (per []int, last string) {
	for _, path := range f.logs {
		n := 0
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `msg="agent connected"`) && !strings.Contains(line, "server="+notAddr) {
				n++
				last = line
			}
		}
		per = append(per, n)
	}
	return per, last
}

// waitMoved waits until every agent connected to a member other than
// notAddr's since before (connections' counts) and returns how long after
// start the last one did.
func (f *fleet) waitMoved(c *cluster, notAddr string, before []int, start time.Time, timeout time.Duration) time.Duration {
	c.t.Helper()
	var moved time.Duration
	c.waitFor(timeout, "every agent on the new leader", func() (bool, string) {
		now, last := f.connections(notAddr)
		moved = time.Since(start)
		for i := range now {
			if now[i] <= before[i] {
				return false, fmt.Sprintf("agent%d not yet (latest connection elsewhere: %s)", i+1, last)
			}
		}
		return true, ""
	})
	return moved
}

// jobGroups maps each allocation id to the process groups of its
// processes started by the agents whose data dirs are dirs.
func jobGroups(dirs ...string) map[string][]int {
	var tags [][]byte
	for _, dir := range dirs {
		abs, _ := filepath.Abs(dir)
		tags = append(tags, []byte("LATTICE_AGENT_TAG="+abs+"\x00"))
	}
	out := map[string][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(tags, func(tag []byte) bool { return bytes.Contains(env, tag) }) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		var id string
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("LATTICE_ALLOC_ID=")); ok {
				id = string(v)
			}
		}
		pgid, err := syscall.Getpgid(pid)
		if id == "" || err != nil {
			continue
		}
		if !slices.Contains(out[id], pgid) {
			out[id] = append(out[id], pgid)
		}
	}
	return out
}

// groupWatch samples jobGroups every 50 ms and reports any job whose
// processes changed: gone (killed) or a new group (a second run).
type groupWatch struct {
	mu       sync.Mutex
	want     map[string][]int
	problems []string
	stop     chan struct{}
	done     chan struct{}
}

func watchGroups(dirs []string, want map[string][]int, ignore []string) *groupWatch {
	w := &groupWatch{want: want, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			now := jobGroups(dirs...)
			w.mu.Lock()
			for id, groups := range w.want {
				if !slices.Equal(now[id], groups) {
					w.problems = append(w.problems, fmt.Sprintf("%s: allocation %s has process groups %v, want %v",
						time.Now().Format("15:04:05.000"), id, now[id], groups))
				}
			}
			for id := range now {
				if w.want[id] == nil && !slices.Contains(ignore, id) {
					w.problems = append(w.problems, fmt.Sprintf("%s: processes of unexpected allocation %s", time.Now().Format("15:04:05.000"), id))
				}
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *groupWatch) finish() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) > 10 {
		return append(w.problems[:10], fmt.Sprintf("... and %d more", len(w.problems)-10))
	}
	return w.problems
}

// runJobs submits n jobs of one node running script and waits until each
// runs (one process group each, under the agents of dirs); it returns
// their ids and groups.
func runJobs(c *cluster, dirs []string, n int, script string) ([]string, map[string][]int) {
	c.t.Helper()
	var ids []string
	for i := range n {
		r, err := submit(c.readTargets(), 0, fmt.Sprintf("cp-%d-%d", time.Now().UnixNano(), i), &latticev1.AllocationRequest{
			Tenant: "t", NodesMin: 1, NodesMax: 1, WalltimeSeconds: 3600, Requeue: true, Script: script}, 5*time.Second, 30*time.Second)
		if err != nil {
			c.t.Fatal(err)
		}
		ids = append(ids, strconv.FormatUint(r.id, 10))
	}
	var groups map[string][]int
	c.waitFor(90*time.Second, fmt.Sprintf("%d jobs running", n), func() (bool, string) {
		groups = jobGroups(dirs...)
		for _, id := range ids {
			if len(groups[id]) != 1 {
				return false, fmt.Sprintf("groups %v", groups)
			}
		}
		return true, ""
	})
	want := map[string][]int{}
	for _, id := range ids {
		want[id] = groups[id]
	}
	return ids, want
}

// checkJobsRunning says which of ids are not RUNNING in their first run.
func (c *cluster) checkJobsRunning(ids []string) {
	c.t.Helper()
	allocs, err := c.listAllocations()
	if err != nil {
		c.t.Fatal(err)
	}
	by := map[string]*latticev1.Allocation{}
	for _, a := range allocs {
		by[strconv.FormatUint(a.Id, 10)] = a
	}
	for _, id := range ids {
		a := by[id]
		switch {
		case a == nil:
			c.t.Errorf("allocation %s is gone", id)
		case a.State != "RUNNING" || a.RequeueCount != 0:
			c.t.Errorf("allocation %s is %s %s (run %d), want RUNNING in its first run", id, a.State, a.Reason, a.RequeueCount)
		}
	}
}

// incidentSettings are the site settings a control-plane test runs with,
// and the agents' flags: by default shorter timeouts than shipped (node
// timeout 6 s, agents' fence 12 s, heartbeat 1 s), so that a 30 s
// incident outlasts them all as a 400 s one outlasts the shipped node
// timeout (300 s); LATTICE_LONG_TESTS=1 runs the shipped defaults.
func incidentSettings(c *cluster) (agentFlags []string) {
	if longTests() {
		c.memberFlags = []string{"--degraded-after", "30s", "--node-timeout", "300s", "--kill-grace", "30s"}
		return nil
	}
	return []string{"--heartbeat", "1s", "--fence-timeout", "12s"}
}

// The leader is frozen (SIGSTOP) for longer than the node timeout (and
// the agents' fence) while 16 jobs run on four agents: none is failed,
// killed or run twice, and every agent is on the new leader within 15 s.
func TestLeaderFreezeCostsNoRunningJob(t *testing.T) {
	freezes := []time.Duration{30 * time.Second}
	if longTests() {
		freezes = []time.Duration{30 * time.Second, 120 * time.Second, 400 * time.Second}
	}
	for _, freeze := range freezes {
		t.Run(freeze.String(), func(t *testing.T) {
			c := newCluster(t)
			agentFlags := incidentSettings(c)
			c.startMembers(3)
			f := c.startFleet(4, 4, agentFlags...)
			ids, groups := runJobs(c, f.dirs, 16, "#!/bin/sh\nsleep 3600\n")
			w := watchGroups(f.dirs, groups, nil)
			old := c.mustLeader(10 * time.Second)
			before, _ := f.connections(old.apiAddr)
			start := time.Now()
			if err := syscall.Kill(old.proc().cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					_ = syscall.Kill(old.proc().cmd.Process.Pid, syscall.SIGCONT)
				}
			}()
			moved := f.waitMoved(c, old.apiAddr, before, start, 90*time.Second)
			t.Logf("every agent was on the new leader %s after the freeze", moved.Round(100*time.Millisecond))
			if limit := 15 * time.Second; moved > limit {
				t.Errorf("the last agent reached the new leader %s after the freeze, want within %s", moved, limit)
			}
			time.Sleep(time.Until(start.Add(freeze)))
			if err := syscall.Kill(old.proc().cmd.Process.Pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			resumed = true
			c.waitHealthy(3, 60*time.Second)
			c.waitNodesReady(16, 30*time.Second)
			time.Sleep(3 * time.Second) // whatever the woken member would do, it does now
			for _, p := range w.finish() {
				t.Error(p)
			}
			c.checkJobsRunning(ids)
		})
	}
}

// Every member goes down while jobs run, some of which end during the
// outage; then every member comes back. The running jobs were never
// touched, and the ended ones are recorded with their own exit status and
// the time they ended, not when the quorum came back.
func TestEveryMemberDownThenBack(t *testing.T) {
	outage := 12 * time.Second
	if longTests() {
		outage = 5 * time.Minute
	}
	c := newCluster(t)
	agentFlags := incidentSettings(c)
	if !longTests() {
		agentFlags = []string{"--heartbeat", "1s"} // the shipped fence (10 min) outlasts the outage
	}
	c.startMembers(3)
	f := c.startFleet(4, 4, agentFlags...)
	long, groups := runJobs(c, f.dirs, 12, "#!/bin/sh\nsleep 3600\n")
	// The short ones end 6 s into the outage, half of them failing.
	shortIDs, _ := runJobs(c, f.dirs, 4, "#!/bin/sh\nsleep 8\nexit $((LATTICE_ALLOC_ID % 2 * 3))\n")
	w := watchGroups(f.dirs, groups, shortIDs)
	down := time.Now()
	var held []net.Listener
	for _, m := range c.members {
		m.proc().kill()
		// The members' ports stay taken while they are down: on a shared
		// machine another test's server could listen there meanwhile, and
		// the agent would talk to it.
		for _, addr := range []string{m.apiAddr, m.raftAddr} {
			if l, err := net.Listen("tcp", addr); err == nil {
				held = append(held, l)
			}
		}
	}
	time.Sleep(outage)
	up := time.Now()
	for _, l := range held {
		l.Close()
	}
	for _, m := range c.members {
		c.start(m)
	}
	c.waitHealthy(3, 90*time.Second)
	c.waitNodesReady(16, 60*time.Second)
	c.waitFor(60*time.Second, "the short jobs' ends recorded", func() (bool, string) {
		allocs, err := c.listAllocations()
		if err != nil {
			return false, err.Error()
		}
		ended := 0
		for _, a := range allocs {
			if slices.Contains(shortIDs, strconv.FormatUint(a.Id, 10)) && (a.State == "COMPLETED" || a.State == "FAILED") {
				ended++
			}
		}
		return ended == len(shortIDs), fmt.Sprintf("%d ended", ended)
	})
	time.Sleep(3 * time.Second)
	for _, p := range w.finish() {
		t.Error(p)
	}
	c.checkJobsRunning(long)
	allocs, err := c.listAllocations()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		id := strconv.FormatUint(a.Id, 10)
		if !slices.Contains(shortIDs, id) {
			continue
		}
		wantState, wantCode := "COMPLETED", int32(0)
		if a.Id%2 == 1 {
			wantState, wantCode = "FAILED", 3
		}
		if a.State != wantState || a.ExitCode != wantCode || a.RequeueCount != 0 {
			t.Errorf("short job %s: %s %s exit %d run %d, want %s exit %d in its first run", id, a.State, a.Reason, a.ExitCode, a.RequeueCount, wantState, wantCode)
		}
		// Their starts may be reported after the outage too: each is
		// recorded when it happened.
		if start := time.UnixMilli(a.StartTimeUnixMs); !start.Before(down) {
			t.Errorf("short job %s recorded as started at %s, after the outage began (%s)", id, start.Format("15:04:05.000"), down.Format("15:04:05.000"))
		}
		end := time.UnixMilli(a.EndTimeUnixMs)
		if end.Before(down) || end.After(up) {
			t.Errorf("short job %s recorded as ended at %s, want during the outage (%s to %s)", id,
				end.Format("15:04:05.000"), down.Format("15:04:05.000"), up.Format("15:04:05.000"))
		}
	}
}
