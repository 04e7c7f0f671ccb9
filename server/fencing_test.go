package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Fencing (agent/fence.go, leader/liveness.go): checked on the job
// processes themselves, in /proc, with a real agent process.

// jobSampler looks at /proc every 50 ms for the processes of one
// allocation under any of the given agents' data dirs.
type jobSampler struct {
	mu      sync.Mutex
	both    []string             // samples where two agents ran the job at once
	last    map[string]time.Time // per agent data dir: when the job was last seen there
	lastAny map[string]time.Time // per allocation id: when last seen anywhere
	stop    chan struct{}
	done    chan struct{}
}

// jobProcs maps allocation ids to the data dirs of the agents whose
// processes of them are alive now.
func jobProcs(dirs []string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, d := range dirs {
		for _, p := range taggedProcs(d) {
			if p.allocID == "" {
				continue
			}
			if out[p.allocID] == nil {
				out[p.allocID] = map[string]bool{}
			}
			out[p.allocID][d] = true
		}
	}
	return out
}

func sampleJobs(dirs []string) *jobSampler {
	s := &jobSampler{last: map[string]time.Time{}, lastAny: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			now := time.Now()
			procs := jobProcs(dirs)
			s.mu.Lock()
			for id, on := range procs {
				s.lastAny[id] = now
				if len(on) > 1 {
					s.both = append(s.both, fmt.Sprintf("%s: allocation %s runs under %d agents at once", now.Format("15:04:05.000"), id, len(on)))
				}
				for d := range on {
					s.last[id+" "+d] = now
				}
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *jobSampler) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *jobSampler) lastSeen(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAny[id]
}

// startSecondAgent runs another agent process (its own id, data dir and
// node names) against the stack's server, with the same settings.
func startSecondAgent(t *testing.T, s *agentProcStack, args ...string) (*exec.Cmd, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent2")
	cmd := exec.Command(latticedBinary(t), append([]string{"agent", "--server", s.srv.APIAddr(), "--id", "a2", "--data-dir", dir,
		"--heartbeat", "500ms", "--grace", "2s", "--simulate", "1", "--vcluster", "hpc-batch", "--name", "other"}, args...)...)
	cmd.Stdout, cmd.Stderr = s.agentLog, s.agentLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		killTagged(dir)
	})
	return cmd, dir
}

