package vcluster

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/solver"
)

// done is a completed allocation of tenant t that ran for run, ending at end.
func done(id uint64, run time.Duration, end time.Time) *model.Allocation {
	a := alloc(id, "batch", model.StateCompleted)
	a.Walltime = 4 * time.Hour
	a.StartTime, a.EndTime = end.Add(-run), end
	return a
}

// predictionSnapshot: one running allocation (started 30 min ago, walltime
// 4 h) on n1, one pending 2-node job, and the tenant's history. Its
// vCluster plans running work with predicted ends (RunningEndsPredicted,
// not a backfill vCluster's default), which these tests are about.
func predictionSnapshot(history ...*model.Allocation) *Snapshot {
	vc := &model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1, RunningEnds: model.RunningEndsPredicted}
	vc.Weights, _ = solver.Profile(solver.DefaultProfile)
	running := alloc(5, "batch", model.StateRunning)
	running.Walltime = 4 * time.Hour
	running.StartTime = t0.Add(-30 * time.Minute)
	running.Nodes = []string{"n1"}
	pending := alloc(9, "batch", model.StatePending)
	pending.NodesMin, pending.NodesMax, pending.Walltime = 2, 2, 4*time.Hour
	s := snapshot(vc, []*model.Node{node("n1", "batch").running(5).build(), node("n2", "batch").build()}, running, pending)
	s.Completed = history
	return s
}

func TestBuildInputPredictsReleaseTimes(t *testing.T) {
	// Three runs of about 40 min, each predicted better than by its 4 h walltime.
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	tests := []struct {
		name    string
		history []*model.Allocation
		now     time.Duration // after t0
		guard   time.Duration
		corr    string
		freeAt  time.Duration // after the running job's start
		pending time.Duration // the pending job's Predicted
	}{
		{"no history: walltime", nil, 0, 0, "", 4 * time.Hour, 0},
		{"predicted from the tenant's runs", history, 0, 0, "", 40 * time.Minute, 40 * time.Minute},
		{"outlived its prediction: reqtime corrects to the walltime", history, 15 * time.Minute, 0, "", 4 * time.Hour, 40 * time.Minute},
		{"outlived its prediction: tsafrir steps", history, 15 * time.Minute, 0, predict.CorrectTsafrir, 46 * time.Minute, 40 * time.Minute}, // 40 + 1 + 5 min: past the 45 min run so far
		{"starvation guard: walltimes again", history, 0, 30 * time.Minute, "", 4 * time.Hour, 40 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := predictionSnapshot(tt.history...)
			s.Now = t0.Add(tt.now)
			s.StarvationWait, s.Corrector = tt.guard, tt.corr
			in := BuildInput(s)
			start := t0.Add(-30 * time.Minute)
			if got := in.Nodes[0].FreeAt; got != start.Add(tt.freeAt) {
				t.Errorf("n1 frees at +%v, want +%v", got.Sub(start), tt.freeAt)
			}
			if got := in.Pending[0].Predicted; got != tt.pending {
				t.Errorf("pending job predicted %v, want %v", got, tt.pending)
			}
			if in.Pending[0].Walltime != 4*time.Hour {
				t.Errorf("walltime changed to %v: a prediction never ends a job", in.Pending[0].Walltime)
			}
		})
	}
}

// completedState is a fakeState that also serves completed allocations.
type completedState struct {
	fakeState
	done []*model.Allocation
}

func (c *completedState) Completed(string) []*model.Allocation { return c.done }

// TestLoopLearnsFromCompleted: the loop reads completed allocations when its
// state reader has them, and the head's reservation moves with the
// prediction; without them it is planned with the walltime.
func TestLoopLearnsFromCompleted(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	expected := func(st StateReader) time.Time {
		l := &Loop{Name: "batch", State: st, Proposer: &fakeProposer{}, Planner: solver.Solve, Clock: func() time.Time { return t0 }}
		if err := l.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
		e, ok := l.Explanations.Get(9)
		if !ok {
			t.Fatal("no explanation for the pending job")
		}
		return e.ExpectedStart
	}
	plain := expected(&fakeState{predictionSnapshot()})
	learnt := expected(&completedState{fakeState{predictionSnapshot()}, history})
	if want := t0.Add(210 * time.Minute); !plain.Equal(want) {
		t.Errorf("without history the head is expected at %v, want %v (walltime)", plain, want)
	}
	if want := t0.Add(10 * time.Minute); !learnt.Equal(want) {
		t.Errorf("with history the head is expected at %v, want %v (prediction)", learnt, want)
	}
}

