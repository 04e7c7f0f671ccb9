package quorum

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/model"
)

// submitReq submits one request and returns its id.
func (f *fixture) submitReq(r model.Request) uint64 {
	f.t.Helper()
	if len(r.Command) == 0 {
		r.Command = []string{"true"}
	}
	if r.Walltime == 0 {
		r.Walltime = time.Hour
	}
	return f.ok(&Submit{Items: []SubmitItem{{Request: r}}}).IDs[0]
}

func (f *fixture) run(vc string, id uint64, nodes ...string) {
	f.t.Helper()
	if r := f.assign(vc, id, nodes...); !r.Committed {
		f.t.Fatalf("assign %d to %v: %s", id, nodes, r.Rejection.Message)
	}
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning}}})
}

func (f *fixture) report(id uint64, st model.AllocState, reason string) {
	f.t.Helper()
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: st, Reason: reason}}})
}

func (f *fixture) alloc(id uint64) *model.Allocation { return f.s.Allocation(id) }

// lendingFixture: batch (b0..b3) lends and preempts, ml (m0, m1) borrows.
func lendingFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.ok(&SetVCluster{VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1,
		AllowLending: true, AllowBorrowing: true, Preemption: true, ReclaimGrace: time.Minute, ReclaimBackoff: 10 * time.Minute,
		CheckpointableOnlyOnBorrowed: true}})
	f.ok(&SetVCluster{VCluster: model.VCluster{Name: "ml", Type: model.TypeMLTraining, ReservationDepth: 1,
		AllowLending: true, AllowBorrowing: true, Preemption: true, CheckpointableOnlyOnBorrowed: true}})
	return f
}

func TestReclaimCheckpointsRequeuesAndHoldsNodes(t *testing.T) {
	f := lendingFixture(t)
	borrower := f.submitReq(model.Request{VCluster: "ml", NodesMin: 4, Checkpoint: model.CheckpointSignal, PriorityClass: 10})
	f.run("ml", borrower, "m0", "m1", "b2", "b3")
	if n := f.s.Node("b2"); n.CurrentVCluster != "ml" || !n.Borrowed() {
		t.Fatalf("b2 should be lent to ml: %+v", n)
	}
	home := f.submitReq(model.Request{VCluster: "batch", NodesMin: 4})
	other := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1})

	r := f.ok(&Reclaim{VCluster: "batch", ReserveUntil: f.now.Add(5 * time.Minute),
		Items: []ReclaimItem{{ForAlloc: home, Nodes: []string{"b2", "b3"}, Reserve: []string{"b0", "b1", "b2", "b3"}, Version: f.s.Version}}})
	if len(r.Items) != 1 || r.Items[0].ID != home {
		t.Fatalf("items: %+v", r.Items)
	}
	b := f.alloc(borrower)
	if b.State != model.StateCheckpointing || b.Preemption == nil || b.Preemption.Kind != model.PreemptReclaim ||
		b.Preemption.ByVCluster != "batch" || b.Preemption.ForAlloc != home || b.CheckpointReason != model.PreemptReclaim {
		t.Fatalf("borrower after reclaim (class 10 must not block it): %+v %+v", b, b.Preemption)
	}
	if got, want := b.CheckpointDeadline, b.Preemption.Time.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("deadline %v, want the home's grace after the reclaim: %v", got, want)
	}
	if n := f.s.Node("b2"); !n.ReturnRequested || n.ReclaimedFrom != "ml" || n.ReservedFor != home {
		t.Fatalf("b2 after reclaim: %+v", n)
	}
	// The held nodes are refused to other work of the home vCluster.
	if res := f.assign("batch", other, "b0"); res.Committed {
		t.Fatal("a node held for the reclaiming allocation went to another one")
	}
	// A late answer to an earlier, keep-running checkpoint does not undo the stop.
	f.report(borrower, model.StateRunning, model.ReasonCheckpointed)
	if f.alloc(borrower).State != model.StateCheckpointing {
		t.Fatal("a RUNNING report ended a reclaim")
	}
	f.report(borrower, model.StateSuspended, model.ReasonCheckpointed)
	b = f.alloc(borrower)
	if b.State != model.StatePending || b.Reason != model.ReasonPreempted || b.RequeueCount != 1 || b.CheckpointCount != 1 ||
		len(b.Nodes) != 0 || b.LastCheckpointAt.IsZero() || !b.SubmitTime.Equal(f.alloc(borrower).History[0].Time) {
		t.Fatalf("borrower after its checkpoint: %+v", b)
	}
	states := []model.AllocState{}
	for _, h := range b.History {
		states = append(states, h.State)
	}
	if !slices.Equal(states[len(states)-3:], []model.AllocState{model.StateCheckpointing, model.StateSuspended, model.StatePending}) {
		t.Fatalf("history %v", states)
	}
	// A resent report of the first run does not touch the requeued allocation.
	r = f.apply(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: borrower, State: model.StateFailed, Run: 1}}})
	if r.Items[0].Committed || r.Items[0].Rejection.Code != CodeStale || f.alloc(borrower).State != model.StatePending {
		t.Fatalf("a report of an earlier run was applied: %+v", r.Items[0])
	}
	for _, name := range []string{"b2", "b3"} {
		if n := f.s.Node(name); n.Borrowed() || n.ReturnRequested || !n.Idle() {
			t.Fatalf("%s did not go home: %+v", name, n)
		}
	}
	// The home job starts on its nodes; the borrower may not take them back
	// during the back-off.
	if res := f.assign("ml", borrower, "m0", "m1", "b2", "b3"); res.Committed {
		t.Fatal("the borrower re-borrowed reclaimed nodes within the back-off")
	}
	f.run("batch", home, "b0", "b1", "b2", "b3")
	if n := f.s.Node("b0"); n.ReservedFor != 0 {
		t.Fatalf("reservation not cleared by the start: %+v", n)
	}
	f.report(home, model.StateCompleted, "")
	f.now = f.now.Add(11 * time.Minute)
	f.run("ml", borrower, "m0", "m1", "b2", "b3")
	if f.alloc(borrower).RequeueCount != 1 {
		t.Fatal("requeue count changed on restart")
	}
}

