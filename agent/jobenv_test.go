package agent

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A job's environment is sbatch's: the node's GPUs and CPUs, the submit
// directory, what the request exports — and nothing of the agent's own.
func TestJobEnvironmentLikeSbatch(t *testing.T) {
	t.Setenv("LATTICE_TEST_DAEMON_ONLY", "leak")
	r, exits := newTestRunner(t)
	wd := t.TempDir()
	l := Launch{AllocID: 41, Nodes: []string{"g1", "g2"}, GPUs: 2, WorkDir: wd, Env: []string{"FROM_SUBMIT=yes"},
		Command: []string{"env"}}
	if err := r.Start(l); err != nil {
		t.Fatal(err)
	}
	if e := waitExit(t, exits); *e.ExitCode != 0 {
		t.Fatalf("env exited %d", *e.ExitCode)
	}
	got := map[string]string{}
	for _, line := range strings.Split(readOut(t, r, 41), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "0,1",
		"SLURM_CPUS_ON_NODE": strconv.Itoa(runtime.NumCPU()), "SLURM_SUBMIT_DIR": wd,
		"SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2", "FROM_SUBMIT": "yes", "PATH": DefaultJobPath,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	if v, ok := got["LATTICE_TEST_DAEMON_ONLY"]; ok {
		t.Errorf("the agent's own environment leaked into the job: LATTICE_TEST_DAEMON_ONLY=%s", v)
	}
	// A node without GPUs sets no GPU variables.
	if err := r.Start(Launch{AllocID: 42, Nodes: []string{"c1"}, Command: []string{"env"}}); err != nil {
		t.Fatal(err)
	}
	waitExit(t, exits)
	if out := readOut(t, r, 42); strings.Contains(out, "CUDA_VISIBLE_DEVICES") {
		t.Error("CUDA_VISIBLE_DEVICES set on a node without GPUs")
	}
}
