package quorum

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func ptr[T any](v T) *T { return &v }

// running submits an allocation and brings it to RUNNING on nodes.
func (f *fixture) running(vc string, nodes ...string) uint64 {
	f.t.Helper()
	id := f.submit(vc, len(nodes))
	if it := f.assign(vc, id, nodes...); !it.Committed {
		f.t.Fatalf("assign: %s", it.Rejection.Message)
	}
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
	return id
}

func TestHoldRelease(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(f *fixture) uint64
		cmd     func(id uint64) *Hold
		wantErr string // "" = committed
		held    string
	}{
		{"user holds pending", func(f *fixture) uint64 { return f.submit("batch", 1) },
			func(id uint64) *Hold { return &Hold{IDs: []uint64{id}} }, "", model.HoldUser},
		{"admin holds pending", func(f *fixture) uint64 { return f.submit("batch", 1) },
			func(id uint64) *Hold { return &Hold{IDs: []uint64{id}, Kind: model.HoldAdmin, Admin: true} }, "", model.HoldAdmin},
		{"hold a running one refused", func(f *fixture) uint64 { return f.running("batch", "b0") },
			func(id uint64) *Hold { return &Hold{IDs: []uint64{id}} }, "only PENDING", ""},
		{"hold unknown refused", func(f *fixture) uint64 { return 999 },
			func(id uint64) *Hold { return &Hold{IDs: []uint64{id}} }, "does not exist", ""},
		{"bad kind refused", func(f *fixture) uint64 { return f.submit("batch", 1) },
			func(id uint64) *Hold { return &Hold{IDs: []uint64{id}, Kind: "boss"} }, "invalid hold kind", ""},
		{"user releases own hold", func(f *fixture) uint64 {
			id := f.submit("batch", 1)
			f.ok(&Hold{IDs: []uint64{id}})
			return id
		}, func(id uint64) *Hold { return &Hold{IDs: []uint64{id}, Release: true} }, "", ""},
		{"user cannot release admin hold", func(f *fixture) uint64 {
			id := f.submit("batch", 1)
			f.ok(&Hold{IDs: []uint64{id}, Kind: model.HoldAdmin, Admin: true})
			return id
		}, func(id uint64) *Hold { return &Hold{IDs: []uint64{id}, Release: true} }, "held by an admin", model.HoldAdmin},
		{"admin releases admin hold", func(f *fixture) uint64 {
			id := f.submit("batch", 1)
			f.ok(&Hold{IDs: []uint64{id}, Kind: model.HoldAdmin, Admin: true})
			return id
		}, func(id uint64) *Hold { return &Hold{IDs: []uint64{id}, Release: true, Admin: true} }, "", ""},
		{"user hold keeps admin hold", func(f *fixture) uint64 {
			id := f.submit("batch", 1)
			f.ok(&Hold{IDs: []uint64{id}, Kind: model.HoldAdmin, Admin: true})
			return id
		}, func(id uint64) *Hold { return &Hold{IDs: []uint64{id}} }, "", model.HoldAdmin},
		{"submitted held", func(f *fixture) uint64 {
			r := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Hold: true}}}})
			return r.IDs[0]
		}, func(id uint64) *Hold { return &Hold{IDs: []uint64{id}} }, "", model.HoldUser},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			id := tc.setup(f)
			r := f.apply(tc.cmd(id))
			msg := ""
			if r.Rejection != nil {
				msg = r.Rejection.Message
			} else if len(r.Items) > 0 && r.Items[0].Rejection != nil {
				msg = r.Items[0].Rejection.Message
			}
			if (tc.wantErr == "") != (msg == "") || !strings.Contains(msg, tc.wantErr) {
				t.Fatalf("got %q, want error containing %q", msg, tc.wantErr)
			}
			if a := f.s.Allocation(id); a != nil && a.Held != tc.held {
				t.Fatalf("held = %q, want %q", a.Held, tc.held)
			}
		})
	}
}

func TestHeldAndBeginTimeRefusedByAssign(t *testing.T) {
	f := newFixture(t)
	held := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1, Hold: true}}}}).IDs[0]
	if it := f.assign("batch", held, "b0"); it.Committed || it.Rejection.Reason != model.ReasonJobHeldUser {
		t.Fatalf("held allocation assigned: %+v", it)
	}
	begin := f.now.Add(time.Minute)
	later := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1, BeginTime: begin}}}}).IDs[0]
	if it := f.assign("batch", later, "b0"); it.Committed || it.Rejection.Reason != model.ReasonBeginTime {
		t.Fatalf("allocation assigned before its begin time: %+v", it)
	}
	f.now = begin
	if it := f.assign("batch", later, "b0"); !it.Committed {
		t.Fatalf("allocation not assigned after its begin time: %s", it.Rejection.Message)
	}
}

