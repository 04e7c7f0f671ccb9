package quorum

import (
	"fmt"

	"github.com/latticehpc/lattice/model"
)

// Node facts: what agents find their nodes are, and what they measure.
//
//   - NodeFacts (32): the conformance fingerprint an agent computed when it
//     re-checked its machine. A changed fingerprint is drift: the node's
//     fingerprint becomes the new one and, when its home vCluster is
//     sensitive (whose allocations must run on one fingerprint), the node is
//     drained with a reason naming the change, until an admin undrains it.
//     A re-registration with another fingerprint is drift too.
//   - NodePower (33): the draw agents measured, committed by the leader when
//     fresh (and cleared when no longer fresh). While the node runs the same
//     allocation (or stays idle) as when measured, the measurement stands
//     for the configured figure in the draw indexes and the power check.

// NodeFact is one node's re-checked fingerprint.
type NodeFact struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
	Detail      string `json:"detail,omitempty"` // which inputs changed
}

// NodeFacts reports what an agent found its nodes are.
type NodeFacts struct {
	Header
	Agent string     `json:"agent"`
	Nodes []NodeFact `json:"nodes"`
}

// NodeMeasurement is one node's measured draw; Watts 0 clears it.
// Allocation is what the node ran when measured (0 = idle): a measurement
// of another allocation than the node runs now is stale and skipped.
type NodeMeasurement struct {
	Name       string `json:"name"`
	Watts      int    `json:"watts"`
	Allocation uint64 `json:"allocation,omitempty"`
}

// NodePower commits measured draws.
type NodePower struct {
	Header
	Nodes []NodeMeasurement `json:"nodes"`
}

// DriftReasonPrefix starts the state reason of a node drained for drift.
const DriftReasonPrefix = "fingerprint drift"

// drift records that node n (a fresh copy) now has fingerprint fp.
func (s *State) drift(n *model.Node, fp, detail string) {
	old := n.Fingerprint
	n.Fingerprint = fp
	if vc := s.vclusters[n.HomeVCluster]; vc != nil && vc.Sensitive() {
		n.Drain = true
		if detail == "" {
			detail = "the machine changed"
		}
		n.StateReason = fmt.Sprintf("%s: %s (was %s, now %s); sensitive vCluster %s takes no work here until an admin undrains it",
			DriftReasonPrefix, detail, short(old), short(fp), n.HomeVCluster)
	}
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	if fp == "" {
		return "none"
	}
	return fp
}

func (s *State) applyNodeFacts(c *NodeFacts) *Result {
	res := &Result{Items: make([]ItemResult, len(c.Nodes))}
	for i, f := range c.Nodes {
		n := s.nodes[f.Name]
		switch {
		case n == nil:
			res.Items[i].Rejection = reject(CodeNotFound, "", "node %s does not exist", f.Name)
			continue
		case c.Agent != "" && n.Agent != c.Agent:
			res.Items[i].Rejection = reject(CodeConflict, "", "node %s is registered by agent %s, not %s", f.Name, n.Agent, c.Agent)
			continue
		}
		res.Items[i].Committed = true
		if n.Fingerprint == f.Fingerprint {
			continue
		}
		nc := modifyNode(n)
		s.drift(nc, f.Fingerprint, f.Detail)
		nc.DeriveState()
		s.putNode(nc)
		s.touch()
	}
	return res
}

func (s *State) applyNodePower(c *NodePower) *Result {
	res := &Result{Items: make([]ItemResult, len(c.Nodes))}
	for i, m := range c.Nodes {
		n := s.nodes[m.Name]
		switch {
		case n == nil:
			res.Items[i].Rejection = reject(CodeNotFound, "", "node %s does not exist", m.Name)
			continue
		case m.Watts < 0:
			res.Items[i].Rejection = reject(CodeInvalid, "", "node %s: invalid measured watts %d: allowed >= 0", m.Name, m.Watts)
			continue
		case m.Watts > 0 && n.Allocation != m.Allocation:
			res.Items[i].Rejection = reject(CodeStale, "", "node %s runs allocation %d, the measurement was of %d", m.Name, n.Allocation, m.Allocation)
			continue
		}
		res.Items[i].Committed = true
		if n.MeasuredWatts == m.Watts && n.MeasuredAlloc == m.Allocation {
			continue
		}
		nc := modifyNode(n)
		nc.MeasuredWatts, nc.MeasuredAlloc, nc.MeasuredAt = m.Watts, m.Allocation, c.Time
		if m.Watts == 0 {
			nc.MeasuredAlloc, nc.MeasuredAt = 0, c.Time
		}
		s.putNode(nc)
		s.touch()
	}
	return res
}

// markCleanup keeps the nodes an allocation held out of work after the
// quorum ended or requeued it without its agent's report: its processes may
// still run there.
func (s *State) markCleanup(id uint64, nodes []string) {
	for _, name := range nodes {
		n := s.nodes[name]
		if n == nil || n.Allocation != 0 || n.Cleanup == id {
			continue
		}
		nc := modifyNode(n)
		nc.Cleanup = id
		nc.DeriveState()
		s.putNode(nc)
		s.touch()
	}
}
