package solver

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestFactorsAtBoundaries(t *testing.T) {
	nan := math.NaN()
	day := 24 * time.Hour
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"f1 class 0", fPriority(0), 0},
		{"f1 class 5", fPriority(5), 0.5},
		{"f1 class 10", fPriority(10), 1},
		{"f1 clamped above", fPriority(42), 1},
		{"f1 clamped below", fPriority(-3), 0},

		{"f2 no wait, unknown length", fWait(0, 0), 0},
		{"f2 negative wait", fWait(-time.Hour, model.MaxWalltime), 0},
		{"f2 reference wait", fWait(time.Hour, model.MaxWalltime), WaitShare * math.Log(2) / math.Log(169)},
		{"f2 wait saturates at 7 days", fWait(7*day, model.MaxWalltime), WaitShare},
		{"f2 clamped past saturation", fWait(30*day, model.MaxWalltime), WaitShare},
		{"f2 a minute's job, no wait", fWait(0, time.Minute), (1 - WaitShare) * (1 - math.Log(2)/math.Log1p(float64(ShortHorizon/ShortReference)))},
		{"f2 shorter is higher", b2f(fWait(0, time.Minute) > fWait(0, time.Hour) && fWait(0, time.Hour) > fWait(0, day)), 1},
		{"f2 longer wait is higher", b2f(fWait(2*time.Hour, time.Hour) > fWait(time.Hour, time.Hour)), 1},
		{"f2 at most 1", b2f(fWait(30*day, time.Second) <= 1), 1},
		{"f2 fifo: the wait alone", fWait(time.Hour, -1), math.Log(2) / math.Log(169)},

		{"f3 no target is neutral", fFairShare(0, 0.3), NeutralFairShare},
		{"f3 NaN target is neutral", fFairShare(nan, 0.3), NeutralFairShare},
		{"f3 NaN usage is neutral", fFairShare(0.2, nan), NeutralFairShare},
		{"f3 nothing used", fFairShare(0.2, 0), 1},
		{"f3 half used", fFairShare(0.2, 0.1), 0.5},
		{"f3 at share", fFairShare(0.2, 0.2), 0},
		{"f3 above share", fFairShare(0.2, 0.9), 0},
		{"f3 negative usage clamped", fFairShare(0.2, -1), 1},

		{"f4 one of 40 groups", fTopology(1, 40), 0.975},
		{"f4 all groups", fTopology(40, 40), 0},
		{"f4 cannot fit", fTopology(-1, 40), 0},
		{"f4 more groups than known", fTopology(5, 4), 0},
		{"f4 no groups", fTopology(1, 0), 0},
		{"f4 zero nodes needed", fTopology(0, 4), 1},

		{"f5 unknown", fDataReady(-1), NeutralDataReady},
		{"f5 NaN", fDataReady(nan), NeutralDataReady},
		{"f5 cold", fDataReady(0), 0},
		{"f5 hot", fDataReady(1), 1},
		{"f5 clamped", fDataReady(3), 1},

		{"f6 empty queue", fBacklog(0, 100), 0},
		{"f6 nothing runs", fBacklog(10, 0), 1},
		{"f6 nothing at all", fBacklog(0, 0), 0},
		{"f6 half", fBacklog(50, 100), 0.5},
		{"f6 capped", fBacklog(500, 100), 1},

		{"f7 unknown", fEnergy(-1), NeutralEnergy},
		{"f7 NaN", fEnergy(nan), NeutralEnergy},
		{"f7 free energy", fEnergy(0), 1},
		{"f7 peak price", fEnergy(1), 0},
		{"f7 clamped", fEnergy(2), 0},

		{"f8 not checkpointable", fCheckpoint(model.CheckpointNone, 1), 0},
		{"f8 mode unset", fCheckpoint("", 1), 0},
		{"f8 unknown minutes", fCheckpoint(model.CheckpointSignal, 0), NeutralCheckpoint},
		{"f8 NaN minutes", fCheckpoint(model.CheckpointHook, nan), NeutralCheckpoint},
		{"f8 one minute", fCheckpoint(model.CheckpointSignal, 1), 0.5},
		{"f8 instant-ish", fCheckpoint(model.CheckpointSignal, 1e-9), 1 / (1 + 1e-9)},
		{"f8 slow", fCheckpoint(model.CheckpointHook, 99), 0.01},

		{"f9 nothing free", fConformance(0, 4), 0},
		{"f9 half", fConformance(2, 4), 0.5},
		{"f9 all", fConformance(4, 4), 1},
		{"f9 capped (the seed's unbounded f9)", fConformance(400, 4), 1},
		{"f9 zero requested counts as one", fConformance(1, 0), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !near(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
			if tt.got < 0 || tt.got > 1 {
				t.Errorf("%v outside [0,1]", tt.got)
			}
		})
	}
}

