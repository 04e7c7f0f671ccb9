package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func newTestRunner(t *testing.T) (*Runner, chan Exit) {
	t.Helper()
	exits := make(chan Exit, 8)
	r, err := NewRunner(RunnerConfig{Dir: t.TempDir(), OnExit: func(e Exit) { exits <- e }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(time.Second) })
	return r, exits
}

func waitExit(t *testing.T, exits chan Exit) Exit {
	t.Helper()
	select {
	case e := <-exits:
		return e
	case <-time.After(15 * time.Second):
		t.Fatal("allocation did not end")
		return Exit{}
	}
}

func readOut(t *testing.T, r *Runner, id uint64) string {
	t.Helper()
	lp, ok := r.Paths(id)
	if !ok {
		t.Fatalf("no log paths for %d", id)
	}
	b, err := os.ReadFile(lp.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunnerExitStatus(t *testing.T) {
	cases := []struct {
		name    string
		launch  Launch
		state   model.AllocState
		reason  string
		code    int
		wantOut string
	}{
		{"success with environment", Launch{AllocID: 7, Name: "env", VCluster: "hpc-batch", Nodes: []string{"node001", "node002", "node003"},
			Command: []string{"echo $LATTICE_ALLOC_ID $LATTICE_NUM_NODES $SLURM_JOB_NODELIST $SLURM_NNODES $LATTICE_VCLUSTER"}},
			model.StateCompleted, "", 0, "7 3 node[001-003] 3 hpc-batch\n"},
		{"argv is executed as it is", Launch{AllocID: 8, Nodes: []string{"n1"}, Command: []string{"printf", "%s|", "a b", "it's"}},
			model.StateCompleted, "", 0, "a b|it's|"},
		{"non-zero exit", Launch{AllocID: 9, Nodes: []string{"n1"}, Command: []string{"exit 3"}},
			model.StateFailed, model.ReasonNonZeroExit, 3, ""},
		{"script without shebang", Launch{AllocID: 10, Nodes: []string{"n1"}, Script: "echo from script\nexit 0\n"},
			model.StateCompleted, "", 0, "from script\n"},
		{"script with shebang", Launch{AllocID: 11, Nodes: []string{"n1"}, Script: "#!/bin/sh\necho $SLURM_JOB_ID\n"},
			model.StateCompleted, "", 0, "11\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, exits := newTestRunner(t)
			if err := r.Start(tc.launch); err != nil {
				t.Fatal(err)
			}
			e := waitExit(t, exits)
			if e.State != tc.state || e.Reason != tc.reason || e.ExitCode == nil || *e.ExitCode != tc.code {
				t.Fatalf("exit = %s/%s code %v, want %s/%s %d", e.State, e.Reason, e.ExitCode, tc.state, tc.reason, tc.code)
			}
			if tc.wantOut != "" {
				if got := readOut(t, r, tc.launch.AllocID); got != tc.wantOut {
					t.Fatalf("output %q, want %q", got, tc.wantOut)
				}
			}
		})
	}
}

// pidsInGroup lists live processes of a process group.
func pidsInGroup(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		g, err := syscall.Getpgid(pid)
		if err == nil && g == pgid {
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(b), ") Z ") {
				out = append(out, pid)
			}
		}
	}
	return out
}

func TestRunnerStopKillsTheWholeGroup(t *testing.T) {
	cases := []struct {
		name    string
		command string
		grace   time.Duration
		reason  string
		state   model.AllocState
	}{
		// The shell traps TERM and ignores it: only SIGKILL after the grace ends it.
		{"TERM ignored, KILL after grace", "trap '' TERM; sleep 300 & sleep 300 & wait", 300 * time.Millisecond, model.ReasonCancelled, model.StateCancelled},
		{"TERM obeyed", "sleep 300 & sleep 300", 10 * time.Second, model.ReasonCancelled, model.StateCancelled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, exits := newTestRunner(t)
			if err := r.Start(Launch{AllocID: 1, Nodes: []string{"n1"}, Command: []string{tc.command}}); err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			pgid := r.running[1].pgid
			r.mu.Unlock()
			deadline := time.Now().Add(5 * time.Second)
			for len(pidsInGroup(pgid)) < 3 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := len(pidsInGroup(pgid)); n < 3 {
				t.Fatalf("expected the shell and two sleeps, found %d processes", n)
			}
			if !r.Stop(1, tc.reason, tc.grace) {
				t.Fatal("Stop found nothing running")
			}
			e := waitExit(t, exits)
			if e.State != tc.state {
				t.Fatalf("state %s, want %s", e.State, tc.state)
			}
			deadline = time.Now().Add(5 * time.Second)
			for len(pidsInGroup(pgid)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if left := pidsInGroup(pgid); len(left) > 0 {
				t.Fatalf("processes left behind: %v", left)
			}
		})
	}
}

