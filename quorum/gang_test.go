package quorum

import (
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// modeFixture: lendingFixture's batch with preempt-mode mode; a class-1
// job that cannot checkpoint runs on b0 b1; a class-5 job of 2 nodes waits.
func modeFixture(t *testing.T, mode model.PreemptMode) (f *fixture, victim, pre uint64) {
	f = lendingFixture(t)
	vc := *f.s.VCluster("batch")
	vc.PreemptMode = mode
	f.ok(&SetVCluster{VCluster: vc})
	victim = f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: 1})
	f.run("batch", victim, "b0", "b1")
	pre = f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, PriorityClass: 5})
	return f, victim, pre
}

func (f *fixture) preempt(victim, pre uint64, action model.PreemptAction) ItemResult {
	f.t.Helper()
	r := f.apply(&Preempt{VCluster: "batch", ReserveUntil: f.now.Add(5 * time.Minute), Items: []PreemptItem{{ForAlloc: pre,
		Victims: []uint64{victim}, Actions: []model.PreemptAction{action}, Reserve: []string{"b0", "b1"}, Version: f.s.Version}}})
	if r.Rejection != nil {
		f.t.Fatalf("preempt rejected whole: %s", r.Rejection.Message)
	}
	return r.Items[0]
}

// TestPreemptActionsFollowThePolicy: Apply commits an action only when it
// is what the policy in force does to the victim.
func TestPreemptActionsFollowThePolicy(t *testing.T) {
	tests := []struct {
		mode   model.PreemptMode
		action model.PreemptAction
		reject string // "" = committed
	}{
		{"", model.ActionRequeue, "may not be preempted: it cannot checkpoint"},
		{"", model.ActionSuspend, "may not be preempted"},
		{model.PreemptRequeue, model.ActionRequeue, ""},
		{model.PreemptRequeue, model.ActionSuspend, "would be preempted by requeue now, not suspend"},
		{model.PreemptCancel, model.ActionCancel, ""},
		{model.PreemptSuspend, model.ActionSuspend, ""},
		{model.PreemptSuspend, model.ActionCheckpoint, "would be preempted by suspend now"},
		{model.PreemptOff, model.ActionRequeue, "preemption is off"},
	}
	for _, tc := range tests {
		t.Run(string(tc.mode)+"/"+string(tc.action), func(t *testing.T) {
			f, victim, pre := modeFixture(t, tc.mode)
			r := f.preempt(victim, pre, tc.action)
			if tc.reject == "" {
				if !r.Committed {
					t.Fatalf("rejected: %s", r.Rejection.Message)
				}
				return
			}
			if r.Committed || !strings.Contains(r.Rejection.Message, tc.reject) {
				t.Fatalf("got %+v, want a rejection with %q", r, tc.reject)
			}
			if a := f.alloc(victim); a.State != model.StateRunning {
				t.Fatalf("victim %s after a rejected preemption", a.State)
			}
		})
	}
}

func TestPreemptRequeueAndCancel(t *testing.T) {
	f, victim, pre := modeFixture(t, model.PreemptRequeue)
	if r := f.preempt(victim, pre, model.ActionRequeue); !r.Committed {
		t.Fatal(r.Rejection.Message)
	}
	if a := f.alloc(victim); a.State != model.StateCheckpointing || !Stopping(a) || a.Preemption.Action != model.ActionRequeue {
		t.Fatalf("requeue: %s %+v", a.State, a.Preemption)
	}
	f.report(victim, model.StateSuspended, model.ReasonPreempted)
	if a := f.alloc(victim); a.State != model.StatePending || a.RequeueCount != 1 {
		t.Fatalf("after the stop: %s requeues %d", a.State, a.RequeueCount)
	}

	f, victim, pre = modeFixture(t, model.PreemptCancel)
	if r := f.preempt(victim, pre, model.ActionCancel); !r.Committed {
		t.Fatal(r.Rejection.Message)
	}
	if a := f.alloc(victim); a.State != model.StateRunning || !a.CancelRequested || a.CancelReason != model.ReasonPreempted {
		t.Fatalf("cancel: %+v", a)
	}
	f.report(victim, model.StateCancelled, "")
	if a := f.alloc(victim); a.State != model.StateCancelled || a.Reason != model.ReasonPreempted {
		t.Fatalf("after the stop: %s %s", a.State, a.Reason)
	}
	if n := f.s.Node("b0"); n.Allocation != 0 || n.ReservedFor != pre {
		t.Fatalf("b0 not held for the preemptor: %+v", n)
	}
}

