package solver

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// randomCfg draws a small random cluster and queue.
func randomCfg(seed int64) genCfg {
	r := rand.New(rand.NewSource(seed))
	groups := 2 + r.Intn(7)
	cfg := genCfg{
		nodes: groups * (3 + r.Intn(20)), groups: groups,
		pending: 5 + r.Intn(120), running: r.Intn(40), seed: seed,
		fps: 1 + r.Intn(3), gpuGroupFrac: []float64{0, 0, 0.25, 0.5}[r.Intn(4)],
		foreignFrac: []float64{0, 0, 0.1, 0.3}[r.Intn(4)], downFrac: []float64{0, 0.02, 0.1}[r.Intn(3)],
		depth:         []int{0, 1, 1, 3, model.ReservationsAll}[r.Intn(5)],
		powerHeadroom: -1, sensitive: r.Intn(6) == 0,
		busyFrac: []float64{0.5, 0.8, 0.95}[r.Intn(3)], maxJob: 64,
		constrainedJobs: []float64{0, 0.1, 0.4}[r.Intn(3)], elasticJobs: []float64{0, 0.2}[r.Intn(2)],
		tenants: 1 + r.Intn(6), quotaTen: r.Intn(3),
	}
	if r.Intn(3) == 0 {
		cfg.powerHeadroom = int64(r.Intn(20000))
	}
	return cfg
}

// propertyInput is a random input with backlog weight 0, so that removing
// jobs from the queue cannot reorder the remaining ones.
func propertyInput(seed int64) *Input {
	in := genInput(randomCfg(seed))
	in.Weights[5] = 0
	return in
}

func cloneInput(in *Input) *Input {
	c := *in
	c.Nodes = slices.Clone(in.Nodes)
	for i := range c.Nodes {
		c.Nodes[i].Features = slices.Clone(in.Nodes[i].Features)
	}
	c.Pending = slices.Clone(in.Pending)
	for i := range c.Pending {
		c.Pending[i].Constraints = slices.Clone(in.Pending[i].Constraints)
	}
	c.Running = slices.Clone(in.Running)
	c.Tenants = make(map[string]Tenant, len(in.Tenants))
	for k, v := range in.Tenants {
		c.Tenants[k] = v
	}
	return &c
}

const propertySeeds = 400

func TestPropertyPlansAreValid(t *testing.T) {
	for seed := int64(1); seed <= propertySeeds; seed++ {
		in := propertyInput(seed)
		orig := cloneInput(in)
		p := Solve(in)
		if !reflect.DeepEqual(in, orig) {
			t.Fatalf("seed %d: Solve modified its input", seed)
		}
		if err := validatePlan(in, p); err != nil {
			t.Fatalf("seed %d (%+v): %v", seed, randomCfg(seed), err)
		}
	}
}

