package server

import (
	"cmp"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Ended allocations past --retention live on in the replicated history of
// ended jobs (quorum/history.go): the leader's retention loop moves them
// there (ArchiveEnded) and drops what is older than --history-retention.
// Get and List read it after the live state; every member answers the same.

// endedLookup finds archived allocations by the ids users type: "12" (and,
// for an array's id, its archived tasks) or "12_3".
func endedLookup(st *quorum.State, id string) []*model.Allocation {
	id = strings.TrimSpace(id)
	base, idx, task := strings.Cut(id, "_")
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil {
		return nil
	}
	var out []*model.Allocation
	if task {
		for _, r := range st.HistoryOfArray(n) {
			if strconv.Itoa(r.ArrayIndex) == idx {
				out = append(out, r.Allocation())
			}
		}
		return out
	}
	if r := st.HistoryRecordOf(n); r != nil && r.ArrayJobID != n {
		return []*model.Allocation{r.Allocation()}
	}
	for _, r := range st.HistoryOfArray(n) {
		out = append(out, r.Allocation())
	}
	return out
}

// endedQuery is the history query of a listing by filter (nil when the
// listing wants no ended allocation).
func endedQuery(states map[model.AllocState]bool, vcluster, tenant string, users []string, cutoff time.Time, after uint64) *quorum.HistoryQuery {
	q := &quorum.HistoryQuery{VCluster: vcluster, Users: users, EndedFrom: cutoff, AfterID: after}
	if tenant != "" {
		q.Tenants = []string{tenant}
	}
	if len(states) > 0 {
		for _, st := range []model.AllocState{model.StateCompleted, model.StateFailed, model.StateCancelled} {
			if states[st] {
				q.States = append(q.States, st)
			}
		}
		if len(q.States) == 0 {
			return nil
		}
	}
	return q
}

// byID sorts history records by id (a listing's order).
func byID(recs []*quorum.HistoryRecord) []*quorum.HistoryRecord {
	slices.SortFunc(recs, func(x, y *quorum.HistoryRecord) int { return cmp.Compare(x.ID, y.ID) })
	return recs
}

// mergeEnded yields live allocations (in id order) merged with history
// records (in id order): each pair holds one of the two. A record stays a
// record — a listing builds its answer from it directly (endedToProto),
// not through a whole model.Allocation.
func mergeEnded(live []*model.Allocation, ended []*quorum.HistoryRecord) iter.Seq2[*model.Allocation, *quorum.HistoryRecord] {
	return func(yield func(*model.Allocation, *quorum.HistoryRecord) bool) {
		i, j := 0, 0
		for i < len(live) || j < len(ended) {
			var ok bool
			switch {
			case j == len(ended) || (i < len(live) && live[i].ID < ended[j].ID):
				ok = yield(live[i], nil)
				i++
			case i < len(live) && live[i].ID == ended[j].ID: // never both; the live one wins
				ok = yield(live[i], nil)
				i, j = i+1, j+1
			default:
				ok = yield(nil, ended[j])
				j++
			}
			if !ok {
				return
			}
		}
	}
}

func endedDisplayID(r *quorum.HistoryRecord) string {
	if r.ArrayJobID != 0 {
		return strconv.FormatUint(r.ArrayJobID, 10) + "_" + strconv.Itoa(r.ArrayIndex)
	}
	return strconv.FormatUint(r.ID, 10)
}

// endedObject describes a record for the object rules (as allocObject).
func endedObject(r *quorum.HistoryRecord) auth.Object {
	return auth.Object{Kind: "allocation", ID: endedDisplayID(r), Owner: r.User, Tenant: r.Tenant}
}

// endedToProto is a record as the API shows an allocation (what allocToProto
// would give of r.Allocation(), without building it).
func endedToProto(r *quorum.HistoryRecord) *latticev1.Allocation {
	p := &latticev1.Allocation{
		Id: r.ID, DisplayId: endedDisplayID(r), State: string(r.State), Reason: r.Reason,
		SubmitTimeUnixMs: r.SubmitMs, EligibleTimeUnixMs: r.EligibleMs, StartTimeUnixMs: r.StartMs, EndTimeUnixMs: r.EndMs,
		ArrayJobId: r.ArrayJobID, ArrayIndex: int32(r.ArrayIndex), DagId: r.DAGID,
		RequeueCount: int32(r.RequeueCount), CheckpointCount: int32(r.CheckpointCount),
		Request: &latticev1.AllocationRequest{Name: r.Name, User: r.User, Tenant: r.Tenant, Project: r.Project, Vcluster: r.VCluster,
			Qos: r.QOS, PriorityClass: int32(r.PriorityClass), NodesMin: int32(r.NodesMin), NodesMax: int32(r.NodesMax),
			WalltimeSeconds: r.WalltimeSeconds, GpuType: r.GPUType, GpusPerNode: int32(r.GPUsPerNode), WorkDir: r.WorkDir,
			HotDataFraction: -1},
	}
	if r.Nodes != "" {
		p.Nodes, _ = model.ExpandHostlist(r.Nodes)
	}
	if r.ExitCode != nil {
		p.HasExitCode, p.ExitCode = true, int32(*r.ExitCode)
	}
	return p
}
