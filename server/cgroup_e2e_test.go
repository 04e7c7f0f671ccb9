package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
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

// End-to-end cgroup tests: a real `latticed agent` (kill -9 and restarted)
// under a one-member quorum, real jobs in real cgroups. They need root and
// a writable cgroup hierarchy of the layout; they skip otherwise.

// startCgroupStack starts the stack with an agent in cgroup layout mode,
// or skips when that layout cannot be used here.
func startCgroupStack(t *testing.T, mode string) *agentProcStack {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cgroup tests need root")
	}
	s := startAgentProcStackArgs(t, 1, nil, []string{"--simulate", "1", "--vcluster", "hpc-batch", "--cgroups", mode})
	waitFor(t, 10*time.Second, "the agent to say its cgroup layout", func() bool {
		return strings.Contains(s.agentLog.String(), "cgroups:")
	})
	if !strings.Contains(s.agentLog.String(), "cgroups: "+mode) {
		t.Skipf("no writable cgroup %s hierarchy here:\n%s", mode, s.agentLog)
	}
	return s
}

// markedPids lists live processes whose environment holds marker.
func markedPids(marker string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte(marker)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
			out = append(out, pid)
		}
	}
	return out
}

func noneLeft(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(markedPids(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if left := markedPids(marker); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes of the job were left behind: %v", left)
	}
}

func submitReq(t *testing.T, s *agentProcStack, req *latticev1.AllocationRequest) string {
	t.Helper()
	req.Tenant, req.NodesMin, req.NodesMax = "t", 1, 1
	if req.WalltimeSeconds == 0 {
		req.WalltimeSeconds = 300
	}
	r, err := s.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return r.DisplayId
}

// Across an agent's kill -9 and restart, nothing of a job escapes: a job
// adopted by the restarted agent and then cancelled leaves no process, and
// what a job left behind while the agent was down (a setsid daemon that
// even dropped the agent's tag from its environment) is killed at restart.
func TestCgroupAcrossAgentKill9(t *testing.T) {
	for _, mode := range []string{"v2", "v1"} {
		t.Run(mode, func(t *testing.T) {
			s := startCgroupStack(t, mode)
			mark1 := fmt.Sprintf("LATTICE_TEST_MARK=kill9-%s-%d", mode, time.Now().UnixNano())
			id := submitReq(t, s, &latticev1.AllocationRequest{Env: []string{mark1}, Script: "#!/bin/sh\nsetsid sleep 1000 &\nsleep 1000\n"})
			waitFor(t, 20*time.Second, "the job's processes", func() bool { return len(markedPids(mark1)) >= 3 })
			s.kill9(t)
			s.startAgent(t, 1)
			waitFor(t, 20*time.Second, "the restarted agent", func() bool {
				return strings.Count(s.agentLog.String(), "cgroups: ") >= 2
			})
			time.Sleep(time.Second) // it adopts the run and reconnects
			if n := len(markedPids(mark1)); n < 3 {
				t.Fatalf("the restart killed the adopted job (%d processes left: %s)\n%s", n, cmdlines(markedPids(mark1)), s.agentLog)
			}
			if _, err := s.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
				t.Fatal(err)
			}
			if a := s.waitEnd(t, id, 30*time.Second); a.State != string(model.StateCancelled) {
				t.Errorf("state %s, want CANCELLED", a.State)
			}
			noneLeft(t, mark1)

			// A job ends while the agent is down; its daemon stays, its
			// environment wiped (the agent's tag scan cannot see it).
			mark2 := fmt.Sprintf("LATTICE_TEST_MARK=down-%s-%d", mode, time.Now().UnixNano())
			id2 := submitReq(t, s, &latticev1.AllocationRequest{Command: []string{"env -i " + mark2 + " setsid sleep 1000 & sleep 2; exit 0"}})
			waitFor(t, 20*time.Second, "the job's daemon", func() bool { return len(markedPids(mark2)) >= 1 })
			s.kill9(t)
			time.Sleep(3 * time.Second) // the job ends meanwhile; its daemon stays
			if len(markedPids(mark2)) == 0 {
				t.Fatal("the daemon ended by itself; the test proves nothing")
			}
			s.startAgent(t, 1)
			if a := s.waitEnd(t, id2, 30*time.Second); a.State != string(model.StateCompleted) {
				t.Errorf("state %s/%s, want COMPLETED", a.State, a.Reason)
			}
			noneLeft(t, mark2)
		})
	}
}