func TestCheckpointRacingCompletionEndsCompleted(t *testing.T) {
	f := lendingFixture(t)
	v := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, Checkpoint: model.CheckpointSignal, PriorityClass: 1})
	f.run("batch", v, "b0", "b1")
	p := f.submitReq(model.Request{VCluster: "batch", NodesMin: 4, PriorityClass: 7})
	f.ok(&Preempt{VCluster: "batch", ReserveUntil: f.now.Add(time.Hour), Items: []PreemptItem{{ForAlloc: p, Victims: []uint64{v}, Reserve: []string{"b0", "b1", "b2", "b3"}, Version: f.s.Version}}})
	code := 0
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: v, State: model.StateCompleted, ExitCode: &code}}})
	if a := f.alloc(v); a.State != model.StateCompleted || a.RequeueCount != 0 || a.CheckpointReason != "" {
		t.Fatalf("%+v", a)
	}
}

func TestPreemptRules(t *testing.T) {
	type setup struct {
		victim    model.Request
		preemptor model.Request
		vc        model.VCluster
		stale     bool
	}
	batch := model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1, AllowLending: true, Preemption: true}
	cases := []struct {
		name string
		s    setup
		ok   bool
		code Code
	}{
		{"class 7 preempts class 2", setup{victim: model.Request{PriorityClass: 2}, preemptor: model.Request{PriorityClass: 7}, vc: batch}, true, ""},
		{"equal classes never", setup{victim: model.Request{PriorityClass: 5}, preemptor: model.Request{PriorityClass: 5}, vc: batch}, false, CodeConflict},
		{"higher victim never", setup{victim: model.Request{PriorityClass: 9}, preemptor: model.Request{PriorityClass: 5}, vc: batch}, false, CodeConflict},
		{"class 10 is never a victim", setup{victim: model.Request{PriorityClass: 10}, preemptor: model.Request{PriorityClass: 10}, vc: batch}, false, CodeConflict},
		{"preemption off", setup{victim: model.Request{PriorityClass: 1}, preemptor: model.Request{PriorityClass: 9},
			vc: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}}, false, CodeConflict},
		{"sensitive is never preempted", setup{victim: model.Request{PriorityClass: 1}, preemptor: model.Request{PriorityClass: 9},
			vc: model.VCluster{Name: "batch", Type: model.TypeSensitive, ReservationDepth: 1, Preemption: true}}, false, CodeConflict},
		{"stale proposal", setup{victim: model.Request{PriorityClass: 1}, preemptor: model.Request{PriorityClass: 9}, vc: batch, stale: true}, false, CodeStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			vr, pr := tc.s.victim, tc.s.preemptor
			vr.VCluster, vr.NodesMin = "batch", 2
			pr.VCluster, pr.NodesMin = "batch", 4
			v := f.submitReq(vr)
			f.run("batch", v, "b0", "b1")
			f.ok(&SetVCluster{VCluster: tc.s.vc})
			p := f.submitReq(pr)
			version := f.s.Version
			if tc.s.stale {
				f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: v, State: model.StateCheckpointing}}})
				f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: v, State: model.StateRunning}}})
			}
			r := f.apply(&Preempt{VCluster: "batch", ReserveUntil: f.now.Add(time.Hour),
				Items: []PreemptItem{{ForAlloc: p, Victims: []uint64{v}, Reserve: []string{"b0", "b1", "b2", "b3"}, Version: version}}})
			if r.Rejection != nil {
				t.Fatalf("rejected whole: %v", r.Rejection)
			}
			it := r.Items[0]
			if it.Committed != tc.ok {
				t.Fatalf("committed=%v, want %v (%v)", it.Committed, tc.ok, it.Rejection)
			}
			a := f.alloc(v)
			if !tc.ok {
				if it.Rejection.Code != tc.code {
					t.Fatalf("code %s, want %s: %s", it.Rejection.Code, tc.code, it.Rejection.Message)
				}
				if a.State != model.StateRunning || f.s.Node("b2").ReservedFor != 0 {
					t.Fatalf("a refused preemption changed state: %+v", a)
				}
				return
			}
			if a.State != model.StateCheckpointing || a.Preemption.Kind != model.PreemptClass || a.Preemption.ForAlloc != p {
				t.Fatalf("victim %+v", a)
			}
		})
	}
}

