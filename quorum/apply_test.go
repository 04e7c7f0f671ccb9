package quorum

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture builds a state with vClusters and nodes through commands, as the
// quorum would.
type fixture struct {
	t   *testing.T
	s   *State
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, s: NewState(), now: t0}
	f.ok(&SetVCluster{VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1, AllowLending: true}})
	f.ok(&SetVCluster{VCluster: model.VCluster{Name: "ml", Type: model.TypeMLTraining, ReservationDepth: 1, AllowBorrowing: true}})
	var nodes []model.Node
	for i := range 4 {
		nodes = append(nodes, model.Node{Name: fmt.Sprintf("b%d", i), HomeVCluster: "batch", Group: i / 2, IdleWatts: 100, BusyWatts: 400})
	}
	for i := range 2 {
		nodes = append(nodes, model.Node{Name: fmt.Sprintf("m%d", i), HomeVCluster: "ml", Group: 2, IdleWatts: 100, BusyWatts: 400})
	}
	f.ok(&RegisterNodes{Agent: "a1", Nodes: nodes})
	return f
}

func (f *fixture) apply(c Command) *Result {
	f.t.Helper()
	f.now = f.now.Add(time.Second)
	c.CommandHeader().Time = f.now
	// Go through the codec, as Raft would.
	data, err := Encode(c)
	if err != nil {
		f.t.Fatal(err)
	}
	dc, err := Decode(data)
	if err != nil {
		f.t.Fatal(err)
	}
	r := f.s.apply(dc)
	if v := CheckInvariants(f.s); len(v) > 0 {
		f.t.Fatalf("after %s: invariant violations:\n%s", c.Type(), strings.Join(v, "\n"))
	}
	return r
}

func (f *fixture) ok(c Command) *Result {
	f.t.Helper()
	r := f.apply(c)
	if r.Rejection != nil {
		f.t.Fatalf("%s rejected: %s", c.Type(), r.Rejection.Message)
	}
	for _, it := range r.Items {
		if !it.Committed {
			f.t.Fatalf("%s item %d rejected: %s", c.Type(), it.ID, it.Rejection.Message)
		}
	}
	return r
}

func (f *fixture) submit(vc string, nodes int) uint64 {
	f.t.Helper()
	r := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: vc, Command: []string{"true"}, NodesMin: nodes, Walltime: time.Hour}}}})
	return r.IDs[0]
}

func (f *fixture) assign(vc string, id uint64, nodes ...string) ItemResult {
	f.t.Helper()
	r := f.apply(&AssignBatch{VCluster: vc, Items: []AssignItem{{AllocID: id, Nodes: nodes, Version: f.s.Version}}})
	if r.Rejection != nil {
		f.t.Fatalf("assign rejected whole: %s", r.Rejection.Message)
	}
	return r.Items[0]
}

