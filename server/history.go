package server

import (
	"cmp"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

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

// mergeEnded yields live (in id order) merged with the history records
// (in id order), each record made an allocation only when reached: a page
// of a listing converts what it shows, not the whole history.
func mergeEnded(live []*model.Allocation, ended []*quorum.HistoryRecord) iter.Seq[*model.Allocation] {
	return func(yield func(*model.Allocation) bool) {
		i, j := 0, 0
		for i < len(live) || j < len(ended) {
			var next *model.Allocation
			switch {
			case j == len(ended) || (i < len(live) && live[i].ID < ended[j].ID):
				next = live[i]
				i++
			case i < len(live) && live[i].ID == ended[j].ID: // never both; the live one wins
				next = live[i]
				i, j = i+1, j+1
			default:
				next = ended[j].Allocation()
				j++
			}
			if !yield(next) {
				return
			}
		}
	}
}
