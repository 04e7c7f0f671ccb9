package agent

import (
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// DefaultJobPath is a job's PATH unless its request sets one (after the
// srun shim's directory).
const DefaultJobPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// BaseEnv is what a job's environment starts from — never the agent's own
// environment: a standard PATH, the user's HOME, USER, LOGNAME and SHELL,
// and the host's locale, time zone and TMPDIR. The request's variables
// (submit --export) come on top, then Lattice's and Slurm's.
func BaseEnv() []string {
	env := []string{"PATH=" + DefaultJobPath, "SHELL=/bin/sh"}
	if u, err := user.Current(); err == nil {
		env = append(env, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
	}
	for _, k := range []string{"LANG", "LC_ALL", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// nodeEnv is what sbatch sets from the node a job starts on: its CPUs, its
// GPUs (CUDA_VISIBLE_DEVICES and friends list every GPU of the node: an
// allocation has whole nodes), and the submit directory.
func nodeEnv(l Launch) []string {
	n := cpusOn(l.CPUs)
	cpus := strconv.Itoa(n)
	perNode := make([]int, max(len(l.Nodes), 1))
	for i := range perNode {
		perNode[i] = n // whole nodes, taken as alike
	}
	env := []string{"SLURM_CPUS_ON_NODE=" + cpus, "SLURM_JOB_CPUS_PER_NODE=" + model.CompressCounts(perNode), "LATTICE_CPUS_ON_NODE=" + cpus}
	env = append(env, taskEnv(l)...)
	if l.WorkDir != "" {
		env = append(env, "SLURM_SUBMIT_DIR="+l.WorkDir, "LATTICE_SUBMIT_DIR="+l.WorkDir)
	}
	if l.GPUs > 0 {
		ids := make([]string, l.GPUs)
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		list, n := strings.Join(ids, ","), strconv.Itoa(l.GPUs)
		env = append(env, "CUDA_VISIBLE_DEVICES="+list, "ROCR_VISIBLE_DEVICES="+list, "GPU_DEVICE_ORDINAL="+list,
			"SLURM_JOB_GPUS="+list, "SLURM_GPUS_ON_NODE="+n, "LATTICE_GPUS_ON_NODE="+n)
	}
	return env
}

// nodeGPUs is the GPU count of one of the agent's nodes.
func (a *Agent) nodeGPUs(name string) int {
	for i := range a.cfg.Nodes {
		if a.cfg.Nodes[i].Name == name {
			return a.cfg.Nodes[i].GPUs
		}
	}
	return 0
}
