package quorum

import (
	"testing"

	"github.com/latticehpc/lattice/model"
)

// A --requeue allocation whose node fails goes back to the queue (requeue
// count + 1, nodes freed); without --requeue it fails. Both ways a node
// failure arrives: the node goes Down, or a FAILED NodeFailure update (an
// agent that restarted without it, the walltime backstop).
func TestRequeueOnNodeFailure(t *testing.T) {
	for _, tt := range []struct {
		name     string
		requeue  bool
		viaNode  bool
		want     model.AllocState
		requeues int
	}{
		{"node down, --requeue", true, true, model.StatePending, 1},
		{"node down, no --requeue", false, true, model.StateFailed, 0},
		{"NodeFailure report, --requeue", true, false, model.StatePending, 1},
		{"NodeFailure report, no --requeue", false, false, model.StateFailed, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			id := f.submitReq(model.Request{VCluster: "batch", NodesMin: 2, Requeue: tt.requeue})
			f.run("batch", id, "b0", "b1")
			if tt.viaNode {
				f.ok(&SetNodeState{Nodes: []string{"b1"}, Action: ActionDown, Reason: "no heartbeat"})
			} else {
				f.report(id, model.StateFailed, model.ReasonNodeFailure)
			}
			a := f.alloc(id)
			if a.State != tt.want || a.RequeueCount != tt.requeues {
				t.Fatalf("state %s, requeues %d; want %s, %d", a.State, a.RequeueCount, tt.want, tt.requeues)
			}
			for _, n := range []string{"b0", "b1"} {
				if f.s.Node(n).Allocation != 0 {
					t.Errorf("node %s still holds allocation %d", n, f.s.Node(n).Allocation)
				}
			}
			if tt.requeue {
				if a.Reason != model.ReasonNodeFailure || len(a.Nodes) != 0 {
					t.Errorf("requeued with reason %q on nodes %v", a.Reason, a.Nodes)
				}
				// Its next run can start; a stale report of the lost run cannot end it.
				f.assign("batch", id, "b0")
				if r := f.apply(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCompleted, Run: 1}}}); r.Items[0].Committed {
					t.Error("a report of the lost run ended the new one")
				}
			}
			if v := CheckInvariants(f.s); len(v) > 0 {
				t.Fatal(v)
			}
		})
	}
	// A RUNNING allocation never reports its way to SUSPENDED.
	f := newFixture(t)
	id := f.submitReq(model.Request{VCluster: "batch", NodesMin: 1, Requeue: true})
	f.run("batch", id, "b0")
	if r := f.apply(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateSuspended}}}); r.Items[0].Committed {
		t.Error("a SUSPENDED report moved a RUNNING allocation")
	}
}
