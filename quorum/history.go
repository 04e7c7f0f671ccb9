package quorum

import (
	"cmp"
	"slices"
	"time"

	"github.com/latticehpc/lattice/model"
)

// The history of ended jobs is replicated state. Retention moves ended
// allocations out of the live state (ArchiveEnded, proposed by the leader
// for those older than --retention) into a compact record each
// (HistoryRecord: what accounting reads, no script, environment, steps or
// transitions), kept in end-time order until --history-retention drops
// them (ArchiveEnded.DropBefore). Every member applies the same commands,
// and snapshots carry the records ("ended" lines), so the history is the
// same on every member — one that caught up from a snapshot included.
//
// Queries by end time are binary searches; by user, tenant and state they
// read per-key lists of positions (derived, rebuilt on restore, never in a
// snapshot).

// ArchiveEnded moves the ended allocations IDs names from the live state
// into the history (an id that is not an ended allocation is skipped), and
// drops the history records that ended before DropBefore (zero: none).
type ArchiveEnded struct {
	Header
	IDs        []uint64  `json:"ids,omitempty"`
	DropBefore time.Time `json:"drop_before,omitzero"`
}

// MaxArchivePerCommand bounds one ArchiveEnded's ids (the entry's size).
const MaxArchivePerCommand = 10000

