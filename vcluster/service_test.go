package vcluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/solver"
)

// ran is tenant's completed allocation that waited wait from its eligible
// time and ran run, ending at end.
func ran(id uint64, tenant string, wait, run time.Duration, end time.Time) *model.Allocation {
	a := done(id, run, end)
	a.Tenant = tenant
	a.SubmitTime = a.StartTime.Add(-wait)
	a.EligibleTime = a.SubmitTime
	return a
}

func TestObserveCompleted(t *testing.T) {
	end := t0.Add(-time.Hour)
	for _, c := range []struct {
		name string
		a    func() *model.Allocation
		want float64 // the tenant's mean; 0 = not observed
	}{
		{"completed: waited 2 h, ran 1 h", func() *model.Allocation { return ran(1, "t1", 2*time.Hour, time.Hour, end) }, 3},
		{"the wait runs from the eligible time", func() *model.Allocation {
			a := ran(1, "t1", 2*time.Hour, time.Hour, end)
			a.SubmitTime = a.SubmitTime.Add(-10 * time.Hour) // waited on a dependency until then
			return a
		}, 3},
		{"else from the submission", func() *model.Allocation {
			a := ran(1, "t1", 2*time.Hour, time.Hour, end)
			a.EligibleTime = time.Time{}
			return a
		}, 3},
		{"failed: not observed", func() *model.Allocation {
			a := ran(1, "t1", 2*time.Hour, time.Hour, end)
			a.State = model.StateFailed
			return a
		}, 0},
		{"never started: not observed", func() *model.Allocation {
			a := ran(1, "t1", 2*time.Hour, time.Hour, end)
			a.StartTime = time.Time{}
			return a
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := &predict.Service{HalfLife: DefaultFairShareHalfLife}
			ObserveCompleted(svc, c.a())
			if got, _ := svc.Tenant("t1", t0); got != c.want {
				t.Errorf("mean = %v, want %v", got, c.want)
			}
		})
	}
	ObserveCompleted(nil, ran(1, "t1", 0, time.Hour, end)) // no memory: nothing to do, no panic
}

// TestServiceMemory: the loop's memory observes every completion once as
// successive windows show it, and ends up with the very bits of learning
// every completion in order (the replay's way): a window seen again, or the
// same completions in a new slice, change nothing.
func TestServiceMemory(t *testing.T) {
	all := []*model.Allocation{
		ran(1, "t1", 0, time.Hour, t0.Add(-50*time.Hour)),
		ran(2, "t2", 5*time.Hour, time.Hour, t0.Add(-40*time.Hour)),
		ran(3, "t1", time.Hour, 10*time.Minute, t0.Add(-30*time.Hour)),
		ran(4, "t3", 20*time.Hour, time.Minute, t0.Add(-20*time.Hour)),
		ran(5, "t2", 0, time.Minute, t0.Add(-10*time.Hour)),
	}
	want := LearnService(all)
	var m ServiceMemory
	w1 := slices.Clone(all[:3])
	m.Update(w1)
	m.Update(w1) // the same window
	w2 := slices.Clone(all[1:4])
	m.Update(w2)
	m.Update(slices.Clone(w2)) // the same completions, a new slice
	got := m.Update(slices.Clone(all[2:]))
	if got.Threshold() != want.Threshold() || got.Average() != want.Average() {
		t.Errorf("threshold %v, average %v; want %v, %v", got.Threshold(), got.Average(), want.Threshold(), want.Average())
	}
	for _, tn := range []string{"t1", "t2", "t3"} {
		gm, gw := got.Tenant(tn, t0)
		wm, ww := want.Tenant(tn, t0)
		if gm != wm || gw != ww {
			t.Errorf("%s: mean %v weight %v, want %v %v", tn, gm, gw, wm, ww)
		}
	}
	if len(m.seen) != 3 {
		t.Errorf("the memory keeps %d IDs, want the last window's 3", len(m.seen))
	}
}

// serviceHistory: t1 served at once (bsld 1), t2 at bsld 100 — x* ≈ 99.
func serviceHistory() []*model.Allocation {
	return []*model.Allocation{
		ran(1, "t1", 0, time.Hour, t0.Add(-3*time.Hour)),
		ran(2, "t2", 99*time.Hour, time.Hour, t0.Add(-2*time.Hour)),
	}
}

// TestLoopServiceSettings: the live loop learns the fair share of service
// from its state reader's completed allocations when the vCluster's
// settings ask for it — ServiceProtect protects a newcomer's job that has
// waited past x*, FairShare job-service hands the solver everyone's average
// — and not otherwise.
func TestLoopServiceSettings(t *testing.T) {
	on, off := true, false
	for _, c := range []struct {
		name        string
		fairShare   model.FairShareMode
		protect     *bool
		wantProtect bool
		wantAverage bool
	}{
		{"default (backfill): job-service and protect", "", nil, true, true},
		{"by usage, no protection", model.FairShareUsage, &off, false, false},
		{"protect", model.FairShareUsage, &on, true, false},
		{"job-service", model.FairShareJobService, &off, false, true},
		{"job-service and protect", model.FairShareJobService, &on, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := predictionSnapshot()
			s.VCluster.FairShare, s.VCluster.ServiceProtect = c.fairShare, c.protect
			p := s.Pending[0]
			p.Tenant, p.SubmitTime, p.EligibleTime = "new", t0.Add(-3*time.Hour), t0.Add(-3*time.Hour)
			var in solver.Input
			l := &Loop{Name: "batch", State: &completedState{fakeState{s}, serviceHistory()}, Proposer: &fakeProposer{},
				Planner: func(i *solver.Input) *solver.Plan { in = *i; return solver.Solve(i) },
				Clock:   func() time.Time { return t0 }}
			if err := l.Cycle(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := in.Pending[0].Protected; got != c.wantProtect {
				t.Errorf("Protected = %v, want %v", got, c.wantProtect)
			}
			want := 0.0
			if c.wantAverage {
				want = LearnService(serviceHistory()).Average() // about 50.5
			}
			if in.ServiceAverage != want || c.wantAverage && !(want > 50) {
				t.Errorf("ServiceAverage = %v, want %v", in.ServiceAverage, want)
			}
		})
	}
}

// TestBuildInputLearnsService: without a memory in the snapshot, BuildInput
// learns one from Snapshot.Completed (as it learns the predictor).
func TestBuildInputLearnsService(t *testing.T) {
	s := predictionSnapshot(serviceHistory()...)
	s.VCluster.FairShare, s.VCluster.ServiceProtect = model.FairShareUsage, new(bool)
	*s.VCluster.ServiceProtect = true
	p := s.Pending[0]
	p.Tenant, p.SubmitTime, p.EligibleTime = "new", t0.Add(-3*time.Hour), t0.Add(-3*time.Hour)
	if !BuildInput(s).Pending[0].Protected {
		t.Error("not protected: the service memory was not learnt from Completed")
	}
}
