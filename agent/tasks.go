package agent

import (
	"os"
	"runtime"
	"strconv"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// TaskSpec is what a request says about its tasks (sbatch -n,
// --ntasks-per-node, -c, --mem, --mem-per-cpu, --gpus-per-task); 0 = not
// given.
type TaskSpec struct {
	Ntasks        int   `json:",omitempty"`
	NtasksPerNode int   `json:",omitempty"`
	CPUsPerTask   int   `json:",omitempty"`
	MemPerNodeMB  int64 `json:",omitempty"`
	MemPerCPUMB   int64 `json:",omitempty"`
	GPUsPerTask   int   `json:",omitempty"`
	Overcommit    bool  `json:",omitempty"`
}

func taskSpecOf(r *latticev1.AllocationRequest) TaskSpec {
	return TaskSpec{Ntasks: int(r.GetNtasks()), NtasksPerNode: int(r.GetNtasksPerNode()), CPUsPerTask: int(r.GetCpusPerTask()),
		MemPerNodeMB: r.GetMemPerNodeMb(), MemPerCPUMB: r.GetMemPerCpuMb(), GPUsPerTask: int(r.GetGpusPerTask()),
		Overcommit: r.GetOvercommit()}
}

// nodeCPUs is the CPU count of one of the agent's nodes (0: unknown).
func (a *Agent) nodeCPUs(name string) int {
	for i := range a.cfg.Nodes {
		if a.cfg.Nodes[i].Name == name {
			return a.cfg.Nodes[i].CPUs
		}
	}
	return 0
}

// cpusOn is a node's CPU count: the one the agent reports, or this host's.
func cpusOn(reported int) int {
	if reported > 0 {
		return reported
	}
	return runtime.NumCPU()
}

// taskEnv is what sbatch sets in a job from its tasks, as Slurm 22.05
// does: SLURM_TASKS_PER_NODE always (without -n/--ntasks-per-node a node
// counts one task per CPU, as Slurm counts a whole-node allocation), and
// SLURM_NTASKS/SLURM_NPROCS, SLURM_NTASKS_PER_NODE, SLURM_CPUS_PER_TASK,
// SLURM_MEM_PER_NODE, SLURM_MEM_PER_CPU when the request gave them. The
// nodes are taken as alike (the launch node's CPUs).
func taskEnv(l Launch) []string {
	t, n := l.Tasks, len(l.Nodes)
	if n == 0 {
		return nil
	}
	cpus := cpusOn(l.CPUs)
	var env []string
	var perNode []int
	if t.Ntasks > 0 || t.NtasksPerNode > 0 {
		perNode = model.TasksPerNode(n, t.Ntasks, t.NtasksPerNode)
		total := 0
		for _, c := range perNode {
			total += c
		}
		env = append(env, "SLURM_NTASKS="+strconv.Itoa(total), "SLURM_NPROCS="+strconv.Itoa(total))
	} else {
		perNode = make([]int, n)
		for i := range perNode {
			perNode[i] = max(cpus/max(t.CPUsPerTask, 1), 1)
		}
	}
	env = append(env, "SLURM_TASKS_PER_NODE="+model.CompressCounts(perNode))
	if t.NtasksPerNode > 0 {
		env = append(env, "SLURM_NTASKS_PER_NODE="+strconv.Itoa(t.NtasksPerNode))
	}
	if t.CPUsPerTask > 0 {
		env = append(env, "SLURM_CPUS_PER_TASK="+strconv.Itoa(t.CPUsPerTask))
	}
	if t.MemPerNodeMB > 0 {
		env = append(env, "SLURM_MEM_PER_NODE="+strconv.FormatInt(t.MemPerNodeMB, 10))
	}
	if t.MemPerCPUMB > 0 {
		env = append(env, "SLURM_MEM_PER_CPU="+strconv.FormatInt(t.MemPerCPUMB, 10))
	}
	if t.Overcommit {
		env = append(env, "SLURM_OVERCOMMIT=1")
	}
	// The batch script is task 0 of node 0, as slurmstepd has it.
	env = append(env, "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_GTIDS=0",
		"SLURM_TOPOLOGY_ADDR="+l.Nodes[0], "SLURM_TOPOLOGY_ADDR_PATTERN=node")
	return env
}

// ownHostname says whether the tasks of node run in their own UTS
// namespace with the node's name as host name: on a dev stack's simulated
// nodes (no Machine; the node is not this host) when the agent runs as
// root. MPI libraries tell nodes apart by host name (Open MPI's shared
// memory segments, MPI_Get_processor_name): without it every rank of a
// dev stack would seem to share one host.
func (a *Agent) ownHostname(node string) bool {
	if a.cfg.Machine != nil || os.Geteuid() != 0 || a.cfg.SharedHostname {
		return false
	}
	host, err := os.Hostname()
	return err == nil && host != node
}
