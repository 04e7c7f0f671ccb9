package cli

import (
	"strconv"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// resolveTasks reads the task settings (sbatch -n, --ntasks-per-node, -c,
// --mem, --mem-per-cpu, --gpus-per-task, --exclusive, -O), from #SBATCH
// lines and flags alike, into req. -n without -N leaves the node count to
// the server, which knows the nodes' CPUs.
func resolveTasks(req *model.Request, o submitOptions, get func(key, def string) (string, func(error) error)) error {
	count := func(key string, min int) (int, error) {
		v, wrap := get(key, "")
		if !hasKey(o, key) {
			return 0, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			return 0, wrap(&model.FieldError{Field: key, Value: v, Allowed: "a count >= " + strconv.Itoa(min)})
		}
		return n, nil
	}
	var err error
	if req.Ntasks, err = count(optNtasks, 1); err != nil {
		return err
	}
	if req.NtasksPerNode, err = count(optNtasksPerNode, 1); err != nil {
		return err
	}
	if req.CPUsPerTask, err = count(optCPUsPerTask, 1); err != nil {
		return err
	}
	if v, wrap := get(optGPUsPerTask, ""); hasKey(o, optGPUsPerTask) {
		typ, n, err := parseGPUsPerNode(v)
		if err != nil {
			return wrap(&model.FieldError{Field: "gpus-per-task", Value: v, Allowed: "[TYPE:]N with N >= 0, e.g. 1 or a100:1"})
		}
		req.GPUsPerTask = n
		if typ != "" {
			req.GPUType = typ
		}
	}
	if v, wrap := get(optMem, ""); hasKey(o, optMem) {
		if req.MemPerNodeMB, err = model.ParseMemoryMB("mem", v); err != nil {
			return wrap(err)
		}
	}
	if v, wrap := get(optMemPerCPU, ""); hasKey(o, optMemPerCPU) {
		if req.MemPerCPUMB, err = model.ParseMemoryMB("mem-per-cpu", v); err != nil {
			return wrap(err)
		}
	}
	if v, _ := get(optExclusive, ""); hasKey(o, optExclusive) && v != "false" {
		req.Exclusive = true
	}
	if v, _ := get(optOvercommit, ""); hasKey(o, optOvercommit) && v != "false" {
		req.Overcommit = true
	}
	if req.Ntasks > 0 && !hasKey(o, optNodes) && !hasKey(o, optNodeList) {
		if req.NtasksPerNode > 0 {
			req.NodesMin = req.TaskNodes(0)
			req.NodesMax = req.NodesMin
		} else {
			// At least one node; the server fits the tasks on the nodes'
			// CPUs (nodes_max 0 with ntasks: as many as they need).
			req.NodesMin, req.NodesMax = 1, 0
		}
	}
	// GPUs the tasks need on each node, at least.
	if req.GPUsPerTask > 0 {
		per := req.NtasksPerNode
		if per == 0 {
			per = (max(req.Ntasks, 1) + max(req.NodesMin, 1) - 1) / max(req.NodesMin, 1)
		}
		req.GPUsPerNode = max(req.GPUsPerNode, per*req.GPUsPerTask)
	}
	return nil
}
