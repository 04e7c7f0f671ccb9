package quorum

import (
	"slices"
	"sort"
	"sync/atomic"

	"github.com/latticehpc/lattice/model"
)

// State is the committed state the FSM holds. Objects it stores are never
// mutated in place: every change stores a fresh copy, so a pointer handed
// to a reader (under the read lock, or kept after it) stays valid and
// unchanged. Derived indexes are kept in step by every change through
// putNode and putAlloc, never recomputed on a hot path.
type State struct {
	Version          uint64 // bumped by every command that changes something
	NextID           uint64 // next allocation id
	DefaultVCluster  string
	PowerBudgetWatts int64 // system-wide; 0 = none
	// level is the highest feature level of any command applied to this
	// state (kept in snapshots): a member of a lower level refuses it.
	level Level

	nodes     map[string]*model.Node
	nodeNames []string // sorted
	// nodeList holds the nodes in nodeNames' order. NodesShared hands it
	// to readers as it is (no copy under the lock); once handed out it is
	// never written again: the next change copies it (nodeListShared).
	nodeList       []*model.Node
	nodeListShared atomic.Bool
	allocs         map[uint64]*model.Allocation
	vclusters      map[string]*model.VCluster
	tenants        map[string]*model.Tenant
	members        map[string]Member
	dags           map[uint64]*model.DAG     // workflows, by the id of their first allocation
	services       map[string]*model.Service // by name (services.go); nil until the first
	// qos is the site's QOS table sorted by name; nil = never set (model.DefaultQOS).
	qos []model.QOS
	// partitions maps partition names (aliases users write) to vClusters.
	partitions map[string]string
	// reservations are the node reservations by name (reservation.go); the
	// slice is replaced, never written, by a change.
	reservations []*model.Reservation
	// users by name and tokens by hash (users.go); nil until the first.
	users  map[string]*User
	tokens map[string]*Token

	// Idempotency: outcome of recent commands by request id, evicted oldest first.
	requests     map[string]*Result
	requestOrder []string

	idx     indexes
	dirtyAt uint64 // the version of the last command that changed something
	// pruned holds the allocations the last Prune dropped, until the FSM
	// hands them to its archive (TakePruned); nil otherwise.
	pruned []*model.Allocation
	// wake lists what the current command changed that waiting allocations
	// depend on; it is empty between commands (dependencies.go).
	wake wakeQueue
	// hist is the history of ended jobs (history.go).
	hist history
	// clusterID names the cluster (clusterid.go); "" until minted.
	clusterID string
}

// MaxRememberedRequests bounds the idempotency table.
const MaxRememberedRequests = 50000

// GroupKey identifies one dragonfly group within one vCluster.
type GroupKey struct {
	VCluster string
	Group    int
}

// Usage counts nodes.
type Usage struct {
	Busy int
	Free int // idle and Ready
	Down int // not Ready and idle (drained, down, degraded)
}

// TenantRun is what a tenant runs now.
type TenantRun struct {
	Allocations int
	Nodes       int
}

// BorrowKey is a (home, current) pair of vClusters.
type BorrowKey struct{ Home, Current string }

type indexes struct {
	groupUsage    map[GroupKey]Usage // by current vCluster and group
	vclusterUsage map[string]Usage   // by current vCluster
	homeCount     map[string]int     // nodes by home vCluster
	drawWatts     int64              // estimated system draw
	vclusterDraw  map[string]int64   // by current vCluster
	tenantRun     map[string]TenantRun
	borrowed      map[BorrowKey]int
	// pending (by vCluster) and active hold allocations in id order as
	// copy-on-write lists: a reader takes them whole under the read lock
	// without copying them (PendingShared, ActiveShared).
	pending       map[string]*allocList
	active        *allocList
	staging       map[uint64]struct{}
	cancelling    map[uint64]struct{}
	checkpointing map[uint64]struct{}
	dependents    map[uint64][]uint64 // dependency id -> pending allocations waiting on it
	ended         *allocList          // terminal allocations (until pruned), in id order
	groupNodes    map[int]int         // nodes by dragonfly group, whatever their vCluster (Groups)
	heldFor       map[uint64]int      // allocation id -> nodes held for it (Node.ReservedFor)
	deps          depIndex            // arrays, singletons, DAG sizes; dependents' slots (dependencies.go)
}

