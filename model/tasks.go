package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Tasks of a request, as Slurm has them: -n/--ntasks, --ntasks-per-node,
// -c/--cpus-per-task, --mem (per node), --mem-per-cpu, --gpus-per-task.
// An allocation always has whole nodes (--exclusive is accepted and
// changes nothing); the tasks say how many processes srun starts by
// default and what the job's Slurm environment holds, and they must fit
// the nodes' CPUs and GPUs (unless --overcommit, for CPUs).

// Bounds on task settings.
const (
	MaxTasks       = 1 << 20
	MaxCPUsPerTask = 4096
	MaxMemoryMB    = int64(1) << 40 // a petabyte
)

// ParseMemoryMB reads Slurm's memory sizes (--mem, --mem-per-cpu): a
// whole number with an optional suffix K, M, G or T (any case, an
// optional trailing B); a plain number is megabytes, as in Slurm. Kilobytes
// round up to a whole megabyte.
func ParseMemoryMB(field, s string) (int64, error) {
	bad := fieldErr(field, s, "a size in megabytes, or with a suffix K, M, G or T (e.g. 4000, 500M, 16G)")
	v := strings.TrimSpace(s)
	v = strings.TrimSuffix(strings.TrimSuffix(v, "B"), "b")
	if v == "" {
		return 0, bad
	}
	mult, div := int64(1), int64(1)
	switch v[len(v)-1] {
	case 'K', 'k':
		div = 1024
	case 'M', 'm':
	case 'G', 'g':
		mult = 1024
	case 'T', 't':
		mult = 1024 * 1024
	default:
		if v[len(v)-1] < '0' || v[len(v)-1] > '9' {
			return 0, bad
		}
		v += "M"
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 || n > MaxMemoryMB*div/mult {
		return 0, bad
	}
	return (n*mult + div - 1) / div, nil
}

// validateTasks checks the task settings on their own; whether they fit
// the nodes is for the server to say (it knows their CPUs and GPUs).
func (r *Request) validateTasks() error {
	switch {
	case r.Ntasks < 0 || r.Ntasks > MaxTasks:
		return fieldErr("ntasks", itoa(r.Ntasks), fmt.Sprintf("a count 1..%d", MaxTasks))
	case r.NtasksPerNode < 0 || r.NtasksPerNode > MaxTasks:
		return fieldErr("ntasks-per-node", itoa(r.NtasksPerNode), fmt.Sprintf("a count 1..%d", MaxTasks))
	case r.CPUsPerTask < 0 || r.CPUsPerTask > MaxCPUsPerTask:
		return fieldErr("cpus-per-task", itoa(r.CPUsPerTask), fmt.Sprintf("a count 1..%d", MaxCPUsPerTask))
	case r.GPUsPerTask < 0 || r.GPUsPerTask > MaxGPUsPerNode:
		return fieldErr("gpus-per-task", itoa(r.GPUsPerTask), fmt.Sprintf("a count 0..%d", MaxGPUsPerNode))
	case r.MemPerNodeMB < 0 || r.MemPerNodeMB > MaxMemoryMB:
		return fieldErr("mem", strconv.FormatInt(r.MemPerNodeMB, 10), "a size in megabytes >= 0")
	case r.MemPerCPUMB < 0 || r.MemPerCPUMB > MaxMemoryMB:
		return fieldErr("mem-per-cpu", strconv.FormatInt(r.MemPerCPUMB, 10), "a size in megabytes >= 0")
	case r.MemPerNodeMB > 0 && r.MemPerCPUMB > 0:
		return fieldErr("mem", strconv.FormatInt(r.MemPerNodeMB, 10)+"M", "either --mem or --mem-per-cpu, not both (as in Slurm)")
	}
	if r.Ntasks > 0 && r.NodesMin > 0 && r.Ntasks < r.NodesMin {
		return fieldErr("ntasks", itoa(r.Ntasks), fmt.Sprintf("at least one task per node: >= %d (the nodes asked for)", r.NodesMin))
	}
	if r.Ntasks > 0 && r.NtasksPerNode > 0 && r.NodesMax > 0 && r.Ntasks > r.NtasksPerNode*r.NodesMax {
		return fieldErr("ntasks", itoa(r.Ntasks), fmt.Sprintf("at most %d nodes × %d tasks per node = %d", r.NodesMax, r.NtasksPerNode, r.NtasksPerNode*r.NodesMax))
	}
	return nil
}

// TaskNodes is how many nodes -n tasks need when -N was not given: with
// --ntasks-per-node, that many per node; otherwise as many as fit on
// nodes of cpus CPUs each (cpus 0: unknown, one node).
func (r *Request) TaskNodes(cpus int) int {
	switch {
	case r.Ntasks <= 0:
		return 1
	case r.NtasksPerNode > 0:
		return (r.Ntasks + r.NtasksPerNode - 1) / r.NtasksPerNode
	case cpus > 0 && !r.Overcommit:
		per := max(cpus/max(r.CPUsPerTask, 1), 1)
		return (r.Ntasks + per - 1) / per
	}
	return 1
}

// HasTasks reports whether the request says anything about its tasks
// (Slurm then sets SLURM_NTASKS and SLURM_TASKS_PER_NODE in the job).
func (r *Request) HasTasks() bool { return r.Ntasks > 0 || r.NtasksPerNode > 0 }

// TasksPerNode lays a job's tasks over its nodes as Slurm does: ntasks
// (0: nodes × ntasks-per-node, or one per node), block-wise, with
// ntasks-per-node filling every node but the last, otherwise spread
// evenly with the first nodes taking one more.
func TasksPerNode(nodes, ntasks, perNode int) []int {
	if nodes <= 0 {
		return nil
	}
	if ntasks <= 0 {
		ntasks = nodes * max(perNode, 1)
	}
	counts := make([]int, nodes)
	if perNode > 0 && ntasks <= nodes*perNode {
		left := ntasks
		for i := range counts {
			counts[i] = max(min(perNode, left-(nodes-1-i)), 0)
			left -= counts[i]
		}
		return counts
	}
	for i := range counts {
		counts[i] = ntasks / nodes
		if i < ntasks%nodes {
			counts[i]++
		}
	}
	return counts
}

// CompressCounts writes per-node counts as Slurm does
// (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE): runs of one value as
// VALUE(xN), joined with commas: [4 4 3] is "4(x2),3".
func CompressCounts(counts []int) string {
	var b strings.Builder
	for i := 0; i < len(counts); {
		j := i
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(counts[i]))
		if j-i > 1 {
			fmt.Fprintf(&b, "(x%d)", j-i)
		}
		i = j
	}
	return b.String()
}

// TaskFit says why tasks-per-node need more than a node of cpus CPUs and
// gpus GPUs has ("" when they fit; cpus 0 = unknown, not judged).
func (r *Request) TaskFit(cpus, gpus int) string {
	per := r.NtasksPerNode
	if per == 0 && r.Ntasks > 0 {
		nodes := max(r.NodesMin, 1)
		per = (r.Ntasks + nodes - 1) / nodes
	}
	per = max(per, 1)
	if need := per * max(r.CPUsPerTask, 1); cpus > 0 && !r.Overcommit && (r.HasTasks() || r.CPUsPerTask > 0) && need > cpus {
		return fmt.Sprintf("%d tasks × %d CPUs per task need %d CPUs on a node; the nodes have %d (use more nodes, or --overcommit)",
			per, max(r.CPUsPerTask, 1), need, cpus)
	}
	if need := per * r.GPUsPerTask; need > gpus {
		return fmt.Sprintf("%d tasks × %d GPUs per task need %d GPUs on a node; the nodes have %d", per, r.GPUsPerTask, need, gpus)
	}
	return ""
}