// TestWalltimeEnds: the two uses of prediction in planning are separate
// vCluster settings — running work's release times
// (model.VCluster.RunningEnds) and the candidates' starts (PredictedStarts)
// — while the prediction keeps ordering the queue; a starvation guard turns
// both off. A backfill vCluster's default is walltime ends with predicted
// starts.
func TestWalltimeEnds(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)),
	}
	off, on := false, true
	tests := []struct {
		name            string
		ends            model.RunningEndsMode
		predictedStarts *bool
		guard           time.Duration
		freeAt          time.Duration // after the running job's start
		wantStarts      bool
	}{
		{"backfill default: walltime ends, predicted starts", "", nil, -1, 4 * time.Hour, true},
		{"predicted ends", model.RunningEndsPredicted, &off, -1, 40 * time.Minute, false},
		{"walltime ends", model.RunningEndsWalltime, &off, -1, 4 * time.Hour, false},
		{"walltime ends, predicted starts", model.RunningEndsWalltime, &on, -1, 4 * time.Hour, true},
		{"predicted ends and starts", model.RunningEndsPredicted, &on, -1, 40 * time.Minute, true},
		{"walltime ends, predicted starts, guard fired", model.RunningEndsWalltime, &on, 30 * time.Minute, 4 * time.Hour, false},
		{"predicted ends and starts, guard fired", model.RunningEndsPredicted, &on, 30 * time.Minute, 4 * time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := predictionSnapshot(history...)
			if s.VCluster.EffectiveAlgorithm() != model.AlgorithmBackfill {
				t.Fatalf("the snapshot's vCluster is %s, want backfill", s.VCluster.EffectiveAlgorithm())
			}
			s.StarvationWait = tt.guard
			s.VCluster.RunningEnds, s.VCluster.PredictedStarts = tt.ends, tt.predictedStarts
			in := BuildInput(s)
			start := t0.Add(-30 * time.Minute)
			if got := in.Nodes[0].FreeAt; got != start.Add(tt.freeAt) {
				t.Errorf("n1 frees at +%v, want +%v", got.Sub(start), tt.freeAt)
			}
			if got := in.Running[0].End; got != start.Add(tt.freeAt) {
				t.Errorf("running job ends at +%v, want +%v", got.Sub(start), tt.freeAt)
			}
			if in.PredictedStarts != tt.wantStarts {
				t.Errorf("PredictedStarts %v, want %v", in.PredictedStarts, tt.wantStarts)
			}
			if got := in.Pending[0].Predicted; got != 40*time.Minute {
				t.Errorf("pending job predicted %v, want 40m: the prediction still orders the queue", got)
			}
		})
	}
}

// TestServiceShare: with the vCluster's fair share "service",
// Snapshot.Service gives each tenant its ServiceBehind; without it, or by
// usage, none.
func TestServiceShare(t *testing.T) {
	s := predictionSnapshot()
	s.VCluster.FairShare = model.FairShareUsage
	s.Tenants = map[string]*model.Tenant{
		"t1": {Name: "t1", FairShareTarget: 0.5},
		"t2": {Name: "t2", FairShareTarget: 0.5},
	}
	if got := BuildInput(s).Tenants["t2"].ServiceBehind; got != 0 {
		t.Fatalf("without Service: ServiceBehind = %v, want 0", got)
	}
	s.Service = &predict.Service{HalfLife: DefaultFairShareHalfLife}
	s.Service.Observe("t1", t0.Add(-time.Hour), 0, time.Hour)           // bsld 1
	s.Service.Observe("t2", t0.Add(-time.Hour), 2*time.Hour, time.Hour) // bsld 3
	if got := BuildInput(s).Tenants["t2"].ServiceBehind; got != 0 {
		t.Fatalf("fair share by usage: ServiceBehind = %v, want 0", got)
	}
	s.VCluster.FairShare = model.FairShareService
	in := BuildInput(s)
	if got, want := in.Tenants["t2"].ServiceBehind, 1-2.0/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("t2: ServiceBehind = %v, want %v", got, want)
	}
	if got := in.Tenants["t1"].ServiceBehind; got != 0 {
		t.Errorf("t1 (served better than average): ServiceBehind = %v, want 0", got)
	}
	if in.ServiceAverage != 0 {
		t.Errorf("per tenant: ServiceAverage = %v, want 0 (the per-job term off)", in.ServiceAverage)
	}

	// Per job: the means and weights of the tenants with a job to place
	// and everyone's average go to the solver, and ServiceBehind stays 0.
	s.VCluster.FairShare = model.FairShareJobService
	s.Pending[0].Tenant = "t2"
	in = BuildInput(s)
	if got := in.Tenants["t1"]; got.ServiceMean != 0 || got.ServiceWeight != 0 {
		t.Errorf("per job: t1 has no job to place, but %+v", got)
	}
	if in.ServiceAverage != 2 {
		t.Errorf("per job: ServiceAverage = %v, want 2", in.ServiceAverage)
	}
	wantW := math.Exp2(-float64(time.Hour) / float64(DefaultFairShareHalfLife))
	if got := in.Tenants["t2"]; got.ServiceBehind != 0 || got.ServiceMean != 3 || math.Abs(got.ServiceWeight-wantW) > 1e-12 {
		t.Errorf("per job: t2 = %+v, want ServiceMean 3, ServiceWeight %v, ServiceBehind 0", got, wantW)
	}
}

