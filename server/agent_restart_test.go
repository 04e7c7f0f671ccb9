package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

var (
	buildLatticedOnce sync.Once
	builtLatticed     string
	buildLatticedErr  error
)

func latticedBinary(t *testing.T) string {
	t.Helper()
	buildLatticedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lattice-latticed-bin")
		if err != nil {
			buildLatticedErr = err
			return
		}
		builtLatticed = filepath.Join(dir, "latticed")
		out, err := exec.Command("go", "build", "-o", builtLatticed, "github.com/latticehpc/lattice/cmd/latticed").CombinedOutput()
		if err != nil {
			buildLatticedErr = fmt.Errorf("go build latticed: %v\n%s", err, out)
		}
	})
	if buildLatticedErr != nil {
		t.Fatal(buildLatticedErr)
	}
	return builtLatticed
}

// agentProcStack is a one-member quorum in the test and its agent as a real
// `latticed agent` process, which a test can kill -9 and start again.
type agentProcStack struct {
	srv      *Server
	allocs   latticev1.AllocationServiceClient
	nodes    latticev1.NodeServiceClient
	admin    latticev1.AdminServiceClient
	dataDir  string
	agentLog *syncBuffer
	agent    *exec.Cmd
	// agentArgs replaces --simulate N on the agent's command line.
	agentArgs []string
}

// syncBuffer is a bytes.Buffer safe for the agent's output and a test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func startAgentProcStack(t *testing.T, nodes int, tune func(*Config)) *agentProcStack {
	t.Helper()
	return startAgentProcStackArgs(t, nodes, tune, nil)
}

// startAgentProcStackArgs is startAgentProcStack with an agent command line
// of its own: args replaces --simulate N (a real node: --name NODE ...).
func startAgentProcStackArgs(t *testing.T, nodes int, tune func(*Config), args []string) *agentProcStack {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{ID: "dev", DataDir: filepath.Join(dir, "quorum"), APIAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", InMemRaft: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogLevel: "off", DefaultVCluster: "hpc-batch", KillGrace: 2 * time.Second,
		VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &agentProcStack{srv: srv, allocs: latticev1.NewAllocationServiceClient(conn), nodes: latticev1.NewNodeServiceClient(conn),
		admin: latticev1.NewAdminServiceClient(conn), dataDir: filepath.Join(dir, "agent"), agentLog: &syncBuffer{}, agentArgs: args}
	s.startAgent(t, nodes)
	t.Cleanup(func() {
		if s.agent != nil {
			_ = s.agent.Process.Signal(syscall.SIGKILL)
			_ = s.agent.Wait()
		}
		// Whatever the test's jobs left: their supervisors carry the tag.
		killTagged(s.dataDir)
		removeAgentCgroups(s.dataDir) // cgroup_e2e_test.go
	})
	waitFor(t, 20*time.Second, "nodes ready", func() bool {
		r, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{States: []string{"Ready"}})
		return err == nil && len(r.Nodes) == nodes
	})
	return s
}

func (s *agentProcStack) startAgent(t *testing.T, nodes int) {
	t.Helper()
	args := []string{"agent", "--server", s.srv.APIAddr(), "--id", "a1", "--data-dir", s.dataDir,
		"--heartbeat", "500ms", "--grace", "2s",
		// Without fencing (the tests of the Cleanup backstop freeze the
		// agent and need the quorum to fail its job while it still runs);
		// fencing_test.go turns it on with agentArgs, which come after.
		"--fence-timeout", "-1s"}
	if s.agentArgs != nil {
		args = append(args, s.agentArgs...)
	} else {
		args = append(args, "--simulate", strconv.Itoa(nodes), "--vcluster", "hpc-batch")
	}
	cmd := exec.Command(latticedBinary(t), args...)
	cmd.Stdout, cmd.Stderr = s.agentLog, s.agentLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.agent = cmd
}

func (s *agentProcStack) kill9(t *testing.T) {
	t.Helper()
	if err := s.agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.agent.Wait()
	s.agent = nil
}

func (s *agentProcStack) get(t *testing.T, id string) *latticev1.Allocation {
	t.Helper()
	a, err := s.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (s *agentProcStack) waitEnd(t *testing.T, id string, within time.Duration) *latticev1.Allocation {
	t.Helper()
	var a *latticev1.Allocation
	waitFor(t, within, "allocation "+id+" to end", func() bool {
		a = s.get(t, id)
		st, _ := model.ParseAllocState(a.State)
		return st.Terminal()
	})
	return a
}

// killTagged kills the process groups carrying an agent's tag.
func killTagged(dataDir string) {
	for _, p := range taggedProcs(dataDir) {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	}
}

type procInfo struct {
	pid, pgid int
	allocID   string
	nodes     []string
}

// taggedProcs lists the live processes an agent (by data dir) started,
// with the allocation and nodes their environment names.
func taggedProcs(dataDir string) []procInfo {
	abs, _ := filepath.Abs(dataDir)
	tag := []byte("LATTICE_AGENT_TAG=" + abs)
	entries, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, tag) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue
		}
		p := procInfo{pid: pid, pgid: pgid}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("LATTICE_ALLOC_ID=")); ok {
				p.allocID = string(v)
			}
			if v, ok := bytes.CutPrefix(kv, []byte("LATTICE_NODELIST=")); ok {
				p.nodes = strings.Split(string(v), ",")
			}
		}
		out = append(out, p)
	}
	return out
}

