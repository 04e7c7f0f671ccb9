package server

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// slurmEnv is one recorded environment: the batch script's and each
// task's of `srun -l`, by variable.
type slurmEnv struct {
	batch map[string]string
	tasks map[int]map[string]string
}

func parseSlurmEnv(t *testing.T, text string) slurmEnv {
	t.Helper()
	e := slurmEnv{batch: map[string]string{}, tasks: map[int]map[string]string{}}
	section := ""
	label := regexp.MustCompile(`^(\d+): (.*)$`)
	for _, line := range strings.Split(text, "\n") {
		switch line {
		case "BATCH", "STEP":
			section = line
			continue
		}
		if section == "BATCH" {
			if k, v, ok := strings.Cut(line, "="); ok {
				e.batch[k] = v
			}
			continue
		}
		if m := label.FindStringSubmatch(line); m != nil && section == "STEP" {
			rank, _ := strconv.Atoi(m[1])
			if e.tasks[rank] == nil {
				e.tasks[rank] = map[string]string{}
			}
			if k, v, ok := strings.Cut(m[2], "="); ok {
				e.tasks[rank][k] = v
			}
		}
	}
	return e
}

// slurmEnvCompared are the variables a Lattice job must have exactly as
// Slurm 22.05 sets them (after mapping node names, the job id, the submit
// directory and the nodes' CPU count).
var slurmEnvCompared = []string{
	"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE",
	"SLURM_CPUS_ON_NODE", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NODELIST", "SLURM_JOB_NODELIST",
	"SLURM_JOB_ID", "SLURM_JOBID", "SLURMD_NODENAME", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_GTIDS",
	"SLURM_OVERCOMMIT", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN", "SLURM_SUBMIT_DIR",
	"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", "SLURM_STEP_NUM_TASKS",
	"SLURM_STEP_TASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_LABELIO",
}

// slurmEnvNotCompared are Slurm's variables a Lattice job has with other
// values or not at all, and why.
var slurmEnvNotCompared = map[string]string{
	"SLURM_CLUSTER_NAME": "site name", "SLURM_CONF": "Slurm's own config", "SLURM_WORKING_CLUSTER": "Slurm's controller address",
	"SLURM_JOB_GID": "user ids (jobs here run as root)", "SLURM_JOB_UID": "user ids", "SLURM_JOB_USER": "user ids",
	"SLURM_JOB_NAME": "the script's file name differs", "SLURM_JOB_PARTITION": "partition name differs (vCluster)",
	"SLURM_NODE_ALIASES": "cloud node aliases", "SLURM_PRIO_PROCESS": "scheduling priority of srun", "SLURM_SUBMIT_HOST": "host name",
	"SLURM_TASK_PID": "a process id", "SLURM_SRUN_COMM_HOST": "srun's I/O port", "SLURM_SRUN_COMM_PORT": "srun's I/O port",
	"SLURM_STEP_LAUNCHER_PORT": "srun's I/O port", "SLURM_LAUNCH_NODE_IPADDR": "srun's address", "SLURM_UMASK": "srun's umask",
	"SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0": "heterogeneous jobs",
}

// TestStepSlurmEnvMatchesSlurm runs the script recorded on a real Slurm
// 22.05 (testdata/slurm-22.05/tasks-env.*: -N2 --ntasks-per-node=4, one
// srun -l) on a dev stack and compares the batch script's and the 8
// tasks' environments with Slurm's, variable by variable.
func TestStepSlurmEnvMatchesSlurm(t *testing.T) {
	script, err := os.ReadFile("testdata/slurm-22.05/tasks-env.sh")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile("testdata/slurm-22.05/tasks-env.out")
	if err != nil {
		t.Fatal(err)
	}
	d, dir := stepStack(t, 2)
	path := filepath.Join(dir, "tasks-env.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := d.ctl(t, dir, "submit", "--parsable", "-O", path)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s%s", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	a := d.waitEnded(t, id)
	got, _ := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out"))
	if a.State != string(model.StateCompleted) {
		t.Fatalf("job %s %s; output:\n%s", id, a.State, got)
	}
	want := parseSlurmEnv(t, string(recorded))
	have := parseSlurmEnv(t, string(got))

	// Map each side's particulars to the same words.
	realNorm := strings.NewReplacer("n[2-3]", "NODES", "n2", "NODE0", "n3", "NODE1", "/tmp/i26a/peer", "DIR").Replace
	ours := strings.NewReplacer(model.CompressHostlist(a.Nodes), "NODES", a.Nodes[0], "NODE0", a.Nodes[1], "NODE1", dir, "DIR").Replace
	norm := func(k, v string, side func(string) string, job, cpus string) string {
		switch k {
		case "SLURM_JOB_ID", "SLURM_JOBID":
			if v == job {
				return "JOBID"
			}
		case "SLURM_CPUS_ON_NODE":
			if v == cpus {
				return "CPUS"
			}
		case "SLURM_JOB_CPUS_PER_NODE":
			if strings.HasPrefix(v, cpus+"(x") {
				return "CPUS" + strings.TrimPrefix(v, cpus)
			}
		}
		return side(v)
	}
	compare := func(where string, w, h map[string]string) {
		for k := range w {
			if _, skip := slurmEnvNotCompared[k]; !skip && !slices.Contains(slurmEnvCompared, k) {
				t.Errorf("%s: Slurm sets %s=%s, which this test neither compares nor explains", where, k, w[k])
			}
		}
		for _, k := range slurmEnvCompared {
			wv, inW := w[k]
			hv, inH := h[k]
			if inW {
				wv = norm(k, wv, realNorm, "7", "1")
			}
			if inH {
				hv = norm(k, hv, ours, id, strconv.Itoa(runtime.NumCPU()))
			}
			if inW != inH || wv != hv {
				t.Errorf("%s: %s = %q (set %v), Slurm 22.05 has %q (set %v)", where, k, hv, inH, wv, inW)
			}
		}
	}
	compare("batch script", want.batch, have.batch)
	if len(have.tasks) != 8 {
		t.Fatalf("srun ran %d tasks, want 8; output:\n%s", len(have.tasks), got)
	}
	ranks := make([]int, 0, 8)
	for r := range want.tasks {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	for _, r := range ranks {
		compare("task "+strconv.Itoa(r), want.tasks[r], have.tasks[r])
	}
}