var (
	burnOnce sync.Once
	burnPath string
	burnErr  error
)

func memburn(t *testing.T) string {
	t.Helper()
	burnOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lattice-memburn")
		if err != nil {
			burnErr = err
			return
		}
		burnPath = filepath.Join(dir, "memburn")
		if out, err := exec.Command("go", "build", "-o", burnPath, "../agent/testdata/memburn").CombinedOutput(); err != nil {
			burnErr = fmt.Errorf("go build memburn: %v\n%s", err, out)
		}
	})
	if burnErr != nil {
		t.Fatal(burnErr)
	}
	return burnPath
}

func near(got, want float64) bool { return math.Abs(got-want) <= 0.1*want }

// Through the whole stack: --mem becomes the job's limit and a job past it
// ends FAILED OutOfMemory while the next job runs; the known workload's
// usage is right in stat while it runs and on the allocation (history)
// once it ended; the per-tenant report sums it.
func TestCgroupLimitsAndUsageEndToEnd(t *testing.T) {
	s := startCgroupStack(t, "v2")
	if !strings.Contains(s.agentLog.String(), "memory_limit=true") {
		t.Skip("no memory controller (v2 or v1) here")
	}
	bin := memburn(t)
	oom := submitReq(t, s, &latticev1.AllocationRequest{Command: []string{bin, "400", "0", "60"}, MemPerNodeMb: 100})
	a := s.waitEnd(t, oom, 60*time.Second)
	if a.State != string(model.StateFailed) || a.Reason != model.ReasonOutOfMemory {
		t.Fatalf("over its --mem: %s/%s, want FAILED OutOfMemory", a.State, a.Reason)
	}
	out := t.TempDir()
	id := submitReq(t, s, &latticev1.AllocationRequest{Command: []string{bin, "200", "2", "4"}, MemPerNodeMb: 1024,
		Stdout: filepath.Join(out, "burn.out")})
	waitFor(t, 60*time.Second, "the workload to be ready", func() bool {
		b, _ := os.ReadFile(filepath.Join(out, "burn.out"))
		return bytes.Contains(b, []byte("ready"))
	})
	cc, err := grpc.NewClient(s.srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	st, err := latticev1.NewUsageServiceClient(cc).Stat(context.Background(), &latticev1.StatRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	u := st.GetUsage()
	if cpu := u.GetUserCpuSeconds() + u.GetSystemCpuSeconds(); !near(cpu, 2) || !near(float64(u.GetMaxRssBytes()), 200<<20) {
		t.Errorf("stat while running: CPU %.2f s, max RSS %d MB; want 2 s and 200 MB within 10 %%", cpu, u.GetMaxRssBytes()>>20)
	}
	a = s.waitEnd(t, id, 60*time.Second)
	if a.State != string(model.StateCompleted) {
		t.Fatalf("the next job: %s/%s, want COMPLETED", a.State, a.Reason)
	}
	u = a.GetUsage()
	if cpu := u.GetUserCpuSeconds() + u.GetSystemCpuSeconds(); !near(cpu, 2) || !near(float64(u.GetMaxRssBytes()), 200<<20) {
		t.Errorf("history: CPU %.2f s, max RSS %d MB; want 2 s and 200 MB within 10 %%", cpu, u.GetMaxRssBytes()>>20)
	}
	if u.GetEnergySource() != model.EnergyModel || u.GetConsumedEnergyJoules() <= 0 {
		t.Errorf("energy %v J from %q, want the model's estimate", u.GetConsumedEnergyJoules(), u.GetEnergySource())
	}
	rep, err := latticev1.NewUsageServiceClient(cc).Report(context.Background(), &latticev1.UsageReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tenants) != 1 || rep.Tenants[0].Jobs != 2 || rep.Tenants[0].MeasuredJobs != 2 || rep.Tenants[0].CpuSeconds < 1.8 {
		t.Errorf("usage report %v, want tenant t with 2 measured jobs and their CPU time", rep.Tenants)
	}
}

func cmdlines(pids []int) string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		out = append(out, fmt.Sprintf("%d:%s", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return strings.Join(out, ", ")
}

// latticectl suspend/resume through the whole stack: the quorum records
// it, the agent freezes the job (no CPU while suspended), resume thaws it.
func TestSuspendResumeEndToEnd(t *testing.T) {
	s := startCgroupStack(t, "v2")
	cc, err := grpc.NewClient(s.srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	us := latticev1.NewUsageServiceClient(cc)
	id := submitReq(t, s, &latticev1.AllocationRequest{Command: []string{"while :; do :; done"}})
	waitFor(t, 20*time.Second, "running", func() bool { return s.get(t, id).State == string(model.StateRunning) })
	cpu := func() float64 {
		st, err := us.Stat(context.Background(), &latticev1.StatRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return st.GetUsage().GetUserCpuSeconds() + st.GetUsage().GetSystemCpuSeconds()
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := us.Suspend(context.Background(), &latticev1.SuspendJobRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if a := s.get(t, id); a.SuspendedUnixMs == 0 || a.State != string(model.StateRunning) {
		t.Fatalf("after suspend: state %s suspended_unix_ms %d", a.State, a.SuspendedUnixMs)
	}
	time.Sleep(500 * time.Millisecond) // the agent freezes it
	before := cpu()
	time.Sleep(time.Second)
	if d := cpu() - before; d > 0.05 {
		t.Errorf("a suspended job used %.2f s of CPU", d)
	}
	if _, err := us.Suspend(context.Background(), &latticev1.SuspendJobRequest{Id: id, Resume: true}); err != nil {
		t.Fatal(err)
	}
	if a := s.get(t, id); a.SuspendedUnixMs != 0 || a.SuspendedSeconds < 1 {
		t.Errorf("after resume: suspended_unix_ms %d suspended_seconds %d", a.SuspendedUnixMs, a.SuspendedSeconds)
	}
	waitFor(t, 10*time.Second, "it runs again", func() bool {
		before := cpu()
		time.Sleep(200 * time.Millisecond)
		return cpu()-before > 0.01
	})
	if _, err := s.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	s.waitEnd(t, id, 30*time.Second)
}

// A step's usage (its cgroup on each node) is recorded with its end.
func TestStepUsageEndToEnd(t *testing.T) {
	s := startCgroupStack(t, "v2")
	bin := memburn(t)
	id := submitReq(t, s, &latticev1.AllocationRequest{Command: []string{"sleep 120"}})
	waitFor(t, 20*time.Second, "running", func() bool { return s.get(t, id).State == string(model.StateRunning) })
	cc, err := grpc.NewClient(s.srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	alloc := s.get(t, id)
	st, err := latticev1.NewStepServiceClient(cc).Launch(context.Background(), &latticev1.LaunchStepRequest{
		AllocationId: alloc.Id, Command: []string{bin, "100", "1", "0"}, Tasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		out, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if out.GetEnd() != nil {
			break
		}
	}
	a := s.get(t, id)
	if len(a.Steps) != 1 || a.Steps[0].Usage == nil {
		t.Fatalf("steps %v, want one with its usage", a.Steps)
	}
	u := a.Steps[0].Usage
	if cpu := u.UserCpuSeconds + u.SystemCpuSeconds; !near(cpu, 1) || !near(float64(u.MaxRssBytes), 100<<20) {
		t.Errorf("step usage: CPU %.2f s, max RSS %d MB; want 1 s and 100 MB within 10 %%", cpu, u.MaxRssBytes>>20)
	}
	if _, err := s.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	s.waitEnd(t, id, 30*time.Second)
}

// removeAgentCgroups ends and removes the cgroups a killed agent of
// dataDir left (agent/cgroup.go names them lattice-HASH of its data dir).
func removeAgentCgroups(dataDir string) {
	abs, _ := filepath.Abs(dataDir)
	h := sha256.Sum256([]byte(abs))
	name := "lattice-" + hex.EncodeToString(h[:6])
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() != name {
			return nil
		}
		var dirs []string
		_ = filepath.WalkDir(p, func(q string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, q)
				for _, f := range strings.Fields(readOr(filepath.Join(q, "cgroup.procs"))) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			for try := 0; try < 50 && syscall.Rmdir(dirs[i]) == syscall.EBUSY; try++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
		return filepath.SkipDir
	})
}

func readOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