func TestAssignRefusals(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(f *fixture) (vc string, id uint64, nodes []string)
		code    Code
		reason  string
		staleBy uint64 // propose from this many versions ago
	}{
		{"busy node (I1)", func(f *fixture) (string, uint64, []string) {
			a := f.submit("batch", 1)
			if r := f.assign("batch", a, "b0"); !r.Committed {
				t.Fatalf("first assign: %v", r.Rejection)
			}
			return "batch", f.submit("batch", 1), []string{"b0"}
		}, CodeConflict, model.ReasonResources, 0},
		{"drained node (I7)", func(f *fixture) (string, uint64, []string) {
			f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionDrain, Reason: "maintenance"})
			return "batch", f.submit("batch", 1), []string{"b1"}
		}, CodeConflict, model.ReasonNodesDrained, 0},
		{"down node (I7)", func(f *fixture) (string, uint64, []string) {
			f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionDown})
			return "batch", f.submit("batch", 1), []string{"b1"}
		}, CodeConflict, model.ReasonNodesDrained, 0},
		{"foreign node of a vcluster that does not lend (I2)", func(f *fixture) (string, uint64, []string) {
			return "batch", f.submit("batch", 1), []string{"m0"}
		}, CodeConflict, model.ReasonResources, 0},
		{"foreign node for a vcluster that does not borrow (I2)", func(f *fixture) (string, uint64, []string) {
			f.ok(&SetVCluster{VCluster: model.VCluster{Name: "ml", Type: model.TypeMLTraining, AllowLending: true}})
			return "batch", f.submit("batch", 1), []string{"m0"}
		}, CodeConflict, model.ReasonResources, 0},
		{"unknown node", func(f *fixture) (string, uint64, []string) {
			return "batch", f.submit("batch", 1), []string{"nope"}
		}, CodeNotFound, "", 0},
		{"allocation of another vcluster", func(f *fixture) (string, uint64, []string) {
			return "batch", f.submit("ml", 1), []string{"b0"}
		}, CodeConflict, "", 0},
		{"too few nodes", func(f *fixture) (string, uint64, []string) {
			return "batch", f.submit("batch", 2), []string{"b0"}
		}, CodeInvalid, "", 0},
		{"same node twice", func(f *fixture) (string, uint64, []string) {
			return "batch", f.submit("batch", 2), []string{"b0", "b0"}
		}, CodeInvalid, "", 0},
		{"same node twice in a long list", func(f *fixture) (string, uint64, []string) {
			var ns []model.Node
			var names []string
			for i := range dupScanMax + 2 {
				ns = append(ns, model.Node{Name: fmt.Sprintf("x%02d", i), HomeVCluster: "batch", IdleWatts: 100, BusyWatts: 400})
				names = append(names, ns[i].Name)
			}
			f.ok(&RegisterNodes{Agent: "a2", Nodes: ns})
			names[len(names)-1] = names[3]
			return "batch", f.submit("batch", len(names)), names
		}, CodeInvalid, "", 0},
		{"stale proposal", func(f *fixture) (string, uint64, []string) {
			id := f.submit("batch", 1)
			f.ok(&RegisterNodes{Agent: "a1", Nodes: []model.Node{{Name: "b2", HomeVCluster: "batch", Group: 1, IdleWatts: 100, BusyWatts: 400}}})
			return "batch", id, []string{"b2"}
		}, CodeStale, "", 1},
		{"power budget (I3)", func(f *fixture) (string, uint64, []string) {
			f.ok(&SetPowerBudget{Watts: 600 + 300}) // idle 600 W; one busy node adds 300
			a := f.submit("batch", 1)
			if r := f.assign("batch", a, "b0"); !r.Committed {
				t.Fatalf("first assign: %v", r.Rejection)
			}
			return "batch", f.submit("batch", 1), []string{"b1"}
		}, CodePower, model.ReasonPowerBudget, 0},
		{"tenant max nodes (I4)", func(f *fixture) (string, uint64, []string) {
			f.ok(&SetTenant{Tenant: model.Tenant{Name: model.DefaultTenant, MaxNodes: 1}})
			return "batch", f.submit("batch", 2), []string{"b0", "b1"}
		}, CodeQuota, model.ReasonQuotaMaxNodes, 0},
		{"tenant max running (I4)", func(f *fixture) (string, uint64, []string) {
			f.ok(&SetTenant{Tenant: model.Tenant{Name: model.DefaultTenant, MaxRunning: 1}})
			a := f.submit("batch", 1)
			if r := f.assign("batch", a, "b0"); !r.Committed {
				t.Fatalf("first assign: %v", r.Rejection)
			}
			return "batch", f.submit("batch", 1), []string{"b1"}
		}, CodeQuota, model.ReasonQuotaMaxRunning, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			vc, id, nodes := tc.setup(f)
			before := f.s.Version
			res := f.apply(&AssignBatch{VCluster: vc, Items: []AssignItem{{AllocID: id, Nodes: nodes, Version: f.s.Version - tc.staleBy}}})
			r := res.Items[0]
			if r.Committed {
				t.Fatalf("assignment committed, want rejection %s", tc.code)
			}
			if r.Rejection.Code != tc.code || r.Rejection.Reason != tc.reason {
				t.Fatalf("rejection = %s/%s (%s), want %s/%s", r.Rejection.Code, r.Rejection.Reason, r.Rejection.Message, tc.code, tc.reason)
			}
			if f.s.Version != before {
				t.Fatalf("a rejected assignment changed the state version %d -> %d", before, f.s.Version)
			}
			if a := f.s.Allocation(id); a.State != model.StatePending || len(a.Nodes) != 0 {
				t.Fatalf("allocation %d is %s on %v after a rejection", id, a.State, a.Nodes)
			}
		})
	}
}

