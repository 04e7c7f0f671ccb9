package solver

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// want describes the expected outcome for one job.
type want struct {
	id       uint64
	nodes    []string // started on (or reserved, with resAt)
	borrowed []string
	reason   string
	resAt    time.Duration // reservation start from t0; 0 = no reservation
	expect   time.Duration // expected start from t0 when waiting; -1 = unknown
	backfill bool
}

func checkPlan(t *testing.T, p *Plan, wants []want) {
	t.Helper()
	for _, w := range wants {
		ex := p.explain(w.id)
		if ex == nil {
			t.Errorf("job %d: no explanation", w.id)
			continue
		}
		if ex.Reason != w.reason {
			t.Errorf("job %d: reason %q, want %q", w.id, ex.Reason, w.reason)
		}
		st, res := p.start(w.id), p.reservation(w.id)
		switch {
		case w.reason == "":
			if st == nil {
				t.Errorf("job %d: not started", w.id)
				continue
			}
			if !slices.Equal(st.Nodes, w.nodes) {
				t.Errorf("job %d: started on %v, want %v", w.id, st.Nodes, w.nodes)
			}
			if !slices.Equal(st.Borrowed, w.borrowed) {
				t.Errorf("job %d: borrowed %v, want %v", w.id, st.Borrowed, w.borrowed)
			}
			if st.Backfilled != w.backfill {
				t.Errorf("job %d: backfilled %v, want %v", w.id, st.Backfilled, w.backfill)
			}
			if !ex.ExpectedStart.Equal(t0) {
				t.Errorf("job %d: expected start %v, want now", w.id, ex.ExpectedStart)
			}
		case w.resAt != 0:
			if st != nil {
				t.Errorf("job %d: started, want a reservation", w.id)
			}
			if res == nil {
				t.Errorf("job %d: no reservation", w.id)
				continue
			}
			if !res.Start.Equal(t0.Add(w.resAt)) || !ex.ExpectedStart.Equal(res.Start) {
				t.Errorf("job %d: reserved at %v (expected %v), want %v", w.id, res.Start.Sub(t0), ex.ExpectedStart.Sub(t0), w.resAt)
			}
			if w.nodes != nil && !slices.Equal(slices.Sorted(slices.Values(res.Nodes)), slices.Sorted(slices.Values(w.nodes))) {
				t.Errorf("job %d: reserved %v, want %v", w.id, res.Nodes, w.nodes)
			}
		default:
			if st != nil || res != nil {
				t.Errorf("job %d: started %v / reserved %v, want neither", w.id, st, res)
			}
			switch {
			case w.expect < 0 && !ex.ExpectedStart.IsZero():
				t.Errorf("job %d: expected start %v, want unknown", w.id, ex.ExpectedStart)
			case w.expect >= 0 && !ex.ExpectedStart.Equal(t0.Add(w.expect)):
				t.Errorf("job %d: expected start %v, want %v", w.id, ex.ExpectedStart.Sub(t0), w.expect)
			}
		}
	}
}

func busyGroup(g, n int, alloc uint64, freeIn time.Duration, prefix string) []Node {
	var out []Node
	for i := 0; i < n; i++ {
		out = append(out, node(prefix+string(rune('a'+i)), g).busy(alloc, freeIn).build())
	}
	return out
}