// A node silent past the node timeout, alone, is still failed and its
// --requeue job runs again on another node — but only once its old run is
// dead: the frozen agent cannot stop it, its job supervisor does at the
// fencing deadline. A /proc sampler at 50 ms never sees both runs, and the
// node shows NotResponding (fencing) in between.
func TestLostNodesJobRunsAgainElsewhereOnlyAfterItsOldRunIsFenced(t *testing.T) {
	const fence = "3s"
	s := startAgentProcStackArgs(t, 1, func(c *Config) {
		c.DegradedAfter, c.DownAfter, c.LivenessGrace = time.Second, 2*time.Second, 100*time.Millisecond
	}, []string{"--simulate", "1", "--vcluster", "hpc-batch", "--fence-timeout", fence})
	// The job first: it can only start on the first agent's node.
	out := t.TempDir()
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: 1, NodesMax: 1, WalltimeSeconds: 300, Requeue: true,
		Script: fmt.Sprintf("#!/bin/sh\necho run $LATTICE_RESTART_COUNT >> %s/runs\nsleep 300\n", out)}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.DisplayId
	waitFor(t, 20*time.Second, "the job running", func() bool {
		return s.get(t, id).State == string(model.StateRunning) && len(jobProcs([]string{s.dataDir})[id]) == 1
	})
	_, dir2 := startSecondAgent(t, s, "--fence-timeout", fence)
	waitFor(t, 20*time.Second, "two nodes", func() bool {
		n, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{})
		return err == nil && len(n.Nodes) == 2
	})
	sampler := sampleJobs([]string{s.dataDir, dir2})
	defer sampler.halt()
	var statesMu sync.Mutex
	states := map[string]bool{}
	stopStates := make(chan struct{})
	defer close(stopStates)
	go func() {
		for {
			if n, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{Names: []string{s.agentNode(t)}}); err == nil && len(n.Nodes) == 1 {
				statesMu.Lock()
				states[n.Nodes[0].State] = true
				statesMu.Unlock()
			}
			select {
			case <-stopStates:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	if err := s.agent.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := s.agent
	defer func() { _ = frozen.Process.Signal(syscall.SIGCONT) }()
	waitFor(t, 60*time.Second, "the job's next run on the other agent", func() bool {
		a := s.get(t, id)
		return a.State == string(model.StateRunning) && a.RequeueCount == 1 && jobProcs([]string{dir2})[id] != nil
	})
	waitFor(t, 10*time.Second, "its next run's first line", func() bool {
		b, _ := os.ReadFile(filepath.Join(out, "runs"))
		return bytes.Contains(b, []byte("run 1"))
	})
	if err := frozen.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the woken agent reconnects and reports its old run
	sampler.halt()
	for _, v := range sampler.both {
		t.Error(v)
	}
	if procs := jobProcs([]string{s.dataDir})[id]; procs != nil {
		t.Error("the old run still runs under the first agent")
	}
	statesMu.Lock()
	defer statesMu.Unlock()
	if !states[string(model.NodeNotResponding)] {
		t.Errorf("the lost node never showed NotResponding while its job was fenced (states seen %v)", states)
	}
	if a := s.get(t, id); a.State != string(model.StateRunning) || a.RequeueCount != 1 {
		t.Errorf("after the old agent woke: %s run %d, want RUNNING run 1", a.State, a.RequeueCount)
	}
}

// agentNode is the name of the stack agent's node (one simulated node).
func (s *agentProcStack) agentNode(t *testing.T) string {
	t.Helper()
	n, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range n.Nodes {
		if nd.Agent == "a1" {
			return nd.Name
		}
	}
	t.Fatal("no node of agent a1")
	return ""
}

// An agent killed for longer than its fencing deadline leaves no job
// running past it — its job supervisor stops them — and none past its
// walltime, which the supervisor enforces on its own first. The quorum
// fails the job only after its processes are gone.
func TestKilledAgentLeavesNoJobPastTheFenceOrTheWalltime(t *testing.T) {
	const fence = 8 * time.Second
	const grace = 2 * time.Second // the stack agent's --grace
	s := startAgentProcStackArgs(t, 2, func(c *Config) {
		c.DegradedAfter, c.DownAfter, c.LivenessGrace = time.Second, 2*time.Second, 100*time.Millisecond
		c.WalltimeBackstop = time.Hour // the supervisor's doing, not the leader's
		c.MassSilenceFraction = 1      // this agent's two nodes are all the nodes
	}, []string{"--simulate", "2", "--vcluster", "hpc-batch", "--fence-timeout", fence.String()})
	long := submitScript(t, s.allocs, 1, "#!/bin/sh\nsleep 300\n")
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: 1, NodesMax: 1, WalltimeSeconds: 3, Script: "#!/bin/sh\nsleep 300\n"}})
	if err != nil {
		t.Fatal(err)
	}
	short := r.DisplayId
	waitFor(t, 20*time.Second, "both running", func() bool {
		p := jobProcs([]string{s.dataDir})
		return p[long] != nil && p[short] != nil
	})
	shortStart := time.Now() // the short job started before this
	sampler := sampleJobs([]string{s.dataDir})
	defer sampler.halt()
	killed := time.Now()
	s.kill9(t)

	var longEnded time.Time
	waitFor(t, 120*time.Second, "the long job failed by the quorum", func() bool {
		st, _ := model.ParseAllocState(s.get(t, long).State)
		if st.Terminal() {
			longEnded = time.Now()
			return true
		}
		return false
	})
	waitFor(t, 10*time.Second, "no job process left", func() bool { return len(jobProcs([]string{s.dataDir})) == 0 })
	sampler.halt()
	// Tolerances for a loaded machine: the supervisor looks once a second.
	const slack = 4 * time.Second
	if last := sampler.lastSeen(short); last.After(shortStart.Add(3*time.Second + 2*time.Second + grace + slack)) {
		t.Errorf("the 3 s job ran until %s after the agent died (%s after it was seen running): past its walltime",
			last.Sub(killed).Round(time.Millisecond), last.Sub(shortStart).Round(time.Millisecond))
	}
	if last := sampler.lastSeen(short); !last.Before(killed.Add(fence)) {
		t.Errorf("the 3 s job ran until %s after the agent died: its walltime was not enforced before the fence", last.Sub(killed).Round(time.Millisecond))
	}
	last := sampler.lastSeen(long)
	if last.After(killed.Add(fence + grace + slack)) {
		t.Errorf("the long job ran until %s after its agent died, past the fencing deadline %s + grace %s", last.Sub(killed).Round(time.Millisecond), fence, grace)
	}
	if last.Before(killed.Add(fence - 3*time.Second)) { // the last answered heartbeat was sent a little before the kill
		t.Errorf("the long job was stopped %s after its agent died, before the fencing deadline %s", last.Sub(killed).Round(time.Millisecond), fence)
	}
	if !longEnded.After(last) {
		t.Errorf("the quorum ended the long job (%s after the kill) while its process still ran (seen %s after)",
			longEnded.Sub(killed).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond))
	}
	if a := s.get(t, long); a.Reason != model.ReasonNodeFailure {
		t.Errorf("long job %s %s, want NodeFailure", a.State, a.Reason)
	}
	for _, f := range []string{"supervisor.log"} {
		b, _ := os.ReadFile(filepath.Join(s.dataDir, f))
		if !bytes.Contains(b, []byte("fencing deadline")) || !bytes.Contains(b, []byte("time limit")) {
			t.Errorf("%s does not say why the jobs were stopped:\n%s", f, b)
		}
	}
}
