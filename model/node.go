package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NodeState is the administrative and health state of a node.
type NodeState string

// Node states. Only Ready nodes take new work (invariant I7).
const (
	NodeReady    NodeState = "Ready"
	NodeDraining NodeState = "Draining" // runs its allocation, takes no new one; Drained once idle
	NodeDrained  NodeState = "Drained"
	NodeDegraded NodeState = "Degraded" // missed heartbeats; keeps its work, takes no new one
	NodeDown     NodeState = "Down"
	// NodeNotResponding: silent past the node timeout, but the leader holds
	// its failure — many nodes went silent at once (the control plane's
	// problem, not theirs), or its work's old run is not yet certainly
	// stopped (fencing). It keeps its work and takes no new one.
	NodeNotResponding NodeState = "NotResponding"
	// NodeCleanup: the quorum ended an allocation here without its agent's
	// report (the node was lost); its processes may still run, so the node
	// takes no work until the agent confirms they are gone.
	NodeCleanup NodeState = "Cleanup"
)

// NodeStates lists every node state, for validation messages and completion.
var NodeStates = []NodeState{NodeReady, NodeDraining, NodeDrained, NodeDegraded, NodeNotResponding, NodeDown, NodeCleanup}

// ParseNodeState accepts a state name in any letter case.
func ParseNodeState(s string) (NodeState, error) {
	for _, st := range NodeStates {
		if strings.EqualFold(s, string(st)) {
			return st, nil
		}
	}
	return "", fieldErr("state", s, joinStates(NodeStates))
}

func joinStates[S ~string](states []S) string {
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// Node is one compute node as the quorum knows it.
type Node struct {
	Name            string    `json:"name"`
	HomeVCluster    string    `json:"home_vcluster"`
	CurrentVCluster string    `json:"current_vcluster"`
	Group           int       `json:"group"` // dragonfly group
	Fingerprint     string    `json:"fingerprint,omitempty"`
	GPUType         string    `json:"gpu_type,omitempty"`
	GPUs            int       `json:"gpus,omitempty"`
	CPUs            int       `json:"cpus,omitempty"`      // detected by the agent (0: unknown)
	MemoryMB        int64     `json:"memory_mb,omitempty"` // detected by the agent (0: unknown)
	Features        []string  `json:"features,omitempty"`  // sorted, unique
	IdleWatts       int       `json:"idle_watts"`
	BusyWatts       int       `json:"busy_watts"`
	State           NodeState `json:"state"`
	StateReason     string    `json:"state_reason,omitempty"`
	// ReasonBy and ReasonAt are who set StateReason (an admin's drain or
	// down) and when; empty for reasons the system set.
	ReasonBy   string    `json:"reason_by,omitempty"`
	ReasonAt   time.Time `json:"reason_at,omitzero"`
	Allocation uint64    `json:"allocation,omitempty"` // 0 when idle
	Agent      string    `json:"agent,omitempty"`      // id of the agent that registered it
	// Health is what the leader hears from the node's agent: Ready, Degraded
	// (missed heartbeats) or Down. Drain is the admin's drain request. State
	// is derived from both and from the allocation (see DeriveState).
	Health NodeState `json:"health"`
	Drain  bool      `json:"drain,omitempty"`
	// ReturnRequested marks a busy borrowed node its home vCluster reclaimed:
	// it goes home as soon as its allocation ends.
	ReturnRequested bool `json:"return_requested,omitempty"`
	// ReservedFor holds an idle node for one pending allocation (the job a
	// reclaim or a preemption freed it for) until ReservedUntil: no other
	// allocation may start on it before then.
	ReservedFor   uint64    `json:"reserved_for,omitempty"`
	ReservedUntil time.Time `json:"reserved_until,omitzero"`
	// SuspendedAlloc is an allocation a preemption suspended here (its
	// processes frozen on this node, model.PreemptSuspend): until it
	// resumes, the node takes only the allocation it was suspended for.
	// 0 = none.
	SuspendedAlloc uint64 `json:"suspended_alloc,omitempty"`
	// ReclaimedFrom is the vCluster a reclaim last took the node back from,
	// at ReclaimedAt: that vCluster may not borrow it again until its home's
	// reclaim back-off has passed (anti-thrash).
	ReclaimedFrom string    `json:"reclaimed_from,omitempty"`
	ReclaimedAt   time.Time `json:"reclaimed_at,omitzero"`
	// Cleanup is an allocation the quorum ended without its agent's report
	// (the node was lost): its processes may still run here, so the node
	// takes no work until the agent confirms they are gone or an admin
	// undrains it. 0 = none.
	Cleanup uint64 `json:"cleanup,omitempty"`
	// MeasuredWatts is the draw its agent measured (RAPL), committed at
	// MeasuredAt while the node ran MeasuredAlloc (0 = idle). It stands for
	// the configured figure as long as the node runs the same allocation;
	// 0 = no measurement in force.
	MeasuredWatts int       `json:"measured_watts,omitempty"`
	MeasuredAlloc uint64    `json:"measured_alloc,omitempty"`
	MeasuredAt    time.Time `json:"measured_at,omitzero"`
	// FenceAfter is how long after a leader last heard its agent the
	// agent has certainly stopped the node's processes (its fencing
	// deadline and kill grace, from its hello; 0 = it never fences itself):
	// the leader fails the node's work no sooner.
	FenceAfter time.Duration `json:"fence_after,omitempty"`
	// ModifyVersion is the quorum state version of the node's last change.
	ModifyVersion uint64 `json:"modify_version,omitempty"`
}

// DeriveState sets State from Health, Drain, Cleanup and Allocation: a Down
// or Degraded node shows that; a drained node is Draining while it still
// runs something and Drained once idle; one with an unconfirmed cleanup is
// Cleanup; otherwise Ready.
func (n *Node) DeriveState() {
	switch {
	case n.Health == NodeDown || n.Health == NodeDegraded || n.Health == NodeNotResponding:
		n.State = n.Health
	case n.Drain && n.Allocation != 0:
		n.State = NodeDraining
	case n.Drain:
		n.State = NodeDrained
	case n.Cleanup != 0:
		n.State = NodeCleanup
	default:
		n.State = NodeReady
	}
}

// Idle reports whether the node runs nothing.
func (n *Node) Idle() bool { return n.Allocation == 0 }

// Schedulable reports whether the node may take new work now: Ready and idle.
func (n *Node) Schedulable() bool { return n.State == NodeReady && n.Allocation == 0 }

// ReservedAgainst reports whether the node is held for an allocation other
// than id at t.
func (n *Node) ReservedAgainst(id uint64, t time.Time) bool {
	return n.ReservedFor != 0 && n.ReservedFor != id && t.Before(n.ReservedUntil)
}

// Borrowed reports whether the node is lent out to another vCluster.
func (n *Node) Borrowed() bool { return n.CurrentVCluster != n.HomeVCluster }

// HasFeatures reports whether the node offers every feature in want.
func (n *Node) HasFeatures(want []string) bool {
	for _, f := range want {
		if !slices.Contains(n.Features, f) {
			return false
		}
	}
	return true
}

// Watts is the node's draw as the quorum counts it: the measured figure
// while it applies (same allocation, or idle, as when measured), else the
// configured estimate — busy when it runs something.
func (n *Node) Watts() int {
	if n.MeasuredWatts > 0 && n.MeasuredAlloc == n.Allocation {
		return n.MeasuredWatts
	}
	return n.EstimatedWatts()
}

// EstimatedWatts is the configured figure: busy when it runs something.
func (n *Node) EstimatedWatts() int {
	if n.Allocation != 0 {
		return n.BusyWatts
	}
	return n.IdleWatts
}

// Clone returns a deep copy.
func (n *Node) Clone() *Node {
	c := *n
	c.Features = slices.Clone(n.Features)
	return &c
}

// ValidateNode checks a node registration.
func ValidateNode(n *Node) error {
	if !validName(n.Name) {
		return fieldErr("node.name", n.Name, "1-253 characters of letters, digits, '.', '-' and '_'")
	}
	if n.HomeVCluster == "" {
		return fieldErr("node.home_vcluster", "", "the name of an existing vCluster")
	}
	if n.Group < 0 {
		return fieldErr("node.group", itoa(n.Group), "a dragonfly group number >= 0")
	}
	if n.GPUs < 0 {
		return fieldErr("node.gpus", itoa(n.GPUs), "a count >= 0")
	}
	if n.CPUs < 0 {
		return fieldErr("node.cpus", itoa(n.CPUs), "a count >= 0")
	}
	if n.MemoryMB < 0 {
		return fieldErr("node.memory_mb", strconv.FormatInt(n.MemoryMB, 10), "a size in MiB >= 0")
	}
	if n.IdleWatts < 0 || n.BusyWatts < 0 || n.BusyWatts < n.IdleWatts {
		return fieldErr("node.watts", itoa(n.IdleWatts)+":"+itoa(n.BusyWatts), "IDLE:BUSY with 0 <= IDLE <= BUSY")
	}
	return nil
}

// NormalizeFeatures sorts and de-duplicates a feature list in place.
func NormalizeFeatures(fs []string) []string {
	out := fs[:0]
	for _, f := range fs {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IsName reports whether s is a valid name of a tenant, vCluster, node or
// DAG stage: 1..253 letters, digits, '.', '-' and '_'.
func IsName(s string) bool { return validName(s) }

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
		default:
			return false
		}
	}
	return true
}

