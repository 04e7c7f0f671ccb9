package quorum

import (
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// A RUNNING report carries when its run started: one delivered late (every
// member was down) records the agent's start — clamped between the
// assignment and the commit — and the run's end, reported with it, stays
// where it was.
func TestReportedStartTime(t *testing.T) {
	f := newFixture(t)
	id := f.submit("batch", 1)
	if r := f.assign("batch", id, "b0"); !r.Committed {
		t.Fatalf("assign: %v", r.Rejection)
	}
	assigned := f.now
	started, ended := assigned.Add(2*time.Second), assigned.Add(8*time.Second)
	f.now = f.now.Add(5 * time.Minute) // both reports come after the outage
	f.ok(&UpdateAllocs{Updates: []AllocUpdate{
		{AllocID: id, State: model.StateRunning, StartTime: started},
		{AllocID: id, State: model.StateCompleted, EndTime: ended},
	}})
	a := f.s.Allocation(id)
	if !a.EndTime.Equal(ended) {
		t.Errorf("end %s, want %s (the start reported late must not bound it)", a.EndTime, ended)
	}
	for _, h := range a.History {
		if h.State == model.StateRunning && !h.Time.Equal(started) {
			t.Errorf("RUNNING at %s, want %s", h.Time, started)
		}
	}
	// Clamped: before the assignment → the assignment; in the future → now.
	for _, tc := range []struct {
		name       string
		start      func() time.Time
		wantOffset func(assigned, now time.Time) time.Time
	}{
		{"before its assignment", func() time.Time { return assigned.Add(-time.Hour) }, func(a, _ time.Time) time.Time { return a }},
		{"in the future", func() time.Time { return f.now.Add(time.Hour) }, func(_, now time.Time) time.Time { return now }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := f.submit("batch", 1)
			if r := f.assign("batch", id, "b1"); !r.Committed {
				t.Fatalf("assign: %v", r.Rejection)
			}
			assigned := f.now
			f.now = f.now.Add(time.Minute)
			start := tc.start()
			now := f.now.Add(time.Second) // the fixture's next command time
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateRunning, StartTime: start}}})
			if got, want := f.s.Allocation(id).StartTime, tc.wantOffset(assigned, now); !got.Equal(want) {
				t.Errorf("start %s, want %s", got, want)
			}
			f.ok(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: id, State: model.StateCompleted}}})
		})
	}
}