func newIndexes() indexes {
	return indexes{
		groupUsage:    map[GroupKey]Usage{},
		vclusterUsage: map[string]Usage{},
		homeCount:     map[string]int{},
		vclusterDraw:  map[string]int64{},
		tenantRun:     map[string]TenantRun{},
		borrowed:      map[BorrowKey]int{},
		pending:       map[string]*allocList{},
		active:        newAllocList(),
		ended:         newAllocList(),
		staging:       map[uint64]struct{}{},
		cancelling:    map[uint64]struct{}{},
		checkpointing: map[uint64]struct{}{},
		dependents:    map[uint64][]uint64{},
		groupNodes:    map[int]int{},
		heldFor:       map[uint64]int{},
		deps:          newDepIndex(),
	}
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		NextID:    1,
		nodes:     map[string]*model.Node{},
		allocs:    map[uint64]*model.Allocation{},
		vclusters: map[string]*model.VCluster{},
		tenants:   map[string]*model.Tenant{},
		members:   map[string]Member{},
		dags:      map[uint64]*model.DAG{},
		requests:  map[string]*Result{},
		idx:       newIndexes(),
	}
}

// --- index maintenance -------------------------------------------------------

func nodeUsageDelta(u Usage, n *model.Node, sign int) Usage {
	switch {
	case n.Allocation != 0:
		u.Busy += sign
	case n.State == model.NodeReady:
		u.Free += sign
	default:
		u.Down += sign
	}
	return u
}

func (s *State) indexNode(n *model.Node, sign int) {
	k := GroupKey{n.CurrentVCluster, n.Group}
	putUsage(s.idx.groupUsage, k, nodeUsageDelta(s.idx.groupUsage[k], n, sign))
	putUsage(s.idx.vclusterUsage, n.CurrentVCluster, nodeUsageDelta(s.idx.vclusterUsage[n.CurrentVCluster], n, sign))
	addInt(s.idx.homeCount, n.HomeVCluster, sign)
	w := int64(n.Watts()) * int64(sign)
	s.idx.drawWatts += w
	addInt(s.idx.vclusterDraw, n.CurrentVCluster, w)
	if n.Borrowed() {
		addInt(s.idx.borrowed, BorrowKey{n.HomeVCluster, n.CurrentVCluster}, sign)
	}
	if n.ReservedFor != 0 {
		addInt(s.idx.heldFor, n.ReservedFor, sign)
	}
}

// reindexNode moves the indexes from old to n, its replacement. When the
// node keeps its vCluster and group — a placement or a release at home —
// each index entry is read and written once, rather than once to remove old
// and once to add n.
func (s *State) reindexNode(old, n *model.Node) {
	if old.CurrentVCluster != n.CurrentVCluster || old.HomeVCluster != n.HomeVCluster || old.Group != n.Group {
		s.indexNode(old, -1)
		s.indexNode(n, +1)
		return
	}
	if nodeUsageDelta(Usage{}, old, -1) != nodeUsageDelta(Usage{}, n, -1) {
		k := GroupKey{n.CurrentVCluster, n.Group}
		putUsage(s.idx.groupUsage, k, nodeUsageDelta(nodeUsageDelta(s.idx.groupUsage[k], old, -1), n, +1))
		putUsage(s.idx.vclusterUsage, n.CurrentVCluster,
			nodeUsageDelta(nodeUsageDelta(s.idx.vclusterUsage[n.CurrentVCluster], old, -1), n, +1))
	}
	if w := int64(n.Watts()) - int64(old.Watts()); w != 0 {
		s.idx.drawWatts += w
		addInt(s.idx.vclusterDraw, n.CurrentVCluster, w)
	}
	if old.ReservedFor != n.ReservedFor {
		if old.ReservedFor != 0 {
			addInt(s.idx.heldFor, old.ReservedFor, -1)
		}
		if n.ReservedFor != 0 {
			addInt(s.idx.heldFor, n.ReservedFor, +1)
		}
	}
	// homeCount and borrowed depend only on the vClusters, unchanged.
}