func TestGoldenPlacements(t *testing.T) {
	h := time.Hour
	tests := []struct {
		name  string
		in    func() *Input
		wants []want
	}{
		{
			name:  "best fit group keeps the big group whole",
			in:    func() *Input { return input(groups(10, 4, 6), jobN(1, 4)) },
			wants: []want{{id: 1, nodes: []string{"g1n00", "g1n01", "g1n02", "g1n03"}}},
		},
		{
			name: "one group when one group holds the job",
			in:   func() *Input { return input(groups(3, 3, 7, 5), jobN(1, 5), jobN(2, 3)) },
			wants: []want{
				{id: 1, nodes: []string{"g3n00", "g3n01", "g3n02", "g3n03", "g3n04"}},
				{id: 2, nodes: []string{"g0n00", "g0n01", "g0n02"}},
			},
		},
		{
			name:  "fewest groups: largest whole, remainder best fit",
			in:    func() *Input { return input(groups(4, 2, 3, 6), jobN(1, 9)) },
			wants: []want{{id: 1, nodes: []string{"g2n00", "g2n01", "g2n02", "g3n00", "g3n01", "g3n02", "g3n03", "g3n04", "g3n05"}}},
		},
		{
			name: "EASY: short job backfills before the reservation, long one waits",
			in: func() *Input {
				nodes := append(groups(2), busyGroup(0, 4, 99, h, "b")...)
				// Job 1 (4 nodes) needs the busy nodes: reserved at +1h on them.
				// Job 2 (2 nodes, 30 min) ends before: backfilled on the free ones.
				// Job 3 (2 nodes, 2h) would not delay job 1 either (job 1 uses
				// the busy nodes), so it starts too — but only 2 free nodes.
				return input(nodes, jobN(1, 4).waited(3*h), jobN(2, 2).wall(30*time.Minute).waited(2*h), jobN(3, 2).wall(2*h).waited(h))
			},
			wants: []want{
				{id: 1, reason: model.ReasonResources, resAt: h, nodes: []string{"ba", "bb", "bc", "bd"}},
				{id: 2, nodes: []string{"g0n00", "g0n01"}, backfill: true},
				{id: 3, reason: model.ReasonPriority, expect: 30 * time.Minute}, // after job 2
			},
		},
		{
			name: "EASY: reservation needs free nodes; only jobs ending before it backfill",
			in: func() *Input {
				nodes := append(groups(3), busyGroup(0, 2, 99, h, "b")...)
				return input(nodes, jobN(1, 5).waited(3*h), jobN(2, 2).wall(2*h).waited(2*h), jobN(3, 3).wall(h).waited(h))
			},
			wants: []want{
				{id: 1, reason: model.ReasonResources, resAt: h, nodes: []string{"g0n00", "g0n01", "g0n02", "ba", "bb"}},
				{id: 2, reason: model.ReasonPriority, expect: 2 * h},
				{id: 3, nodes: []string{"g0n00", "g0n01", "g0n02"}, backfill: true},
			},
		},
		{
			name: "EASY: extra free nodes beyond the reservation run long jobs",
			in: func() *Input {
				nodes := append(groups(4), busyGroup(0, 3, 99, h, "b")...)
				// Job 1 needs 5: at +1h it takes the 3 busy nodes and 2 free
				// ones; the other 2 free nodes are extra.
				return input(nodes, jobN(1, 5).waited(3*h), jobN(2, 2).wall(10*h).waited(2*h), jobN(3, 1).wall(10*h).waited(h))
			},
			wants: []want{
				{id: 1, reason: model.ReasonResources, resAt: h, nodes: []string{"g0n00", "g0n01", "ba", "bb", "bc"}},
				{id: 2, nodes: []string{"g0n02", "g0n03"}, backfill: true},
				{id: 3, reason: model.ReasonPriority, expect: 2 * h}, // after job 1's reservation
			},
		},
		{
			name: "head guard: a higher-scored newcomer cannot take the oldest job's nodes",
			in: func() *Input {
				nodes := append(groups(2), busyGroup(0, 2, 99, h, "b")...)
				in := input(nodes, jobN(1, 4).tenant("rich").waited(5*h), jobN(2, 2).wall(3*h).tenant("poor"))
				in.Weights = model.Weights{0, 0.1, 0.9}
				in.Tenants["rich"] = Tenant{FairShareTarget: 0.5, UsageShare: 0.9, NodesLeft: -1, RunningLeft: -1}
				in.Tenants["poor"] = Tenant{FairShareTarget: 0.5, UsageShare: 0, NodesLeft: -1, RunningLeft: -1}
				return in
			},
			wants: []want{
				{id: 1, reason: model.ReasonResources, resAt: h, nodes: []string{"g0n00", "g0n01", "ba", "bb"}},
				{id: 2, reason: model.ReasonPriority, expect: 2 * h},
			},
		},
		{
			name: "head guard off at depth 0: the newcomer starts",
			in: func() *Input {
				nodes := append(groups(2), busyGroup(0, 2, 99, h, "b")...)
				in := input(nodes, jobN(1, 4).tenant("rich").waited(5*h), jobN(2, 2).wall(3*h).tenant("poor"))
				in.Weights = model.Weights{0, 0.1, 0.9}
				in.Tenants["rich"] = Tenant{FairShareTarget: 0.5, UsageShare: 0.9, NodesLeft: -1, RunningLeft: -1}
				in.Tenants["poor"] = Tenant{FairShareTarget: 0.5, UsageShare: 0, NodesLeft: -1, RunningLeft: -1}
				in.ReservationDepth = 0
				return in
			},
			wants: []want{
				{id: 2, nodes: []string{"g0n00", "g0n01"}},
				{id: 1, reason: model.ReasonResources, expect: 3 * h},
			},
		},
		{
			name: "head is the oldest of the highest priority class",
			in: func() *Input {
				nodes := append(groups(2), busyGroup(0, 2, 99, h, "b")...)
				// Job 1 is older but class 0; job 2 (class 5) is the head and
				// starts; job 1 is then the first blocked job in score order.
				return input(nodes, jobN(1, 4).waited(50*h), jobN(2, 2).prio(5).wall(3*h))
			},
			wants: []want{
				{id: 2, nodes: []string{"g0n00", "g0n01"}},
				{id: 1, reason: model.ReasonResources, resAt: 3 * h},
			},
		},
		{
			name: "no reservations (depth 0): greedy, the long job starts",
			in: func() *Input {
				nodes := append(groups(3), busyGroup(0, 2, 99, h, "b")...)
				in := input(nodes, jobN(1, 5).waited(3*h), jobN(2, 2).wall(2*h).waited(2*h))
				in.ReservationDepth = 0
				return in
			},
			wants: []want{
				{id: 1, reason: model.ReasonResources, expect: h},
				{id: 2, nodes: []string{"g0n00", "g0n01"}, backfill: true},
			},
		},
		{
			name: "conservative: every blocked job is protected",
			in: func() *Input {
				nodes := busyGroup(0, 4, 99, h, "b")
				in := input(nodes, jobN(1, 4).waited(3*h), jobN(2, 2).wall(2*h).waited(2*h), jobN(3, 2).wall(h).waited(h))
				in.ReservationDepth = model.ReservationsAll
				return in
			},
			wants: []want{
				{id: 1, reason: model.ReasonResources, resAt: h},
				{id: 2, reason: model.ReasonResources, resAt: 2 * h},
				{id: 3, reason: model.ReasonResources, resAt: 2 * h},
			},
		},
		{
			name: "borrow only when own nodes cannot hold the job",
			in: func() *Input {
				nodes := []Node{
					node("own1", 0).build(), node("own2", 0).build(),
					node("x1", 1).foreign().build(), node("x2", 1).foreign().build(), node("x3", 1).foreign().build(),
				}
				return input(nodes, jobN(1, 2).waited(2*time.Hour), jobN(2, 2))
			},
			wants: []want{
				{id: 1, nodes: []string{"own1", "own2"}},
				{id: 2, nodes: []string{"x1", "x2"}, borrowed: []string{"x1", "x2"}},
			},
		},
		{
			name: "own plus borrowed to reach NodesMin",
			in: func() *Input {
				nodes := []Node{node("own1", 0).build(), node("x1", 1).foreign().build(), node("x2", 1).foreign().build()}
				return input(nodes, jobN(1, 2).elastic(2, 3))
			},
			wants: []want{{id: 1, nodes: []string{"own1", "x1"}, borrowed: []string{"x1"}}},
		},
		{
			name: "elastic: as many own nodes as there are, up to NodesMax",
			in:   func() *Input { return input(groups(5), jobN(1, 2).elastic(2, 8), jobN(2, 1)) },
			wants: []want{
				{id: 1, nodes: []string{"g0n00", "g0n01", "g0n02", "g0n03", "g0n04"}},
				{id: 2, reason: model.ReasonPriority, resAt: h, nodes: []string{"g0n00"}},
			},
		},
		{
			name: "power headroom: too big waits, small one starts",
			in: func() *Input {
				in := input(groups(6), jobN(1, 3).waited(2*h), jobN(2, 2))
				in.PowerHeadroomWatts = 700 // 300 W per node started
				return in
			},
			wants: []want{
				{id: 1, reason: model.ReasonPowerBudget, expect: -1},
				{id: 2, nodes: []string{"g0n00", "g0n01"}},
			},
		},
		{
			name: "power headroom shrinks an elastic job",
			in: func() *Input {
				in := input(groups(6), jobN(1, 2).elastic(2, 6))
				in.PowerHeadroomWatts = 1000
				return in
			},
			wants: []want{{id: 1, nodes: []string{"g0n00", "g0n01", "g0n02"}}},
		},
		{
			name: "tenant quotas",
			in: func() *Input {
				in := input(groups(10), jobN(1, 4).tenant("a").waited(3*h), jobN(2, 1).tenant("b").waited(2*h),
					jobN(3, 1).tenant("b").waited(h), jobN(4, 2).tenant("a"))
				in.Tenants["a"] = Tenant{NodesLeft: 5, RunningLeft: -1}
				in.Tenants["b"] = Tenant{NodesLeft: -1, RunningLeft: 1}
				return in
			},
			wants: []want{
				{id: 1, nodes: []string{"g0n00", "g0n01", "g0n02", "g0n03"}},
				{id: 2, nodes: []string{"g0n04"}},
				{id: 3, reason: model.ReasonQuotaMaxRunning, expect: -1},
				{id: 4, reason: model.ReasonQuotaMaxNodes, expect: -1},
			},
		},
		{
			name: "hold: scored and explained, neither started nor reserved",
			in: func() *Input {
				return input(groups(4), jobN(1, 2).hold("JobArrayTaskLimit").waited(5*h), jobN(2, 8).waited(4*h), jobN(3, 4))
			},
			wants: []want{
				{id: 1, reason: "JobArrayTaskLimit", expect: -1},
				{id: 2, reason: model.ReasonBadConstraints, expect: -1},
				{id: 3, nodes: []string{"g0n00", "g0n01", "g0n02", "g0n03"}},
			},
		},
		{
			name: "constraints: GPU type and features; drained nodes",
			in: func() *Input {
				nodes := []Node{
					node("cpu1", 0).build(),
					node("gpu1", 0).gpu("a100", 4).features("ib").build(),
					node("gpu2", 1).gpu("a100", 4).features("ib").state(model.NodeDrained).build(),
					node("gpu3", 1).gpu("h100", 8).build(),
				}
				return input(nodes, jobN(1, 2).gpu("a100", 4).waited(3*h), jobN(2, 1).gpu("A100", 2).constraints("ib").waited(2*h),
					jobN(3, 1).gpu("mi300", 1).waited(h), jobN(4, 1).gpu("", 8))
			},
			wants: []want{
				{id: 1, reason: model.ReasonNodesDrained, expect: -1},
				{id: 2, nodes: []string{"gpu1"}},
				{id: 3, reason: model.ReasonBadConstraints, expect: -1},
				{id: 4, nodes: []string{"gpu3"}},
			},
		},
		{
			name: "sensitive: all nodes in one conformance group",
			in: func() *Input {
				nodes := []Node{
					node("a1", 0).fp("A").build(), node("a2", 0).fp("A").build(),
					node("b1", 0).fp("B").build(), node("b2", 1).fp("B").build(), node("b3", 1).fp("B").build(),
				}
				in := input(nodes, jobN(1, 3).waited(3*h), jobN(2, 3).waited(2*h), jobN(3, 2))
				in.Type = model.TypeSensitive
				return in
			},
			wants: []want{
				{id: 1, nodes: []string{"b1", "b2", "b3"}},
				{id: 2, reason: model.ReasonPriority, resAt: h, nodes: []string{"b1", "b2", "b3"}},
				{id: 3, nodes: []string{"a1", "a2"}, backfill: true},
			},
		},
		{
			name: "non-sensitive prefers one conformance group",
			in: func() *Input {
				nodes := []Node{
					node("a1", 0).fp("A").build(), node("a2", 0).fp("A").build(), node("b1", 0).fp("B").build(),
					node("c1", 1).fp("C").build(), node("c2", 1).fp("C").build(), node("c3", 1).fp("C").build(), node("c4", 1).fp("C").build(),
				}
				return input(nodes, jobN(1, 3))
			},
			wants: []want{{id: 1, nodes: []string{"c1", "c2", "c3"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in()
			p := Solve(in)
			checkPlan(t, p, tt.wants)
			if !reflect.DeepEqual(p, Solve(in)) {
				t.Error("second Solve gave a different plan")
			}
		})
	}
}