func TestRunnerWalltime(t *testing.T) {
	r, exits := newTestRunner(t)
	if err := r.Start(Launch{AllocID: 2, Nodes: []string{"n1"}, Command: []string{"sleep 300"}, Walltime: 200 * time.Millisecond, Grace: time.Second}); err != nil {
		t.Fatal(err)
	}
	e := waitExit(t, exits)
	if e.State != model.StateFailed || e.Reason != model.ReasonWalltimeExceeded {
		t.Fatalf("exit %s/%s, want FAILED/WalltimeExceeded", e.State, e.Reason)
	}
}

func TestRunnerOutputPatterns(t *testing.T) {
	r, exits := newTestRunner(t)
	wd := t.TempDir()
	l := Launch{AllocID: 42, ArrayJobID: 40, ArrayIndex: 2, Name: "job", Nodes: []string{"n1"}, WorkDir: wd,
		Command: []string{"echo out; echo err >&2"}, Stdout: "out-%A_%a-%x.txt", Stderr: filepath.Join(wd, "err-%j.txt")}
	if err := r.Start(l); err != nil {
		t.Fatal(err)
	}
	waitExit(t, exits)
	if b, err := os.ReadFile(filepath.Join(wd, "out-40_2-job.txt")); err != nil || string(b) != "out\n" {
		t.Fatalf("stdout file: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "err-42.txt")); err != nil || string(b) != "err\n" {
		t.Fatalf("stderr file: %q %v", b, err)
	}
}

func TestLaunchFailures(t *testing.T) {
	r, _ := newTestRunner(t)
	if err := r.Start(Launch{AllocID: 3, Nodes: []string{"n1"}, Command: []string{"true"}, WorkDir: "/does/not/exist"}); err == nil {
		t.Fatal("start in a missing work dir succeeded")
	}
	if err := r.Start(Launch{AllocID: 4, Nodes: []string{"n1"}}); err == nil {
		t.Fatal("start without entrypoint succeeded")
	}
}

func TestSimulatedNodesSplit(t *testing.T) {
	cases := []struct {
		n, group  int
		vcs       []string
		counts    []int
		wantHomes map[string]int
		wantErr   bool
	}{
		{64, 16, []string{"a", "b", "c"}, []int{0, 0, 0}, map[string]int{"a": 22, "b": 21, "c": 21}, false},
		{10, 4, []string{"a", "b"}, []int{3, 0}, map[string]int{"a": 3, "b": 7}, false},
		{10, 4, []string{"a", "b"}, []int{3, 7}, map[string]int{"a": 3, "b": 7}, false},
		{10, 4, []string{"a", "b"}, []int{3, 3}, nil, true},
		{10, 4, []string{"a"}, []int{11}, nil, true},
	}
	for _, tc := range cases {
		nodes, err := SimulatedNodes("node", tc.n, tc.group, tc.vcs, tc.counts, 100, 400, "fp")
		if tc.wantErr {
			if err == nil {
				t.Errorf("%v %v: no error", tc.vcs, tc.counts)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		homes := map[string]int{}
		for _, n := range nodes {
			homes[n.HomeVCluster]++
		}
		for k, v := range tc.wantHomes {
			if homes[k] != v {
				t.Errorf("%v %v: %s has %d nodes, want %d", tc.vcs, tc.counts, k, homes[k], v)
			}
		}
		if nodes[len(nodes)-1].Group != (tc.n-1)/tc.group {
			t.Errorf("last node in group %d", nodes[len(nodes)-1].Group)
		}
	}
}

// A `-- CMD ARGS` job is its program, not a wrapper shell: SIGTERM reaches
// the program's handler, which gets its grace before SIGKILL.
func TestRunnerCommandKeepsItsGrace(t *testing.T) {
	r, exits := newTestRunner(t)
	l := Launch{AllocID: 11, Nodes: []string{"n1"}, Grace: 10 * time.Second,
		Command: []string{"sh", "-c", `trap "sleep 2; echo after; exit 7" TERM; echo ready; sleep 100 & wait`}}
	if err := r.Start(l); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readOut(t, r, 11), "ready") {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	r.Stop(11, model.ReasonCancelled, 10*time.Second)
	e := waitExit(t, exits)
	if e.State != model.StateCancelled || e.ExitCode == nil || *e.ExitCode != 7 {
		t.Fatalf("exit %+v (code %v), want CANCELLED with the trap's exit 7", e, e.ExitCode)
	}
	if !strings.Contains(readOut(t, r, 11), "after") {
		t.Errorf("output %q lacks the trap's line", readOut(t, r, 11))
	}
	if d := time.Since(start); d < 2*time.Second || d > 9*time.Second {
		t.Errorf("ended %s after SIGTERM: want the trap's 2 s, not the grace", d)
	}
}

func TestRunnerCommandNotFound(t *testing.T) {
	r, _ := newTestRunner(t)
	err := r.Start(Launch{AllocID: 12, Nodes: []string{"n1"}, Command: []string{"no-such-program-lattice", "x"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-program-lattice") {
		t.Fatalf("start = %v, want an error naming the program", err)
	}
}