// putUsage stores u under k, dropping the entry when it is empty.
func putUsage[K comparable](m map[K]Usage, k K, u Usage) {
	if u == (Usage{}) {
		delete(m, k)
	} else {
		m[k] = u
	}
}

func addInt[K comparable, V int | int64](m map[K]V, k K, d V) {
	if v := m[k] + d; v == 0 {
		delete(m, k)
	} else {
		m[k] = v
	}
}

func (s *State) indexAlloc(a *model.Allocation, sign int) {
	add := sign > 0
	switch {
	case a.State == model.StatePending:
		l := s.idx.pending[a.VCluster]
		if l == nil {
			l = newAllocList()
			s.idx.pending[a.VCluster] = l
		}
		if add {
			l.put(a)
		} else {
			l.remove(a.ID)
		}
		if l.Len() == 0 {
			delete(s.idx.pending, a.VCluster)
		}
	case a.State.Active():
		if add {
			s.idx.active.put(a)
		} else {
			s.idx.active.remove(a.ID)
		}
		tr := s.idx.tenantRun[a.Tenant]
		tr.Allocations += sign
		tr.Nodes += sign * len(a.Nodes)
		if tr == (TenantRun{}) {
			delete(s.idx.tenantRun, a.Tenant)
		} else {
			s.idx.tenantRun[a.Tenant] = tr
		}
		if a.State == model.StateStaging {
			setMember(s.idx.staging, a.ID, add)
		}
		if a.CancelRequested {
			setMember(s.idx.cancelling, a.ID, add)
		}
		if a.State == model.StateCheckpointing {
			setMember(s.idx.checkpointing, a.ID, add)
		}
	case a.State.Terminal():
		if add {
			s.idx.ended.put(a)
		} else {
			s.idx.ended.remove(a.ID)
		}
	}
}

// putNode stores n (a fresh copy owned by the state) in place of the node of
// the same name, keeping indexes in step and stamping the version.
func (s *State) putNode(n *model.Node) {
	s.replaceNode(s.nodes[n.Name], n)
}

// replaceNode is putNode when the caller holds the stored node already
// (old, nil for a new name): one map lookup fewer on the hot path.
func (s *State) replaceNode(old, n *model.Node) {
	if old != nil {
		s.reindexNode(old, n)
		if old.Group != n.Group {
			addInt(s.idx.groupNodes, old.Group, -1)
			addInt(s.idx.groupNodes, n.Group, +1)
		}
		i, _ := slices.BinarySearch(s.nodeNames, n.Name)
		s.ownNodeList()
		s.nodeList[i] = n
	} else {
		i, _ := slices.BinarySearch(s.nodeNames, n.Name)
		s.nodeNames = slices.Insert(s.nodeNames, i, n.Name)
		s.ownNodeList()
		s.nodeList = slices.Insert(s.nodeList, i, n)
		addInt(s.idx.groupNodes, n.Group, +1)
		s.indexNode(n, +1)
	}
	n.ModifyVersion = s.Version
	s.dirtyAt = s.Version
	s.nodes[n.Name] = n
}

// putAlloc stores a (a fresh copy) in place of the allocation with its id.
func (s *State) putAlloc(a *model.Allocation) {
	s.replaceAlloc(s.allocs[a.ID], a)
}