// validatePlan checks a plan against its input: nodes given at most once and
// only when free, constraints, quotas and power respected, and no two
// commitments (running work, starts, reservations) overlapping on a node —
// so no start delays any reservation.
func validatePlan(in *Input, p *Plan) error {
	byName := make(map[string]int, len(in.Nodes))
	for i, n := range in.Nodes {
		byName[n.Name] = i
	}
	jobs := make(map[uint64]*Job, len(in.Pending))
	for i := range in.Pending {
		jobs[in.Pending[i].ID] = &in.Pending[i]
	}
	if len(p.Explanations) != len(in.Pending) {
		return fmt.Errorf("%d explanations for %d jobs", len(p.Explanations), len(in.Pending))
	}
	valid := map[string]bool{"": true, model.ReasonPriority: true, model.ReasonResources: true,
		model.ReasonPowerBudget: true, model.ReasonQuotaMaxNodes: true, model.ReasonQuotaMaxRunning: true,
		model.ReasonNodesDrained: true, model.ReasonBadConstraints: true, "JobArrayTaskLimit": true}
	for i, ex := range p.Explanations {
		if ex.Position != i+1 {
			return fmt.Errorf("explanation %d has position %d", i, ex.Position)
		}
		if i > 0 && ex.Score > p.Explanations[i-1].Score {
			return fmt.Errorf("scores not sorted at %d", i)
		}
		if !valid[ex.Reason] {
			return fmt.Errorf("job %d: reason %q", ex.JobID, ex.Reason)
		}
		f := ex.Filtered
		if f.Constraint < 0 || f.State < 0 || f.Ownership < 0 || f.Busy < 0 || f.Power < 0 {
			return fmt.Errorf("job %d: negative filter count %+v", ex.JobID, f)
		}
		if ex.Reason == model.ReasonPowerBudget && f.Constraint+f.State+f.Ownership+f.Busy+f.Power != len(in.Nodes) {
			return fmt.Errorf("job %d: filters %+v do not add up to %d nodes", ex.JobID, f, len(in.Nodes))
		}
		if ex.Reason == "" && (p.start(ex.JobID) == nil) {
			return fmt.Errorf("job %d: no reason and no start", ex.JobID)
		}
		if j := jobs[ex.JobID]; j.Hold != "" && ex.Reason != j.Hold {
			return fmt.Errorf("job %d: held, reason %q", ex.JobID, ex.Reason)
		}
	}

	alg := in.Algorithm
	if alg == "" {
		alg = model.AlgorithmFor(in.Type)
	}
	sensitive := alg == model.AlgorithmSensitive
	if alg == model.AlgorithmFIFO {
		// Nothing starts past the first job that could run and waits
		// (except on nodes held for it).
		blocked := uint64(0)
		for _, ex := range p.Explanations {
			switch st := p.start(ex.JobID); {
			case st != nil && blocked != 0 && !onHeld(in, st):
				return fmt.Errorf("fifo: job %d started behind the blocked job %d", ex.JobID, blocked)
			case st == nil && blocked == 0 && (ex.Reason == model.ReasonResources || ex.Reason == model.ReasonPriority || ex.Reason == model.ReasonPowerBudget):
				blocked = ex.JobID
			}
		}
	}

	// A hold ends when its job starts.
	heldUsed := map[uint64]bool{}
	for _, st := range p.Starts {
		heldUsed[st.JobID] = true
	}

	// Interval commitments per node.
	type iv struct {
		from, to time.Duration
		what     string
	}
	busy := make([][]iv, len(in.Nodes))
	for i, n := range in.Nodes {
		if n.Allocation != 0 {
			to := time.Duration(1 << 62)
			if !n.FreeAt.IsZero() {
				to = max(0, n.FreeAt.Sub(in.Now))
			}
			busy[i] = append(busy[i], iv{0, to, "running"})
		}
	}
	check := func(j *Job, names []string, start time.Duration, what string, reserved bool) error {
		if len(names) < max(1, j.NodesMin) || len(names) > max(j.NodesMin, j.NodesMax) {
			return fmt.Errorf("%s: %d nodes for %d..%d", what, len(names), j.NodesMin, j.NodesMax)
		}
		fps := map[string]bool{}
		for _, name := range names {
			x, ok := byName[name]
			if !ok {
				return fmt.Errorf("%s: unknown node %q", what, name)
			}
			n := &in.Nodes[x]
			fps[n.Fingerprint] = true
			if n.State != model.NodeReady {
				return fmt.Errorf("%s: node %s is %s", what, name, n.State)
			}
			if reserved && !n.Own {
				return fmt.Errorf("%s: reservation on borrowable node %s", what, name)
			}
			if !n.Own && (j.OwnNodesOnly || sensitive) {
				return fmt.Errorf("%s: borrows node %s, which it may not", what, name)
			}
			if !n.Own && !n.LendUntil.IsZero() && in.Now.Add(start+jobWall(j)).After(n.LendUntil) {
				return fmt.Errorf("%s: on node %s past its lending limit %v", what, name, n.LendUntil.Sub(in.Now))
			}
			if n.ReservedFor != 0 && n.ReservedFor != j.ID && in.Now.Add(start).Before(n.ReservedUntil) && !heldUsed[n.ReservedFor] {
				return fmt.Errorf("%s: node %s is held for job %d until %v", what, name, n.ReservedFor, n.ReservedUntil.Sub(in.Now))
			}
			if !reserved && n.Allocation != 0 {
				return fmt.Errorf("%s: started on busy node %s", what, name)
			}
			if j.GPUType != "" && !equalFold(n.GPUType, j.GPUType) || n.GPUs < j.GPUsPerNode {
				return fmt.Errorf("%s: node %s lacks GPUs", what, name)
			}
			for _, c := range j.Constraints {
				if !slices.Contains(n.Features, c) {
					return fmt.Errorf("%s: node %s lacks %s", what, name, c)
				}
			}
			end := start + jobWall(j)
			for _, b := range busy[x] {
				if start < b.to && b.from < end {
					return fmt.Errorf("%s: node %s [%v,%v) overlaps %s [%v,%v)", what, name, start, end, b.what, b.from, b.to)
				}
			}
			busy[x] = append(busy[x], iv{start, end, what})
		}
		if sensitive && len(fps) > 1 {
			return fmt.Errorf("%s: sensitive job on %d conformance groups", what, len(fps))
		}
		return nil
	}
	seen := map[uint64]bool{}
	var watts int64
	type use struct{ nodes, running int }
	usage := map[string]*use{}
	for _, st := range p.Starts {
		j := jobs[st.JobID]
		if j == nil || seen[st.JobID] || j.Hold != "" {
			return fmt.Errorf("start of job %d: unknown, twice or held", st.JobID)
		}
		seen[st.JobID] = true
		if err := check(j, st.Nodes, 0, fmt.Sprintf("start %d", j.ID), false); err != nil {
			return err
		}
		var borrowed []string
		for _, name := range st.Nodes {
			n := &in.Nodes[byName[name]]
			watts += max(0, int64(n.BusyWatts-n.IdleWatts))
			if !n.Own {
				borrowed = append(borrowed, name)
			}
		}
		if !slices.Equal(borrowed, st.Borrowed) {
			return fmt.Errorf("start %d: Borrowed %v, want %v", j.ID, st.Borrowed, borrowed)
		}
		u := usage[j.Tenant]
		if u == nil {
			u = &use{}
			usage[j.Tenant] = u
		}
		u.nodes += len(st.Nodes)
		u.running++
	}
	if in.PowerHeadroomWatts >= 0 && watts > in.PowerHeadroomWatts {
		return fmt.Errorf("starts draw %d W more, headroom %d W", watts, in.PowerHeadroomWatts)
	}
	for name, u := range usage {
		t, ok := in.Tenants[name]
		if !ok {
			continue
		}
		if t.NodesLeft >= 0 && u.nodes > t.NodesLeft || t.RunningLeft >= 0 && u.running > t.RunningLeft {
			return fmt.Errorf("tenant %s: %+v over quota room %+v", name, *u, t)
		}
	}
	for _, r := range p.Reservations {
		j := jobs[r.JobID]
		if j == nil || seen[r.JobID] {
			return fmt.Errorf("reservation of job %d: unknown or also started", r.JobID)
		}
		seen[r.JobID] = true
		if r.Start.Before(in.Now) {
			return fmt.Errorf("reservation %d starts in the past", r.JobID)
		}
		if err := check(j, r.Nodes, r.Start.Sub(in.Now), fmt.Sprintf("reservation %d", j.ID), true); err != nil {
			return err
		}
	}
	// Protected jobs get reservations beyond the depth (never at depth 0).
	extra := 0
	for _, r := range p.Reservations {
		if j := jobs[r.JobID]; j != nil && j.Protected {
			extra++
		}
	}
	switch d := in.ReservationDepth; {
	case d == 0 && len(p.Reservations) > 0:
		return fmt.Errorf("%d reservations at depth 0", len(p.Reservations))
	case d > 0 && len(p.Reservations) > d+extra:
		return fmt.Errorf("%d reservations at depth %d (%d of protected jobs)", len(p.Reservations), d, extra)
	}
	return nil
}