// Two schedulers proposing from the same version for the same node: exactly
// one commits, whatever the command (assignment or preemption).
func TestRacingProposalsCommitOnce(t *testing.T) {
	f := lendingFixture(t)
	// Two vClusters want idle b0 in the same instant.
	x := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1})
	y := f.submitReq(model.Request{VCluster: "ml", NodesMin: 1, Checkpoint: model.CheckpointSignal})
	v := f.s.Version
	r1 := f.apply(&AssignBatch{VCluster: "batch", Items: []AssignItem{{AllocID: x, Nodes: []string{"b0"}, Version: v}}})
	r2 := f.apply(&AssignBatch{VCluster: "ml", Items: []AssignItem{{AllocID: y, Nodes: []string{"b0"}, Version: v}}})
	if got := btoi(r1.Items[0].Committed) + btoi(r2.Items[0].Committed); got != 1 {
		t.Fatalf("%d of two racing assignments committed", got)
	}
	// Two preemptors want the same victim's nodes.
	victim := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: 1, Checkpoint: model.CheckpointSignal})
	f.run("batch", victim, "b1", "b2")
	p1 := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: 6})
	p2 := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: 8})
	v = f.s.Version
	until := f.now.Add(time.Hour)
	r1 = f.apply(&Preempt{VCluster: "batch", ReserveUntil: until, Items: []PreemptItem{{ForAlloc: p1, Victims: []uint64{victim}, Reserve: []string{"b1", "b2"}, Version: v}}})
	r2 = f.apply(&Preempt{VCluster: "batch", ReserveUntil: until, Items: []PreemptItem{{ForAlloc: p2, Victims: []uint64{victim}, Reserve: []string{"b1", "b2"}, Version: v}}})
	if got := btoi(r1.Items[0].Committed) + btoi(r2.Items[0].Committed); got != 1 {
		t.Fatalf("%d of two racing preemptions committed", got)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestKeepRunningCheckpoint(t *testing.T) {
	f := lendingFixture(t)
	a := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1, Checkpoint: model.CheckpointHook, CheckpointHook: "true"})
	none := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1})
	f.run("batch", a, "b0")
	f.run("batch", none, "b1")
	r := f.apply(&Checkpoint{Items: []CheckpointItem{{AllocID: a, Reason: CheckpointUser, Deadline: f.now.Add(time.Minute)}, {AllocID: none, Reason: CheckpointUser}}})
	if !r.Items[0].Committed || r.Items[1].Committed || r.Items[1].Rejection.Code != CodeInvalid {
		t.Fatalf("items %+v %v", r.Items, r.Items[1].Rejection)
	}
	if x := f.alloc(a); x.State != model.StateCheckpointing || x.CheckpointReason != CheckpointUser {
		t.Fatalf("%+v", x)
	}
	f.report(a, model.StateRunning, model.ReasonCheckpointed)
	if x := f.alloc(a); x.State != model.StateRunning || x.CheckpointCount != 1 || x.LastCheckpointAt.IsZero() || x.CheckpointReason != "" || len(x.Nodes) != 1 {
		t.Fatalf("%+v", x)
	}
	f.ok(&Checkpoint{Items: []CheckpointItem{{AllocID: a, Reason: CheckpointProactive}}})
	f.report(a, model.StateRunning, model.ReasonCheckpointTimeout)
	if x := f.alloc(a); x.CheckpointCount != 1 {
		t.Fatalf("a timed-out checkpoint was counted: %+v", x)
	}
}

