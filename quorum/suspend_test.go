package quorum

import (
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Suspend and resume record when and how long a running allocation was
// frozen (through the codec, with the invariants checked after each
// command); a usage report records the run's usage; a new run starts with
// no suspended time.
func TestSuspendJobAndUsage(t *testing.T) {
	f := newFixture(t)
	id := f.running("batch", "b0")
	f.ok(&SuspendJob{ID: id})
	a := f.alloc(id)
	if a.SuspendedAt.IsZero() || a.State != model.StateRunning || a.Nodes[0] != "b0" {
		t.Fatalf("suspended: at %v state %s nodes %v", a.SuspendedAt, a.State, a.Nodes)
	}
	at := a.SuspendedAt
	f.ok(&SuspendJob{ID: id}) // again: nothing changes
	if f.alloc(id).SuspendedAt != at {
		t.Error("a second suspend moved the suspend time")
	}
	f.ok(&SuspendJob{ID: id, Resume: true})
	a = f.alloc(id)
	if !a.SuspendedAt.IsZero() || a.SuspendedFor != 2*time.Second {
		t.Errorf("resumed: at %v for %v, want zero and 2s (two commands, a second apart)", a.SuspendedAt, a.SuspendedFor)
	}
	u := &model.Usage{UserCPUSeconds: 2, MaxRSSBytes: 1 << 20, EnergySource: model.EnergyModel, EnergyJoules: 10}
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateFailed, Reason: model.ReasonOutOfMemory, Usage: u}}})
	if a = f.alloc(id); a.Usage == nil || *a.Usage != *u || a.Reason != model.ReasonOutOfMemory {
		t.Errorf("ended: usage %+v reason %s", a.Usage, a.Reason)
	}
	if r := f.apply(&SuspendJob{ID: id}); r.Rejection == nil || !strings.Contains(r.Rejection.Message, "only RUNNING") {
		t.Errorf("suspending an ended allocation: %+v", r.Rejection)
	}
	if r := f.apply(&SuspendJob{ID: 999}); r.Rejection == nil || r.Rejection.Code != CodeNotFound {
		t.Errorf("suspending an unknown allocation: %+v", r.Rejection)
	}
}