// onHeld reports whether every node of st is held for its job.
func onHeld(in *Input, st *Start) bool {
	for _, name := range st.Nodes {
		for _, n := range in.Nodes {
			if n.Name == name && n.ReservedFor != st.JobID {
				return false
			}
		}
	}
	return true
}

// TestPropertyAlgorithms: plans of every algorithm, with lending limits,
// held nodes and jobs that may not borrow, are valid (validatePlan checks
// each algorithm's rule), deterministic, and a reused Solver plans them
// like fresh Solves.
func TestPropertyAlgorithms(t *testing.T) {
	var sv Solver
	algs := []model.Algorithm{model.AlgorithmBackfill, model.AlgorithmFIFO, model.AlgorithmBinpack, model.AlgorithmSensitive}
	pre := 0
	for seed := int64(1); seed <= propertySeeds; seed++ {
		cfg := randomCfg(seed)
		cfg.alg = algs[seed%4]
		cfg.lendLimitFrac = []float64{0, 0.5, 1}[seed%3]
		cfg.heldFrac = []float64{0, 0.05, 0.2}[(seed/3)%3]
		cfg.ownOnlyJobs = []float64{0, 0.3}[(seed/9)%2]
		in := genInput(cfg)
		orig := cloneInput(in)
		p := Solve(in)
		if !reflect.DeepEqual(in, orig) {
			t.Fatalf("seed %d: Solve modified its input", seed)
		}
		if err := validatePlan(in, p); err != nil {
			t.Fatalf("seed %d (%s): %v", seed, cfg.alg, err)
		}
		if got, want := planText(sv.Solve(in)), planText(p); got != want {
			t.Fatalf("seed %d (%s): a reused Solver plans differently", seed, cfg.alg)
		}
		for _, st := range p.Starts {
			if onHeld(in, &st) {
				pre++
			}
		}
	}
	if pre < 20 {
		t.Fatalf("only %d starts on held nodes", pre)
	}
}

