package quorum

import (
	"fmt"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Benchmarks of issue 11: Apply time of the commands that submit and
// complete dependent arrays and large DAGs, on one State (what every
// member pays per command; Raft adds its fsync).
//
//	go test -run '^$' -bench 'Dependency|DAG' -benchtime 3x ./quorum/
//
// Each reports ms per command of each kind as custom metrics; one op is
// the whole scenario.

// benchDepState is a state with n idle one-vCluster nodes.
func benchDepState(b *testing.B, n int) (*State, []string, *time.Time) {
	b.Helper()
	s := NewState()
	now := t0
	apply := func(c Command) *Result {
		now = now.Add(time.Second)
		c.CommandHeader().Time = now
		return s.apply(c)
	}
	apply(&SetVCluster{VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}})
	names := make([]string, n)
	for from := 0; from < n; from += 1000 {
		var nodes []model.Node
		for i := from; i < min(n, from+1000); i++ {
			names[i] = fmt.Sprintf("n%05d", i)
			nodes = append(nodes, model.Node{Name: names[i], HomeVCluster: "batch", IdleWatts: 100, BusyWatts: 400})
		}
		if r := apply(&RegisterNodes{Agent: fmt.Sprintf("a%d", from), Nodes: nodes}); r.Rejection != nil {
			b.Fatal(r.Rejection.Message)
		}
	}
	return s, names, &now
}

// timed applies c and adds its Apply time to *total.
func timed(b *testing.B, s *State, now *time.Time, c Command, total *time.Duration) *Result {
	b.Helper()
	*now = now.Add(time.Second)
	c.CommandHeader().Time = *now
	b.StartTimer()
	start := time.Now()
	r := s.apply(c)
	*total += time.Since(start)
	b.StopTimer()
	if r.Rejection != nil {
		b.Fatalf("%s rejected: %s", c.Type(), r.Rejection.Message)
	}
	for _, it := range r.Items {
		if !it.Committed {
			b.Fatalf("%s item %d rejected: %s", c.Type(), it.ID, it.Rejection.Message)
		}
	}
	return r
}

// runAll places ids on nodes and reports them running, then completed, in
// commands of the leader's sizes (AssignBatch of 1024, UpdateAllocs of 512).
func runAll(b *testing.B, s *State, now *time.Time, ids []uint64, nodes []string, assign, complete *time.Duration, completes *int) {
	b.Helper()
	for from := 0; from < len(ids); from += 1024 {
		chunk := ids[from:min(len(ids), from+1024)]
		timed(b, s, now, assignBatch("batch", chunk, nodes[:len(chunk)], s.Version), assign)
		timed(b, s, now, runningBatch(chunk), assign)
		for k := 0; k < len(chunk); k += 512 {
			timed(b, s, now, completeBatch(chunk[k:min(len(chunk), k+512)]), complete)
			*completes++
		}
	}
}

func runningBatch(ids []uint64) *UpdateAllocs {
	c := &UpdateAllocs{Updates: make([]AllocUpdate, len(ids))}
	for i, id := range ids {
		c.Updates[i] = AllocUpdate{AllocID: id, State: model.StateRunning}
	}
	return c
}

func benchArray(n int) model.Request {
	return model.Request{Name: "sweep", VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour,
		Array: &model.ArraySpec{Start: 0, End: n - 1, Step: 1}}
}

// BenchmarkDependencyArrayAftercorr10k: submit a 10,000-task array, then a
// 10,000-task array aftercorr on it; run and complete the first, each
// completion releasing its element of the second; then run and complete
// the second.
func BenchmarkDependencyArrayAftercorr10k(b *testing.B) {
	const n = 10000
	var parentSubmit, childSubmit, assign, complete time.Duration
	completes := 0
	for range b.N {
		b.StopTimer()
		s, nodes, now := benchDepState(b, 1024)
		parent := timed(b, s, now, &Submit{Items: []SubmitItem{{Request: benchArray(n)}}}, &parentSubmit).IDs
		child := benchArray(n)
		child.DependsOn = []model.Dependency{{Condition: model.AfterCorr, IDs: []uint64{parent[0]}}}
		children := timed(b, s, now, &Submit{Items: []SubmitItem{{Request: child}}}, &childSubmit).IDs
		runAll(b, s, now, parent, nodes, &assign, &complete, &completes)
		for _, id := range children {
			if s.allocs[id].EligibleTime.IsZero() {
				b.Fatalf("child %d not released", id)
			}
		}
		runAll(b, s, now, children, nodes, &assign, &complete, &completes)
	}
	b.ReportMetric(float64(parentSubmit.Milliseconds())/float64(b.N), "ms/submit-10k")
	b.ReportMetric(float64(childSubmit.Milliseconds())/float64(b.N), "ms/submit-10k-aftercorr")
	b.ReportMetric(float64(complete.Microseconds())/float64(completes)/1000, "ms/complete-512")
}