// TestFactorsInSolve checks the factors as Solve computes them from an Input.
func TestFactorsInSolve(t *testing.T) {
	nodes := append(groups(4, 2), node("gpu", 2).gpu("a100", 4).fp("B").build())
	nodes = append(nodes, node("busy", 1).busy(7, 2*time.Hour).build())
	eligible := t0.Add(-time.Hour)
	in := input(nodes,
		jobN(1, 2).prio(10),
		jobN(2, 8),                // never fits now: f4 from all usable nodes, f9 = 6/8
		jobN(3, 1).gpu("a100", 4), // gpu class: f9 = 1
		jobN(4, 1).tenant("rich"), // fair share at target
		jobN(5, 1).tenant("poor"), // fair share unused
		jobN(6, 20),               // can never fit: f4 = 0
	)
	in.Pending[1].EligibleTime = eligible
	in.Pending[0].HotDataFraction = 0.25
	in.Pending[0].Checkpoint, in.Pending[0].CheckpointMinutes = model.CheckpointSignal, 3
	in.Tenants["rich"] = Tenant{FairShareTarget: 0.4, UsageShare: 0.4, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["poor"] = Tenant{FairShareTarget: 0.4, UsageShare: 0, NodesLeft: -1, RunningLeft: -1}
	in.Groups = 4
	in.EnergyPrice = 0.25
	in.Running = []Running{{ID: 7, Nodes: 1, Start: t0.Add(-time.Hour), End: t0.Add(2 * time.Hour)}}
	in.Weights, _ = Profile(DefaultProfile)
	p := Solve(in)

	// queued node-hours = 2+8+1+1+1+20 = 33; running = 1 node × 2h.
	f := func(id uint64) [model.NumFactors]float64 { return p.explain(id).Factors }
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"f1", f(1)[0], 1},
		{"f2 from eligible time, not submit", f(2)[1], fWait(time.Hour, jobLength(&in.Pending[1]))},
		{"f2 from submit time", f(1)[1], fWait(10*time.Minute, jobLength(&in.Pending[0]))},
		{"f3 unknown tenant", f(1)[2], NeutralFairShare},
		{"f3 at target", f(4)[2], 0},
		{"f3 unused", f(5)[2], 1},
		{"f4 one group of four", f(1)[3], 0.75},
		{"f4 three groups by usable nodes (4+3+1)", f(2)[3], 0.25},
		{"f4 cannot fit", f(6)[3], 0},
		{"f5 given", f(1)[4], 0.25},
		{"f5 unknown", f(2)[4], NeutralDataReady},
		{"f6 backlog capped", f(1)[5], 1},
		{"f7", f(1)[6], 0.75},
		{"f8", f(1)[7], 0.25},
		{"f8 not checkpointable", f(2)[7], 0},
		{"f9 all free nodes conform", f(1)[8], 1},
		{"f9 largest conformance group / requested", f(2)[8], 7.0 / 8},
		{"f9 gpu class", f(3)[8], 1},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, ex := range p.Explanations {
		var want float64
		for i := range ex.Factors {
			want += ex.Weights[i] * ex.Factors[i]
			if ex.Factors[i] < 0 || ex.Factors[i] > 1 {
				t.Errorf("job %d: f%d = %v outside [0,1]", ex.JobID, i+1, ex.Factors[i])
			}
		}
		if !near(ex.Score, want) {
			t.Errorf("job %d: score %v, want Σ w·f = %v", ex.JobID, ex.Score, want)
		}
	}
}