func equalFold(a, b string) bool { return len(a) == len(b) && (a == b || lower(a) == lower(b)) }

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

// headOf returns the id of the job Solve decides first when reservations
// are on (the oldest runnable job of the highest priority class), or 0.
func headOf(in *Input, p *Plan) uint64 {
	if in.ReservationDepth == 0 {
		return 0
	}
	static := map[string]bool{model.ReasonBadConstraints: true, model.ReasonNodesDrained: true}
	reason := map[uint64]string{}
	for _, ex := range p.Explanations {
		reason[ex.JobID] = ex.Reason
	}
	var head *Job
	for i := range in.Pending {
		j := &in.Pending[i]
		t, ok := in.Tenants[j.Tenant]
		if j.Hold != "" || static[reason[j.ID]] || ok && (t.RunningLeft == 0 || t.NodesLeft >= 0 && t.NodesLeft < max(1, j.NodesMin)) {
			continue
		}
		if head != nil {
			pa, pb := clampClass(j.PriorityClass), clampClass(head.PriorityClass)
			ea, eb := eligibleOf(j), eligibleOf(head)
			if pa < pb || pa == pb && (ea.After(eb) || ea.Equal(eb) && j.ID > head.ID) {
				continue
			}
		}
		head = j
	}
	if head == nil {
		return 0
	}
	return head.ID
}

func eligibleOf(j *Job) time.Time {
	if !j.EligibleTime.IsZero() {
		return j.EligibleTime
	}
	return j.SubmitTime
}

// decisionOrder is the plan's explanations in the order Solve decided them:
// the head first, then by rank.
func decisionOrder(in *Input, p *Plan) []Explanation {
	head := headOf(in, p)
	out := make([]Explanation, 0, len(p.Explanations))
	for _, ex := range p.Explanations {
		if ex.JobID == head {
			out = append(out, ex)
		}
	}
	for _, ex := range p.Explanations {
		if ex.JobID != head {
			out = append(out, ex)
		}
	}
	return out
}

// TestPropertyReservationsHold checks that jobs decided after a reservation
// leave its start unchanged: solving only the queue's prefix up to any job
// (plus the head, which is decided first) gives every job in it the same
// decision as the full queue. Together with the overlap check of
// validatePlan — no start shares a node with a reservation during it — no
// backfilled job delays a reservation.
func TestPropertyReservationsHold(t *testing.T) {
	for seed := int64(1); seed <= propertySeeds/4; seed++ {
		in := propertyInput(seed)
		full := Solve(in)
		byID := map[uint64]Job{}
		for _, j := range in.Pending {
			byID[j.ID] = j
		}
		fullEx := map[uint64]Explanation{}
		for _, ex := range full.Explanations {
			fullEx[ex.JobID] = ex
		}
		head := headOf(in, full)
		r := rand.New(rand.NewSource(seed))
		for _, cut := range []int{r.Intn(len(full.Explanations)), r.Intn(len(full.Explanations)), len(full.Explanations) / 2} {
			sub := cloneInput(in)
			sub.Pending = sub.Pending[:0]
			for i, ex := range full.Explanations {
				if i <= cut || ex.JobID == head {
					sub.Pending = append(sub.Pending, byID[ex.JobID])
				}
			}
			part := Solve(sub)
			for _, ex := range part.Explanations {
				fe := fullEx[ex.JobID]
				if ex.JobID != fe.JobID || ex.Reason != fe.Reason || !ex.ExpectedStart.Equal(fe.ExpectedStart) || !slices.Equal(ex.Nodes, fe.Nodes) {
					t.Fatalf("seed %d cut %d: job %d decided %q at %v on %v alone, %q at %v on %v with the lower jobs",
						seed, cut, ex.JobID, ex.Reason, ex.ExpectedStart, ex.Nodes, fe.Reason, fe.ExpectedStart, fe.Nodes)
				}
			}
		}
	}
}