func TestLendingPolicies(t *testing.T) {
	cases := []struct {
		name  string
		batch model.VCluster
		req   model.Request
		nodes []string
		ok    bool
	}{
		{"within the lend fraction", model.VCluster{AllowLending: true, MaxLendFraction: 0.5}, model.Request{NodesMin: 3, Checkpoint: model.CheckpointSignal}, []string{"m0", "b0", "b1"}, true},
		{"beyond the lend fraction", model.VCluster{AllowLending: true, MaxLendFraction: 0.5}, model.Request{NodesMin: 3, Checkpoint: model.CheckpointSignal}, []string{"b0", "b1", "b2"}, false},
		{"non-checkpointable work on borrowed nodes", model.VCluster{AllowLending: true}, model.Request{NodesMin: 1}, []string{"b0"}, false},
		{"sensitive never lends", model.VCluster{Type: model.TypeSensitive, AllowLending: true}, model.Request{NodesMin: 1, Checkpoint: model.CheckpointSignal}, []string{"b0"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			b := tc.batch
			b.Name, b.ReservationDepth = "batch", 1
			if b.Type == "" {
				b.Type = model.TypeHPCBatch
			}
			f.ok(&SetVCluster{VCluster: b})
			f.ok(&SetVCluster{VCluster: model.VCluster{Name: "ml", Type: model.TypeMLTraining, ReservationDepth: 1, AllowBorrowing: true, CheckpointableOnlyOnBorrowed: true}})
			tc.req.VCluster = "ml"
			id := f.submitReq(tc.req)
			if r := f.assign("ml", id, tc.nodes...); r.Committed != tc.ok {
				t.Fatalf("committed=%v, want %v: %v", r.Committed, tc.ok, r.Rejection)
			}
		})
	}
}