func TestOrderTies(t *testing.T) {
	// Equal scores (zero weights): earliest eligible first, then lowest id.
	in := input(groups(1), jobN(5, 1).waited(time.Hour), jobN(3, 1), jobN(4, 1), jobN(9, 1).waited(2*time.Hour))
	in.Weights = model.Weights{}
	p := Solve(in)
	var got []uint64
	for _, e := range p.Explanations {
		got = append(got, e.JobID)
	}
	if want := []uint64{9, 5, 3, 4}; !equalIDs(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	// A higher score goes first regardless of wait.
	in.Weights = model.Weights{1}
	in.Pending[2].PriorityClass = 1
	p = Solve(in)
	if p.Explanations[0].JobID != 4 || p.Explanations[0].Position != 1 {
		t.Errorf("first = %d at %d, want job 4 at 1", p.Explanations[0].JobID, p.Explanations[0].Position)
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestProfiles(t *testing.T) {
	names := ProfileNames()
	if names[0] != DefaultProfile || len(names) != 6 {
		t.Fatalf("ProfileNames = %v", names)
	}
	for _, n := range names {
		w, ok := Profile(n)
		if !ok {
			t.Fatalf("Profile(%q) missing", n)
		}
		var sum float64
		for _, x := range w {
			sum += x
		}
		if !near(sum, 1) {
			t.Errorf("profile %q weights sum to %v, want 1", n, sum)
		}
	}
	w, _ := Profile("balanced")
	if w != (model.Weights{.20, .20, .35, 0, .10, .05, 0, 0, .10}) {
		t.Errorf("balanced = %v", w)
	}
	if w, _ := Profile(" Sensitive "); w[0] != 0.9 || w[8] != 0.1 {
		t.Errorf("sensitive = %v", w)
	}
	if _, ok := Profile("nope"); ok {
		t.Error("Profile(nope) found")
	}
	for _, typ := range model.VClusterTypes {
		if got := ProfileForType(typ); got != string(typ) {
			t.Errorf("ProfileForType(%s) = %q", typ, got)
		}
	}
	if got := ProfileForType("weird"); got != DefaultProfile {
		t.Errorf("ProfileForType(weird) = %q", got)
	}

	w, resolved, warn := ResolveProfile("ML-Training")
	if resolved != "ml-training" || warn != "" || w[3] != 0.25 {
		t.Errorf("ResolveProfile(ML-Training) = %v %q %q", w, resolved, warn)
	}
	if _, resolved, warn := ResolveProfile(""); resolved != DefaultProfile || warn != "" {
		t.Errorf("ResolveProfile(\"\") = %q %q", resolved, warn)
	}
	w, resolved, warn = ResolveProfile("turbo")
	def, _ := Profile(DefaultProfile)
	if resolved != DefaultProfile || w != def || !strings.Contains(warn, `"turbo"`) {
		t.Errorf("ResolveProfile(turbo) = %v %q %q", w, resolved, warn)
	}
}

func TestParseWeightOverride(t *testing.T) {
	tests := []struct {
		in    string
		index int
		value float64
		ok    bool
	}{
		{"f3=0.3", 2, 0.3, true},
		{"w9=1", 8, 1, true},
		{" F1 = 0 ", 0, 0, true},
		{"fair_share=0.25", 2, 0.25, true},
		{"wait_time=0.5", 1, 0.5, true},
		{"f0=0.1", 0, 0, false},
		{"f10=0.1", 0, 0, false},
		{"f3=1.5", 0, 0, false},
		{"f3=-0.1", 0, 0, false},
		{"f3=NaN", 0, 0, false},
		{"f3", 0, 0, false},
		{"speed=0.1", 0, 0, false},
	}
	for _, tt := range tests {
		i, v, err := ParseWeightOverride(tt.in)
		if (err == nil) != tt.ok || (tt.ok && (i != tt.index || v != tt.value)) {
			t.Errorf("ParseWeightOverride(%q) = %d, %v, %v", tt.in, i, v, err)
		}
		if err != nil && !model.IsFieldError(err) {
			t.Errorf("ParseWeightOverride(%q): error %v is not a FieldError", tt.in, err)
		}
	}
	base, _ := Profile(DefaultProfile)
	w, err := ApplyWeightOverrides(base, []string{"f3=0.3", "energy=0.1"})
	if err != nil || w[2] != 0.3 || w[6] != 0.1 || w[0] != base[0] {
		t.Errorf("ApplyWeightOverrides = %v, %v", w, err)
	}
	if w, err := ApplyWeightOverrides(base, []string{"f3=0.3", "bad"}); err == nil || w != base {
		t.Errorf("ApplyWeightOverrides(bad) = %v, %v", w, err)
	}
	for i, f := range Factors {
		if f.Name != "f"+string(rune('1'+i)) || f.Title == "" || f.Rewards == "" || f.Formula == "" {
			t.Errorf("Factors[%d] = %+v", i, f)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestFairShareOfService: f3 is the larger of the usage term and the
// tenant's ServiceBehind, only for a tenant with a target.
func TestFairShareOfServicePerJob(t *testing.T) {
	// Everyone's average bounded slowdown is 5. Jobs of 10 minutes (10 s
	// for job 5) predicted or walltimed; their waits make x.
	in := input(groups(4),
		jobN(1, 1).tenant("new").wall(10*time.Minute).waited(90*time.Minute),  // x = 10, no history: 1 − 5/10
		jobN(2, 1).tenant("new").wall(10*time.Minute).waited(30*time.Minute),  // x = 4: not behind, the usage term
		jobN(3, 1).tenant("many").wall(10*time.Minute).waited(90*time.Minute), // 9 runs at 1: ŝ = 1.9
		jobN(4, 1).tenant("bad").wall(time.Hour).waited(0),                    // 3 runs at 9: ŝ = 7
		jobN(5, 1).tenant("notarget").wall(10*time.Second).waited(time.Hour),  // no contract: neutral
		jobN(6, 1).tenant("new").wall(5*time.Hour).waited(90*time.Minute),     // predicted 10 minutes: x = 10
	)
	in.Pending[5].Predicted = 10 * time.Minute
	in.ServiceAverage = 5
	in.Tenants["new"] = Tenant{FairShareTarget: 0.25, UsageShare: 0.2, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["many"] = Tenant{FairShareTarget: 0.25, UsageShare: 0.25, ServiceMean: 1, ServiceWeight: 9, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["bad"] = Tenant{FairShareTarget: 0.25, UsageShare: 0.25, ServiceMean: 9, ServiceWeight: 3, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["notarget"] = Tenant{NodesLeft: -1, RunningLeft: -1}
	in.Weights, _ = Profile(DefaultProfile)
	check := func(in *Input, want map[uint64]float64) {
		t.Helper()
		p := Solve(in)
		for id, w := range want {
			if got := p.explain(id).Factors[2]; math.Abs(got-w) > 1e-12 {
				t.Errorf("ServiceAverage %v: job %d: f3 = %v, want %v", in.ServiceAverage, id, got, w)
			}
		}
	}
	usage := (0.25 - 0.2) / 0.25
	check(in, map[uint64]float64{1: 0.5, 2: usage, 3: 0, 4: 1 - 5.0/7, 5: NeutralFairShare, 6: 0.5})
	in.ServiceAverage = 0 // off: the usage term alone
	check(in, map[uint64]float64{1: usage, 2: usage, 3: 0, 4: 0, 5: NeutralFairShare, 6: usage})
}

func TestFairShareOfService(t *testing.T) {
	in := input(groups(4),
		jobN(1, 1).tenant("rich"),     // at its usage target, served at the average
		jobN(2, 1).tenant("behind"),   // at its usage target, served worse than average
		jobN(3, 1).tenant("idle"),     // unused share beats a smaller service term
		jobN(4, 1).tenant("notarget"), // no contract: neutral whatever its service
	)
	in.Tenants["rich"] = Tenant{FairShareTarget: 0.4, UsageShare: 0.4, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["behind"] = Tenant{FairShareTarget: 0.4, UsageShare: 0.4, ServiceBehind: 0.6, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["idle"] = Tenant{FairShareTarget: 0.4, UsageShare: 0, ServiceBehind: 0.3, NodesLeft: -1, RunningLeft: -1}
	in.Tenants["notarget"] = Tenant{ServiceBehind: 0.9, NodesLeft: -1, RunningLeft: -1}
	in.Weights, _ = Profile(DefaultProfile)
	p := Solve(in)
	for _, c := range []struct {
		id   uint64
		want float64
	}{{1, 0}, {2, 0.6}, {3, 1}, {4, NeutralFairShare}} {
		if got := p.explain(c.id).Factors[2]; got != c.want {
			t.Errorf("job %d: f3 = %v, want %v", c.id, got, c.want)
		}
	}
}
