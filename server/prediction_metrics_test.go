package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latticehpc/lattice/predict"
	"github.com/latticehpc/lattice/vcluster"
)

// TestPredictionGauges: a cycle that reports how the predictor did sets the
// vCluster's three prediction gauges; a cycle without a report leaves them;
// losing leadership drops them.
func TestPredictionGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	gauges := func() map[string]float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range fams {
			for _, s := range f.GetMetric() {
				if g := s.GetGauge(); g != nil && len(s.GetLabel()) == 1 && s.GetLabel()[0].GetValue() == "hpc-batch" {
					out[f.GetName()] = g.GetValue()
				}
			}
		}
		return out
	}
	m.observeCycle(vcluster.CycleStats{VCluster: "hpc-batch",
		Prediction: predict.Accuracy{Runs: 10, Prediction: 0.6, Walltime: 0.4, Underpredicted: 0.3}})
	m.observeCycle(vcluster.CycleStats{VCluster: "hpc-batch"})
	got := gauges()
	for name, want := range map[string]float64{"lattice_scheduler_prediction_accuracy": 0.6,
		"lattice_scheduler_walltime_accuracy": 0.4, "lattice_scheduler_prediction_underpredicted_ratio": 0.3} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	m.clearPrediction()
	if got := gauges(); len(got) != 0 {
		t.Errorf("after leadership was lost: %v, want no prediction gauges", got)
	}
}