func TestServiceProtect(t *testing.T) {
	// t1 served at bsld 1, t2 at 100: x* = (1 + 100²)/101 ≈ 99. The
	// pending job (4 h walltime, no prediction) is reckoned at
	// predict.UnknownLength(4h) ≈ 72.8 s: past x* after about 2 h.
	svc := &predict.Service{HalfLife: DefaultFairShareHalfLife}
	svc.Observe("t1", t0.Add(-time.Hour), 0, time.Hour)
	svc.Observe("t2", t0.Add(-time.Hour), 99*time.Hour, time.Hour)
	for _, c := range []struct {
		name    string
		on      bool
		tenant  string
		waited  time.Duration
		starved bool // the absolute guard is on: protected jobs after the head
		want    bool
	}{
		{"off", false, "new", 3 * time.Hour, false, false}, // the default is on: see TestLoopServiceSettings
		{"a newcomer past x*", true, "new", 3 * time.Hour, false, true},
		{"a newcomer not yet past x*", true, "new", time.Hour, false, false},
		{"a tenant served well: one job does not take it past x*", true, "t1", 3 * time.Hour, false, false},
		{"a tenant already above x*", true, "t2", 3 * time.Hour, false, false},
		{"a starving head: protected, after the head", true, "new", 3 * time.Hour, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := predictionSnapshot()
			if c.starved { // the guards act only with a predictor
				s = predictionSnapshot(done(1, 40*time.Minute, t0.Add(-5*time.Hour)))
				s.StarvationWait = time.Minute
			}
			p := s.Pending[0]
			p.Tenant, p.SubmitTime, p.EligibleTime = c.tenant, t0.Add(-c.waited), t0.Add(-c.waited)
			s.Service, s.VCluster.ServiceProtect, s.VCluster.FairShare = svc, &c.on, model.FairShareUsage
			in := BuildInput(s)
			if got := in.Pending[0].Protected; got != c.want {
				t.Errorf("Protected = %v, want %v", got, c.want)
			}
			if want := c.on && !c.starved; in.ProtectedFirst != want {
				t.Errorf("ProtectedFirst = %v, want %v", in.ProtectedFirst, want)
			}
			for name, tn := range in.Tenants {
				if tn.ServiceBehind != 0 || in.ServiceAverage != 0 {
					t.Errorf("%s: the f3 terms are on (ServiceNoTerm)", name)
				}
			}
		})
	}
}

// TestLoopReportsPrediction: a loop with ImmutableState reports, with each
// cycle's stats, how the predictor did on the completed window it learnt
// from. The first three runs are predicted with the walltime (4 h): two
// runs are too few, and the third is the first that tells whether their
// mean beats the walltime. The fourth is predicted exactly.
func TestLoopReportsPrediction(t *testing.T) {
	history := []*model.Allocation{
		done(1, 40*time.Minute, t0.Add(-5*time.Hour)), done(2, 40*time.Minute, t0.Add(-4*time.Hour)),
		done(3, 40*time.Minute, t0.Add(-3*time.Hour)), done(4, 40*time.Minute, t0.Add(-2*time.Hour)),
	}
	var got []CycleStats
	l := &Loop{Name: "batch", State: &completedState{fakeState{predictionSnapshot()}, history}, Proposer: &fakeProposer{},
		Planner: solver.Solve, Clock: func() time.Time { return t0 }, ImmutableState: true,
		OnCycle: func(st CycleStats) { got = append(got, st) }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d cycle stats, want 1", len(got))
	}
	p, wall := got[0].Prediction, 40.0/240
	if p.Runs != 4 || math.Abs(p.Walltime-wall) > 1e-9 || math.Abs(p.Prediction-(3*wall+1)/4) > 1e-9 || p.Underpredicted != 0 {
		t.Errorf("prediction %+v, want 4 runs, walltime accuracy %.4f, prediction accuracy %.4f, none underpredicted",
			p, wall, (3*wall+1)/4)
	}
	// Without ImmutableState the loop does not learn the predictor itself.
	got = nil
	l = &Loop{Name: "batch", State: &completedState{fakeState{predictionSnapshot()}, history}, Proposer: &fakeProposer{},
		Planner: solver.Solve, Clock: func() time.Time { return t0 }, OnCycle: func(st CycleStats) { got = append(got, st) }}
	if err := l.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Prediction.Runs != 0 {
		t.Errorf("without ImmutableState: %+v", got)
	}
}
