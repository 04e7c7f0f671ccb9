package replay

import (
	"testing"

	"github.com/latticehpc/lattice/model"
)

// TestLatticeQualityBars holds the default lattice policy to issue 15's and
// issue 32's bars
// on the in-repo traces where it meets it, and to where it stands where it
// does not yet (docs/solver.md has the full table): a change that gives any
// of it up fails here, not only in the decision digests.
//
// Met: hpc2n bounded slowdown ≤ the best of sjbf and easy++ (both
// correctors), max wait ≤ 1.5 × EASY's; lublin bounded slowdown ≤ the best
// of sjbf and easy++, max wait ≤ 1.5 × EASY's. Not yet met, held where
// they are: hpc2n Jain's index within 0.02 of EASY's (0.227 vs 0.244 since
// backfill vClusters plan with walltime ends and predicted starts; the old
// default met it and missed the bsld by 2.7 %), lublin utilization within
// 0.035 of EASY's (0.903 vs 0.936). The per-job starvation guard (off by default) at 1.25
// keeps lublin's max wait within 1.1 × EASY's at EASY's utilization within
// 0.01, and its bsld below EASY's.
func TestLatticeQualityBars(t *testing.T) {
	run := func(tr *Trace, cfg Config) Metrics {
		t.Helper()
		res, err := Run(tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.Metrics
	}
	// best is the best of sjbf and easy++ (tsafrir; with reqtime too when
	// asked: on lublin it is far behind, and each replay takes seconds
	// under -race).
	best := func(tr *Trace, reqtime bool) float64 {
		b := min(run(tr, Config{Policy: PolicySJBF}).AvgBoundedSlowdown, run(tr, Config{Policy: PolicyEASYPP}).AvgBoundedSlowdown)
		if reqtime {
			b = min(b, run(tr, Config{Policy: PolicyEASYPP, Corrector: "reqtime"}).AvgBoundedSlowdown)
		}
		return b
	}
	t.Run("hpc2n", func(t *testing.T) {
		tr := loadTrace(t, "hpc2n.swf")
		lat, easy := run(tr, Config{Policy: PolicyLattice}), run(tr, Config{Policy: PolicyEASY})
		// Within 0.02: on hpc2n, Jain ≥ EASY's caps what the other users
		// may gain (docs/solver.md, "Per-user fairness"): predicted starts
		// bring u9 (63 jobs) from 74 to 44, below x*, which lowers the
		// index (docs/quality.md).
		if lat.JainFairness < easy.JainFairness-0.02 {
			t.Errorf("Jain's index %.3f < EASY's %.3f − 0.02", lat.JainFairness, easy.JainFairness)
		}
		if lat.MaxWait > 1.5*easy.MaxWait {
			t.Errorf("max wait %.0f > 1.5 × EASY's %.0f", lat.MaxWait, easy.MaxWait)
		}
		if b := best(tr, true); lat.AvgBoundedSlowdown > b {
			t.Errorf("bounded slowdown %.2f > the best baseline's %.2f", lat.AvgBoundedSlowdown, b)
		}
		if lat.Utilization < easy.Utilization-0.001 {
			t.Errorf("utilization %.3f < EASY's %.3f", lat.Utilization, easy.Utilization)
		}
		// Issue 32's fairness parts: nobody of 20 jobs or more worse off
		// than under EASY (0 of 12 users), the worst-served user (u18)
		// better served than EASY's.
		f := CompareUsers(lat, easy, 0)
		if f.WorseOffJobs > 0.10 || f.Worst.AvgBoundedSlowdown > f.ReferenceWorst.AvgBoundedSlowdown {
			t.Errorf("worse-off jobs %.3f (bar 0.10), worst-served user %+v against EASY's %+v", f.WorseOffJobs, f.Worst, f.ReferenceWorst)
		}
	})
	t.Run("lublin", func(t *testing.T) {
		if testing.Short() {
			t.Skip("long: the lublin replays take seconds")
		}
		tr := loadTrace(t, "lublin_256.swf")
		lat, easy := run(tr, Config{Policy: PolicyLattice}), run(tr, Config{Policy: PolicyEASY})
		if b := best(tr, false); lat.AvgBoundedSlowdown > b {
			t.Errorf("bounded slowdown %.2f > the best baseline's %.2f", lat.AvgBoundedSlowdown, b)
		}
		if lat.MaxWait > 1.5*easy.MaxWait {
			t.Errorf("max wait %.0f > 1.5 × EASY's %.0f", lat.MaxWait, easy.MaxWait)
		}
		if lat.Utilization < easy.Utilization-0.035 {
			t.Errorf("utilization %.3f < EASY's %.3f − 0.035", lat.Utilization, easy.Utilization)
		}
	})
	// The per-job guard where walltimes are exact: lublin's first 3,000
	// jobs (a quarter of a second; the whole trace gives 1.04 × EASY's max
	// wait and 0.929 utilization). Measured: max wait 0.94 × EASY's,
	// utilization 0.859 (EASY 0.854), bsld 206 (EASY 342); without the
	// guard 1.25 ×, 0.830 and 157.
	t.Run("per-job guard", func(t *testing.T) {
		tr := loadTrace(t, "lublin_256.swf").First(3000)
		guarded, easy := run(tr, Config{Policy: PolicyLattice, JobStarvationFactor: 1.25}), run(tr, Config{Policy: PolicyEASY})
		if guarded.MaxWait > 1.1*easy.MaxWait {
			t.Errorf("max wait %.0f > 1.1 × EASY's %.0f", guarded.MaxWait, easy.MaxWait)
		}
		if guarded.Utilization < easy.Utilization-0.01 {
			t.Errorf("utilization %.3f < EASY's %.3f − 0.01", guarded.Utilization, easy.Utilization)
		}
		if guarded.AvgBoundedSlowdown > easy.AvgBoundedSlowdown {
			t.Errorf("bounded slowdown %.2f > EASY's %.2f", guarded.AvgBoundedSlowdown, easy.AvgBoundedSlowdown)
		}
	})
}

// TestFairShareService: the fair share of service (off by default) changes
// the lattice policy's decisions on a trace with many users, and the same
// trace gives the same result twice.
func TestFairShareService(t *testing.T) {
	tr := loadTrace(t, "hpc2n.swf")
	run := func(service bool) Metrics {
		t.Helper()
		c := Config{Policy: PolicyLattice, FairShare: model.FairShareUsage, ServiceProtect: new(bool)}
		if service {
			c.FairShare = model.FairShareService
		}
		res, err := Run(tr, c)
		if err != nil {
			t.Fatal(err)
		}
		return res.Metrics
	}
	def, a, b := run(false), run(true), run(true)
	if a.AvgBoundedSlowdown != b.AvgBoundedSlowdown || a.MaxWait != b.MaxWait || a.JainFairness != b.JainFairness {
		t.Errorf("two runs differ: %+v / %+v", a, b)
	}
	if a.AvgBoundedSlowdown == def.AvgBoundedSlowdown && a.AvgWait == def.AvgWait {
		t.Errorf("the fair share of service changed nothing (bsld %.4f)", a.AvgBoundedSlowdown)
	}
}

// TestServiceOptions: the per-job fair share of service and the service
// protection (off by default) each change the lattice policy's schedule on
// hpc2n, and the same options give the same schedule twice.
func TestServiceOptions(t *testing.T) {
	tr := loadTrace(t, "hpc2n.swf")
	run := func(c Config) Metrics {
		t.Helper()
		on := true
		c.Policy, c.RunningEnds, c.PredictedStarts = PolicyLattice, model.RunningEndsWalltime, &on
		if c.FairShare == "" {
			c.FairShare = model.FairShareUsage
		}
		if c.ServiceProtect == nil {
			c.ServiceProtect = new(bool)
		}
		res, err := Run(tr, c)
		if err != nil {
			t.Fatal(err)
		}
		return res.Metrics
	}
	def := run(Config{})
	on := true
	for name, c := range map[string]Config{
		"job-service":          {FairShare: model.FairShareJobService},
		"protect":              {ServiceProtect: &on},
		"job-service, protect": {FairShare: model.FairShareJobService, ServiceProtect: &on},
	} {
		a, b := run(c), run(c)
		if a.AvgBoundedSlowdown != b.AvgBoundedSlowdown || a.MaxWait != b.MaxWait || a.JainFairness != b.JainFairness {
			t.Errorf("%s: two runs differ: %+v / %+v", name, a, b)
		}
		if a.AvgBoundedSlowdown == def.AvgBoundedSlowdown && a.AvgWait == def.AvgWait {
			t.Errorf("%s changed nothing (bsld %.4f)", name, a.AvgBoundedSlowdown)
		}
	}
}
