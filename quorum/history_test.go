package quorum

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// endJobs submits n jobs of rotating users and tenants and ends them:
// most run and complete (exit code i%3), some are cancelled pending.
func endJobs(f *fixture, n int) []uint64 {
	f.t.Helper()
	var ids []uint64
	for i := range n {
		r := model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour,
			User: fmt.Sprintf("u%d", i%3), Tenant: fmt.Sprintf("t%d", i%2), Name: fmt.Sprintf("job%d", i)}
		id := f.submitReq(r)
		if i%4 == 3 {
			f.ok(&Cancel{IDs: []uint64{id}})
		} else {
			f.run("batch", id, fmt.Sprintf("b%d", i%4))
			code := i % 3
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCompleted, ExitCode: &code}}})
		}
		ids = append(ids, id)
	}
	return ids
}

func stateSnapshot(t *testing.T, s *State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func restored(t *testing.T, s *State) *State {
	t.Helper()
	r, err := ReadSnapshot(bytes.NewReader(stateSnapshot(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func historyIDs(recs []*HistoryRecord) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// The history of ended jobs is replicated state: a member restored from a
// snapshot holds the same records, answers the same queries and applies
// later commands to the same bytes.
func TestHistoryIsReplicatedState(t *testing.T) {
	f := newFixture(t)
	ids := endJobs(f, 12)
	r := f.ok(&ArchiveEnded{IDs: append(slices.Clone(ids[:8]), 9999)})
	if len(r.IDs) != 8 || f.s.HistoryLen() != 8 || f.s.Allocation(ids[0]) != nil {
		t.Fatalf("moved %v, history %d", r.IDs, f.s.HistoryLen())
	}
	rec := f.s.HistoryRecordOf(ids[1])
	if rec == nil || rec.User != "u1" || rec.Tenant != "t1" || rec.State != model.StateCompleted || rec.ExitCode == nil || *rec.ExitCode != 1 ||
		rec.Nodes != "b1" || rec.Name != "job1" || rec.StartMs == 0 || rec.EndMs == 0 {
		t.Fatalf("record of job 1: %+v", rec)
	}
	if a := rec.Allocation(); a.DisplayID() != fmt.Sprint(ids[1]) || len(a.Nodes) != 1 || a.Nodes[0] != "b1" || a.Walltime != time.Hour {
		t.Fatalf("record as an allocation: %+v", a)
	}
	copyOf := restored(t, f.s)
	if !bytes.Equal(stateSnapshot(t, f.s), stateSnapshot(t, copyOf)) {
		t.Fatal("a restored state writes another snapshot")
	}
	queries := []HistoryQuery{
		{},
		{Users: []string{"u0"}},
		{Users: []string{"u0", "u2"}, States: []model.AllocState{model.StateCompleted}},
		{Tenants: []string{"t1"}},
		{States: []model.AllocState{model.StateCancelled}},
		{EndedFrom: fromMs(rec.EndMs)},
		{AfterID: ids[3]},
	}
	for _, q := range queries {
		a, b := historyIDs(f.s.History(q)), historyIDs(copyOf.History(q))
		if !slices.Equal(a, b) {
			t.Fatalf("query %+v: %v on the leader, %v restored", q, a, b)
		}
	}
	if got := historyIDs(f.s.History(HistoryQuery{Users: []string{"u0"}})); len(got) != 3 {
		t.Fatalf("u0's ended jobs: %v", got)
	}
	// Later commands, including a retention drop, apply alike.
	more := &ArchiveEnded{Header: Header{Time: f.now.Add(time.Minute)}, IDs: ids[8:], DropBefore: fromMs(f.s.HistoryRecordOf(ids[4]).EndMs)}
	f.s.apply(more)
	copyOf.apply(more)
	if !bytes.Equal(stateSnapshot(t, f.s), stateSnapshot(t, copyOf)) {
		t.Fatal("the leader and the restored member diverged")
	}
	if got := historyIDs(f.s.History(HistoryQuery{})); !slices.Equal(got, append(slices.Clone(ids[4:8]), ids[8:]...)) {
		t.Fatalf("after the drop: %v", got)
	}
	if v := CheckInvariants(copyOf); len(v) > 0 {
		t.Fatal(v)
	}
}

// Queries answer what a scan of every record would, through insertions
// out of order and drops.
func TestHistoryQueryMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h history
	var all []*HistoryRecord
	states := []model.AllocState{model.StateCompleted, model.StateFailed, model.StateCancelled}
	id := uint64(0)
	for round := range 60 {
		var batch []*HistoryRecord
		for range rng.IntN(40) {
			id++
			end := int64(1000*round + rng.IntN(3000)) // overlaps earlier rounds now and then
			batch = append(batch, &HistoryRecord{ID: id, User: fmt.Sprintf("u%d", rng.IntN(5)), Tenant: fmt.Sprintf("t%d", rng.IntN(3)),
				State: states[rng.IntN(3)], VCluster: []string{"a", "b"}[rng.IntN(2)], SubmitMs: end - 500, EndMs: end})
		}
		h.add(slices.Clone(batch))
		all = append(all, batch...)
		if round%7 == 6 {
			cut := int64(1000 * (round - 10))
			h.dropBefore(fromMs(cut))
			all = slices.DeleteFunc(all, func(r *HistoryRecord) bool { return r.EndMs < cut })
		}
		slices.SortFunc(all, func(x, y *HistoryRecord) int {
			if x.before(y) {
				return -1
			}
			if y.before(x) {
				return 1
			}
			return 0
		})
		for range 20 {
			q := HistoryQuery{}
			if rng.IntN(2) == 0 {
				q.EndedFrom = fromMs(int64(rng.IntN(1000 * (round + 1))))
			}
			if rng.IntN(3) == 0 {
				q.EndedBefore = fromMs(int64(rng.IntN(1000*(round+1)) + 1))
			}
			if rng.IntN(2) == 0 {
				q.Users = []string{fmt.Sprintf("u%d", rng.IntN(5)), fmt.Sprintf("u%d", rng.IntN(5))}
			}
			if rng.IntN(3) == 0 {
				q.Tenants = []string{fmt.Sprintf("t%d", rng.IntN(3))}
			}
			if rng.IntN(3) == 0 {
				q.States = []model.AllocState{states[rng.IntN(3)]}
			}
			if rng.IntN(4) == 0 {
				q.VCluster = "a"
			}
			if rng.IntN(4) == 0 {
				q.AfterID = uint64(rng.IntN(int(id) + 1))
			}
			var want []uint64
			for _, r := range all {
				if (q.EndedFrom.IsZero() || r.EndMs >= q.EndedFrom.UnixMilli()) && (q.EndedBefore.IsZero() || r.EndMs < q.EndedBefore.UnixMilli()) &&
					(len(q.Users) == 0 || slices.Contains(q.Users, r.User)) && (len(q.Tenants) == 0 || slices.Contains(q.Tenants, r.Tenant)) &&
					(len(q.States) == 0 || slices.Contains(q.States, r.State)) && (q.VCluster == "" || r.VCluster == q.VCluster) && r.ID > q.AfterID {
					want = append(want, r.ID)
				}
			}
			if got := historyIDs(h.query(q)); !slices.Equal(got, want) {
				t.Fatalf("round %d, query %+v:\n got %v\nwant %v", round, q, got, want)
			}
		}
	}
}
