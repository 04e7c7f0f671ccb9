package admission

import (
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// FitTasks sizes and checks a request's tasks against the nodes' CPUs and
// GPUs, which the agents report: -n without -N gets as many nodes as its
// tasks need on the vCluster's smallest nodes (nodes_max 0) (one when their CPUs are
// unknown), and tasks that no node can hold are refused (CodeTasks), as sbatch
// refuses them ("Requested node configuration is not available"), unless
// the request is held or kept anyway (keep).
func (c *Chain) FitTasks(r *model.Request, keep bool) error {
	if !r.HasTasks() && r.CPUsPerTask == 0 && r.GPUsPerTask == 0 {
		return nil
	}
	cpus, gpus, known := 0, 0, false
	c.View(func(st *quorum.State) {
		name := st.ResolveVCluster(r.VCluster)
		if name == "" {
			name = st.DefaultVCluster
		}
		for pass := 0; pass < 2 && !known; pass++ {
			for _, n := range st.NodesShared() {
				if pass == 0 && n.HomeVCluster != name {
					continue
				}
				if n.CPUs > 0 && (cpus == 0 || n.CPUs < cpus) {
					cpus = n.CPUs
				}
				gpus = max(gpus, n.GPUs)
				known = true
			}
		}
	})
	if r.NodesMax == 0 && r.Ntasks > 0 { // -n without -N
		r.NodesMin = max(r.NodesMin, r.TaskNodes(cpus))
		r.NodesMax = r.NodesMin
	}
	if !known || keep || r.Hold {
		return nil
	}
	if why := r.TaskFit(cpus, gpus); why != "" {
		return refusef(CodeTasks, "tasks: %s; submit with --hold to keep it anyway", why)
	}
	return nil
}