func TestAssignBorrowAndReturn(t *testing.T) {
	f := newFixture(t)
	id := f.submit("ml", 3)
	if r := f.assign("ml", id, "m0", "m1", "b3"); !r.Committed {
		t.Fatalf("borrowing assign rejected: %v", r.Rejection)
	}
	if n := f.s.Node("b3"); n.CurrentVCluster != "ml" || n.HomeVCluster != "batch" {
		t.Fatalf("b3 home/current = %s/%s", n.HomeVCluster, n.CurrentVCluster)
	}
	if got := f.s.Borrowed("batch", "ml"); got != 1 {
		t.Fatalf("borrowed index = %d, want 1", got)
	}
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
	zero := 0
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCompleted, ExitCode: &zero}}})
	if n := f.s.Node("b3"); n.CurrentVCluster != "batch" || !n.Idle() {
		t.Fatalf("b3 did not go home when idle: current %s alloc %d", n.CurrentVCluster, n.Allocation)
	}
}

func TestBatchCommitsItemByItem(t *testing.T) {
	f := newFixture(t)
	a, b, c := f.submit("batch", 1), f.submit("batch", 1), f.submit("batch", 1)
	v := f.s.Version
	r := f.apply(&AssignBatch{VCluster: "batch", Items: []AssignItem{
		{AllocID: a, Nodes: []string{"b0"}, Version: v},
		{AllocID: b, Nodes: []string{"b0"}, Version: v}, // double-booked: rejected
		{AllocID: c, Nodes: []string{"b1"}, Version: v},
	}})
	got := []bool{r.Items[0].Committed, r.Items[1].Committed, r.Items[2].Committed}
	if got[0] != true || got[1] != false || got[2] != true {
		t.Fatalf("committed = %v, want [true false true]", got)
	}
}

func TestTransitionsReported(t *testing.T) {
	exit3 := 3
	cases := []struct {
		name    string
		updates []AllocUpdate
		final   model.AllocState
		reject  int // index of the update that must be rejected, -1 none
	}{
		{"runs and completes", []AllocUpdate{{State: model.StateRunning}, {State: model.StateCompleted}}, model.StateCompleted, -1},
		{"fails with exit code", []AllocUpdate{{State: model.StateRunning}, {State: model.StateFailed, Reason: model.ReasonNonZeroExit, ExitCode: &exit3}}, model.StateFailed, -1},
		{"repeated report is idempotent", []AllocUpdate{{State: model.StateRunning}, {State: model.StateRunning}}, model.StateRunning, -1},
		{"cannot complete twice into failed", []AllocUpdate{{State: model.StateRunning}, {State: model.StateCompleted}, {State: model.StateFailed}}, model.StateCompleted, 2},
		{"staging cannot suspend", []AllocUpdate{{State: model.StateSuspended}}, model.StateStaging, 0},
		{"checkpoint and requeue", []AllocUpdate{{State: model.StateRunning}, {State: model.StateCheckpointing}, {State: model.StateSuspended}, {State: model.StatePending}}, model.StatePending, -1},
		{"running cannot go pending", []AllocUpdate{{State: model.StateRunning}, {State: model.StatePending}}, model.StateRunning, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.submit("batch", 2)
			if r := f.assign("batch", id, "b0", "b1"); !r.Committed {
				t.Fatal(r.Rejection)
			}
			for i, u := range tc.updates {
				u.AllocID = id
				r := f.apply(&UpdateAllocs{Updates: []AllocUpdate{u}})
				if rejected := !r.Items[0].Committed; rejected != (i == tc.reject) {
					t.Fatalf("update %d (%s): rejected=%v, want %v (%v)", i, u.State, rejected, i == tc.reject, r.Items[0].Rejection)
				}
			}
			a := f.s.Allocation(id)
			if a.State != tc.final {
				t.Fatalf("final state %s, want %s", a.State, tc.final)
			}
			if a.State.Terminal() || a.State == model.StatePending {
				for _, n := range []string{"b0", "b1"} {
					if !f.s.Node(n).Idle() {
						t.Fatalf("node %s still busy after %s", n, a.State)
					}
				}
			}
		})
	}
}