// HistoryRecord is one ended job as the history keeps it. New fields are
// added with omitempty (and to historyRecordOf and Allocation), so records
// written before them load unchanged.
type HistoryRecord struct {
	ID              uint64           `json:"id"`
	ArrayJobID      uint64           `json:"array_job_id,omitempty"`
	ArrayIndex      int              `json:"array_index,omitempty"`
	DAGID           uint64           `json:"dag_id,omitempty"`
	Name            string           `json:"name,omitempty"`
	User            string           `json:"user,omitempty"`
	Tenant          string           `json:"tenant,omitempty"`
	Project         string           `json:"project,omitempty"`
	VCluster        string           `json:"vcluster,omitempty"`
	QOS             string           `json:"qos,omitempty"`
	PriorityClass   int              `json:"priority_class,omitempty"`
	NodesMin        int              `json:"nodes_min,omitempty"`
	NodesMax        int              `json:"nodes_max,omitempty"`
	WalltimeSeconds int64            `json:"walltime_s,omitempty"`
	GPUType         string           `json:"gpu_type,omitempty"`
	GPUsPerNode     int              `json:"gpus_per_node,omitempty"`
	WorkDir         string           `json:"work_dir,omitempty"`
	State           model.AllocState `json:"state"`
	Reason          string           `json:"reason,omitempty"`
	ExitCode        *int             `json:"exit_code,omitempty"`
	// Nodes is the node list as a hostlist ("node[001-004]").
	Nodes           string `json:"nodes,omitempty"`
	SubmitMs        int64  `json:"submit_ms,omitempty"`
	EligibleMs      int64  `json:"eligible_ms,omitempty"`
	StartMs         int64  `json:"start_ms,omitempty"`
	EndMs           int64  `json:"end_ms"`
	RequeueCount    int    `json:"requeue_count,omitempty"`
	CheckpointCount int    `json:"checkpoint_count,omitempty"`
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// historyRecordOf is the record of an ended allocation.
func historyRecordOf(a *model.Allocation) *HistoryRecord {
	r := &HistoryRecord{
		ID: a.ID, ArrayJobID: a.ArrayJobID, ArrayIndex: a.ArrayIndex, DAGID: a.DAGID,
		Name: a.Name, User: a.User, Tenant: a.Tenant, Project: a.Project, VCluster: a.VCluster, QOS: a.QOS,
		PriorityClass: a.PriorityClass, NodesMin: a.NodesMin, NodesMax: a.NodesMax,
		WalltimeSeconds: int64(a.Walltime / time.Second), GPUType: a.GPUType, GPUsPerNode: a.GPUsPerNode, WorkDir: a.WorkDir,
		State: a.State, Reason: a.Reason, Nodes: model.CompressHostlist(a.Nodes),
		SubmitMs: unixMs(a.SubmitTime), EligibleMs: unixMs(a.EligibleTime), StartMs: unixMs(a.StartTime), EndMs: unixMs(a.EndTime),
		RequeueCount: a.RequeueCount, CheckpointCount: a.CheckpointCount,
	}
	if a.ExitCode != nil {
		e := *a.ExitCode
		r.ExitCode = &e
	}
	return r
}

// Allocation is the record as an allocation (what Get and List show): the
// fields the record keeps, the rest zero.
func (r *HistoryRecord) Allocation() *model.Allocation {
	a := &model.Allocation{
		ID: r.ID, ArrayJobID: r.ArrayJobID, ArrayIndex: r.ArrayIndex, DAGID: r.DAGID,
		State: r.State, Reason: r.Reason,
		SubmitTime: fromMs(r.SubmitMs), EligibleTime: fromMs(r.EligibleMs), StartTime: fromMs(r.StartMs), EndTime: fromMs(r.EndMs),
		RequeueCount: r.RequeueCount, CheckpointCount: r.CheckpointCount,
	}
	a.Name, a.User, a.Tenant, a.Project, a.VCluster, a.QOS = r.Name, r.User, r.Tenant, r.Project, r.VCluster, r.QOS
	a.PriorityClass, a.NodesMin, a.NodesMax = r.PriorityClass, r.NodesMin, r.NodesMax
	a.Walltime = time.Duration(r.WalltimeSeconds) * time.Second
	a.GPUType, a.GPUsPerNode, a.WorkDir = r.GPUType, r.GPUsPerNode, r.WorkDir
	if r.Nodes != "" {
		a.Nodes, _ = model.ExpandHostlist(r.Nodes)
	}
	if r.ExitCode != nil {
		e := *r.ExitCode
		a.ExitCode = &e
	}
	return a
}

// owner is whom Users queries match: the user, or for work submitted
// without authentication (no user) its tenant, as latticectl shows it.
func (r *HistoryRecord) owner() string { return cmp.Or(r.User, r.Tenant) }

// before orders records by end time, then id.
func (r *HistoryRecord) before(o *HistoryRecord) bool {
	return r.EndMs < o.EndMs || (r.EndMs == o.EndMs && r.ID < o.ID)
}

// history is the state's store of ended jobs: recs in (end, id) order;
// the record at recs[i] has position base+i, which the per-key lists hold.
type history struct {
	recs []*HistoryRecord
	base uint64
	byID map[uint64]*HistoryRecord
	// byArray: the ids of an array's archived tasks, ascending.
	byArray  map[uint64][]uint64
	byUser   map[string][]uint64
	byTenant map[string][]uint64
	byState  map[model.AllocState][]uint64
}

func (h *history) init() {
	if h.byID == nil {
		h.byID = map[uint64]*HistoryRecord{}
		h.byArray = map[uint64][]uint64{}
		h.byUser = map[string][]uint64{}
		h.byTenant = map[string][]uint64{}
		h.byState = map[model.AllocState][]uint64{}
	}
}

// index adds the record at position pos to the per-key lists (pos is
// above every position they hold).
func (h *history) index(r *HistoryRecord, pos uint64) {
	h.byID[r.ID] = r
	if r.ArrayJobID != 0 {
		ids := h.byArray[r.ArrayJobID]
		i, _ := slices.BinarySearch(ids, r.ID)
		h.byArray[r.ArrayJobID] = slices.Insert(ids, i, r.ID)
	}
	h.byUser[r.owner()] = append(h.byUser[r.owner()], pos)
	h.byTenant[r.Tenant] = append(h.byTenant[r.Tenant], pos)
	h.byState[r.State] = append(h.byState[r.State], pos)
}

// reindex rebuilds the derived maps from recs (after a restore or an
// insertion out of order).
func (h *history) reindex() {
	h.byID = nil
	h.init()
	h.base = 0
	for i, r := range h.recs {
		h.index(r, uint64(i))
	}
}

// add inserts records (in any order). The records already held are never
// written: an insertion out of order builds a new slice, so a reader that
// holds recs (a snapshot) keeps what it took.
func (h *history) add(recs []*HistoryRecord) {
	if len(recs) == 0 {
		return
	}
	h.init()
	slices.SortFunc(recs, func(x, y *HistoryRecord) int {
		if c := cmp.Compare(x.EndMs, y.EndMs); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	if n := len(h.recs); n == 0 || h.recs[n-1].before(recs[0]) {
		for _, r := range recs {
			h.recs = append(h.recs, r)
			h.index(r, h.base+uint64(len(h.recs)-1))
		}
		return
	}
	merged := make([]*HistoryRecord, 0, len(h.recs)+len(recs))
	i, j := 0, 0
	for i < len(h.recs) || j < len(recs) {
		if j == len(recs) || (i < len(h.recs) && h.recs[i].before(recs[j])) {
			merged = append(merged, h.recs[i])
			i++
		} else {
			merged = append(merged, recs[j])
			j++
		}
	}
	h.recs = merged
	h.reindex()
}

// dropBefore forgets the records that ended before t; it returns how many.
func (h *history) dropBefore(t time.Time) int {
	if t.IsZero() || len(h.recs) == 0 {
		return 0
	}
	cut := unixMs(t)
	n := 0
	for n < len(h.recs) && h.recs[n].EndMs < cut {
		n++
	}
	for _, r := range h.recs[:n] {
		delete(h.byID, r.ID)
		if r.ArrayJobID != 0 {
			ids := h.byArray[r.ArrayJobID]
			if i, ok := slices.BinarySearch(ids, r.ID); ok {
				ids = slices.Delete(slices.Clone(ids), i, i+1)
			}
			if len(ids) == 0 {
				delete(h.byArray, r.ArrayJobID)
			} else {
				h.byArray[r.ArrayJobID] = ids
			}
		}
		h.byUser[r.owner()] = popFront(h.byUser[r.owner()])
		if len(h.byUser[r.owner()]) == 0 {
			delete(h.byUser, r.owner())
		}
		h.byTenant[r.Tenant] = popFront(h.byTenant[r.Tenant])
		if len(h.byTenant[r.Tenant]) == 0 {
			delete(h.byTenant, r.Tenant)
		}
		h.byState[r.State] = popFront(h.byState[r.State])
		if len(h.byState[r.State]) == 0 {
			delete(h.byState, r.State)
		}
	}
	h.recs = h.recs[n:]
	h.base += uint64(n)
	return n
}

func popFront(s []uint64) []uint64 {
	if len(s) == 0 {
		return s
	}
	return s[1:]
}

// HistoryQuery selects ended jobs; every field set narrows the answer.
type HistoryQuery struct {
	// EndedFrom and EndedBefore bound the end time ([from, before)).
	EndedFrom, EndedBefore time.Time
	// SubmittedBefore keeps jobs submitted before it (sacct's window).
	SubmittedBefore time.Time
	// Users match the submitter (the tenant of work submitted without one).
	Users    []string
	Tenants  []string
	States   []model.AllocState
	VCluster string
	// AfterID keeps ids above it (paging).
	AfterID uint64
}

// positions returns the positions in [lo, hi) of a per-key list.
func window(list []uint64, lo, hi uint64) []uint64 {
	i, _ := slices.BinarySearch(list, lo)
	j, _ := slices.BinarySearch(list, hi)
	return list[i:j]
}

// query returns the records q selects, in (end, id) order.
func (h *history) query(q HistoryQuery) []*HistoryRecord {
	if len(h.recs) == 0 {
		return nil
	}
	loIdx, hiIdx := 0, len(h.recs)
	if !q.EndedFrom.IsZero() {
		t := unixMs(q.EndedFrom)
		loIdx, _ = slices.BinarySearchFunc(h.recs, t, func(r *HistoryRecord, t int64) int { return cmp.Compare(r.EndMs, t) })
	}
	if !q.EndedBefore.IsZero() {
		t := unixMs(q.EndedBefore)
		hiIdx, _ = slices.BinarySearchFunc(h.recs, t, func(r *HistoryRecord, t int64) int { return cmp.Compare(r.EndMs, t) })
	}
	if loIdx >= hiIdx {
		return nil
	}
	lo, hi := h.base+uint64(loIdx), h.base+uint64(hiIdx)
	// The narrowest index the query names gives the candidates.
	var cands []uint64
	indexed := false
	collect := func(lists [][]uint64) {
		var best []uint64
		for _, l := range lists {
			best = append(best, window(l, lo, hi)...)
		}
		if len(lists) > 1 {
			slices.Sort(best)
			best = slices.Compact(best)
		}
		if !indexed || len(best) < len(cands) {
			cands, indexed = best, true
		}
	}
	if len(q.Users) > 0 {
		var lists [][]uint64
		for _, u := range q.Users {
			lists = append(lists, h.byUser[u])
		}
		collect(lists)
	}
	if len(q.Tenants) > 0 {
		var lists [][]uint64
		for _, t := range q.Tenants {
			lists = append(lists, h.byTenant[t])
		}
		collect(lists)
	}
	if len(q.States) > 0 {
		var lists [][]uint64
		for _, s := range q.States {
			lists = append(lists, h.byState[s])
		}
		collect(lists)
	}
	keep := func(r *HistoryRecord) bool {
		return r.ID > q.AfterID &&
			(q.SubmittedBefore.IsZero() || r.SubmitMs < unixMs(q.SubmittedBefore)) &&
			(q.VCluster == "" || r.VCluster == q.VCluster) &&
			(len(q.Users) == 0 || slices.Contains(q.Users, r.owner())) &&
			(len(q.Tenants) == 0 || slices.Contains(q.Tenants, r.Tenant)) &&
			(len(q.States) == 0 || slices.Contains(q.States, r.State))
	}
	var out []*HistoryRecord
	if indexed {
		for _, p := range cands {
			if r := h.recs[p-h.base]; keep(r) {
				out = append(out, r)
			}
		}
		return out
	}
	for _, r := range h.recs[loIdx:hiIdx] {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// --- State ---------------------------------------------------------------------

func (s *State) applyArchiveEnded(c *ArchiveEnded) *Result {
	var moved []uint64
	var recs []*HistoryRecord
	for _, id := range c.IDs {
		a := s.allocs[id]
		if a == nil || !a.State.Terminal() || a.EndTime.IsZero() {
			continue
		}
		recs = append(recs, historyRecordOf(a))
		moved = append(moved, id)
		s.deleteAlloc(id)
	}
	s.hist.add(recs)
	dropped := s.hist.dropBefore(c.DropBefore)
	if len(moved) > 0 || dropped > 0 {
		s.touch()
	}
	return &Result{IDs: moved}
}

// History returns the ended jobs q selects, in end-time order (call it
// under the read lock; the records are never changed).
func (s *State) History(q HistoryQuery) []*HistoryRecord { return s.hist.query(q) }

// HistoryRecordOf returns the record of an archived allocation, nil if none.
func (s *State) HistoryRecordOf(id uint64) *HistoryRecord { return s.hist.byID[id] }

// HistoryOfArray returns the records of an array's archived tasks, in id order.
func (s *State) HistoryOfArray(arrayID uint64) []*HistoryRecord {
	ids := s.hist.byArray[arrayID]
	out := make([]*HistoryRecord, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.hist.byID[id])
	}
	return out
}

// HistoryLen is how many ended jobs the history holds.
func (s *State) HistoryLen() int { return len(s.hist.recs) }

// HistoryNewestEnd is the latest end time in the history (zero if empty).
func (s *State) HistoryNewestEnd() time.Time {
	if n := len(s.hist.recs); n > 0 {
		return fromMs(s.hist.recs[n-1].EndMs)
	}
	return time.Time{}
}

// HistoryOldestEnd is the earliest end time in the history (zero if empty).
func (s *State) HistoryOldestEnd() time.Time {
	if len(s.hist.recs) > 0 {
		return fromMs(s.hist.recs[0].EndMs)
	}
	return time.Time{}
}