func TestSensitiveOneFingerprint(t *testing.T) {
	f := newFixture(t)
	f.ok(&SetVCluster{VCluster: model.VCluster{Name: "sens", Type: model.TypeSensitive, ReservationDepth: 1}})
	f.ok(&RegisterNodes{Agent: "a9", Nodes: []model.Node{
		{Name: "s0", HomeVCluster: "sens", Fingerprint: "A", IdleWatts: 1, BusyWatts: 2},
		{Name: "s1", HomeVCluster: "sens", Fingerprint: "B", IdleWatts: 1, BusyWatts: 2},
		{Name: "s2", HomeVCluster: "sens", Fingerprint: "A", IdleWatts: 1, BusyWatts: 2}}})
	id := f.submitReq(model.Request{VCluster: "sens", NodesMin: 2})
	if r := f.assign("sens", id, "s0", "s1"); r.Committed || r.Rejection.Reason != model.ReasonBadConstraints {
		t.Fatalf("mixed fingerprints: %+v", r)
	}
	if r := f.assign("sens", id, "s0", "s2"); !r.Committed {
		t.Fatalf("one fingerprint: %v", r.Rejection)
	}
}

// Property: over random clusters and random preemption proposals, class-10
// work is never preempted and no victim is of a class at or above its
// preemptor's.
func TestPreemptionPropertyNeverClass10(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := range 200 {
		f := newFixture(t)
		f.ok(&SetVCluster{VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1, AllowLending: true, Preemption: true}})
		var ns []model.Node
		for i := range 6 {
			ns = append(ns, model.Node{Name: fmt.Sprintf("p%d", i), HomeVCluster: "batch", IdleWatts: 1, BusyWatts: 2})
		}
		f.ok(&RegisterNodes{Agent: "ap", Nodes: ns})
		var running []uint64
		names := []string{"b0", "b1", "b2", "b3", "p0", "p1", "p2", "p3", "p4", "p5"}
		for i := 0; i+1 < len(names); i += 2 {
			id := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: rng.Intn(11), Checkpoint: model.CheckpointSignal})
			f.run("batch", id, names[i], names[i+1])
			running = append(running, id)
		}
		for range 5 {
			p := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: rng.Intn(11)})
			victims := []uint64{running[rng.Intn(len(running))]}
			if rng.Intn(2) == 0 {
				victims = append(victims, running[rng.Intn(len(running))])
			}
			r := f.apply(&Preempt{VCluster: "batch", ReserveUntil: f.now.Add(time.Hour), Items: []PreemptItem{{ForAlloc: p, Victims: victims, Version: f.s.Version}}})
			if !r.Items[0].Committed {
				continue
			}
			for _, v := range victims {
				va, pa := f.alloc(v), f.alloc(p)
				if va.PriorityClass == model.MaxPriorityClass || va.PriorityClass >= pa.PriorityClass {
					t.Fatalf("round %d: class %d preempted for class %d", round, va.PriorityClass, pa.PriorityClass)
				}
			}
		}
	}
}

// Two schedulers' proposals for one node reach the FSM at the same instant
// from two goroutines: exactly one commits (run with -race).
func TestConcurrentProposalsForOneNodeCommitOnce(t *testing.T) {
	for round := range 50 {
		f := lendingFixture(t)
		x := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1})
		y := f.submitReq(model.Request{VCluster: "ml", NodesMin: 1, Checkpoint: model.CheckpointSignal})
		fsm := &FSM{state: f.s, changed: make(chan struct{})}
		v := f.s.Version
		cmds := []Command{
			&AssignBatch{Header: Header{Time: f.now}, VCluster: "batch", Items: []AssignItem{{AllocID: x, Nodes: []string{"b1"}, Version: v}}},
			&AssignBatch{Header: Header{Time: f.now}, VCluster: "ml", Items: []AssignItem{{AllocID: y, Nodes: []string{"b1"}, Version: v}}},
		}
		results := make([]*Result, 2)
		var start, done sync.WaitGroup
		start.Add(1)
		for i, c := range cmds {
			data, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				results[i] = fsm.Apply(&raft.Log{Type: raft.LogCommand, Index: uint64(10 + i), Data: data}).(*Result)
			}()
		}
		start.Done()
		done.Wait()
		if got := btoi(results[0].Items[0].Committed) + btoi(results[1].Items[0].Committed); got != 1 {
			t.Fatalf("round %d: %d of two racing proposals committed", round, got)
		}
		if v := CheckInvariants(f.s); len(v) > 0 {
			t.Fatalf("round %d: %v", round, v)
		}
	}
}
