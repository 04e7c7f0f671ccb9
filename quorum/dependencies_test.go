package quorum

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// depFixture is a fixture with n batch nodes, and helpers to drive
// allocations through their lives.
type depFixture struct {
	*fixture
	free []string
}

func newDepFixture(t *testing.T, n int) *depFixture {
	f := &depFixture{fixture: &fixture{t: t, s: NewState(), now: t0}}
	f.ok(&SetVCluster{VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}})
	var nodes []model.Node
	for i := range n {
		name := fmt.Sprintf("n%03d", i)
		nodes = append(nodes, model.Node{Name: name, HomeVCluster: "batch", IdleWatts: 100, BusyWatts: 400})
		f.free = append(f.free, name)
	}
	f.ok(&RegisterNodes{Agent: "a1", Nodes: nodes})
	return f
}

func job(name string, deps ...model.Dependency) model.Request {
	return model.Request{Name: name, Tenant: "alice", VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour, DependsOn: deps}
}

func on(c model.DependencyCondition, ids ...uint64) model.Dependency {
	return model.Dependency{Condition: c, IDs: ids}
}

func (f *depFixture) sub(r model.Request) []uint64 {
	f.t.Helper()
	return f.ok(&Submit{Items: []SubmitItem{{Request: r}}}).IDs
}

func (f *depFixture) array(name string, a model.ArraySpec, deps ...model.Dependency) []uint64 {
	f.t.Helper()
	r := job(name, deps...)
	r.Array = &a
	return f.sub(r)
}

// start places id on a free node and reports it running.
func (f *depFixture) start(id uint64) {
	f.t.Helper()
	node := f.free[0]
	if r := f.assign("batch", id, node); !r.Committed {
		f.t.Fatalf("assign %d: %s", id, r.Rejection.Message)
	}
	f.free = f.free[1:]
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
}

// end reports id ended in st (after starting it when pending).
func (f *depFixture) end(id uint64, st model.AllocState) {
	f.t.Helper()
	a := f.s.Allocation(id)
	if a.State == model.StatePending {
		f.start(id)
		a = f.s.Allocation(id)
	}
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: st}}})
	f.free = append(f.free, a.Nodes...)
}

func (f *depFixture) eligible(id uint64) bool {
	a := f.s.Allocation(id)
	return a.State == model.StatePending && !a.EligibleTime.IsZero()
}

func (f *depFixture) wantWaiting(id uint64, reason string) {
	f.t.Helper()
	a := f.s.Allocation(id)
	if a.State != model.StatePending || !a.EligibleTime.IsZero() || a.Reason != reason {
		f.t.Fatalf("allocation %d (%s): %s %s eligible at %v, want waiting with %s (%s)", id, a.Name, a.State, a.Reason, a.EligibleTime, reason, a.ReasonDetail)
	}
}

func (f *depFixture) wantEligible(id uint64) {
	f.t.Helper()
	if a := f.s.Allocation(id); !f.eligible(id) || a.EligibleTime != f.now || a.Reason != model.ReasonWaitingForScheduling {
		f.t.Fatalf("allocation %d (%s): %s %s eligible at %v, want released now (%v)", id, a.Name, a.State, a.Reason, a.EligibleTime, f.now)
	}
}

