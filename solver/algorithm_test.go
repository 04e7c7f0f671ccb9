package solver

import (
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// algorithmInput is one input that each algorithm decides differently:
//
//	g0: a0 a1 busy for 2h, a2 a3 a4 idle   (fingerprint A)
//	g1: b0 b1 idle                          (A)
//	g2: c0 idle (A), c1 c2 idle (B)
//
// Job 1 (9 nodes, the oldest) cannot start: 8 nodes are idle. Job 2 (2
// nodes, 30 min) fits in the holes before job 1's reservation.
func algorithmInput(alg model.Algorithm) *Input {
	h := time.Hour
	nodes := []Node{
		node("a0", 0).busy(90, 2*h).build(), node("a1", 0).busy(90, 2*h).build(),
		node("a2", 0).build(), node("a3", 0).build(), node("a4", 0).build(),
		node("b0", 1).build(), node("b1", 1).build(),
		node("c0", 2).build(), node("c1", 2).fp("fpB").build(), node("c2", 2).fp("fpB").build(),
	}
	in := input(nodes, jobN(1, 9).waited(3*h), jobN(2, 2).wall(30*time.Minute).waited(2*h))
	in.Algorithm = alg
	return in
}

// TestAlgorithmsDiffer: the same input, placed by each algorithm.
func TestAlgorithmsDiffer(t *testing.T) {
	h := time.Hour
	tests := []struct {
		alg   model.Algorithm
		wants []want
	}{
		{model.AlgorithmBackfill, []want{
			{id: 1, reason: model.ReasonResources, resAt: 2 * h},
			// Best fit: the group with the fewest usable nodes that holds it.
			{id: 2, nodes: []string{"b0", "b1"}, backfill: true},
		}},
		{model.AlgorithmFIFO, []want{
			{id: 1, reason: model.ReasonResources, resAt: 2 * h},
			// Strict order: nothing starts past the blocked job 1; job 2
			// expects to start once job 1 has (after its reservation).
			{id: 2, reason: model.ReasonPriority, expect: 3 * h},
		}},
		{model.AlgorithmBinpack, []want{
			{id: 1, reason: model.ReasonResources, resAt: 2 * h},
			// The busiest group first: g0 runs two nodes.
			{id: 2, nodes: []string{"a2", "a3"}, backfill: true},
		}},
		{model.AlgorithmSensitive, []want{
			// No conformance group holds 9 nodes: it can never run here.
			{id: 1, reason: model.ReasonBadConstraints, expect: -1},
			// One fingerprint, best fit: B's two nodes.
			{id: 2, nodes: []string{"c1", "c2"}},
		}},
	}
	plans := map[string]string{}
	for _, tc := range tests {
		t.Run(string(tc.alg), func(t *testing.T) {
			in := algorithmInput(tc.alg)
			p := Solve(in)
			checkPlan(t, p, tc.wants)
			if err := validatePlan(in, p); err != nil {
				t.Fatal(err)
			}
			txt := planText(p)
			for other, ptxt := range plans {
				if ptxt == txt {
					t.Errorf("%s plans exactly like %s", tc.alg, other)
				}
			}
			plans[string(tc.alg)] = txt
		})
	}
	// The empty algorithm is the type's default.
	for typ, alg := range map[model.VClusterType]model.Algorithm{
		model.TypeHPCBatch: model.AlgorithmBackfill, model.TypeInteractive: model.AlgorithmFIFO,
		model.TypeService: model.AlgorithmBinpack, model.TypeSensitive: model.AlgorithmSensitive,
	} {
		in := algorithmInput("")
		in.Type = typ
		if got, want := planText(Solve(in)), planText(Solve(algorithmInput(alg))); got != want {
			t.Errorf("type %s without an algorithm plans unlike %s", typ, alg)
		}
	}
}

// TestFIFOStrictOrder: held, badly constrained and quota-bound jobs do not
// block the queue (they could not run anyway); the first job that could
// run and cannot start does, and everything behind it waits with Priority.
func TestFIFOStrictOrder(t *testing.T) {
	h := time.Hour
	in := input(append(groups(3), busyGroup(1, 2, 99, h, "x")...),
		jobN(1, 1).waited(6*h).hold("JobArrayTaskLimit"),
		jobN(2, 1).waited(5*h).gpu("h100", 1),
		jobN(3, 1).waited(4*h),
		jobN(4, 4).waited(3*h),
		jobN(5, 1).waited(2*h),
		jobN(6, 1).waited(1*h).tenant("capped"),
	)
	in.Algorithm = model.AlgorithmFIFO
	in.Tenants["capped"] = Tenant{NodesLeft: -1, RunningLeft: 0}
	p := Solve(in)
	checkPlan(t, p, []want{
		{id: 1, reason: "JobArrayTaskLimit", expect: -1},
		{id: 2, reason: model.ReasonBadConstraints, expect: -1},
		{id: 3, nodes: []string{"g0n00"}},
		{id: 4, reason: model.ReasonResources, resAt: h},
		{id: 5, reason: model.ReasonPriority, expect: h},
		{id: 6, reason: model.ReasonQuotaMaxRunning, expect: -1},
	})
	if err := validatePlan(in, p); err != nil {
		t.Fatal(err)
	}
	for _, ex := range p.Explanations {
		if ex.JobID == 5 && ex.Filtered.Busy+ex.Filtered.Constraint+ex.Filtered.State+ex.Filtered.Ownership == 0 {
			t.Errorf("job 5 behind the head has no filter counts: %+v", ex.Filtered)
		}
	}
}

// TestSensitiveNeverBorrows: a sensitive vCluster never starts work on
// another vCluster's nodes, even when its own cannot hold the job; the
// backfill borrows them.
func TestSensitiveNeverBorrows(t *testing.T) {
	nodes := []Node{node("own1", 0).build(), node("own2", 0).build(), node("x1", 1).foreign().build()}
	in := input(nodes, jobN(1, 3))
	p := Solve(in)
	checkPlan(t, p, []want{{id: 1, nodes: []string{"own1", "own2", "x1"}, borrowed: []string{"x1"}}})

	in.Algorithm = model.AlgorithmSensitive
	p = Solve(in)
	checkPlan(t, p, []want{{id: 1, reason: model.ReasonBadConstraints, expect: -1}})
	if ex := p.explain(1); ex.Filtered.Ownership != 1 {
		t.Errorf("sensitive: ownership filter %d, want 1 (the foreign node)", ex.Filtered.Ownership)
	}
}

// TestLendLimits: a borrowable node lent until its home needs it is used
// only by jobs that end by then; the tightest limits go first.
func TestLendLimits(t *testing.T) {
	h := time.Hour
	nodes := []Node{
		node("own", 0).build(),
		node("x1", 1).foreign().build(),
		node("x2", 1).foreign().build(),
		node("x3", 1).foreign().build(),
	}
	nodes[1].LendUntil = t0.Add(h)            // usable by a job of up to 1h
	nodes[2].LendUntil = t0.Add(3 * h)        // up to 3h
	nodes[3].LendUntil = t0.Add(-time.Minute) // its home needs it now
	tests := []struct {
		name  string
		jobs  []*jobB
		wants []want
	}{
		{"a short job takes the tightest limit", []*jobB{jobN(1, 2).wall(h)},
			[]want{{id: 1, nodes: []string{"own", "x1"}, borrowed: []string{"x1"}}}},
		{"a longer job only the looser one", []*jobB{jobN(1, 2).wall(2 * h)},
			[]want{{id: 1, nodes: []string{"own", "x2"}, borrowed: []string{"x2"}}}},
		// Free nodes existed at cycle start: Priority (the reasons do not
		// tell lending limits from reservations).
		{"too long for every limit", []*jobB{jobN(1, 2).wall(4 * h)},
			[]want{{id: 1, reason: model.ReasonPriority, expect: -1}}},
		{"two jobs share them", []*jobB{jobN(1, 1).wall(2 * h).waited(h), jobN(2, 2).wall(h)},
			[]want{{id: 1, nodes: []string{"own"}}, {id: 2, nodes: []string{"x1", "x2"}, borrowed: []string{"x1", "x2"}}}},
		{"own nodes only", []*jobB{jobN(1, 2).wall(h).ownOnly()},
			[]want{{id: 1, reason: model.ReasonResources, expect: -1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := input(slices.Clone(nodes), tc.jobs...)
			p := Solve(in)
			checkPlan(t, p, tc.wants)
			if err := validatePlan(in, p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHeldNodes: nodes held for a job (a reclaim or a preemption freed them
// for it) are used by no other job before the hold ends, and the job starts
// on them as soon as all are idle, ahead of higher-scored jobs.
func TestHeldNodes(t *testing.T) {
	h := time.Hour
	hold := func(n Node, job uint64, d time.Duration) Node {
		n.ReservedFor, n.ReservedUntil = job, t0.Add(d)
		return n
	}
	tests := []struct {
		name  string
		nodes []Node
		jobs  []*jobB
		wants []want
	}{
		{"held nodes idle: the job starts on them first",
			[]Node{hold(node("n1", 0).build(), 5, 10*time.Minute), hold(node("n2", 0).build(), 5, 10*time.Minute), node("n3", 0).build()},
			[]*jobB{jobN(7, 2).waited(5 * h), jobN(5, 2)},
			[]want{{id: 5, nodes: []string{"n1", "n2"}}, {id: 7, reason: model.ReasonResources, resAt: h, nodes: []string{"n1", "n2"}}}},
		{"one held node still busy: nobody uses the idle one",
			[]Node{hold(node("n1", 0).build(), 5, 10*time.Minute), hold(node("n2", 0).busy(90, 5*time.Minute).build(), 5, 10*time.Minute), node("n3", 0).build()},
			[]*jobB{jobN(7, 2).waited(5 * h), jobN(5, 2)},
			[]want{{id: 7, reason: model.ReasonResources, resAt: 10 * time.Minute}, {id: 5, reason: model.ReasonResources, expect: 10*time.Minute + h}}},
		{"an expired hold holds nothing",
			[]Node{hold(node("n1", 0).build(), 5, -time.Minute), node("n2", 0).build()},
			[]*jobB{jobN(7, 2).waited(5 * h), jobN(5, 2)},
			[]want{{id: 7, nodes: []string{"n1", "n2"}}, {id: 5, reason: model.ReasonPriority, resAt: h}}},
		{"held for a job not in the queue: unusable until the hold ends",
			[]Node{hold(node("n1", 0).build(), 99, 30*time.Minute), node("n2", 0).build()},
			[]*jobB{jobN(7, 2)},
			[]want{{id: 7, reason: model.ReasonResources, resAt: 30 * time.Minute}}},
		{"a short job may not use a held node either",
			[]Node{hold(node("n1", 0).build(), 99, 30*time.Minute)},
			[]*jobB{jobN(7, 1).wall(time.Minute)},
			[]want{{id: 7, reason: model.ReasonResources, resAt: 30 * time.Minute}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, alg := range []model.Algorithm{model.AlgorithmBackfill, model.AlgorithmBinpack} {
				in := input(tc.nodes, tc.jobs...)
				in.Algorithm = alg
				p := Solve(in)
				checkPlan(t, p, tc.wants)
				if err := validatePlan(in, p); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
