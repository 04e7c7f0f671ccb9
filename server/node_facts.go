package server

import (
	"context"
	"slices"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// confirmCleanup ends the Cleanup of those of nodes (all of one agent)
// whose allocation in cleanup is not among running, the allocations the
// agent has processes of: the agent confirms they are gone.
func (s *Server) confirmCleanup(ctx context.Context, nodes []string, running []uint64) {
	byAlloc := map[uint64][]string{}
	var ids []uint64
	s.view(func(st *quorum.State) {
		for _, name := range nodes {
			n := st.Node(name)
			if n == nil || n.Cleanup == 0 || slices.Contains(running, n.Cleanup) {
				continue
			}
			if byAlloc[n.Cleanup] == nil {
				ids = append(ids, n.Cleanup)
			}
			byAlloc[n.Cleanup] = append(byAlloc[n.Cleanup], name)
		}
	})
	slices.Sort(ids)
	for _, id := range ids {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.propose(pctx, &quorum.SetNodeState{Nodes: byAlloc[id], Action: quorum.ActionCleaned, Allocation: id})
		cancel()
		if err != nil {
			s.log.Warn("commit confirmed cleanup", "alloc", id, "nodes", len(byAlloc[id]), "err", err)
			continue
		}
		s.log.Info("cleanup confirmed by the agent: the nodes take work again", "alloc", id, "nodes", len(byAlloc[id]))
	}
}

// nodeFacts commits an agent's re-checked fingerprints (drift).
func (s *Server) nodeFacts(ctx context.Context, agentID string, f *latticev1.NodeFacts) {
	cmd := &quorum.NodeFacts{Agent: agentID}
	for _, n := range f.Nodes {
		cmd.Nodes = append(cmd.Nodes, quorum.NodeFact{Name: n.Name, Fingerprint: n.Fingerprint, Detail: n.Detail})
	}
	if len(cmd.Nodes) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := s.propose(pctx, cmd)
	if err != nil {
		s.log.Warn("commit node facts", "agent", agentID, "err", err)
		return
	}
	for i, it := range r.Items {
		if it.Rejection != nil {
			s.log.Warn("node facts refused", "agent", agentID, "node", cmd.Nodes[i].Name, "reason", it.Rejection.Message)
		}
	}
	s.log.Warn("fingerprint drift reported", "agent", agentID, "nodes", len(cmd.Nodes))
}
