package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// interactiveStack is a dev stack of n nodes whose agent has the srun shim,
// with the latticectl binary and a directory holding an srun for the
// submit host (as `latticectl slurm-commands install` makes one).
func interactiveStack(t *testing.T, n int, tune func(*Config)) (*devStack, string, string) {
	t.Helper()
	buildLatticectlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lattice-steps-bin")
		if err != nil {
			buildLatticectlErr = err
			return
		}
		builtLatticectl = filepath.Join(dir, "latticectl")
		out, err := exec.Command("go", "build", "-o", builtLatticectl, "github.com/latticehpc/lattice/cmd/latticectl").CombinedOutput()
		if err != nil {
			buildLatticectlErr = fmt.Errorf("go build latticectl: %v\n%s", err, out)
		}
	})
	if buildLatticectlErr != nil {
		t.Fatal(buildLatticectlErr)
	}
	devLatticectl = builtLatticectl
	t.Cleanup(func() { devLatticectl = "" })
	dir := t.TempDir()
	d := startDevWith(t, filepath.Join(dir, "stack"), n, []string{"interactive"}, tune)
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"srun", "salloc"} {
		cmd := map[string]string{"srun": "srun", "salloc": "alloc"}[name]
		script := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", builtLatticectl, cmd)
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d, builtLatticectl, bin
}

// userEnv is a submit host's environment: no allocation, the stack's
// server, an empty home (no shell start-up files), srun and salloc first
// on PATH.
func userEnv(d *devStack, bin, home string) []string {
	return []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LATTICE_SERVER=" + d.srv.APIAddr(),
		"TERM=xterm", "PS1=PROMPT$ ", "USER=" + os.Getenv("USER"), "LANG=C"}
}

// terminal is the master side of a pseudo-terminal whose output is kept.
type terminal struct {
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	seen   int // output consumed by expect
}

