package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// devLatticectl is the latticectl binary the dev stack's agent puts behind
// the srun shim ("" = the agent looks for one itself).
var devLatticectl string

var (
	buildLatticectlOnce sync.Once
	builtLatticectl     string
	buildLatticectlErr  error
)

// stepStack starts a dev stack of n nodes in one vCluster whose jobs have
// a working srun shim and latticectl (built once per test binary).
func stepStack(t *testing.T, n int) (*devStack, string) {
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
	// The job finds srun and latticectl in the agent's shim directory.
	return startDevWith(t, dir, n, []string{"hpc-batch"}, nil), dir
}

func (d *devStack) submitScript(t *testing.T, nodes int, script string) string {
	t.Helper()
	return d.submit(t, &latticev1.AllocationRequest{Tenant: "t", NodesMin: int32(nodes), NodesMax: int32(nodes), Script: script})
}

func (d *devStack) waitEnded(t *testing.T, id string) *latticev1.Allocation {
	t.Helper()
	var a *latticev1.Allocation
	waitFor(t, 60*time.Second, "allocation "+id+" to end", func() bool {
		var err error
		a, err = d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
		st, _ := model.ParseAllocState(a.GetState())
		return err == nil && st.Terminal()
	})
	return a
}

// The first "done means": srun through the shim and latticectl run
// reach every node of a 4-node allocation, with ranks 0..7 laid out block-wise.
func TestStepLaunchOnEveryNode(t *testing.T) {
	d, _ := stepStack(t, 4)
	id := d.submitScript(t, 4, `#!/bin/sh
srun sh -c 'echo A $SLURMD_NODENAME $LATTICE_NODENAME $SLURM_STEP_ID'
latticectl run -n 8 -- sh -c 'echo B $SLURM_PROCID $SLURMD_NODENAME $SLURM_LOCALID $SLURM_NTASKS $SLURM_NODEID $SLURM_STEP_ID'
srun -N2 --ntasks-per-node=1 -l echo C
`)
	a := d.waitEnded(t, id)
	out := d.logs(t, id, false)
	if a.State != string(model.StateCompleted) {
		t.Fatalf("job %s %s (exit %d); output:\n%s\nerr:\n%s", id, a.State, a.ExitCode, out, d.logs(t, id, true))
	}
	var aNodes []string
	ranks := map[int]string{}
	var cLines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 4 && f[0] == "A":
			if f[1] != f[2] || f[3] != "0" {
				t.Errorf("step 0 line %q: SLURMD_NODENAME and LATTICE_NODENAME differ or step id is not 0", line)
			}
			aNodes = append(aNodes, f[1])
		case len(f) == 7 && f[0] == "B":
			rank, _ := strconv.Atoi(f[1])
			if _, dup := ranks[rank]; dup {
				t.Errorf("rank %d twice", rank)
			}
			ranks[rank] = f[2]
			local, _ := strconv.Atoi(f[3])
			nodeID, _ := strconv.Atoi(f[5])
			if f[4] != "8" || f[6] != "1" || local != rank%2 || nodeID != rank/2 {
				t.Errorf("rank line %q: want ntasks 8, step 1, local rank %d, node id %d", line, rank%2, rank/2)
			}
		case len(f) == 2 && f[1] == "C":
			cLines = append(cLines, line)
		default:
			t.Errorf("unexpected output line %q", line)
		}
	}
	sort.Strings(aNodes)
	want := append([]string(nil), a.Nodes...)
	sort.Strings(want)
	if strings.Join(aNodes, ",") != strings.Join(want, ",") {
		t.Errorf("srun ran on %v, want once on each of %v", aNodes, want)
	}
	if len(ranks) != 8 {
		t.Errorf("ranks %v, want 0..7", ranks)
	}
	for r := range 8 {
		if ranks[r] != a.Nodes[r/2] {
			t.Errorf("rank %d on %s, want %s (block layout)", r, ranks[r], a.Nodes[r/2])
		}
	}
	sort.Strings(cLines)
	if strings.Join(cLines, "|") != "0: C|1: C" {
		t.Errorf("labelled output %q, want 0: C and 1: C", cLines)
	}
	if len(a.Steps) != 3 {
		t.Fatalf("steps recorded: %v, want 3", a.Steps)
	}
	for i, st := range a.Steps {
		if st.Id != int32(i) || st.State != string(model.StepCompleted) || !st.HasExitCode || st.ExitCode != 0 {
			t.Errorf("step %d = %v, want COMPLETED with exit 0", i, st)
		}
	}
	if a.Steps[1].Tasks != 8 || len(a.Steps[1].Nodes) != 4 || len(a.Steps[2].Nodes) != 2 {
		t.Errorf("steps %v: want 8 tasks on 4 nodes, then 2 nodes", a.Steps)
	}
}

