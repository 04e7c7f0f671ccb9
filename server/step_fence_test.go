package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// stepTasksOf lists the pids of the live step tasks of the agent whose
// data dir is dataDir whose environment holds marker (tests pass it in
// the step's env).
func stepTasksOf(dataDir, marker string) []int {
	var out []int
	for _, p := range taggedProcs(dataDir) {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "environ"))
		if err == nil && bytes.Contains(env, []byte("\x00"+marker+"\x00")) && bytes.Contains(env, []byte("LATTICE_STEP_ID=")) {
			out = append(out, p.pid)
		}
	}
	return out
}

// An agent killed for longer than its fencing deadline leaves no step task
// (srun) running past it, nor past its allocation's walltime: the tasks
// are the agent's children, and their step guard stops them without it.
// A /proc sampler at 50 ms records when each was last seen.
func TestKilledAgentLeavesNoStepTaskPastTheFenceOrTheWalltime(t *testing.T) {
	const fence = 8 * time.Second
	const grace = 2 * time.Second // the stack agent's --grace
	s := startAgentProcStackArgs(t, 2, func(c *Config) {
		c.DegradedAfter, c.DownAfter, c.LivenessGrace = time.Second, 2*time.Second, 100*time.Millisecond
		c.WalltimeBackstop = time.Hour // the guards' doing, not the leader's
		c.MassSilenceFraction = 1      // this agent's two nodes are all the nodes
	}, []string{"--simulate", "2", "--vcluster", "hpc-batch", "--fence-timeout", fence.String()})
	long := submitScript(t, s.allocs, 1, "#!/bin/sh\nsleep 300\n")
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: 1, NodesMax: 1, WalltimeSeconds: 6, Script: "#!/bin/sh\nsleep 300\n"}})
	if err != nil {
		t.Fatal(err)
	}
	short := r.DisplayId
	waitFor(t, 20*time.Second, "both running", func() bool {
		p := jobProcs([]string{s.dataDir})
		return p[long] != nil && p[short] != nil
	})
	cc, err := grpc.NewClient(s.srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := map[string]string{}
	for _, id := range []string{long, short} {
		marker[id] = "R24_STEP_OF=" + id
		st, err := latticev1.NewStepServiceClient(cc).Launch(ctx, &latticev1.LaunchStepRequest{
			AllocationId: s.get(t, id).Id, Command: []string{"sleep", "300"}, Tasks: 1, Env: []string{marker[id]}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				if _, err := st.Recv(); err != nil {
					return
				}
			}
		}()
	}
	waitFor(t, 20*time.Second, "both steps' tasks running", func() bool {
		return len(stepTasksOf(s.dataDir, marker[long])) == 1 && len(stepTasksOf(s.dataDir, marker[short])) == 1
	})
	shortStart := s.get(t, short).StartTimeUnixMs
	// The guard stops the 6 s job's step at its walltime + 2 s, the fence
	// at the last acknowledged heartbeat (up to 500 ms before the kill) +
	// 8 s, each checked once a second: killed right after the job started
	// (the steps start in well under a second), both come at the same
	// time and the fence, checked first, wins. So the kill comes 3 s into
	// the job: the walltime is then over 2.5 s or more before the fence,
	// and 3 s are left before the agent would end the job itself.
	if at := time.UnixMilli(shortStart).Add(3 * time.Second); time.Until(at) > 0 {
		time.Sleep(time.Until(at))
	} else if time.Since(at) > 1500*time.Millisecond {
		t.Skipf("the steps took %s to start: the 6 s job's walltime is too near to tell its guard from its agent",
			time.Since(time.UnixMilli(shortStart)).Round(time.Millisecond))
	}

	var mu sync.Mutex
	last := map[string]time.Time{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			now := time.Now()
			for id, m := range marker {
				if len(stepTasksOf(s.dataDir, m)) > 0 {
					mu.Lock()
					last[id] = now
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	killed := time.Now()
	s.kill9(t)
	waitFor(t, 60*time.Second, "no step task left", func() bool {
		return len(stepTasksOf(s.dataDir, marker[long])) == 0 && len(stepTasksOf(s.dataDir, marker[short])) == 0
	})
	close(stop)
	<-done
	// Tolerances for a loaded machine: the guard looks once a second.
	const slack = 4 * time.Second
	shortEnd := time.UnixMilli(shortStart).Add(6 * time.Second)
	if l := last[short]; l.After(shortEnd.Add(2*time.Second + grace + slack)) {
		t.Errorf("the step of the 6 s job ran until %s after its walltime ended (its agent was killed %s before)",
			l.Sub(shortEnd).Round(time.Millisecond), shortEnd.Sub(killed).Round(time.Millisecond))
	}
	if l := last[short]; !l.Before(killed.Add(fence)) {
		t.Errorf("the step of the 6 s job ran until %s after the agent died: its walltime was not enforced before the fence", l.Sub(killed).Round(time.Millisecond))
	}
	l := last[long]
	if l.After(killed.Add(fence + grace + slack)) {
		t.Errorf("the long job's step ran until %s after its agent died, past the fencing deadline %s + grace %s", l.Sub(killed).Round(time.Millisecond), fence, grace)
	}
	if l.Before(killed.Add(fence - 3*time.Second)) {
		t.Errorf("the long job's step was stopped %s after its agent died, before the fencing deadline %s", l.Sub(killed).Round(time.Millisecond), fence)
	}
	b, _ := os.ReadFile(filepath.Join(s.dataDir, "supervisor.log"))
	if !bytes.Contains(b, []byte("stopping step tasks")) || !bytes.Contains(b, []byte("fencing deadline")) || !bytes.Contains(b, []byte("time limit")) {
		t.Errorf("supervisor.log does not say why the step tasks were stopped:\n%s", b)
	}
}