// replaceAlloc is putAlloc when the caller holds the stored allocation
// already (old, nil for a new id).
func (s *State) replaceAlloc(old, a *model.Allocation) {
	if old != nil && len(old.SuspendedOn) > 0 && !a.GangSuspended() {
		s.dropSuspendMarks(old, a)
	}
	if old != nil {
		s.reindexAlloc(old, a)
	} else {
		s.indexAlloc(a, +1)
	}
	s.reindexDeps(old, a)
	compactEnded(a)
	a.ModifyVersion = s.Version
	s.dirtyAt = s.Version
	s.allocs[a.ID] = a
}

// compactEnded drops what an ended allocation no longer needs — its script
// and environment, the bulk of a stored request — so the state and its
// snapshots carry them only for live work. a is the state's own fresh copy.
func compactEnded(a *model.Allocation) {
	if a.State.Terminal() && (a.Script != "" || a.Env != nil || a.ScriptBytes != nil) {
		a.Script, a.Env, a.ScriptBytes = "", nil, nil
	}
}

// reindexAlloc moves the indexes from old to a, its replacement. An
// allocation that stays active on as many nodes (Staging → Running,
// Running ⇄ Checkpointing, a cancel request) keeps its entries in the
// active set and its tenant's counts; only its staging and cancelling
// membership can change.
func (s *State) reindexAlloc(old, a *model.Allocation) {
	if old.State == model.StatePending && a.State == model.StatePending && old.VCluster == a.VCluster {
		s.idx.pending[a.VCluster].put(a) // stays pending: the new copy in place of the old
		return
	}
	if !old.State.Active() || !a.State.Active() || old.Tenant != a.Tenant || len(old.Nodes) != len(a.Nodes) {
		s.indexAlloc(old, -1)
		s.indexAlloc(a, +1)
		return
	}
	s.idx.active.put(a)
	if was, is := old.State == model.StateStaging, a.State == model.StateStaging; was != is {
		setMember(s.idx.staging, a.ID, is)
	}
	if old.CancelRequested != a.CancelRequested {
		setMember(s.idx.cancelling, a.ID, a.CancelRequested)
	}
	if was, is := old.State == model.StateCheckpointing, a.State == model.StateCheckpointing; was != is {
		setMember(s.idx.checkpointing, a.ID, is)
	}
}

func setMember(m map[uint64]struct{}, id uint64, in bool) {
	if in {
		m[id] = struct{}{}
	} else {
		delete(m, id)
	}
}

func (s *State) deleteAlloc(id uint64) {
	if old := s.allocs[id]; old != nil {
		s.indexAlloc(old, -1)
		s.reindexDeps(old, nil)
		delete(s.allocs, id)
		s.dirtyAt = s.Version
	}
}

// ownNodeList makes nodeList the state's own before a change: a copy when
// a reader holds it (NodesShared).
func (s *State) ownNodeList() {
	if s.nodeListShared.Load() {
		s.nodeList = slices.Clone(s.nodeList)
		s.nodeListShared.Store(false)
	}
}

// rebuildIndexes recomputes every index from the objects (after a restore).
func (s *State) rebuildIndexes() {
	s.idx = newIndexes()
	s.hist.reindex()
	s.nodeList = make([]*model.Node, len(s.nodeNames))
	for i, name := range s.nodeNames {
		s.nodeList[i] = s.nodes[name]
	}
	s.nodeListShared.Store(false)
	for _, name := range s.nodeNames {
		s.indexNode(s.nodes[name], +1)
		addInt(s.idx.groupNodes, s.nodes[name].Group, +1)
	}
	for _, id := range s.allocIDs() {
		s.indexAlloc(s.allocs[id], +1)
		s.indexDeps(s.allocs[id], +1)
	}
}

// --- read access ---------------------------------------------------------------

// Node returns a node by name (nil if unknown). The value must not be modified.
func (s *State) Node(name string) *model.Node { return s.nodes[name] }

// Nodes returns every node in name order, in a slice of the caller's.
func (s *State) Nodes() []*model.Node { return slices.Clone(s.nodeList) }