func (tm *terminal) read() {
	buf := make([]byte, 4096)
	for {
		n, err := tm.master.Read(buf)
		tm.mu.Lock()
		tm.out.Write(buf[:n])
		tm.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// expect waits for want in the output after what was already matched.
func (tm *terminal) expect(want string) {
	tm.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		tm.mu.Lock()
		s := tm.out.String()
		i := strings.Index(s[tm.seen:], want)
		if i >= 0 {
			tm.seen += i + len(want)
		}
		tm.mu.Unlock()
		if i >= 0 {
			return
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("terminal: timed out waiting for %q; the terminal shows:\n%s", want, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// text is everything the terminal showed so far.
func (tm *terminal) text() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

func (tm *terminal) typeIn(s string) {
	tm.t.Helper()
	if _, err := tm.master.Write([]byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// TestSrunPtyBash types into `srun --pty bash` run on a real pseudo-terminal,
// outside any allocation: the shell answers, Ctrl-C interrupts its
// foreground command and not the shell, Ctrl-Z stops it, the window size
// (and its changes) reach `stty size`, and `exit 3` is srun's exit code.
// The allocation srun created for it ends with it.
func TestSrunPtyBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	d, _, bin := interactiveStack(t, 2, nil)
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	if err := pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 100}); err != nil {
		t.Fatal(err)
	}
	// --norc: the site's /etc/bash.bashrc would set its own prompt.
	cmd := exec.Command(filepath.Join(bin, "srun"), "--pty", bash, "--norc", "--noprofile")
	cmd.Env = userEnv(d, bin, t.TempDir())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	defer func() { _ = cmd.Process.Kill() }()
	tm := &terminal{t: t, master: master}
	go tm.read()

	tm.expect("PROMPT$ ")
	tm.typeIn("echo answer $((6*7)) on $SLURMD_NODENAME\r")
	tm.expect("answer 42 on node")
	tm.expect("PROMPT$ ")

	tm.typeIn("stty size\r")
	tm.expect("40 100")
	tm.expect("PROMPT$ ")
	// The window changes: the kernel tells latticectl (SIGWINCH), which
	// tells the remote terminal.
	if err := pty.Setsize(master, &pty.Winsize{Rows: 50, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		tm.typeIn("stty size\r")
		tm.expect("PROMPT$ ")
		if strings.Contains(tm.text(), "50 120") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new window size never reached the remote terminal:\n%s", tm.text())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Ctrl-C stops the foreground command, not the shell.
	tm.typeIn("sleep 300; echo sleep-ended-$?\r")
	time.Sleep(500 * time.Millisecond)
	tm.typeIn("\x03")
	tm.expect("PROMPT$ ")
	tm.typeIn("echo still-$((1+1))\r")
	tm.expect("still-2")
	tm.expect("PROMPT$ ")

	// Ctrl-Z stops it, and job control sees it.
	tm.typeIn("sleep 300\r")
	time.Sleep(500 * time.Millisecond)
	tm.typeIn("\x1a")
	tm.expect("Stopped")
	tm.expect("PROMPT$ ")
	tm.typeIn("kill -9 %1; echo killed-it\r")
	tm.expect("killed-it")
	tm.expect("PROMPT$ ")

	tm.typeIn("exit 3\r")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("srun did not end after exit 3:\n%s", tm.text())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("srun --pty bash after `exit 3`: %v, want exit code 3\n%s", err, tm.text())
	}
	if strings.Contains(tm.text(), "sleep-ended-0") {
		t.Fatalf("Ctrl-C did not interrupt sleep:\n%s", tm.text())
	}
	// The allocation srun made for the terminal ended with it.
	waitFor(t, 30*time.Second, "srun's allocation to end", func() bool {
		r, err := d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
		if err != nil || len(r.Allocations) != 1 {
			return false
		}
		return r.Allocations[0].State == string(model.StateCancelled) && r.Allocations[0].Request.Interactive
	})
}

// sallocRun runs salloc (the submit host's) with stdin and returns its
// exit code and output.
func sallocRun(t *testing.T, d *devStack, bin string, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "salloc"), args...)
	cmd.Env = append(userEnv(d, bin, t.TempDir()), "SHELL=/bin/sh")
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("salloc did not end; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// TestSallocShell: salloc -N2 grants an allocation and starts the user's
// shell here; srun inside runs on both nodes; the allocation is
// relinquished when the shell exits, whose exit code salloc returns.
func TestSallocShell(t *testing.T) {
	d, _, bin := interactiveStack(t, 2, nil)
	code, out, errOut := sallocRun(t, d, bin, strings.NewReader(
		"srun hostname\nsrun sh -c 'echo on $SLURMD_NODENAME of $SLURM_JOB_NODELIST'\necho nnodes=$SLURM_NNODES job=$SLURM_JOB_ID\nexit 4\n"), "-N2")
	if code != 4 {
		t.Fatalf("salloc exit code %d, want the shell's 4; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// As root each simulated node's tasks have the node's name as host
	// name (agent/tasks.go); otherwise they share this host's.
	host, _ := os.Hostname()
	if os.Geteuid() == 0 {
		if !strings.Contains(out, "node001\n") || !strings.Contains(out, "node002\n") {
			t.Errorf("srun hostname inside salloc -N2 did not run on node001 and node002:\n%s", out)
		}
	} else if strings.Count(out, host+"\n") != 2 {
		t.Errorf("srun hostname inside salloc -N2 did not run twice:\n%s", out)
	}
	for _, n := range []string{"node001", "node002"} {
		if !strings.Contains(out, "on "+n+" of node[001-002]") {
			t.Errorf("no task on %s:\n%s", n, out)
		}
	}
	if !strings.Contains(out, "nnodes=2 job=") {
		t.Errorf("the shell lacks the allocation's environment:\n%s", out)
	}
	for _, want := range []string{"salloc: Granted job allocation ", "salloc: Relinquishing job allocation "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("salloc's stderr lacks %q:\n%s", want, errOut)
		}
	}
	r, err := d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
	if err != nil || len(r.Allocations) != 1 {
		t.Fatalf("allocations: %v %v", r, err)
	}
	a := d.waitEnded(t, r.Allocations[0].DisplayId)
	if a.State != string(model.StateCancelled) || len(a.Nodes) != 2 {
		t.Fatalf("the allocation after the shell exited: %s on %v, want CANCELLED on 2 nodes", a.State, a.Nodes)
	}
}

// TestSallocIdleTimeout: an interactive allocation whose shell is left
// idle (no step) is ended by the site's idle timeout (shortened here), and
// salloc tells its user and ends the shell.
func TestSallocIdleTimeout(t *testing.T) {
	d, _, bin := interactiveStack(t, 2, func(c *Config) { c.InteractiveIdleTimeout = 3 * time.Second })
	in, w, err := os.Pipe() // a shell nobody types into
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer in.Close()
	code, out, errOut := sallocRun(t, d, bin, in, "-N", "1")
	if !strings.Contains(errOut, "has been revoked") || code == 0 {
		t.Fatalf("salloc with an idle shell: exit %d; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	r, err := d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
	if err != nil || len(r.Allocations) != 1 {
		t.Fatalf("allocations: %v %v", r, err)
	}
	a := d.waitEnded(t, r.Allocations[0].DisplayId)
	if a.State != string(model.StateCancelled) || a.Reason != model.ReasonIdleTimeout {
		t.Fatalf("idle allocation ended %s (%s), want CANCELLED (%s)", a.State, a.Reason, model.ReasonIdleTimeout)
	}
}

// TestSallocWaitsAndExplains: an interactive request behind a running job
// waits; salloc and explain say when it should start; it is granted when
// the node frees, and then runs its command.
func TestSallocWaitsAndExplains(t *testing.T) {
	d, _, bin := interactiveStack(t, 1, nil)
	busy := d.submit(t, &latticev1.AllocationRequest{Tenant: "t", NodesMin: 1, Command: []string{"sleep 300"}, WalltimeSeconds: 600, PriorityClass: 5})
	waitFor(t, 30*time.Second, "the busy job to run", func() bool {
		a, err := d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: busy})
		return err == nil && a.State == string(model.StateRunning)
	})
	cmd := exec.Command(filepath.Join(bin, "salloc"), "-N1", "-t", "5", "sh", "-c", "echo granted on $SLURM_JOB_NODELIST")
	cmd.Env = userEnv(d, bin, t.TempDir())
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(errOut.String(), "expected to start at") {
		if time.Now().After(deadline) {
			b, _ := d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: busy})
			t.Fatalf("salloc never said when its allocation should start; stderr:\n%s\nbusy: %v", errOut.String(), b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e, err := d.allocs.Explain(context.Background(), &latticev1.ExplainRequest{Id: "2"})
	if err != nil || !strings.Contains(e.Message, "interactive request: expected to start at") || e.ExpectedStartUnixMs == 0 {
		t.Fatalf("explain of the waiting interactive request: %v %v", e, err)
	}
	if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{busy}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("salloc was not granted after the node freed; stderr:\n%s", errOut.String())
	}
	if err != nil || !strings.Contains(out.String(), "granted on node001") || !strings.Contains(errOut.String(), "Granted job allocation 2") {
		t.Fatalf("salloc: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
}

// TestRunPtyInsideAllocationAndAttach: inside an allocation, run --pty
// runs its command on a terminal of the first node (stdin here is no
// terminal: it is relayed as typed); attach joins it, sees its output and
// types into it; the step's exit code is both commands'.
func TestRunPtyInsideAllocationAndAttach(t *testing.T) {
	d, latticectl, bin := interactiveStack(t, 2, nil)
	id := d.submit(t, &latticev1.AllocationRequest{Tenant: "t", NodesMin: 2, Interactive: true})
	waitFor(t, 30*time.Second, "the allocation to run", func() bool {
		a, err := d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
		return err == nil && a.State == string(model.StateRunning)
	})
	env := append(userEnv(d, bin, t.TempDir()), "LATTICE_ALLOC_ID="+id)
	run := exec.Command(latticectl, "run", "--pty", "--", "sh", "-c",
		`tty; while read l; do echo "got:$l on $SLURMD_NODENAME"; [ "$l" = quit ] && exit 5; done`)
	run.Env = env
	runIn, err := run.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var runOut, runErr lockedBuffer
	run.Stdout, run.Stderr = &runOut, &runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill() }()
	if _, err := io.WriteString(runIn, "first\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the terminal step to answer", func() bool { return strings.Contains(runOut.String(), "got:first on node001") })
	if !strings.Contains(runOut.String(), "/dev/pts/") {
		t.Fatalf("the step has no terminal:\n%s", runOut.String())
	}

	att := exec.Command(latticectl, "attach", id+".0")
	att.Env = env
	attIn, err := att.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var attOut, attErr lockedBuffer
	att.Stdout, att.Stderr = &attOut, &attErr
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = att.Process.Kill() }()
	// The attach is in once its typing is answered (retyped until then).
	waitFor(t, 60*time.Second, "the attached terminal's input to be answered", func() bool {
		_, _ = io.WriteString(attIn, "from-attach\n")
		time.Sleep(200 * time.Millisecond)
		return strings.Contains(attOut.String(), "got:from-attach on node001")
	})
	if !strings.Contains(runOut.String(), "got:from-attach") {
		t.Fatalf("the launching terminal did not see the attached input:\n%s", runOut.String())
	}
	if _, err := io.WriteString(runIn, "quit\n"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*exec.Cmd{"run --pty": run, "attach": att} {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not end", name)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 {
			t.Fatalf("%s: %v, want exit code 5\nrun: %s %s\nattach: %s %s", name, err, runOut.String(), runErr.String(), attOut.String(), attErr.String())
		}
	}
}

// TestRunPtyForwardsInterrupt: with no terminal on the caller's side, a
// SIGINT to latticectl run --pty goes to the step's foreground job (which
// here traps it and exits 7), as srun forwards it.
func TestRunPtyForwardsInterrupt(t *testing.T) {
	d, latticectl, bin := interactiveStack(t, 1, nil)
	run := exec.Command(latticectl, "run", "--pty", "--", "sh", "-c", `trap 'echo got-INT; exit 7' INT; echo ready; while :; do sleep 0.1; done`)
	run.Env = userEnv(d, bin, t.TempDir())
	var out, errOut lockedBuffer
	run.Stdout, run.Stderr = &out, &errOut
	if _, err := run.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill() }()
	waitFor(t, 60*time.Second, "the step to be ready", func() bool { return strings.Contains(out.String(), "ready") })
	if err := run.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("run --pty did not end after SIGINT:\n%s\n%s", out.String(), errOut.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || !strings.Contains(out.String(), "got-INT") {
		t.Fatalf("run --pty after SIGINT: %v, want exit 7 from the trap\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
	}
}
