package solver

import (
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// TestNodeReservations: a maintenance reservation ahead keeps jobs that
// would cross its start off its nodes, lets short ones backfill, and
// admits only its own jobs while it is active.
func TestNodeReservations(t *testing.T) {
	maint := func(start, dur time.Duration, nodes ...string) NodeReservation {
		return NodeReservation{Name: "maint", Maint: true, Start: t0.Add(start), End: t0.Add(start + dur), Nodes: nodes}
	}
	inResv := func(b *jobB, name string) *jobB { b.j.Reservation = name; return b }
	type want struct {
		id     uint64
		starts bool
		nodes  []string // when it starts: exactly these
		reason string   // when it waits
		resv   string   // Explanation.Reservation
		after  time.Time
	}
	cases := []struct {
		name  string
		nodes []Node
		resv  []NodeReservation
		jobs  []*jobB
		want  []want
	}{
		{
			name:  "1-hour job kept off, 5-minute job backfills (maint in 10 minutes on every node)",
			nodes: groups(2),
			resv:  []NodeReservation{maint(10*time.Minute, time.Hour, "g0n00", "g0n01")},
			jobs:  []*jobB{jobN(1, 2).wall(time.Hour).waited(time.Hour), jobN(2, 2).wall(5 * time.Minute)},
			want: []want{
				{id: 1, reason: model.ReasonMaintenance, resv: "maint", after: t0.Add(70 * time.Minute)},
				{id: 2, starts: true, nodes: []string{"g0n00", "g0n01"}},
			},
		},
		{
			name:  "1-hour job takes the nodes outside the reservation",
			nodes: groups(3),
			resv:  []NodeReservation{maint(10*time.Minute, time.Hour, "g0n00")},
			jobs:  []*jobB{jobN(1, 2).wall(time.Hour)},
			want:  []want{{id: 1, starts: true, nodes: []string{"g0n01", "g0n02"}}},
		},
		{
			name:  "a job that ends exactly at the start fits",
			nodes: groups(1),
			resv:  []NodeReservation{maint(10*time.Minute, time.Hour, "g0n00")},
			jobs:  []*jobB{jobN(1, 1).wall(10 * time.Minute)},
			want:  []want{{id: 1, starts: true, nodes: []string{"g0n00"}}},
		},
		{
			name:  "a job one second too long waits",
			nodes: groups(1),
			resv:  []NodeReservation{maint(10*time.Minute, time.Hour, "g0n00")},
			jobs:  []*jobB{jobN(1, 1).wall(10*time.Minute + time.Second)},
			want:  []want{{id: 1, reason: model.ReasonMaintenance, resv: "maint", after: t0.Add(70 * time.Minute)}},
		},
		{
			name:  "active reservation: others may not start on its nodes",
			nodes: groups(2),
			resv:  []NodeReservation{maint(-time.Minute, time.Hour, "g0n00", "g0n01")},
			jobs:  []*jobB{jobN(1, 1).wall(time.Minute)},
			want:  []want{{id: 1, reason: model.ReasonMaintenance, resv: "maint"}},
		},
		{
			name:  "active reservation: its own job runs on its nodes only",
			nodes: groups(3),
			resv:  []NodeReservation{maint(-time.Minute, time.Hour, "g0n02")},
			jobs:  []*jobB{inResv(jobN(1, 1).waited(time.Hour), "maint"), jobN(2, 1), inResv(jobN(3, 2), "maint")},
			want: []want{
				{id: 1, starts: true, nodes: []string{"g0n02"}},
				{id: 2, starts: true},
				{id: 3, reason: model.ReasonBadConstraints, resv: "maint"},
			},
		},
		{
			name:  "a job of a future reservation waits for its start",
			nodes: groups(2),
			resv:  []NodeReservation{maint(10*time.Minute, time.Hour, "g0n00")},
			jobs:  []*jobB{inResv(jobN(1, 1), "maint")},
			want:  []want{{id: 1, reason: model.ReasonReservation, resv: "maint"}},
		},
		{
			name:  "a job of an unknown reservation waits",
			nodes: groups(2),
			jobs:  []*jobB{inResv(jobN(1, 1), "gone")},
			want:  []want{{id: 1, reason: model.ReasonReservation, resv: "gone"}},
		},
		{
			name:  "a reservation without the maint flag: Reserved",
			nodes: groups(1),
			resv:  []NodeReservation{{Name: "r", Start: t0.Add(time.Minute), End: t0.Add(time.Hour), Nodes: []string{"g0n00"}}},
			jobs:  []*jobB{jobN(1, 1)},
			want:  []want{{id: 1, reason: model.ReasonReserved, resv: "r"}},
		},
		{
			name:  "a busy node under a future reservation is planned only after it",
			nodes: []Node{node("a", 0).busy(9, 5*time.Minute).build(), node("b", 0).build()},
			resv:  []NodeReservation{maint(10*time.Minute, time.Hour, "a")},
			jobs:  []*jobB{jobN(1, 2).wall(2 * time.Minute)},
			want:  []want{{id: 1, reason: model.ReasonResources, after: t0.Add(70 * time.Minute)}},
		},
		{
			name:  "an ended reservation holds nothing",
			nodes: groups(1),
			resv:  []NodeReservation{maint(-2*time.Hour, time.Hour, "g0n00")},
			jobs:  []*jobB{jobN(1, 1)},
			want:  []want{{id: 1, starts: true}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(tc.nodes, tc.jobs...)
			in.NodeReservations = tc.resv
			for _, sv := range []*Solver{new(Solver), warmSolver(tc.nodes)} {
				p := sv.Solve(in)
				for _, w := range tc.want {
					st, ex := p.start(w.id), p.explain(w.id)
					if ex == nil {
						t.Fatalf("job %d: no explanation", w.id)
					}
					if w.starts {
						if st == nil {
							t.Fatalf("job %d does not start: %+v", w.id, *ex)
						}
						if w.nodes != nil && !slices.Equal(st.Nodes, w.nodes) {
							t.Errorf("job %d starts on %v, want %v", w.id, st.Nodes, w.nodes)
						}
						continue
					}
					if st != nil {
						t.Fatalf("job %d starts on %v; want it to wait (%s)", w.id, st.Nodes, w.reason)
					}
					if ex.Reason != w.reason || ex.Reservation != w.resv {
						t.Errorf("job %d: reason %q reservation %q, want %q %q", w.id, ex.Reason, ex.Reservation, w.reason, w.resv)
					}
					if !w.after.IsZero() && ex.ExpectedStart.Before(w.after) {
						t.Errorf("job %d: expected start %v, want at or after %v (the reservation's end)", w.id, ex.ExpectedStart, w.after)
					}
				}
			}
		})
	}
}

// warmSolver is a Solver that has planned a cycle without reservations
// first: its memory of that cycle must change nothing.
func warmSolver(nodes []Node) *Solver {
	sv := new(Solver)
	sv.Solve(input(nodes, jobN(100, 1)))
	return sv
}
