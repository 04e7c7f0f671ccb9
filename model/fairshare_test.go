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