// CompressHostlist writes node names the way Slurm does: n001,n002,n003,n007
// becomes n[001-003,007]. Names sharing a prefix (and zero-padded width) are
// merged and sorted; names without a numeric suffix follow as they are.
func CompressHostlist(names []string) string {
	type key struct {
		prefix string
		width  int
	}
	type group struct {
		key  key
		nums []int
	}
	var groups []*group
	index := map[key]*group{}
	var plain []string
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		if i == len(n) || len(n)-i > 9 {
			plain = append(plain, n)
			continue
		}
		num, _ := strconv.Atoi(n[i:])
		k := key{n[:i], len(n) - i}
		if n[i] != '0' || len(n)-i == 1 {
			k.width = 0 // not zero-padded: numbers of different widths share a range
		}
		g := index[k]
		if g == nil {
			g = &group{key: k}
			index[k] = g
			groups = append(groups, g)
		}
		g.nums = append(g.nums, num)
	}
	var out []string
	for _, g := range groups {
		slices.Sort(g.nums)
		var ranges []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] <= g.nums[j]+1 {
				j++
			}
			r := fmt.Sprintf("%0*d", g.key.width, g.nums[i])
			if g.nums[j] != g.nums[i] {
				r += "-" + fmt.Sprintf("%0*d", g.key.width, g.nums[j])
			}
			ranges = append(ranges, r)
			i = j + 1
		}
		if len(ranges) == 1 && !strings.Contains(ranges[0], "-") {
			out = append(out, g.key.prefix+ranges[0])
		} else {
			out = append(out, g.key.prefix+"["+strings.Join(ranges, ",")+"]")
		}
	}
	return strings.Join(append(out, plain...), ",")
}