// Restart the agent (kill -9, start again) while a job runs: the job keeps
// running, is not started again, and ends COMPLETED with its real exit
// code; a job that ends while the agent is down is reported with its own.
func TestAgentRestartKeepsRunningJobs(t *testing.T) {
	s := startAgentProcStack(t, 2, nil)
	dir := t.TempDir()
	long := submitScript(t, s.allocs, 1, fmt.Sprintf("#!/bin/sh\necho start >> %s/long\nsleep 6\nexit 0\n", dir))
	short := submitScript(t, s.allocs, 1, "#!/bin/sh\nsleep 1\nexit 3\n")
	waitFor(t, 20*time.Second, "both running", func() bool {
		return s.get(t, long).State == string(model.StateRunning) && s.get(t, short).State == string(model.StateRunning)
	})
	s.kill9(t)
	time.Sleep(2 * time.Second) // the short job ends while no agent watches
	s.startAgent(t, 2)
	a := s.waitEnd(t, short, 20*time.Second)
	if a.State != string(model.StateFailed) || a.ExitCode != 3 || a.Reason != model.ReasonNonZeroExit {
		t.Errorf("short job %s %s exit %d, want FAILED NonZeroExit exit 3 (its real exit code)", a.State, a.Reason, a.ExitCode)
	}
	a = s.waitEnd(t, long, 30*time.Second)
	if a.State != string(model.StateCompleted) || !a.HasExitCode || a.ExitCode != 0 {
		t.Errorf("long job %s %s exit %d, want COMPLETED exit 0; agent log:\n%s", a.State, a.Reason, a.ExitCode, s.agentLog)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "long"))
	if n := strings.Count(string(b), "start"); n != 1 {
		t.Errorf("the long job started %d times, want once", n)
	}
}

// Kill -9 the agent and start it again while jobs come and go: no node
// ever runs processes of two allocations — checked on the processes
// themselves, not on the quorum's view.
func TestAgentKill9NeverTwoAllocationsOnANode(t *testing.T) {
	s := startAgentProcStack(t, 2, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", s.agentLog)
		}
	})
	var ids []string
	for range 6 {
		ids = append(ids, submitScript(t, s.allocs, 1, "#!/bin/sh\nsleep 2\n"))
	}
	stop := make(chan struct{})
	violations := make(chan string, 16)
	var sampled int
	go func() {
		for {
			select {
			case <-stop:
				close(violations)
				return
			case <-time.After(50 * time.Millisecond):
			}
			byNode := map[string]map[string]bool{}
			for _, p := range taggedProcs(s.dataDir) {
				for _, n := range p.nodes {
					if byNode[n] == nil {
						byNode[n] = map[string]bool{}
					}
					byNode[n][p.allocID] = true
				}
			}
			sampled++
			for n, allocs := range byNode {
				if len(allocs) > 1 {
					select {
					case violations <- fmt.Sprintf("node %s runs processes of allocations %v", n, allocs):
					default:
					}
				}
			}
		}
	}()
	waitFor(t, 20*time.Second, "two jobs running", func() bool {
		return len(taggedProcs(s.dataDir)) >= 2
	})
	s.kill9(t)
	time.Sleep(time.Second)
	s.startAgent(t, 2)
	time.Sleep(1500 * time.Millisecond)
	s.kill9(t)
	s.startAgent(t, 2)
	for _, id := range ids {
		s.waitEnd(t, id, 60*time.Second)
	}
	close(stop)
	for v := range violations {
		t.Error(v)
	}
	if sampled < 10 {
		t.Errorf("only %d samples of the processes", sampled)
	}
}

func submitScript(t *testing.T, c latticev1.AllocationServiceClient, nodes int, script string) string {
	t.Helper()
	r, err := c.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "t", NodesMin: int32(nodes), NodesMax: int32(nodes), Script: script, WalltimeSeconds: 300}})
	if err != nil {
		t.Fatal(err)
	}
	return r.DisplayId
}

// kill -9 of a real agent's job supervisor daemon (latticed re-executed):
// its running job is killed and reported FAILED with exit 137 (its exit
// status can no longer be known), the agent stays up, and the next job runs
// under a new daemon.
func TestAgentSupervisorDaemonKill9(t *testing.T) {
	s := startAgentProcStack(t, 1, nil)
	long := submitScript(t, s.allocs, 1, "#!/bin/sh\nsleep 300\n")
	waitFor(t, 20*time.Second, "the job running", func() bool { return s.get(t, long).State == string(model.StateRunning) })
	pidFile := filepath.Join(s.dataDir, "supervisor.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("no daemon pid file: %v; agent log:\n%s", err, s.agentLog)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a := s.waitEnd(t, long, 20*time.Second)
	if a.State != string(model.StateFailed) || !a.HasExitCode || a.ExitCode != 137 {
		t.Errorf("job %s %s exit %d, want FAILED exit 137; agent log:\n%s", a.State, a.Reason, a.ExitCode, s.agentLog)
	}
	waitFor(t, 10*time.Second, "the killed daemon's job gone", func() bool { return len(taggedProcs(s.dataDir)) == 0 })
	next := submitScript(t, s.allocs, 1, "#!/bin/sh\nexit 0\n")
	a = s.waitEnd(t, next, 20*time.Second)
	if a.State != string(model.StateCompleted) {
		t.Errorf("the next job %s %s, want COMPLETED; agent log:\n%s", a.State, a.Reason, s.agentLog)
	}
	if b, err := os.ReadFile(pidFile); err != nil || strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		t.Errorf("daemon pid file after the kill: %q, %v; want a new daemon's", b, err)
	}
	if !strings.Contains(s.agentLog.String(), "started the job supervisor daemon") {
		t.Errorf("the agent did not start a new daemon; log:\n%s", s.agentLog)
	}
}
