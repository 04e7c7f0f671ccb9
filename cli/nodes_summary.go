package cli

import (
	"cmp"
	"io"
	"slices"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// nodeSummaryView is one line of `nodes --summary -o json`: the nodes of
// a vCluster (where they currently are) in one sinfo state.
type nodeSummaryView struct {
	VCluster string   `json:"vcluster"`
	State    string   `json:"state"`
	Nodes    int      `json:"nodes"`
	NodeList string   `json:"nodelist"`
	Names    []string `json:"names"`
}

// sinfoState is a node's state in sinfo's words: idle, alloc, drng,
// drain, down; a '*' marks a node that stopped answering (Degraded, NotResponding).
func sinfoState(n *latticev1.Node) string {
	busy := n.GetAllocation() != 0
	switch model.NodeState(n.GetState()) {
	case model.NodeReady:
		switch {
		case busy:
			return "alloc"
		case n.GetReservationMaint():
			return "maint"
		case n.GetReservation() != "":
			return "resv"
		}
		return "idle"
	case model.NodeDraining:
		return "drng"
	case model.NodeDrained:
		return "drain"
	case model.NodeDegraded, model.NodeNotResponding:
		if busy {
			return "alloc*"
		}
		return "idle*"
	case model.NodeDown:
		return "down*"
	}
	return n.GetState()
}

// sinfoOrder is the order sinfo's states are listed in within a vCluster.
var sinfoOrder = []string{"alloc", "alloc*", "idle", "idle*", "resv", "maint", "drng", "drain", "down*"}

// nodesSummary is sinfo's default view: one line per vCluster and state
// with the count and the hostlist.
func (r *runner) nodesSummary(format string, nodes []*latticev1.Node) error {
	type key struct{ vc, state string }
	groups := map[key][]string{}
	for _, n := range nodes {
		k := key{cmp.Or(n.GetCurrentVcluster(), n.GetHomeVcluster()), sinfoState(n)}
		groups[k] = append(groups[k], n.GetName())
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	rank := func(s string) int {
		if i := slices.Index(sinfoOrder, s); i >= 0 {
			return i
		}
		return len(sinfoOrder)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.vc, b.vc), cmp.Compare(rank(a.state), rank(b.state)), cmp.Compare(a.state, b.state))
	})
	views := make([]nodeSummaryView, 0, len(keys))
	for _, k := range keys {
		names := groups[k]
		slices.Sort(names)
		views = append(views, nodeSummaryView{VCluster: orDash(k.vc), State: k.state, Nodes: len(names), NodeList: hostlist(names), Names: names})
	}
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		// sinfo's columns; a vCluster is always up and has no time limit of its own.
		row(w, "VCLUSTER", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST")
		for _, v := range views {
			row(w, v.VCluster, "up", "infinite", v.Nodes, v.State, v.NodeList)
		}
		return nil
	})
}
