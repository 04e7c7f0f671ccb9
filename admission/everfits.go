package admission

import (
	"fmt"
	"strings"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// EverFits refuses (CodeNeverFits) a request no set of nodes its vCluster can own or
// borrow could ever satisfy: more nodes than it has, counting only those
// that meet its constraints (features, GPUs, node list) and, for borrowed
// ones, what their homes may lend; or more than its tenant's node quota. A cluster with no nodes yet (agents not
// registered) is not judged.
func (c *Chain) EverFits(r *model.Request) error {
	constrained := r.GPUType != "" || r.GPUsPerNode > 0 || len(r.Constraints) > 0 || len(r.NodeList) > 0 || len(r.ExcludeNodes) > 0
	// What is read under the lock: counts from the quorum's indexes, and
	// for a request that looks at the nodes themselves, the node list as
	// the state shares it, scanned after the lock. Every submission asks,
	// so nothing here walks 10,000 nodes while Apply waits.
	type home struct {
		vc    *model.VCluster
		nodes int
	}
	var (
		vc     *model.VCluster
		name   string
		homes  []home // every vCluster, with the nodes whose home it is
		nodes  []*model.Node
		tenant *model.Tenant
		judged bool
	)
	tname := r.Tenant
	if tname == "" {
		tname = model.DefaultTenant
	}
	c.View(func(st *quorum.State) {
		if st.NodeCount() == 0 {
			return
		}
		name = st.ResolveVCluster(r.VCluster)
		if name == "" {
			name = st.DefaultVCluster
		}
		if vc = st.VCluster(name); vc == nil {
			return // the quorum names the known ones
		}
		judged = true
		for _, v := range st.VClusters() {
			homes = append(homes, home{v, st.HomeNodes(v.Name)})
		}
		if constrained || vc.Sensitive() {
			nodes = st.NodesShared()
		}
		tenant = st.Tenant(tname)
	})
	if !judged {
		return nil
	}
	most := 0
	lendable := map[string]int{} // by home: the nodes that pass
	if nodes == nil {
		for _, h := range homes {
			if h.vc.Name == name {
				most = h.nodes
			} else {
				lendable[h.vc.Name] = h.nodes
			}
		}
	} else {
		fps := map[string]int{}
		for _, n := range nodes {
			if !nodeMeets(n, r) {
				continue
			}
			if n.HomeVCluster == name {
				most++
				fps[n.Fingerprint]++
				continue
			}
			lendable[n.HomeVCluster]++
		}
		if vc.Sensitive() {
			most = 0
			for _, c := range fps {
				most = max(most, c)
			}
		}
	}
	if !vc.Sensitive() && vc.Borrows() && !(vc.CheckpointableOnlyOnBorrowed && !r.Checkpoint.Checkpointable()) {
		for _, h := range homes {
			if c := lendable[h.vc.Name]; c > 0 && h.vc.Name != name && h.vc.Lends() {
				most += min(c, h.vc.MaxLendable(h.nodes))
			}
		}
	}
	var msg string
	switch {
	case tenant != nil && tenant.MaxNodes > 0 && r.NodesMin > tenant.MaxNodes:
		msg = fmt.Sprintf("nodes: %d requested, tenant %s may use at most %d at once (its quota)", r.NodesMin, tname, tenant.MaxNodes)
	case r.NodesMin > most:
		what := ""
		if constrained {
			what = " nodes that meet its constraints"
		}
		msg = fmt.Sprintf("nodes: %d requested, vCluster %s can have at most %d%s (its own and what it may borrow)", r.NodesMin, name, most, what)
	}
	if msg != "" {
		return refusef(CodeNeverFits, "%s; submit with --hold to keep it anyway", msg)
	}
	return nil
}

func nodeMeets(n *model.Node, r *model.Request) bool {
	if r.GPUType != "" && !strings.EqualFold(n.GPUType, r.GPUType) {
		return false
	}
	return n.GPUs >= r.GPUsPerNode && n.HasFeatures(r.Constraints) && r.NodeAllowed(n.Name)
}