func TestArrayDependencyMeansEveryTask(t *testing.T) {
	cases := []struct {
		cond model.DependencyCondition
		// ends of the 5 tasks, in order; then whether the waiter is
		// released after the first four and after the last, or never.
		ends       []model.AllocState
		afterFour  string // "wait", "met", "never"
		afterFifth string
	}{
		{model.AfterOK, []model.AllocState{"COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"}, "wait", "met"},
		{model.AfterOK, []model.AllocState{"COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "COMPLETED"}, "never", "never"},
		{model.AfterAny, []model.AllocState{"COMPLETED", "FAILED", "CANCELLED", "COMPLETED", "COMPLETED"}, "wait", "met"},
		{model.AfterNotOK, []model.AllocState{"COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "COMPLETED"}, "wait", "met"},
		{model.AfterNotOK, []model.AllocState{"COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"}, "wait", "never"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %v", tc.cond, tc.ends), func(t *testing.T) {
			f := newDepFixture(t, 8)
			tasks := f.array("sweep", model.ArraySpec{Start: 0, End: 4, Step: 1})
			w := f.sub(job("post", on(tc.cond, tasks[0])))[0]
			f.wantWaiting(w, model.ReasonDependency)
			check := func(want string) {
				t.Helper()
				switch want {
				case "wait":
					f.wantWaiting(w, model.ReasonDependency)
				case "met":
					f.wantEligible(w)
				case "never":
					f.wantWaiting(w, model.ReasonDependencyNeverSatisfied)
					if d := f.s.Allocation(w).ReasonDetail; !strings.Contains(d, fmt.Sprintf("array %d", tasks[0])) {
						t.Errorf("detail %q does not name the array", d)
					}
				}
			}
			for i, st := range tc.ends {
				f.end(tasks[i], st)
				if i == 3 {
					check(tc.afterFour)
				}
			}
			check(tc.afterFifth)
		})
	}
	t.Run("after: every task started", func(t *testing.T) {
		f := newDepFixture(t, 8)
		tasks := f.array("sweep", model.ArraySpec{Start: 0, End: 2, Step: 1})
		w := f.sub(job("post", on(model.AfterStart, tasks[0])))[0]
		f.start(tasks[0])
		f.start(tasks[1])
		f.wantWaiting(w, model.ReasonDependency)
		f.start(tasks[2])
		if !f.eligible(w) { // released when the last task was placed
			t.Fatal("after: not released once every task started")
		}
	})
	t.Run("one task named ARRAYID_INDEX", func(t *testing.T) {
		f := newDepFixture(t, 8)
		tasks := f.array("sweep", model.ArraySpec{Start: 0, End: 2, Step: 1})
		w := f.sub(job("post", model.Dependency{Condition: model.AfterOK, IDs: []uint64{tasks[0]}, Task: true}))[0]
		f.end(tasks[0], model.StateCompleted)
		f.wantEligible(w)
	})
}

func TestAftercorrReleasesElementByElement(t *testing.T) {
	f := newDepFixture(t, 16)
	parent := f.array("prep", model.ArraySpec{Start: 0, End: 9, Step: 1})
	child := f.array("train", model.ArraySpec{Start: 0, End: 11, Step: 1}, on(model.AfterCorr, parent[0]))
	whole := f.sub(job("report", on(model.AfterCorr, parent[0])))[0]
	// Indexes 10 and 11 have no parent element: nothing to wait for.
	for i, id := range child {
		if i < 10 {
			f.wantWaiting(id, model.ReasonDependency)
		} else if !f.eligible(id) {
			t.Fatalf("child %d has no parent element but waits", i)
		}
	}
	f.end(parent[3], model.StateCompleted)
	for i, id := range child[:10] {
		if (i == 3) != f.eligible(id) {
			t.Fatalf("after parent element 3 completed, child %d eligible=%v", i, f.eligible(id))
		}
	}
	f.end(parent[5], model.StateFailed)
	f.wantWaiting(child[5], model.ReasonDependencyNeverSatisfied)
	if d := f.s.Allocation(child[5]).ReasonDetail; !strings.Contains(d, fmt.Sprintf("%d_5 (prep) ended FAILED", parent[0])) {
		t.Errorf("detail %q", d)
	}
	// A non-array allocation's aftercorr is afterok on the whole array.
	f.wantWaiting(whole, model.ReasonDependencyNeverSatisfied)
}

func TestAnyOf(t *testing.T) {
	f := newDepFixture(t, 8)
	x := f.sub(job("x"))[0]
	y := f.sub(job("y"))[0]
	any := job("either", on(model.AfterOK, x), on(model.AfterOK, y))
	any.DependencyAny = true
	either := f.sub(any)[0]
	all := f.sub(job("both", on(model.AfterOK, x), on(model.AfterOK, y)))[0]
	f.end(y, model.StateCompleted)
	f.wantEligible(either)
	f.wantWaiting(all, model.ReasonDependency)

	a, b := f.sub(job("a"))[0], f.sub(job("b"))[0]
	never := job("never", on(model.AfterOK, a), on(model.AfterNotOK, b))
	never.DependencyAny = true
	n := f.sub(never)[0]
	f.end(a, model.StateFailed)
	f.wantWaiting(n, model.ReasonDependency)
	f.end(b, model.StateCompleted)
	f.wantWaiting(n, model.ReasonDependencyNeverSatisfied)
	if d := f.s.Allocation(n).ReasonDetail; !strings.Contains(d, "none of") {
		t.Errorf("detail %q", d)
	}
}

func TestSingleton(t *testing.T) {
	f := newDepFixture(t, 8)
	single := func(name, tenant string) uint64 {
		r := job(name, model.Dependency{Condition: model.Singleton})
		r.Tenant = tenant
		return f.sub(r)[0]
	}
	s1 := single("nightly", "alice")
	f.wantEligible(s1)
	s2 := single("nightly", "alice")
	s3 := single("nightly", "alice")
	f.wantWaiting(s2, model.ReasonDependency)
	other := single("nightly", "bob")
	f.wantEligible(other) // another tenant's name is another singleton
	f.start(s1)
	f.wantWaiting(s2, model.ReasonDependency)
	f.end(s1, model.StateCompleted)
	f.wantEligible(s2) // the first in line
	f.wantWaiting(s3, model.ReasonDependency)

	// A plain allocation of the name that starts first sends the eligible
	// singleton back to wait; it goes when that one ends.
	plain := f.sub(job("nightly"))[0]
	f.start(plain)
	f.wantWaiting(s2, model.ReasonDependency)
	if d := f.s.Allocation(s2).ReasonDetail; !strings.Contains(d, "started first") {
		t.Errorf("detail %q", d)
	}
	if r := f.assign("batch", s2, f.free[0]); r.Committed {
		t.Fatal("a waiting singleton was placed")
	}
	f.end(plain, model.StateCompleted)
	f.wantEligible(s2)
	f.ok(&Cancel{IDs: []uint64{s2}})
	f.wantEligible(s3)

	// A singleton that also waits on another allocation goes when both hold.
	dep := f.sub(job("dep"))[0]
	r := job("nightly", model.Dependency{Condition: model.Singleton}, on(model.AfterOK, dep))
	r.Tenant = "carol"
	s4 := f.sub(r)[0]
	f.wantWaiting(s4, model.ReasonDependency)
	f.end(dep, model.StateCompleted)
	f.wantEligible(s4)
}

func TestArrayTaskLimitHeldByTheQuorum(t *testing.T) {
	f := newDepFixture(t, 8)
	tasks := f.array("sweep", model.ArraySpec{Start: 0, End: 5, Step: 1, MaxConcurrent: 2})
	r := f.apply(&AssignBatch{VCluster: "batch", Items: []AssignItem{
		{AllocID: tasks[0], Nodes: []string{"n000"}, Version: f.s.Version},
		{AllocID: tasks[1], Nodes: []string{"n001"}, Version: f.s.Version},
		{AllocID: tasks[2], Nodes: []string{"n002"}, Version: f.s.Version},
	}})
	if !r.Items[0].Committed || !r.Items[1].Committed || r.Items[2].Committed || r.Items[2].Rejection.Reason != model.ReasonArrayTaskLimit {
		t.Fatalf("items %+v", r.Items)
	}
}

// dagSubmit builds a DAG submission from "name:cond>parent,cond>parent" specs.
func dagSubmit(name string, stages ...string) *Submit {
	c := &Submit{DAG: true, Name: name}
	index := map[string]int{}
	for i, spec := range stages {
		stage, edges, _ := strings.Cut(spec, ":")
		it := SubmitItem{Request: job(stage)}
		if edges != "" {
			for _, e := range strings.Split(edges, ",") {
				cond, parent, _ := strings.Cut(e, ">")
				it.AfterItems = append(it.AfterItems, ItemDep{Condition: model.DependencyCondition(cond), Index: index[parent]})
			}
		}
		index[stage] = i
		c.Items = append(c.Items, it)
	}
	return c
}

func TestDAGTrainFails(t *testing.T) {
	f := newDepFixture(t, 8)
	ids := f.ok(dagSubmit("pipeline",
		"prep",
		"train:afterok>prep",
		"evaluate:afterok>train",
		"notify:afternotok>train",
		"cleanup:afterany>evaluate",
		"publish:afterok>evaluate",
	)).IDs
	prep, train, evaluate, notify, cleanup, publish := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]
	dag := f.s.DAG(prep)
	if dag == nil || dag.Name != "pipeline" || len(dag.Stages) != 6 || dag.Stages[2].Name != "evaluate" || dag.Stages[2].ID != evaluate ||
		dag.Stages[3].DependsOn[0] != (model.DAGDependency{Name: "train", Condition: model.AfterNotOK}) {
		t.Fatalf("DAG record %+v", dag)
	}
	for _, id := range ids {
		if f.s.Allocation(id).DAGID != prep {
			t.Fatalf("allocation %d is not in DAG %d", id, prep)
		}
	}
	f.wantEligible(prep)
	f.end(prep, model.StateCompleted)
	f.wantEligible(train)
	f.end(train, model.StateFailed)
	// evaluate can never run: cancelled, naming train; publish after it (a
	// cascade in the same command); notify and cleanup released.
	for _, id := range []uint64{evaluate, publish} {
		a := f.s.Allocation(id)
		if a.State != model.StateCancelled || a.Reason != model.ReasonDependencyNeverSatisfied || a.EndTime != f.now {
			t.Fatalf("%s: %s %s", a.Name, a.State, a.Reason)
		}
	}
	if d := f.s.Allocation(evaluate).ReasonDetail; d != fmt.Sprintf("afterok:%d (train) ended FAILED", train) {
		t.Errorf("evaluate's detail %q", d)
	}
	if d := f.s.Allocation(publish).ReasonDetail; !strings.Contains(d, "(evaluate) ended CANCELLED") {
		t.Errorf("publish's detail %q", d)
	}
	f.wantEligible(notify)
	f.wantEligible(cleanup)
}

func TestDAGCascadeIsOneCommand(t *testing.T) {
	f := newDepFixture(t, 4)
	stages := []string{"s0"}
	for i := 1; i < 200; i++ {
		stages = append(stages, fmt.Sprintf("s%d:afterok>s%d", i, i-1))
	}
	ids := f.ok(dagSubmit("chain", stages...)).IDs
	f.end(ids[0], model.StateFailed)
	for _, id := range ids[1:] {
		if a := f.s.Allocation(id); a.State != model.StateCancelled {
			t.Fatalf("%s is %s", a.Name, a.State)
		}
	}
}

func TestDAGAftercorrAndFanIn(t *testing.T) {
	f := newDepFixture(t, 16)
	c := dagSubmit("etl", "extract", "transform:aftercorr>extract", "load:afterok>transform,afterok>extract")
	c.Items[0].Request.Array = &model.ArraySpec{Start: 0, End: 3, Step: 1}
	c.Items[1].Request.Array = &model.ArraySpec{Start: 0, End: 3, Step: 1}
	ids := f.ok(c).IDs
	extract, transform, load := ids[0:4], ids[4:8], ids[8]
	if st := f.s.DAG(extract[0]).Stages; st[0].Tasks != 4 || st[1].ID != transform[0] || st[2].ID != load {
		t.Fatalf("stages %+v", st)
	}
	f.end(extract[2], model.StateCompleted)
	f.wantEligible(transform[2])
	f.wantWaiting(transform[1], model.ReasonDependency)
	for i := range 4 {
		if i != 2 {
			f.end(extract[i], model.StateCompleted)
		}
	}
	for _, id := range transform[:3] {
		f.end(id, model.StateCompleted)
	}
	f.wantWaiting(load, model.ReasonDependency) // fan-in waits for every parent task
	f.end(transform[3], model.StateCompleted)
	f.wantEligible(load)
}

func TestDAGSubmitValidation(t *testing.T) {
	f := newDepFixture(t, 4)
	dup := dagSubmit("d", "a", "a:afterok>a")
	if r := f.apply(dup); r.Rejection == nil || !strings.Contains(r.Rejection.Message, "both named") {
		t.Fatalf("duplicate names: %+v", r.Rejection)
	}
	mutex := dagSubmit("d", "a", "b")
	mutex.Items[1].AfterItems = []ItemDep{{Condition: model.Singleton, Index: 0}}
	if r := f.apply(mutex); r.Rejection == nil || !strings.Contains(r.Rejection.Message, "invalid condition") {
		t.Fatalf("singleton between items: %+v", r.Rejection)
	}
}

func TestDAGRecordPrunedWithItsLastAllocation(t *testing.T) {
	f := newDepFixture(t, 4)
	ids := f.ok(dagSubmit("d", "a", "b:afterok>a")).IDs
	f.end(ids[0], model.StateCompleted)
	f.now = f.now.Add(time.Hour)
	f.ok(&Prune{Before: f.now})
	if f.s.DAG(ids[0]) == nil || f.s.DAGSize(ids[0]) != 1 {
		t.Fatal("DAG record gone while a stage is pending")
	}
	f.end(ids[1], model.StateCompleted)
	f.now = f.now.Add(time.Hour)
	f.ok(&Prune{Before: f.now})
	if f.s.DAG(ids[0]) != nil {
		t.Fatal("DAG record kept after its last allocation was pruned")
	}
}