// NodesShared returns every node in name order without copying: the
// state's own list, which it never changes again (its next node change
// copies it first). The caller must not modify it; it may keep it after
// the read lock. Safe to call from concurrent readers.
func (s *State) NodesShared() []*model.Node {
	if !s.nodeListShared.Load() {
		s.nodeListShared.Store(true)
	}
	return s.nodeList[:len(s.nodeList):len(s.nodeList)]
}

// NodeCount is the number of nodes.
func (s *State) NodeCount() int { return len(s.nodeNames) }

// Allocation returns an allocation by id (nil if unknown or pruned).
func (s *State) Allocation(id uint64) *model.Allocation { return s.allocs[id] }

// AllocationCount is the number of retained allocations.
func (s *State) AllocationCount() int { return len(s.allocs) }

func (s *State) allocIDs() []uint64 {
	ids := make([]uint64, 0, len(s.allocs))
	for id := range s.allocs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Allocations returns every retained allocation in id order.
func (s *State) Allocations() []*model.Allocation {
	ids := s.allocIDs()
	out := make([]*model.Allocation, len(ids))
	for i, id := range ids {
		out[i] = s.allocs[id]
	}
	return out
}

func sortedIDs(m map[uint64]struct{}) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *State) byIDs(ids []uint64) []*model.Allocation {
	out := make([]*model.Allocation, len(ids))
	for i, id := range ids {
		out[i] = s.allocs[id]
	}
	return out
}

// Pending returns a vCluster's pending allocations in id order.
func (s *State) Pending(vcluster string) []*model.Allocation {
	return s.idx.pending[vcluster].Share().AppendTo(nil)
}

// PendingShared returns a vCluster's pending allocations in id order as a
// view that stays as it is: taking it copies a few hundred pointers at
// 100,000 pending, so a reader under the read lock takes it and reads it
// after releasing the lock (a scheduling cycle).
func (s *State) PendingShared(vcluster string) AllocView { return s.idx.pending[vcluster].Share() }

// PendingCounts counts the pending allocations of every vCluster that has
// some (a vCluster removed since included).
func (s *State) PendingCounts() map[string]int {
	out := make(map[string]int, len(s.idx.pending))
	for vc, l := range s.idx.pending {
		out[vc] = l.Len()
	}
	return out
}

// PendingCount counts a vCluster's pending allocations.
func (s *State) PendingCount(vcluster string) int { return s.idx.pending[vcluster].Len() }

// Active returns the allocations holding nodes, in id order.
func (s *State) Active() []*model.Allocation { return s.idx.active.Share().AppendTo(nil) }

// ActiveShared returns the allocations holding nodes in id order as a view
// that stays as it is (see PendingShared).
func (s *State) ActiveShared() AllocView { return s.idx.active.Share() }

// EndedShared returns the ended (terminal) allocations the state still
// holds, in id order, as a view that stays as it is (see PendingShared):
// retention, the predictor's window and the metrics read it after the lock.
func (s *State) EndedShared() AllocView { return s.idx.ended.Share() }

// ActiveCount counts the allocations holding nodes.
func (s *State) ActiveCount() int { return s.idx.active.Len() }

// Staging returns the allocations assigned but not yet running, in id order.
func (s *State) Staging() []*model.Allocation { return s.byIDs(sortedIDs(s.idx.staging)) }

// Cancelling returns active allocations a user cancelled, in id order.
func (s *State) Cancelling() []*model.Allocation { return s.byIDs(sortedIDs(s.idx.cancelling)) }

// Checkpointing lists the allocations being checkpointed, in id order.
func (s *State) Checkpointing() []*model.Allocation {
	return s.byIDs(sortedIDs(s.idx.checkpointing))
}

// Lent counts the nodes of home that other vClusters currently hold.
func (s *State) Lent(home string) int {
	n := 0
	for k, c := range s.idx.borrowed { // a sum: map order does not matter
		if k.Home == home {
			n += c
		}
	}
	return n
}

// VCluster returns a vCluster by name (nil if unknown).
func (s *State) VCluster(name string) *model.VCluster { return s.vclusters[name] }