func TestTransitionTable(t *testing.T) {
	allowed := map[[2]model.AllocState]bool{}
	for _, e := range [][2]model.AllocState{
		{model.StatePending, model.StateStaging}, {model.StatePending, model.StateCancelled}, {model.StatePending, model.StateFailed},
		{model.StateStaging, model.StateRunning}, {model.StateStaging, model.StatePending}, {model.StateStaging, model.StateCompleted},
		{model.StateStaging, model.StateFailed}, {model.StateStaging, model.StateCancelled},
		{model.StateRunning, model.StateCheckpointing}, {model.StateRunning, model.StateSuspended}, {model.StateRunning, model.StateCompleted}, {model.StateRunning, model.StateFailed}, {model.StateRunning, model.StateCancelled},
		{model.StateCheckpointing, model.StateSuspended}, {model.StateCheckpointing, model.StateRunning}, {model.StateCheckpointing, model.StateCompleted},
		{model.StateCheckpointing, model.StateFailed}, {model.StateCheckpointing, model.StateCancelled},
		{model.StateSuspended, model.StatePending}, {model.StateSuspended, model.StateCancelled},
		{model.StateSuspended, model.StateRunning}, // the resume of a preemption's suspension (gang.go)
	} {
		allowed[e] = true
	}
	for _, from := range model.AllocStates {
		for _, to := range model.AllocStates {
			if got := model.CanTransition(from, to); got != allowed[[2]model.AllocState{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t)
	pending := f.submit("batch", 1)
	running := f.submit("batch", 1)
	f.assign("batch", running, "b0")
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: running, State: model.StateRunning}}})
	r := f.apply(&Cancel{IDs: []uint64{pending, running, 999}})
	if !r.Items[0].Committed || !r.Items[1].Committed || r.Items[2].Rejection == nil || r.Items[2].Rejection.Code != CodeNotFound {
		t.Fatalf("cancel results %+v", r.Items)
	}
	if a := f.s.Allocation(pending); a.State != model.StateCancelled {
		t.Fatalf("pending allocation is %s after cancel", a.State)
	}
	a := f.s.Allocation(running)
	if a.State != model.StateRunning || !a.CancelRequested {
		t.Fatalf("running allocation: state %s cancel_requested %v", a.State, a.CancelRequested)
	}
	// The agent reports the kill as a failure; the FSM records it as cancelled.
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: running, State: model.StateFailed, Reason: model.ReasonNonZeroExit}}})
	if a := f.s.Allocation(running); a.State != model.StateCancelled || !f.s.Node("b0").Idle() {
		t.Fatalf("after the kill: %s, node idle %v", a.State, f.s.Node("b0").Idle())
	}
}

func TestDependencies(t *testing.T) {
	f := newFixture(t)
	first := f.submit("batch", 1)
	r := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour,
		DependsOn: []model.Dependency{{Condition: model.AfterOK, IDs: []uint64{first}}}}}}})
	second := r.IDs[0]
	if a := f.s.Allocation(second); !a.EligibleTime.IsZero() || a.Reason != model.ReasonDependency {
		t.Fatalf("dependent is eligible at submit: %+v", a)
	}
	if rej := f.assign("batch", second, "b1"); rej.Committed {
		t.Fatal("a job waiting on a dependency was assigned")
	}
	f.assign("batch", first, "b0")
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: first, State: model.StateRunning}}})
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: first, State: model.StateCompleted}}})
	if a := f.s.Allocation(second); a.EligibleTime.IsZero() {
		t.Fatalf("dependent not released after afterok: %+v", a)
	}
	// afterok on a failed job can never hold.
	failed := f.submit("batch", 1)
	f.ok(&Cancel{IDs: []uint64{failed}})
	r = f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Walltime: time.Hour,
		DependsOn: []model.Dependency{{Condition: model.AfterOK, IDs: []uint64{failed}}}}}}})
	if a := f.s.Allocation(r.IDs[0]); a.Reason != model.ReasonDependencyNeverSatisfied || a.State != model.StatePending {
		t.Fatalf("never-satisfiable dependency: %s %s", a.State, a.Reason)
	}
}

