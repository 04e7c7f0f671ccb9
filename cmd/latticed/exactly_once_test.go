package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// restartAgent kills the agent (-9, its own process only: its jobs run in
// their own process groups and survive) and starts it again with the same
// command line.
func (c *cluster) restartAgent() {
	c.t.Helper()
	old := c.agent
	_ = old.cmd.Process.Signal(syscall.SIGKILL)
	<-old.done
	c.agent = startProc(c.t, old.logPath, "agent", old.args...)
	c.track(c.agent)
}

// The sequence that once launched a job twice: the agent is frozen
// (SIGSTOP) while the leader assigns a job to it, the leader dies with the
// job STAGING, the agent wakes up (the assignment it had received may or
// may not reach it), is killed -9 and started again, and the new leader
// sends the assignment again. Each launch is recorded durably before it
// starts, so the job's process starts exactly once (it appends a line to a
// file) and the job ends COMPLETED.
func TestClusterFrozenAgentLeaderChangeLaunchesOnce(t *testing.T) {
	skipShort(t)
	c := newCluster(t)
	c.startMembers(3)
	c.startAgent(2, 2)
	work := t.TempDir()

	var ids []string
	files := map[string]string{}
	for round := range 2 {
		old := c.mustLeader(5 * time.Second)
		if err := c.agent.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(work, fmt.Sprintf("starts-%d", round))
		req := &latticev1.AllocationRequest{Name: fmt.Sprintf("once-%d", round), Tenant: "stream", NodesMin: 1, WalltimeSeconds: 120,
			Command: []string{"sh", "-c", "echo start >> " + file + "; sleep 4"}, WorkDir: work}
		res, err := submit([]*member{old}, 0, fmt.Sprintf("once-%d", round), req, 2*time.Second, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint(res.id)
		ids = append(ids, id)
		files[id] = file
		// Assigned and sent to the frozen agent's stream.
		c.waitFor(15*time.Second, "job "+id+" STAGING", func() (bool, string) {
			a, err := old.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
			if err != nil {
				return false, err.Error()
			}
			return a.State == "STAGING", a.State
		})
		time.Sleep(500 * time.Millisecond)
		old.proc().kill()
		t.Logf("round %d: job %s STAGING on a frozen agent; leader %s killed", round, id, old.id)
		if err := c.agent.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		// Awake long enough to act on what it had received (or not), then
		// killed -9 and started again against the new leader.
		time.Sleep(time.Duration(300*(round+1)) * time.Millisecond)
		c.restartAgent()
		newLeader := c.mustLeader(15 * time.Second)
		t.Logf("round %d: agent restarted; %s leads", round, newLeader.id)
		// The killed member comes back as a follower for the next round.
		c.start(old)
		c.waitHealthy(3, 30*time.Second)
	}
	for _, id := range ids {
		var last string
		c.waitFor(60*time.Second, "job "+id+" to end", func() (bool, string) {
			for _, m := range c.readTargets() {
				a, err := m.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
				if err != nil {
					continue
				}
				last = a.State + " " + a.Reason
				return a.State == "COMPLETED" || a.State == "FAILED" || a.State == "CANCELLED", last
			}
			return false, last
		})
		if !strings.HasPrefix(last, "COMPLETED") {
			t.Errorf("job %s ended %s, want COMPLETED", id, last)
		}
		b, _ := os.ReadFile(files[id])
		if n := strings.Count(string(b), "start"); n != 1 {
			t.Errorf("job %s started %d times, want exactly once", id, n)
		}
	}
}
