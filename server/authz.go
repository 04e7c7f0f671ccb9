package server

import (
	"context"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Object-level authorization in the handlers: what auth.CanRead,
// CanChange and CanSubmit decide, applied to allocations and workflows.
// With auth off every check passes.

func allocObject(al *model.Allocation) auth.Object {
	return auth.Object{Kind: "allocation", ID: al.DisplayID(), Owner: al.User, Tenant: al.Tenant}
}

// dagObject describes a workflow by its first stage (every stage has the
// same submitter; tenants are per stage, the first one's is the workflow's).
func dagObject(st *quorum.State, g *model.DAG) auth.Object {
	o := auth.Object{Kind: "workflow", ID: g.Name}
	if len(g.Stages) > 0 {
		if a := st.Allocation(g.Stages[0].ID); a != nil {
			o.Owner, o.Tenant = a.User, a.Tenant
		}
	}
	return o
}

// mayRead reports whether the caller may see an object (listings skip what
// it may not).
func (s *Server) mayRead(ctx context.Context, o auth.Object) bool {
	return s.canRead(ctx, "see", o) == nil
}

// agentOwns refuses (and logs) an agent acting for a node its credential
// does not name.
func (s *Server) agentOwns(ctx context.Context, verb string, nodes []string) error {
	if !s.authOn() {
		return nil
	}
	id := caller(ctx)
	for _, n := range nodes {
		if err := auth.CanReportFor(id, n); err != nil {
			s.log.Warn("refused an agent acting for a node it does not own", "user", id.User, "action", verb, "node", n)
			return deny(err)
		}
	}
	return nil
}

// reportIsFor reports whether an agent's report is about an allocation
// that runs on one of its nodes; a report for anything else is refused
// and logged (and acknowledged, so the agent stops resending it).
func (s *Server) reportIsFor(conn *leader.AgentConn, owned map[string]bool, r *latticev1.AllocationReport) bool {
	if !s.authOn() {
		return true
	}
	var nodes []string
	s.view(func(st *quorum.State) {
		if al := st.Allocation(r.AllocationId); al != nil {
			nodes = al.Nodes
		}
	})
	for _, n := range nodes {
		if owned[n] {
			return true
		}
	}
	s.log.Warn("refused an agent report for an allocation not on its nodes", "agent", conn.ID(),
		"alloc", r.AllocationId, "state", r.State, "alloc_nodes", model.CompressHostlist(nodes))
	return false
}

func helloNodeNames(h *latticev1.AgentHello) []string {
	names := make([]string, len(h.Nodes))
	for i, n := range h.Nodes {
		names[i] = n.Name
	}
	return names
}

func nodeSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// ownedOnly keeps the heartbeat names that are among the agent's nodes.
func (s *Server) ownedOnly(owned map[string]bool, names []string) []string {
	if !s.authOn() {
		return names
	}
	out := names[:0:0]
	for _, n := range names {
		if owned[n] {
			out = append(out, n)
		}
	}
	return out
}