func TestSubmitArrayAndIdempotency(t *testing.T) {
	f := newFixture(t)
	sub := &Submit{Header: Header{RequestID: "req-1"}, Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1,
		Walltime: time.Hour, Array: &model.ArraySpec{Start: 0, End: 6, Step: 2, MaxConcurrent: 2}}}}}
	r := f.ok(sub)
	if len(r.IDs) != 4 {
		t.Fatalf("array created %d tasks, want 4", len(r.IDs))
	}
	first := f.s.Allocation(r.IDs[0])
	if first.DisplayID() != fmt.Sprintf("%d_0", r.IDs[0]) {
		t.Fatalf("display id %s", first.DisplayID())
	}
	if a := f.s.LookupArrayTask(r.IDs[0], 4); a == nil || a.ID != r.IDs[2] {
		t.Fatalf("LookupArrayTask(_, 4) = %+v", a)
	}
	next := f.s.NextID
	again := f.apply(&Submit{Header: Header{RequestID: "req-1"}, Items: sub.Items})
	if f.s.NextID != next || len(again.IDs) != 4 || again.IDs[0] != r.IDs[0] {
		t.Fatalf("retried submission created allocations: ids %v next %d->%d", again.IDs, next, f.s.NextID)
	}
}

func TestSubmitValidation(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name string
		req  model.Request
		want string
	}{
		{"unknown vcluster", model.Request{VCluster: "nope", Command: []string{"x"}, NodesMin: 1}, "vcluster"},
		{"too many nodes", model.Request{Command: []string{"x"}, NodesMin: 7}, "nodes"},
		{"zero nodes", model.Request{Command: []string{"x"}}, "nodes"},
		{"no entrypoint", model.Request{NodesMin: 1}, "entrypoint"},
		{"unknown dependency", model.Request{Command: []string{"x"}, NodesMin: 1, DependsOn: []model.Dependency{{Condition: model.AfterOK, IDs: []uint64{77}}}}, "depends-on"},
		{"priority", model.Request{Command: []string{"x"}, NodesMin: 1, PriorityClass: 11}, "priority-class"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.apply(&Submit{Items: []SubmitItem{{Request: tc.req}}})
			if r.Rejection == nil || r.Rejection.Code != CodeInvalid || !strings.Contains(r.Rejection.Message, tc.want) {
				t.Fatalf("rejection = %+v, want invalid naming %q", r.Rejection, tc.want)
			}
		})
	}
}

func TestNodeDownFailsItsAllocation(t *testing.T) {
	f := newFixture(t)
	id := f.submit("batch", 2)
	f.assign("batch", id, "b0", "b1")
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
	f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionDown, Reason: "no heartbeat"})
	a := f.s.Allocation(id)
	if a.State != model.StateFailed || a.Reason != model.ReasonNodeFailure {
		t.Fatalf("allocation %s/%s after node down", a.State, a.Reason)
	}
	if !f.s.Node("b0").Idle() || f.s.Node("b1").State != model.NodeDown {
		t.Fatal("nodes not released / marked down")
	}
	f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionDrain})
	f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionUp})
	if n := f.s.Node("b1"); n.State != model.NodeDrained {
		t.Fatalf("a drained node coming back is %s, want Drained", n.State)
	}
	// Its processes may still run on both nodes: no work until the agent
	// (or an admin) says they are gone.
	for _, name := range []string{"b0", "b1"} {
		if n := f.s.Node(name); n.Cleanup != id {
			t.Errorf("node %s cleanup %d, want %d", name, n.Cleanup, id)
		}
	}
	if st := f.s.Node("b0").State; st != model.NodeCleanup {
		t.Fatalf("b0 is %s, want Cleanup", st)
	}
	other := f.submit("batch", 1)
	if it := f.assign("batch", other, "b0"); it.Committed {
		t.Fatal("a node in Cleanup took new work")
	}
	f.ok(&SetNodeState{Nodes: []string{"b0"}, Action: ActionCleaned, Allocation: id + 1000})
	if st := f.s.Node("b0").State; st != model.NodeCleanup {
		t.Fatalf("a confirmation for another allocation ended the cleanup: %s", st)
	}
	f.ok(&SetNodeState{Nodes: []string{"b0"}, Action: ActionCleaned, Allocation: id})
	f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionUndrain})
	for _, name := range []string{"b0", "b1"} {
		if n := f.s.Node(name); n.State != model.NodeReady || n.Cleanup != 0 {
			t.Errorf("node %s is %s cleanup %d after the confirmation / undrain, want Ready", name, n.State, n.Cleanup)
		}
	}
	if it := f.assign("batch", other, "b0"); !it.Committed {
		t.Fatalf("a cleaned node refused work: %s", it.Rejection.Message)
	}
}

