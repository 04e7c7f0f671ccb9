package model

import "testing"

// TestVClusterFairShareValidation: a vCluster's fair-share mode is one of
// the modes, spelt as they are; the error names the field and the allowed
// values. ParseFairShare accepts any letter case.
func TestVClusterFairShareValidation(t *testing.T) {
	for _, c := range []struct {
		mode FairShareMode
		ok   bool
	}{{"", true}, {"usage", true}, {"service", true}, {"job-service", true}, {"Job-Service", false}, {"slowdown", false}} {
		vc := &VCluster{Name: "batch", Type: TypeHPCBatch, FairShare: c.mode}
		err := vc.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%q: err = %v, want ok %v", c.mode, err, c.ok)
		}
		if err != nil && err.Error() != `invalid fair-share "`+string(c.mode)+`": allowed usage, service, job-service` {
			t.Errorf("%q: error %q does not name the field and the allowed values", c.mode, err)
		}
	}
}

func TestParseFairShare(t *testing.T) {
	if m, err := ParseFairShare(" Job-Service "); err != nil || m != FairShareJobService {
		t.Errorf("ParseFairShare: %q, %v", m, err)
	}
	if _, err := ParseFairShare("slowdown"); err == nil || err.Error() != `invalid fair-share "slowdown": allowed usage, service, job-service` {
		t.Errorf("ParseFairShare(slowdown): %v", err)
	}
}

// TestVClusterPlanningSettings: running-ends is one of the modes, spelt as
// they are (the error names the field and the allowed values); backfill
// vClusters default to walltime ends with predicted starts, the other
// algorithms to predicted ends without, and explicit settings win.
func TestVClusterPlanningSettings(t *testing.T) {
	for _, c := range []struct {
		mode RunningEndsMode
		ok   bool
	}{{"", true}, {"predicted", true}, {"walltime", true}, {"Walltime", false}, {"estimate", false}} {
		vc := &VCluster{Name: "batch", Type: TypeHPCBatch, RunningEnds: c.mode}
		err := vc.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%q: err = %v, want ok %v", c.mode, err, c.ok)
		}
		if err != nil && err.Error() != `invalid running-ends "`+string(c.mode)+`": allowed predicted, walltime` {
			t.Errorf("%q: error %q does not name the field and the allowed values", c.mode, err)
		}
	}
	if m, err := ParseRunningEnds(" WALLTIME "); err != nil || m != RunningEndsWalltime {
		t.Errorf("ParseRunningEnds: %q, %v", m, err)
	}
	off, on := false, true
	for _, c := range []struct {
		name   string
		vc     VCluster
		ends   RunningEndsMode
		starts bool
	}{
		{"backfill default", VCluster{Type: TypeHPCBatch}, RunningEndsWalltime, true},
		{"ml-training default", VCluster{Type: TypeMLTraining}, RunningEndsWalltime, true},
		{"fifo default", VCluster{Type: TypeInteractive}, RunningEndsPredicted, false},
		{"sensitive default", VCluster{Type: TypeSensitive}, RunningEndsPredicted, false},
		{"backfill, old policy", VCluster{Type: TypeHPCBatch, RunningEnds: RunningEndsPredicted, PredictedStarts: &off}, RunningEndsPredicted, false},
		{"fifo, set", VCluster{Type: TypeInteractive, RunningEnds: RunningEndsWalltime, PredictedStarts: &on}, RunningEndsWalltime, true},
	} {
		if got := c.vc.EffectiveRunningEnds(); got != c.ends {
			t.Errorf("%s: EffectiveRunningEnds = %q, want %q", c.name, got, c.ends)
		}
		if got := c.vc.StartsByPrediction(); got != c.starts {
			t.Errorf("%s: StartsByPrediction = %v, want %v", c.name, got, c.starts)
		}
	}
}