// A failing rank's exit code becomes the step's and the job's, and the
// other ranks are stopped rather than left to finish.
func TestStepFailingRankEndsStepAndJob(t *testing.T) {
	d, _ := stepStack(t, 4)
	start := time.Now()
	id := d.submitScript(t, 4, `#!/bin/sh
latticectl run -n 4 -- sh -c 'if [ "$SLURM_PROCID" = 2 ]; then exit 3; fi; sleep 60'
exit $?
`)
	a := d.waitEnded(t, id)
	if a.State != string(model.StateFailed) || !a.HasExitCode || a.ExitCode != 3 {
		t.Fatalf("job %s %s exit %d, want FAILED exit 3; err:\n%s", id, a.State, a.ExitCode, d.logs(t, id, true))
	}
	if time.Since(start) > 40*time.Second {
		t.Errorf("job took %s: the other ranks were not stopped", time.Since(start))
	}
	if len(a.Steps) != 1 || a.Steps[0].State != string(model.StepFailed) || a.Steps[0].ExitCode != 3 {
		t.Errorf("steps %v, want one FAILED with exit 3", a.Steps)
	}
	// --keep-going lets the others finish; the worst exit is the step's.
	id = d.submitScript(t, 2, `#!/bin/sh
latticectl run -K -n 2 -- sh -c 'if [ "$SLURM_PROCID" = 0 ]; then exit 4; fi; sleep 1; echo survived'
`)
	a = d.waitEnded(t, id)
	if a.ExitCode != 4 || !strings.Contains(d.logs(t, id, false), "survived") {
		t.Errorf("--keep-going: exit %d, output %q; want 4 and the other rank's output", a.ExitCode, d.logs(t, id, false))
	}
}

// Cancelling the job stops every task of its steps on every node.
func TestStepCancelLeavesNoTask(t *testing.T) {
	d, dir := stepStack(t, 4)
	pids := filepath.Join(dir, "pids")
	id := d.submitScript(t, 4, fmt.Sprintf(`#!/bin/sh
srun -n 8 sh -c 'echo $$ >> %s; sleep 300'
`, pids))
	d.waitState(t, id, model.StateRunning)
	var groups []int
	waitFor(t, 30*time.Second, "8 tasks started", func() bool {
		b, _ := os.ReadFile(pids)
		groups = groups[:0]
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				groups = append(groups, n)
			}
		}
		return len(groups) == 8
	})
	if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id}}); err != nil {
		t.Fatal(err)
	}
	a := d.waitEnded(t, id)
	if a.State != string(model.StateCancelled) {
		t.Errorf("job %s, want CANCELLED", a.State)
	}
	waitFor(t, 15*time.Second, "no task process left", func() bool {
		for _, g := range groups {
			if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
				return false
			}
		}
		return true
	})
	waitFor(t, 15*time.Second, "the step recorded as ended", func() bool {
		a, _ = d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
		return len(a.GetSteps()) == 1 && a.Steps[0].State != string(model.StepRunning)
	})
}