func TestNodeListAndExclude(t *testing.T) {
	f := newFixture(t)
	sub := func(r model.Request) *Result {
		r.VCluster, r.Command = "batch", []string{"true"}
		return f.apply(&Submit{Items: []SubmitItem{{Request: r}}})
	}
	r := sub(model.Request{NodesMin: 2, NodeList: []string{"b1", "b2"}})
	if r.Rejection != nil {
		t.Fatal(r.Rejection.Message)
	}
	id := r.IDs[0]
	if it := f.assign("batch", id, "b0", "b1"); it.Committed {
		t.Fatal("assigned off its node list")
	}
	if it := f.assign("batch", id, "b1", "b2"); !it.Committed {
		t.Fatalf("not assigned on its node list: %s", it.Rejection.Message)
	}
	x := sub(model.Request{NodesMin: 1, ExcludeNodes: []string{"b3"}}).IDs[0]
	if it := f.assign("batch", x, "b3"); it.Committed {
		t.Fatal("assigned on an excluded node")
	}
	for _, bad := range []model.Request{
		{NodesMin: 1, NodeList: []string{"nosuch"}},
		{NodesMin: 3, NodeList: []string{"b0", "b1"}},
		{NodesMin: 1, NodeList: []string{"b0"}, ExcludeNodes: []string{"b0"}},
	} {
		if r := sub(bad); r.Rejection == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestUpdateAlloc(t *testing.T) {
	tests := []struct {
		name    string
		run     bool
		cmd     UpdateAlloc
		wantErr string
		check   func(a *model.Allocation) bool
	}{
		{"pending walltime up", false, UpdateAlloc{Walltime: ptr(3 * time.Hour)}, "", func(a *model.Allocation) bool { return a.Walltime == 3*time.Hour }},
		{"pending nodes", false, UpdateAlloc{NodesMin: ptr(3)}, "", func(a *model.Allocation) bool { return a.NodesMin == 3 && a.NodesMax == 3 }},
		{"pending too many nodes", false, UpdateAlloc{NodesMin: ptr(60)}, "the cluster has 6 nodes", nil},
		{"pending class", false, UpdateAlloc{PriorityClass: ptr(9)}, "", func(a *model.Allocation) bool { return a.PriorityClass == 9 }},
		{"pending bad class", false, UpdateAlloc{PriorityClass: ptr(11)}, "priority-class", nil},
		{"pending vcluster", false, UpdateAlloc{VCluster: ptr("ml")}, "", func(a *model.Allocation) bool { return a.VCluster == "ml" }},
		{"pending unknown vcluster", false, UpdateAlloc{VCluster: ptr("nope")}, "invalid vcluster", nil},
		{"pending name", false, UpdateAlloc{Name: ptr("renamed")}, "", func(a *model.Allocation) bool { return a.Name == "renamed" }},
		{"running shrink", true, UpdateAlloc{Walltime: ptr(30 * time.Minute)}, "", func(a *model.Allocation) bool { return a.Walltime == 30*time.Minute }},
		{"running extend refused", true, UpdateAlloc{Walltime: ptr(2 * time.Hour)}, "may only shrink", nil},
		{"running extend by admin", true, UpdateAlloc{Walltime: ptr(2 * time.Hour), Admin: true}, "", func(a *model.Allocation) bool { return a.Walltime == 2*time.Hour }},
		{"running nodes refused", true, UpdateAlloc{NodesMin: ptr(2)}, "only while PENDING", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var id uint64
			if tc.run {
				id = f.running("batch", "b0")
			} else {
				id = f.submit("batch", 1)
			}
			tc.cmd.IDs = []uint64{id}
			r := f.apply(&tc.cmd)
			msg := ""
			if r.Rejection != nil {
				msg = r.Rejection.Message
			}
			if (tc.wantErr == "") != (msg == "") || !strings.Contains(msg, tc.wantErr) {
				t.Fatalf("got %q, want error containing %q", msg, tc.wantErr)
			}
			if tc.check != nil && !tc.check(f.s.Allocation(id)) {
				t.Fatalf("not changed: %+v", f.s.Allocation(id).Request)
			}
		})
	}
}

func TestRequeueJobs(t *testing.T) {
	f := newFixture(t)
	id := f.running("batch", "b0")
	f.ok(&RequeueJobs{IDs: []uint64{id}})
	a := f.s.Allocation(id)
	if a.State != model.StateRunning || !a.CancelRequested || !a.RequeueRequested {
		t.Fatalf("after requeue: %s cancel=%v requeue=%v", a.State, a.CancelRequested, a.RequeueRequested)
	}
	// The agent reports the stop: back to the queue, nodes free.
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCancelled, Reason: model.ReasonCancelled, Run: 1}}})
	a = f.s.Allocation(id)
	if a.State != model.StatePending || a.Reason != model.ReasonRequeued || a.RequeueCount != 1 || len(a.Nodes) != 0 {
		t.Fatalf("after stop: %s %s count=%d nodes=%v", a.State, a.Reason, a.RequeueCount, a.Nodes)
	}
	if n := f.s.Node("b0"); n.Allocation != 0 {
		t.Fatal("node not freed")
	}
	// Refusals: pending, ended, unknown.
	for _, tc := range []struct {
		id   uint64
		want string
	}{{id, "PENDING already"}, {999, "does not exist"}} {
		r := f.apply(&RequeueJobs{IDs: []uint64{tc.id}})
		if it := r.Items[0]; it.Committed || !strings.Contains(it.Rejection.Message, tc.want) {
			t.Errorf("requeue %d: %+v, want %q", tc.id, it, tc.want)
		}
	}
	f.ok(&Cancel{IDs: []uint64{id}})
	if it := f.apply(&RequeueJobs{IDs: []uint64{id}}).Items[0]; it.Committed || !strings.Contains(it.Rejection.Message, "already ended") {
		t.Errorf("requeue of an ended allocation: %+v", it)
	}
	// requeuehold: back in the queue, held.
	id3 := f.running("batch", "b2")
	f.ok(&RequeueJobs{IDs: []uint64{id3}, Hold: model.HoldUser})
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id3, State: model.StateCancelled, Run: 1}}})
	if a := f.s.Allocation(id3); a.State != model.StatePending || a.Waiting(f.now) != model.ReasonJobHeldUser {
		t.Fatalf("requeuehold: %s %q", a.State, a.Held)
	}
	// A cancel after a requeue request wins.
	id2 := f.running("batch", "b1")
	f.ok(&RequeueJobs{IDs: []uint64{id2}})
	f.ok(&Cancel{IDs: []uint64{id2}})
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id2, State: model.StateCancelled, Run: 1}}})
	if a := f.s.Allocation(id2); a.State != model.StateCancelled {
		t.Fatalf("cancel after requeue: %s", a.State)
	}
}

