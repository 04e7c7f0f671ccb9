package cli

import (
	"strings"
	"testing"
)

// Task options go through the one code path of #SBATCH lines and flags.
func TestResolveTasks(t *testing.T) {
	for _, tt := range []struct {
		script             string
		nodesMin, nodesMax int
		ntasks, perNode    int
		cpt                int
		mem, memCPU        int64
		gpn, gpt           int
		over               bool
		err                string
	}{
		{script: "#SBATCH -N2 --ntasks-per-node=4\n", nodesMin: 2, nodesMax: 2, perNode: 4},
		{script: "#SBATCH -n 8 --ntasks-per-node=2\n", nodesMin: 4, nodesMax: 4, ntasks: 8, perNode: 2},
		{script: "#SBATCH -n8\n", nodesMin: 1, nodesMax: 0, ntasks: 8},
		{script: "#SBATCH -n8 -N2 -c4 --mem=2G -O\n", nodesMin: 2, nodesMax: 2, ntasks: 8, cpt: 4, mem: 2048, over: true},
		{script: "#SBATCH -N1 --ntasks-per-node=2 --gpus-per-task=2 --mem-per-cpu=500\n", nodesMin: 1, nodesMax: 1, perNode: 2, gpn: 4, gpt: 2, memCPU: 500},
		{script: "#SBATCH --exclusive -N3\n", nodesMin: 3, nodesMax: 3},
		{script: "#SBATCH -n 0\n", err: "ntasks"},
		{script: "#SBATCH --mem=lots\n", err: "mem"},
		{script: "#SBATCH -c x\n", err: "cpus-per-task"},
		{script: "#SBATCH -N4 -n2\n", err: "ntasks"},
	} {
		opts := submitOptions{}
		if _, err := parseSbatch("job.sh", tt.script, opts); err != nil {
			t.Fatal(err)
		}
		req, err := resolveSubmit(submitInput{opts: opts, script: tt.script, scriptPath: "job.sh", cwd: "/w"})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one naming %s", tt.script, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.script, err)
			continue
		}
		if req.NodesMin != tt.nodesMin || req.NodesMax != tt.nodesMax || req.Ntasks != tt.ntasks || req.NtasksPerNode != tt.perNode ||
			req.CPUsPerTask != tt.cpt || req.MemPerNodeMB != tt.mem || req.MemPerCPUMB != tt.memCPU || req.GPUsPerNode != tt.gpn ||
			req.GPUsPerTask != tt.gpt || req.Overcommit != tt.over {
			t.Errorf("%q: nodes %d-%d ntasks %d per node %d cpt %d mem %d/%d gpus %d/%d over %v", tt.script, req.NodesMin, req.NodesMax,
				req.Ntasks, req.NtasksPerNode, req.CPUsPerTask, req.MemPerNodeMB, req.MemPerCPUMB, req.GPUsPerNode, req.GPUsPerTask, req.Overcommit)
		}
	}
}