// TestPropertyOneGroup checks that a fixed-size job whose usable free nodes
// in some dragonfly group could hold it is placed in one group, and, in a
// homogeneous cluster, in the group with the fewest such nodes (best fit).
// It replays the plan's decisions in rank order to know the free nodes at
// each decision.
func TestPropertyOneGroup(t *testing.T) {
	checked := 0
	for seed := int64(1); seed <= propertySeeds; seed++ {
		in := propertyInput(seed)
		if in.Type == model.TypeSensitive {
			continue
		}
		p := Solve(in)
		homogeneous := true
		for _, n := range in.Nodes {
			homogeneous = homogeneous && n.Fingerprint == in.Nodes[0].Fingerprint
		}
		byName := make(map[string]int, len(in.Nodes))
		for i, n := range in.Nodes {
			byName[n.Name] = i
		}
		jobs := map[uint64]*Job{}
		for i := range in.Pending {
			jobs[in.Pending[i].ID] = &in.Pending[i]
		}
		taken := make([]bool, len(in.Nodes))
		firstRes := make([]time.Duration, len(in.Nodes))
		for i := range firstRes {
			firstRes[i] = -1
		}
		for _, ex := range decisionOrder(in, p) {
			j := jobs[ex.JobID]
			if st := p.start(ex.JobID); st != nil {
				if len(st.Borrowed) == 0 && j.NodesMin == j.NodesMax {
					perGroup := map[int]int{}
					for x, n := range in.Nodes {
						ok := n.Own && n.State == model.NodeReady && n.Allocation == 0 && !taken[x] &&
							(firstRes[x] < 0 || firstRes[x] >= jobWall(j)) && passesJob(&n, j)
						if ok {
							perGroup[n.Group]++
						}
					}
					bestFit := -1
					for g, c := range perGroup {
						if c >= j.NodesMin && (bestFit < 0 || c < perGroup[bestFit] || c == perGroup[bestFit] && g < bestFit) {
							bestFit = g
						}
					}
					gs := map[int]bool{}
					for _, name := range st.Nodes {
						gs[in.Nodes[byName[name]].Group] = true
					}
					if bestFit >= 0 {
						checked++
						if len(gs) != 1 {
							t.Fatalf("seed %d: job %d (%d nodes) spans %d groups though group %d had %d usable nodes",
								seed, j.ID, j.NodesMin, len(gs), bestFit, perGroup[bestFit])
						}
						if homogeneous && !gs[bestFit] {
							t.Fatalf("seed %d: job %d (%d nodes) not in best-fit group %d (%v)", seed, j.ID, j.NodesMin, bestFit, perGroup)
						}
					}
				}
				for _, name := range st.Nodes {
					taken[byName[name]] = true
				}
			}
			if r := p.reservation(ex.JobID); r != nil {
				for _, name := range r.Nodes {
					x := byName[name]
					if firstRes[x] < 0 && !taken[x] && in.Nodes[x].Allocation == 0 {
						firstRes[x] = r.Start.Sub(in.Now)
					}
				}
			}
		}
	}
	if checked < 200 {
		t.Fatalf("only %d starts checked", checked)
	}
}

func passesJob(n *Node, j *Job) bool {
	if j.GPUType != "" && !equalFold(n.GPUType, j.GPUType) || n.GPUs < j.GPUsPerNode {
		return false
	}
	for _, c := range j.Constraints {
		if !slices.Contains(n.Features, c) {
			return false
		}
	}
	return true
}

// TestDeterminism solves generated inputs twice, and once more from a copy
// built in a different order of tenant insertion, and wants identical plans.
func TestDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		in := genInput(randomCfg(seed))
		a, b := Solve(in), Solve(cloneInput(in))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: two solves differ", seed)
		}
	}
	in := genInput(genCfg{nodes: 2000, groups: 8, pending: 3000, running: 800, seed: 7, fps: 2,
		gpuGroupFrac: 0.25, foreignFrac: 0.05, downFrac: 0.01, depth: model.ReservationsAll, powerHeadroom: -1,
		constrainedJobs: 0.1, quotaTen: 3})
	p := Solve(in)
	if !reflect.DeepEqual(p, Solve(in)) {
		t.Fatal("large input: two solves differ")
	}
	if err := validatePlan(in, p); err != nil { // long levels, many reservations
		t.Fatal(err)
	}
}

