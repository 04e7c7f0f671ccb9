package agent

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latticehpc/lattice/agent/supervise"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

func TestParseSupervisorMode(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"", SupervisorDaemon, false},
		{"daemon", SupervisorDaemon, false},
		{"per-job", SupervisorPerJob, false},
		{"perjob", "", true},
		{"Daemon", "", true},
	} {
		got, err := ParseSupervisorMode(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseSupervisorMode(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "daemon or per-job") {
			t.Errorf("error %q does not name the allowed values", err)
		}
	}
}

// daemonAgent is an agent (KeepJobs) whose runs go through the daemon.
func daemonAgent(t *testing.T, dir string) *Agent {
	t.Helper()
	cfg := restartConfig(dir)
	cfg.SupervisorMode = SupervisorDaemon
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// daemonPID is the pid of the daemon a is connected to (0: none).
func daemonPID(a *Agent) int {
	a.runner.daemonMu.Lock()
	defer a.runner.daemonMu.Unlock()
	if a.runner.daemon == nil || a.runner.daemon.isDead() {
		return 0
	}
	return a.runner.daemon.pid
}

// runPID is the pid (= process group) of a running allocation.
func runPID(t *testing.T, a *Agent, id uint64) int {
	t.Helper()
	a.runner.mu.Lock()
	defer a.runner.mu.Unlock()
	p := a.runner.running[id]
	if p == nil {
		t.Fatalf("allocation %d does not run", id)
	}
	return p.pgid
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A run through the daemon: a child of the daemon (not of the agent),
// leading its own process group, in its work dir, with the job's
// environment; its real exit code is reported and recorded durably.
func TestDaemonRunsJobAndRecordsExitCode(t *testing.T) {
	dir := t.TempDir()
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	out := filepath.Join(dir, "out")
	a.handle(assignMsg(1, 0, "#!/bin/sh\necho \"$LATTICE_ALLOC_ID $(pwd) $LATTICE_SUPERVISE_STATUS.\" > "+out+"\nsleep 0.5\nexit 3\n"))
	waitReport(t, a, 1, model.StateRunning)
	pid := runPID(t, a, 1)
	d := daemonPID(a)
	if d == 0 || d == os.Getpid() {
		t.Fatalf("no supervisor daemon (pid %d)", d)
	}
	if got := parentOf(t, pid); got != d {
		t.Errorf("the job's parent is %d, want the daemon %d", got, d)
	}
	if pgid, _ := syscall.Getpgid(pid); pgid != pid {
		t.Errorf("the job's process group is %d, want its own (%d)", pgid, pid)
	}
	r := waitReport(t, a, 1, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 3 || r.Reason != model.ReasonNonZeroExit {
		t.Errorf("report %v, want FAILED NonZeroExit exit 3", r)
	}
	if code, ok := readStatus(a.statusPath(1, 0)); !ok || code != 3 {
		t.Errorf("status file: %d, %v; want 3", code, ok)
	}
	b, _ := os.ReadFile(out)
	cwd, _ := os.Getwd()
	if want := "1 " + cwd + " .\n"; string(b) != want {
		t.Errorf("the job wrote %q, want %q (its id, the agent's working dir, no supervisor variable)", b, want)
	}
}

// A cancel reaches the job's own process group: its TERM trap runs
// (with the grace), and the run ends CANCELLED.
func TestDaemonCancelSignalsTheJob(t *testing.T) {
	dir := t.TempDir()
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	mark := filepath.Join(dir, "term")
	a.handle(assignMsg(2, 0, "#!/bin/sh\ntrap 'echo term > "+mark+"; exit 0' TERM\nwhile :; do sleep 0.1; done\n"))
	waitReport(t, a, 2, model.StateRunning)
	time.Sleep(300 * time.Millisecond) // the trap is set
	a.handle(&latticev1.ServerMessage{Msg: &latticev1.ServerMessage_Cancel{Cancel: &latticev1.CancelAllocation{AllocationId: 2, GraceSeconds: 5}}})
	r := waitReport(t, a, 2, model.StateCancelled)
	if !r.HasExitCode || r.ExitCode != 0 {
		t.Errorf("report %v, want CANCELLED with the trap's exit 0", r)
	}
	if b, err := os.ReadFile(mark); err != nil || string(b) != "term\n" {
		t.Errorf("the job's TERM trap did not run: %q, %v", b, err)
	}
}

// An entrypoint that cannot be executed ends with 127 and its error in its
// stderr, as under a per-job supervisor.
func TestDaemonExecFailureIs127(t *testing.T) {
	dir := t.TempDir()
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	a.handle(assignMsg(4, 0, "#!/nonexistent/interpreter\nexit 0\n"))
	r := waitReport(t, a, 4, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 127 {
		t.Errorf("report %v, want FAILED exit 127", r)
	}
	lp, _ := a.runner.Paths(4)
	if b, _ := os.ReadFile(lp.Stderr); !strings.Contains(string(b), "lattice: start") {
		t.Errorf("stderr %q does not say why it did not start", b)
	}
}

// The daemon outlives the agent: a restarted agent adopts the run from it
// and reports its real exit code; the daemon ends once it has neither an
// agent nor a job.
func TestDaemonRunAdoptedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	a1 := daemonAgent(t, dir)
	a1.handle(assignMsg(5, 0, "#!/bin/sh\nsleep 1\nexit 7\n"))
	waitReport(t, a1, 5, model.StateRunning)
	pid, d := runPID(t, a1, 5), daemonPID(a1)
	a1.detach()

	a2 := daemonAgent(t, dir)
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	if !a2.runner.IsRunning(5) || runPID(t, a2, 5) != pid {
		t.Fatal("the restarted agent did not adopt the running job")
	}
	if got := daemonPID(a2); got != d {
		t.Errorf("the restarted agent's daemon is %d, want the same %d", got, d)
	}
	r := waitReport(t, a2, 5, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 7 || r.Reason != model.ReasonNonZeroExit {
		t.Errorf("report %v, want FAILED NonZeroExit exit 7", r)
	}
	a2.runner.Shutdown(time.Second)
	waitGone(t, d, "the daemon without agent or job")
}

// kill -9 of the daemon while a run goes: the run is reported FAILED with
// a message saying why, its processes are killed, and the next run starts
// a new daemon.
func TestDaemonKilledRunsFailAndDaemonRestarts(t *testing.T) {
	dir := t.TempDir()
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	a.handle(assignMsg(6, 0, "#!/bin/sh\nsleep 300\n"))
	waitReport(t, a, 6, model.StateRunning)
	pid, d := runPID(t, a, 6), daemonPID(a)
	if err := syscall.Kill(d, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := waitReport(t, a, 6, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 137 || r.Message != lostMessage {
		t.Errorf("report %v, want FAILED exit 137 with %q", r, lostMessage)
	}
	waitGone(t, pid, "the job of the killed daemon")

	a.handle(assignMsg(7, 0, "#!/bin/sh\nexit 0\n"))
	r = waitReport(t, a, 7, model.StateCompleted)
	if !r.HasExitCode || r.ExitCode != 0 {
		t.Errorf("report %v, want COMPLETED exit 0", r)
	}
	if nd := daemonPID(a); nd == 0 || nd == d {
		t.Errorf("daemon after the kill: %d (killed: %d); want a new one", nd, d)
	}
}

// kill -9 of the daemon while the agent is down: the restarted agent
// reports the run FAILED (nobody can know its exit status) and kills it.
func TestDaemonKilledWhileAgentDown(t *testing.T) {
	dir := t.TempDir()
	a1 := daemonAgent(t, dir)
	a1.handle(assignMsg(8, 0, "#!/bin/sh\nsleep 300\n"))
	waitReport(t, a1, 8, model.StateRunning)
	pid, d := runPID(t, a1, 8), daemonPID(a1)
	a1.detach()
	if err := syscall.Kill(d, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d, "the killed daemon")

	a2 := daemonAgent(t, dir)
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	r := waitReport(t, a2, 8, model.StateFailed)
	if r.Reason != model.ReasonNodeFailure || !strings.Contains(r.Message, "recorded no exit status") {
		t.Errorf("report %v, want FAILED NodeFailure saying its supervisor recorded no exit status", r)
	}
	waitGone(t, pid, "the orphaned job")
}

// Upgrades: a run started under a per-job supervisor is adopted by an
// agent that uses the daemon, with its real exit code.
func TestDaemonAgentAdoptsPerJobSupervisorRun(t *testing.T) {
	dir := t.TempDir()
	cfg := restartConfig(dir)
	cfg.SupervisorMode = SupervisorPerJob
	a1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a1.handle(assignMsg(9, 0, "#!/bin/sh\nsleep 1\nexit 4\n"))
	waitReport(t, a1, 9, model.StateRunning)
	if daemonPID(a1) != 0 {
		t.Fatal("a per-job agent connected to a daemon")
	}
	a1.detach()

	a2 := daemonAgent(t, dir)
	t.Cleanup(func() { a2.runner.Shutdown(time.Second) })
	if !a2.runner.IsRunning(9) {
		t.Fatal("the daemon agent did not adopt the per-job supervisor's run")
	}
	r := waitReport(t, a2, 9, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 4 {
		t.Errorf("report %v, want FAILED exit 4", r)
	}
}

// Under a root agent the daemon starts the job as its owner (the same
// credential a per-job supervisor would take), with output it can write.
func TestDaemonRunsJobAsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root; this test runs as uid", os.Geteuid())
	}
	// Its script must be readable by nobody: not under t.TempDir (0700).
	dir, err := os.MkdirTemp("", "lattice-daemon-owner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	msg := assignMsg(10, 0, "#!/bin/sh\nid -u\nid -g\n")
	msg.GetAssign().Allocation.Request.User = "nobody"
	a.handle(msg)
	r := waitReport(t, a, 10, model.StateCompleted)
	lp, _ := a.runner.Paths(10)
	if !r.HasExitCode || r.ExitCode != 0 {
		e, _ := os.ReadFile(lp.Stderr)
		t.Fatalf("report %v, want COMPLETED exit 0; stderr %q", r, e)
	}
	b, _ := os.ReadFile(lp.Stdout)
	if string(b) != "65534\n65534\n" {
		t.Errorf("the job ran as %q, want uid and gid 65534 (nobody)", b)
	}
	if daemonPID(a) == 0 {
		t.Error("the run did not go through the daemon")
	}
}

// A daemon of another protocol version is refused at once, and the run
// gets a supervisor of its own.
func TestDaemonOfAnotherVersionFallsBackToPerJob(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: supervise.SocketName(dir), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			buf, oob := supervise.RecvBuffers()
			if _, _, err := supervise.Recv(c, buf, oob); err == nil {
				_ = supervise.Send(c, &supervise.Msg{Op: supervise.OpHello, V: supervise.ProtocolVersion + 1})
			}
			c.Close()
		}
	}()
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	start := time.Now()
	a.handle(assignMsg(11, 0, "#!/bin/sh\nexit 6\n"))
	r := waitReport(t, a, 11, model.StateFailed)
	if !r.HasExitCode || r.ExitCode != 6 {
		t.Errorf("report %v, want FAILED exit 6", r)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the run took %v: the agent waited for a daemon it cannot use", d)
	}
	if daemonPID(a) != 0 {
		t.Error("the agent uses a daemon of another version")
	}
	if code, ok := readStatus(a.statusPath(11, 0)); !ok || code != 6 {
		t.Errorf("status file: %d, %v; want 6 (written by a per-job supervisor)", code, ok)
	}
}

// An agent connected to the daemon that reads nothing (frozen) holds up
// neither the reaper nor the other agents' exits.
func TestDaemonNotHeldUpByAnAgentThatDoesNotRead(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	ended := 0
	r, err := NewRunner(RunnerConfig{Dir: dir, SupervisorMode: SupervisorDaemon, OnExit: func(Exit) {
		mu.Lock()
		ended++
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(time.Second) })
	start := func(id uint64) {
		t.Helper()
		if err := r.Start(Launch{AllocID: id, Command: []string{"/bin/true", "x"}, StatusFile: filepath.Join(dir, "runs", strconv.FormatUint(id, 10)+".status")}); err != nil {
			t.Fatal(err)
		}
	}
	start(1) // starts the daemon
	// Connected, said hello, reads nothing: the daemon's packets pile up.
	frozen, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: supervise.SocketName(dir), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	if err := supervise.Send(frozen, &supervise.Msg{Op: supervise.OpHello, V: supervise.ProtocolVersion}); err != nil {
		t.Fatal(err)
	}
	const n = 600 // a unix socket's send buffer holds a few hundred small packets
	for id := uint64(2); id <= n; id++ {
		start(id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		e := ended
		mu.Unlock()
		if e == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs ended", e, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A list longer than one packet comes in parts (status files with long
// paths: 80 of them are more than MaxMsg).
func TestDaemonListsManyJobs(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRunner(RunnerConfig{Dir: dir, SupervisorMode: SupervisorDaemon})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(time.Second) })
	long := filepath.Join(dir, "runs")
	for i := range 14 {
		long = filepath.Join(long, strings.Repeat(string(rune('a'+i)), 200))
	}
	const n = 80
	for id := uint64(1); id <= n; id++ {
		if err := r.Start(Launch{AllocID: id, Command: []string{"/bin/sleep", "30"}, StatusFile: filepath.Join(long, strconv.FormatUint(id, 10)+".status")}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := dialDaemon(dir) // as a restarted agent would
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	jobs, err := other.jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != n {
		t.Fatalf("the daemon listed %d jobs, want %d", len(jobs), n)
	}
	for id := uint64(1); id <= n; id++ {
		if jobs[filepath.Join(long, strconv.FormatUint(id, 10)+".status")] == 0 {
			t.Fatalf("job %d is not listed", id)
		}
	}
}

// A daemon that stops answering (here: stopped) does not hold the agent's
// starts for ever: the start in flight fails after daemonReplyTimeout, the
// daemon is killed, and the next start runs under a new one.
func TestDaemonThatDoesNotAnswerIsReplaced(t *testing.T) {
	old := daemonReplyTimeout
	daemonReplyTimeout = 500 * time.Millisecond
	t.Cleanup(func() { daemonReplyTimeout = old })
	dir := t.TempDir()
	a := daemonAgent(t, dir)
	t.Cleanup(func() { a.runner.Shutdown(time.Second) })
	a.handle(assignMsg(11, 0, "#!/bin/sh\nexit 0\n"))
	waitReport(t, a, 11, model.StateCompleted)
	d := daemonPID(a)
	if d == 0 {
		t.Fatal("no supervisor daemon")
	}
	if err := syscall.Kill(d, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(d, syscall.SIGKILL) })
	a.handle(assignMsg(12, 0, "#!/bin/sh\nexit 0\n"))
	r := waitReport(t, a, 12, model.StateFailed)
	if r.Reason != model.ReasonLaunchFailed {
		t.Errorf("report %v, want FAILED LaunchFailed", r)
	}
	waitGone(t, d, "the daemon that did not answer")
	a.handle(assignMsg(13, 0, "#!/bin/sh\nexit 0\n"))
	if r := waitReport(t, a, 13, model.StateCompleted); !r.HasExitCode || r.ExitCode != 0 {
		t.Errorf("report %v, want COMPLETED exit 0", r)
	}
	if nd := daemonPID(a); nd == 0 || nd == d {
		t.Errorf("daemon after the hang: %d (stopped one: %d); want a new one", nd, d)
	}
}