// TestGangSuspendAndResume: the victim is SUSPENDED holding no node (I1:
// its nodes go to the preemptor), its nodes take only the preemptor, and
// it resumes on them once the preemptor has ended. Every step checks the
// invariants (fixture.apply).
func TestGangSuspendAndResume(t *testing.T) {
	f, victim, pre := modeFixture(t, model.PreemptSuspend)
	if r := f.preempt(victim, pre, model.ActionSuspend); !r.Committed {
		t.Fatal(r.Rejection.Message)
	}
	v := f.alloc(victim)
	if v.State != model.StateSuspended || len(v.Nodes) != 0 || strings.Join(v.SuspendedOn, ",") != "b0,b1" || v.SuspendedAt.IsZero() ||
		!v.GangSuspended() || v.Preemption.Action != model.ActionSuspend || v.Preemption.ForAlloc != pre {
		t.Fatalf("victim: %+v", v)
	}
	for _, name := range []string{"b0", "b1"} {
		if n := f.s.Node(name); n.Allocation != 0 || n.SuspendedAlloc != victim {
			t.Fatalf("%s: %+v", name, n)
		}
	}
	if got := f.s.SuspendedByPreemption(); len(got) != 1 || got[0].ID != victim {
		t.Fatalf("SuspendedByPreemption %v", got)
	}
	// Nothing resumes it while its preemptor holds its nodes.
	if why, _ := f.s.ResumeBlocker(v, f.now); why == "" {
		t.Fatal("resumable while its nodes are held for the preemptor")
	}
	// Another job may not take its nodes, even when the hold lapses.
	other := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1, PriorityClass: 9})
	f.now = f.now.Add(10 * time.Minute)
	if r := f.assign("batch", other, "b0"); r.Committed || !strings.Contains(r.Rejection.Message, "frozen processes") {
		t.Fatalf("another job on a node of the suspended one: %+v", r)
	}
	f.run("batch", pre, "b0", "b1")
	// A report of the frozen run is no resume.
	if r := f.apply(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: victim, State: model.StateRunning}}}); r.Items[0].Committed {
		t.Fatal("an agent's RUNNING report resumed the suspended allocation")
	}
	if r := f.apply(&ResumeSuspended{IDs: []uint64{victim}}); r.Items[0].Committed {
		t.Fatal("resumed while the preemptor runs on its nodes")
	}
	f.report(pre, model.StateCompleted, "")
	if why, never := f.s.ResumeBlocker(f.alloc(victim), f.now); why != "" || never {
		t.Fatalf("not resumable after the preemptor ended: %s", why)
	}
	// Still not the other job's.
	if r := f.assign("batch", other, "b0"); r.Committed {
		t.Fatal("another job took a node the suspended allocation waits for")
	}
	f.ok(&ResumeSuspended{IDs: []uint64{victim}})
	v = f.alloc(victim)
	if v.State != model.StateRunning || strings.Join(v.Nodes, ",") != "b0,b1" || len(v.SuspendedOn) != 0 || !v.SuspendedAt.IsZero() || v.SuspendedFor <= 0 {
		t.Fatalf("resumed: %+v", v)
	}
	for _, name := range []string{"b0", "b1"} {
		if n := f.s.Node(name); n.Allocation != victim || n.SuspendedAlloc != 0 {
			t.Fatalf("%s after the resume: %+v", name, n)
		}
	}
	if got := f.s.SuspendedByPreemption(); len(got) != 0 {
		t.Fatalf("SuspendedByPreemption after the resume: %v", got)
	}
}

// TestGangSuspendedEnds: a suspended allocation that is cancelled, or
// whose node goes down (requeued), drops its marks.
func TestGangSuspendedEnds(t *testing.T) {
	f, victim, pre := modeFixture(t, model.PreemptSuspend)
	f.preempt(victim, pre, model.ActionSuspend)
	f.ok(&Cancel{IDs: []uint64{victim}})
	if a := f.alloc(victim); a.State != model.StateCancelled || len(a.SuspendedOn) != 0 {
		t.Fatalf("cancelled: %+v", a)
	}
	if n := f.s.Node("b0"); n.SuspendedAlloc != 0 {
		t.Fatalf("b0 keeps the mark of a cancelled allocation: %+v", n)
	}

	f, victim, pre = modeFixture(t, model.PreemptSuspend)
	f.preempt(victim, pre, model.ActionSuspend)
	f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionDrain})
	if _, never := f.s.ResumeBlocker(f.alloc(victim), f.now); !never {
		t.Fatal("a drained node should requeue the suspended allocation")
	}
	f.ok(&ResumeSuspended{IDs: []uint64{victim}, Requeue: true})
	if a := f.alloc(victim); a.State != model.StatePending || a.RequeueCount != 1 || a.Reason != model.ReasonPreempted || len(a.SuspendedOn) != 0 {
		t.Fatalf("requeued: %+v", a)
	}
	if n := f.s.Node("b0"); n.SuspendedAlloc != 0 {
		t.Fatalf("b0 keeps the mark of a requeued allocation: %+v", n)
	}
}

// TestGangSuspendNeedsOwnNodes: work on borrowed nodes cannot wait there.
func TestGangSuspendNeedsOwnNodes(t *testing.T) {
	f := lendingFixture(t)
	vc := *f.s.VCluster("ml")
	vc.PreemptMode = model.PreemptSuspend
	vc.CheckpointableOnlyOnBorrowed = false
	f.ok(&SetVCluster{VCluster: vc})
	victim := f.submitReq(model.Request{VCluster: "ml", NodesMin: 2, PriorityClass: 1})
	f.run("ml", victim, "m0", "b3")
	pre := f.submitReq(model.Request{VCluster: "ml", NodesMin: 1, PriorityClass: 5})
	r := f.apply(&Preempt{VCluster: "ml", ReserveUntil: f.now.Add(time.Minute), Items: []PreemptItem{{ForAlloc: pre,
		Victims: []uint64{victim}, Actions: []model.PreemptAction{model.ActionSuspend}, Reserve: []string{"m0"}, Version: f.s.Version}}})
	if r.Items[0].Committed || !strings.Contains(r.Items[0].Rejection.Message, "not vcluster ml's own") {
		t.Fatalf("%+v", r.Items[0])
	}
}