func TestReasonsAndFilters(t *testing.T) {
	in := genInput(genCfg{nodes: 400, groups: 4, pending: 500, running: 100, seed: 3, fps: 2,
		gpuGroupFrac: 0.25, foreignFrac: 0.1, downFrac: 0.05, depth: 1, powerHeadroom: 6000,
		constrainedJobs: 0.2, busyFrac: 0.7, tenants: 4})
	in.Tenants["t00"] = Tenant{NodesLeft: -1, RunningLeft: 0}
	in.Tenants["t01"] = Tenant{NodesLeft: 1, RunningLeft: -1}
	p := Solve(in)
	if err := validatePlan(in, p); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, ex := range p.Explanations {
		seen[ex.Reason]++
	}
	for _, r := range []string{"", model.ReasonPriority, model.ReasonResources, model.ReasonPowerBudget,
		model.ReasonQuotaMaxNodes, model.ReasonQuotaMaxRunning, "JobArrayTaskLimit"} {
		if seen[r] == 0 {
			t.Errorf("no job with reason %q in a varied queue (%v)", r, seen)
		}
	}
	if len(p.Reservations) != 1 {
		t.Errorf("%d reservations at depth 1", len(p.Reservations))
	}
}

// planText renders a plan completely (a nil and an empty slice alike), to
// compare plans of a reused Solver, which live only until its next cycle.
func planText(p *Plan) string { return fmt.Sprintf("%+v", *p) }

// TestSolverReuse: one Solver plans a sequence of inputs of every shape —
// machines growing and shrinking, classes, conformance groups, sensitive
// vClusters, power limits, depths, queues long and short or empty — and
// each plan equals a fresh Solve's, bit for bit; the inputs stay untouched.
func TestSolverReuse(t *testing.T) {
	var sv Solver
	check := func(name string, in *Input) {
		t.Helper()
		orig := cloneInput(in)
		want := planText(Solve(in))
		if got := planText(sv.Solve(in)); got != want {
			t.Fatalf("%s: the reused Solver's plan differs from Solve's:\n got %s\nwant %s", name, got, want)
		}
		if !reflect.DeepEqual(in, orig) {
			t.Fatalf("%s: Solver.Solve modified its input", name)
		}
	}
	for seed := int64(1); seed <= 300; seed++ {
		check(fmt.Sprint("seed ", seed), genInput(randomCfg(seed)))
		if seed%25 == 0 {
			check(fmt.Sprint("replay scale ", seed), genInput(replayScaleCfg(int(seed), []int{1, model.ReservationsAll}[seed%2])))
			empty := genInput(randomCfg(seed))
			empty.Pending = nil
			check(fmt.Sprint("empty queue ", seed), empty)
			check(fmt.Sprint("no nodes ", seed), &Input{Now: t0, Pending: genInput(randomCfg(seed)).Pending, Tenants: map[string]Tenant{}})
		}
	}
	if p := sv.Solve(nil); len(p.Starts)+len(p.Explanations) != 0 {
		t.Fatal("nil input: non-empty plan")
	}
}

// TestPropertyPredictions: predictions (Job.Predicted) reorder the queue but,
// without PredictedStarts, every start still ends by its walltime before any
// reservation; with PredictedStarts, the plan is valid for the predicted
// lengths.
func TestPropertyPredictions(t *testing.T) {
	for seed := int64(1); seed <= propertySeeds/2; seed++ {
		in := propertyInput(seed)
		for i := range in.Pending {
			j := &in.Pending[i]
			if j.ID%5 != 0 {
				j.Predicted = j.Walltime * time.Duration(j.ID%4+1) / 5
			}
		}
		p := Solve(in)
		if err := validatePlan(in, p); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		in.PredictedStarts = true
		p = Solve(in)
		as := cloneInput(in)
		for i := range as.Pending {
			if d := as.Pending[i].Predicted; d > 0 && d < as.Pending[i].Walltime {
				as.Pending[i].Walltime = d
			}
		}
		if err := validatePlan(as, p); err != nil {
			t.Fatalf("seed %d, predicted starts: %v", seed, err)
		}
	}
}