func TestDrainBusyNode(t *testing.T) {
	f := newFixture(t)
	id := f.submit("batch", 1)
	f.assign("batch", id, "b0")
	f.ok(&SetNodeState{Nodes: []string{"b0"}, Action: ActionDrain, Reason: "bios"})
	if st := f.s.Node("b0").State; st != model.NodeDraining {
		t.Fatalf("busy drained node is %s", st)
	}
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCompleted}}})
	if st := f.s.Node("b0").State; st != model.NodeDrained {
		t.Fatalf("after completion node is %s", st)
	}
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	a := f.submit("batch", 1)
	b := f.submit("batch", 1)
	f.ok(&Cancel{IDs: []uint64{a}})
	r := f.ok(&Prune{Before: f.now.Add(time.Hour)})
	if len(r.IDs) != 1 || r.IDs[0] != a || f.s.Allocation(a) != nil || f.s.Allocation(b) == nil {
		t.Fatalf("prune removed %v", r.IDs)
	}
}

// A final report carries when its run ended; a late delivery (after a
// leader change, or a member that was down) does not stretch the run, and
// an end time from a skewed agent clock stays between start and now.
func TestReportedEndTime(t *testing.T) {
	tests := []struct {
		name string
		end  func(start, now time.Time) time.Time
		want func(start, now time.Time) time.Time
	}{
		{"none: the commit's time", func(_, _ time.Time) time.Time { return time.Time{} }, func(_, now time.Time) time.Time { return now }},
		{"late delivery: the agent's time", func(start, _ time.Time) time.Time { return start.Add(1500 * time.Millisecond) },
			func(start, _ time.Time) time.Time { return start.Add(1500 * time.Millisecond) }},
		{"before its start: its start", func(start, _ time.Time) time.Time { return start.Add(-time.Hour) }, func(start, _ time.Time) time.Time { return start }},
		{"in the future: now", func(_, now time.Time) time.Time { return now.Add(time.Hour) }, func(_, now time.Time) time.Time { return now }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.submit("batch", 1)
			if r := f.assign("batch", id, "b0"); !r.Committed {
				t.Fatalf("assign: %v", r.Rejection)
			}
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
			start := f.s.Allocation(id).StartTime
			f.now = f.now.Add(time.Hour) // the report arrives an hour late
			now := f.now.Add(time.Second)
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateFailed, Reason: model.ReasonNodeFailure,
				EndTime: tt.end(start, now)}}})
			a := f.s.Allocation(id)
			if want := tt.want(start, now); !a.EndTime.Equal(want) {
				t.Errorf("end %s, want %s (start %s, now %s)", a.EndTime, want, start, now)
			}
			if h := a.History; !h[len(h)-1].Time.Equal(a.EndTime) {
				t.Errorf("last transition at %s, end %s", h[len(h)-1].Time, a.EndTime)
			}
			if n := f.s.Node("b0"); n.Allocation != 0 {
				t.Errorf("b0 still held by %d", n.Allocation)
			}
		})
	}
}