func TestSiteConfig(t *testing.T) {
	f := newFixture(t)
	if q, ok := f.s.QOS("debug"); !ok || q.PriorityClass != 8 {
		t.Fatalf("default debug qos: %+v %v", q, ok)
	}
	f.ok(&SetQOS{QOS: model.QOS{Name: "regular", PriorityClass: 4, MaxNodes: 4}})
	f.ok(&SetQOS{QOS: model.QOS{Name: "debug"}, Delete: true})
	for _, bad := range []*SetQOS{
		{QOS: model.QOS{Name: "x", PriorityClass: 12}},
		{QOS: model.QOS{Name: "bad name"}},
		{QOS: model.QOS{Name: "nope"}, Delete: true},
		{QOS: model.QOS{Name: "y", VCluster: "nope"}},
	} {
		if r := f.apply(bad); r.Rejection == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	f.ok(&SetPartition{Name: "regular", VCluster: "batch"})
	for _, bad := range []*SetPartition{{Name: "x", VCluster: "nope"}, {Name: "ml", VCluster: "batch"}, {Name: "gone"}} {
		if r := f.apply(bad); r.Rejection == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	r := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "regular", Command: []string{"true"}, NodesMin: 1}}}})
	if a := f.s.Allocation(r.IDs[0]); a.VCluster != "batch" {
		t.Fatalf("partition regular resolved to %q", a.VCluster)
	}
	// The table and partitions survive a snapshot.
	var buf bytes.Buffer
	if err := f.s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	s2, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.QOS("debug"); ok {
		t.Error("deleted qos back after restore")
	}
	if q, ok := s2.QOS("regular"); !ok || q.MaxNodes != 4 {
		t.Errorf("qos regular after restore: %+v", q)
	}
	if s2.Partitions()["regular"] != "batch" {
		t.Errorf("partitions after restore: %v", s2.Partitions())
	}
}

func TestUpdateArrayAllOrNothing(t *testing.T) {
	f := newFixture(t)
	r := f.ok(&Submit{Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Command: []string{"true"}, NodesMin: 1,
		Array: &model.ArraySpec{Start: 0, End: 2, Step: 1}}}}})
	ids := r.IDs
	f.ok(&UpdateAlloc{IDs: ids, Walltime: ptr(2 * time.Hour)})
	for _, id := range ids {
		if a := f.s.Allocation(id); a.Walltime != 2*time.Hour {
			t.Fatalf("task %d walltime %s", id, a.Walltime)
		}
	}
	// One task runs: a node change is refused for all of them.
	if it := f.assign("batch", ids[1], "b0"); !it.Committed {
		t.Fatal(it.Rejection.Message)
	}
	if r := f.apply(&UpdateAlloc{IDs: ids, NodesMin: ptr(2)}); r.Rejection == nil || !strings.Contains(r.Rejection.Message, "only while PENDING") {
		t.Fatalf("update with a running task: %+v", r.Rejection)
	}
	if a := f.s.Allocation(ids[0]); a.NodesMin != 1 {
		t.Fatalf("task 0 changed although the update was refused: %d nodes", a.NodesMin)
	}
	for _, bad := range []*UpdateAlloc{{}, {IDs: []uint64{ids[0], ids[0]}, Name: ptr("x")}, {IDs: []uint64{999}, Name: ptr("x")}} {
		if r := f.apply(bad); r.Rejection == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