// BenchmarkDependencyArrayAfterOK10k: a 10,000-task array afterok on a
// whole 10,000-task array waits for every task; the last completion
// releases all of it in one command.
func BenchmarkDependencyArrayAfterOK10k(b *testing.B) {
	const n = 10000
	var submit, assign, complete, last time.Duration
	completes := 0
	for range b.N {
		b.StopTimer()
		s, nodes, now := benchDepState(b, 1024)
		parent := timed(b, s, now, &Submit{Items: []SubmitItem{{Request: benchArray(n)}}}, &submit).IDs
		child := benchArray(n)
		child.DependsOn = []model.Dependency{{Condition: model.AfterOK, IDs: []uint64{parent[0]}}}
		children := timed(b, s, now, &Submit{Items: []SubmitItem{{Request: child}}}, &submit).IDs
		runAll(b, s, now, parent[:n-1], nodes, &assign, &complete, &completes)
		if !s.allocs[children[0]].EligibleTime.IsZero() {
			b.Fatal("released before the last task completed")
		}
		ids := parent[n-1:]
		timed(b, s, now, assignBatch("batch", ids, nodes[:1], s.Version), &assign)
		timed(b, s, now, runningBatch(ids), &assign)
		timed(b, s, now, completeBatch(ids), &last)
		if s.allocs[children[n-1]].EligibleTime.IsZero() {
			b.Fatal("not released after the last task completed")
		}
	}
	b.ReportMetric(float64(complete.Microseconds())/float64(completes)/1000, "ms/complete-512")
	b.ReportMetric(float64(last.Microseconds())/float64(b.N)/1000, "ms/last-completion-releasing-10k")
}

// benchDAG is a 1,000-stage DAG: stage i depends on i-1 (afterok) and, every
// tenth stage, on the stage ten back (afterany) — a long chain with
// fan-in.
func benchDAG(n int) *Submit {
	c := &Submit{DAG: true, Name: "big"}
	for i := range n {
		r := model.Request{Name: fmt.Sprintf("stage%04d", i), VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour}
		it := SubmitItem{Request: r}
		if i > 0 {
			it.AfterItems = append(it.AfterItems, ItemDep{Condition: model.AfterOK, Index: i - 1})
		}
		if i >= 10 && i%10 == 0 {
			it.AfterItems = append(it.AfterItems, ItemDep{Condition: model.AfterAny, Index: i - 10})
		}
		c.Items = append(c.Items, it)
	}
	return c
}

// BenchmarkDAG1000Stages: submit a 1,000-stage DAG; run it stage by stage
// (each completion releases the next); then submit it again and fail its
// first stage, which cancels the other 999 in one command.
func BenchmarkDAG1000Stages(b *testing.B) {
	const n = 1000
	var submit, step, cascade time.Duration
	steps := 0
	for range b.N {
		b.StopTimer()
		s, nodes, now := benchDepState(b, 4)
		ids := timed(b, s, now, benchDAG(n), &submit).IDs
		var none time.Duration
		for _, id := range ids {
			timed(b, s, now, assignBatch("batch", []uint64{id}, nodes[:1], s.Version), &none)
			timed(b, s, now, runningBatch([]uint64{id}), &none)
			timed(b, s, now, completeBatch([]uint64{id}), &step)
			steps++
		}
		ids = timed(b, s, now, benchDAG(n), &submit).IDs
		timed(b, s, now, assignBatch("batch", ids[:1], nodes[:1], s.Version), &none)
		fail := &UpdateAllocs{Updates: []AllocUpdate{{AllocID: ids[0], State: model.StateFailed}}}
		timed(b, s, now, fail, &cascade)
		if a := s.allocs[ids[n-1]]; a.State != model.StateCancelled {
			b.Fatalf("last stage %s", a.State)
		}
	}
	b.ReportMetric(float64(submit.Microseconds())/float64(2*b.N)/1000, "ms/submit-1000-stages")
	b.ReportMetric(float64(step.Microseconds())/float64(steps)/1000, "ms/complete-stage")
	b.ReportMetric(float64(cascade.Microseconds())/float64(b.N)/1000, "ms/fail-cancelling-999")
}