// VClusters returns every vCluster in name order.
func (s *State) VClusters() []*model.VCluster {
	names := make([]string, 0, len(s.vclusters))
	for n := range s.vclusters {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*model.VCluster, len(names))
	for i, n := range names {
		out[i] = s.vclusters[n]
	}
	return out
}

// Tenant returns a tenant by name (nil if it has no record).
func (s *State) Tenant(name string) *model.Tenant { return s.tenants[name] }

// Tenants returns every tenant record in name order.
func (s *State) Tenants() []*model.Tenant {
	names := make([]string, 0, len(s.tenants))
	for n := range s.tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*model.Tenant, len(names))
	for i, n := range names {
		out[i] = s.tenants[n]
	}
	return out
}

// Members returns the recorded quorum members in id order.
func (s *State) Members() []Member {
	out := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Member returns one member's addresses.
func (s *State) Member(id string) (Member, bool) {
	m, ok := s.members[id]
	return m, ok
}

// GroupUsage returns node counts of one vCluster's part of one group.
func (s *State) GroupUsage(vcluster string, group int) Usage {
	return s.idx.groupUsage[GroupKey{vcluster, group}]
}

// VClusterUsage returns node counts by current vCluster.
func (s *State) VClusterUsage(vcluster string) Usage { return s.idx.vclusterUsage[vcluster] }

// HomeNodes counts the nodes whose home is vcluster.
func (s *State) HomeNodes(vcluster string) int { return s.idx.homeCount[vcluster] }

// Borrowed counts nodes of home currently used by current.
func (s *State) Borrowed(home, current string) int {
	return s.idx.borrowed[BorrowKey{home, current}]
}

// DrawWatts is the estimated draw of the whole system.
func (s *State) DrawWatts() int64 { return s.idx.drawWatts }

// VClusterDrawWatts is the estimated draw of the nodes a vCluster currently uses.
func (s *State) VClusterDrawWatts(vcluster string) int64 { return s.idx.vclusterDraw[vcluster] }

// TenantRunning is what a tenant runs now.
func (s *State) TenantRunning(tenant string) TenantRun { return s.idx.tenantRun[tenant] }

// HeldFor lists, in id order, the allocations some node is held for
// (Node.ReservedFor, expired holds included): a few at most, from an index.
func (s *State) HeldFor() []uint64 {
	ids := make([]uint64, 0, len(s.idx.heldFor))
	for id := range s.idx.heldFor {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Groups is the number of distinct dragonfly groups among the nodes. Every
// scheduling cycle asks, so it is an index, not a scan of the nodes.
func (s *State) Groups() int { return len(s.idx.groupNodes) }

// LookupArrayTask finds task index of the array whose first task is
// arrayID. Tasks get consecutive ids in index order, so this is arithmetic.
func (s *State) LookupArrayTask(arrayID uint64, index int) *model.Allocation {
	first := s.allocs[arrayID]
	if first == nil || first.ArrayJobID != arrayID || first.Array == nil {
		return nil
	}
	pos, ok := first.Array.Position(index)
	if !ok {
		return nil
	}
	if a := s.allocs[arrayID+uint64(pos)]; a != nil && a.ArrayJobID == arrayID && a.ArrayIndex == index {
		return a
	}
	return nil
}

// takePruned returns and forgets what the last Prune dropped.
func (s *State) takePruned() []*model.Allocation {
	p := s.pruned
	s.pruned = nil
	return p
}

// ActiveAnyOrder returns the allocations holding nodes (in id order now;
// kept for readers that do not need one).
func (s *State) ActiveAnyOrder() []*model.Allocation { return s.Active() }

// StagingAnyOrder returns the allocations assigned but not yet running in
// no particular order (map order: never inside Apply), for the dispatcher,
// which looks at them after every change.
func (s *State) StagingAnyOrder() []*model.Allocation {
	out := make([]*model.Allocation, 0, len(s.idx.staging))
	for id := range s.idx.staging {
		out = append(out, s.allocs[id])
	}
	return out
}
