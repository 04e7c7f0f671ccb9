package replay

import (
	"math"
	"path/filepath"
	"testing"
)

// tracesDir holds the development traces, in the repository
// (testdata/traces/README.md says where they come from).
const tracesDir = "../testdata/traces"

func loadTrace(t testing.TB, name string) *Trace {
	t.Helper()
	// A missing trace is a failure, never a skip: the tests must run on a
	// fresh clone with nothing beside it.
	tr, err := ReadFile(filepath.Join(tracesDir, name), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestReferenceResults compares the baselines with the reference results of
// an independent implementation (traces README): jobs and capacity exactly,
// avg wait, avg bounded slowdown and utilization within 4 %.
func TestReferenceResults(t *testing.T) {
	refs := []struct {
		trace, policy    string
		jobs, capacity   int
		wait, bsld, util float64
	}{
		{"lublin_256.swf", PolicyFCFS, 10000, 256, 2388443.8, 66502.5, 0.655},
		{"lublin_256.swf", PolicyEASY, 10000, 256, 97156.0, 590.05, 0.936},
		{"lublin_256.swf", PolicyConservative, 10000, 256, 131567.5, 489.20, 0.936},
		{"hpc2n.swf", PolicyFCFS, 3145, 240, 5601.4, 47.12, 0.394},
		{"hpc2n.swf", PolicyEASY, 3145, 240, 3483.4, 16.87, 0.396},
		{"hpc2n.swf", PolicyConservative, 3145, 240, 3593.4, 16.64, 0.396},
	}
	const tol = 0.04
	traces := map[string]*Trace{}
	for _, ref := range refs {
		t.Run(ref.trace+"/"+ref.policy, func(t *testing.T) {
			tr := traces[ref.trace]
			if tr == nil {
				tr = loadTrace(t, ref.trace)
				traces[ref.trace] = tr
			}
			res, err := Run(tr, Config{Policy: ref.policy})
			if err != nil {
				t.Fatal(err)
			}
			m := res.Metrics
			t.Logf("jobs %d capacity %d avg wait %.1f bsld %.2f util %.3f (ref %.1f %.2f %.3f)",
				m.Jobs, m.Capacity, m.AvgWait, m.AvgBoundedSlowdown, m.Utilization, ref.wait, ref.bsld, ref.util)
			if m.Jobs != ref.jobs || m.Capacity != ref.capacity {
				t.Errorf("jobs %d capacity %d, want %d %d", m.Jobs, m.Capacity, ref.jobs, ref.capacity)
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{{"avg wait", m.AvgWait, ref.wait}, {"avg bounded slowdown", m.AvgBoundedSlowdown, ref.bsld}, {"utilization", m.Utilization, ref.util}} {
				if math.Abs(c.got-c.want) > tol*c.want {
					t.Errorf("%s = %.4g, want %.4g ± %.0f%%", c.name, c.got, c.want, tol*100)
				}
			}
		})
	}
}
